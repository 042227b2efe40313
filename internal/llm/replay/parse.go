package replay

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/yamlnode"
)

// Problem is one thing wrong with a scenario file.
type Problem struct {
	// Line and Column locate the problem (1-based; 0 when unknown).
	Line, Column int
	// Path names the field, e.g. frames[2].statements[0].kind; "" for the
	// whole document.
	Path    string
	Message string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "%d:%d: ", p.Line, p.Column)
	}
	if p.Path != "" {
		b.WriteString(p.Path + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// ValidationError lists every problem of a scenario file.
type ValidationError struct {
	// Name is the file's name (or path).
	Name     string
	Problems []Problem
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid scripted scenario %s", e.Name)
	if len(e.Problems) == 1 {
		b.WriteString(": ")
	} else {
		fmt.Fprintf(&b, " (%d problems):\n  ", len(e.Problems))
	}
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("\n  ")
		}
		if p.Line > 0 && e.Name != "" && len(e.Problems) > 1 {
			b.WriteString(e.Name + ":")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Load reads and parses a scenario file (JSON, or YAML when the name ends
// in .yaml or .yml or the content does not start with '{').
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scripted scenario: %w", err)
	}
	return Parse(data, path)
}

// Parse parses and validates a scenario. name is used in error messages
// and chooses the syntax: YAML for names ending in .yaml or .yml, JSON for
// .json, otherwise JSON when the content starts with '{' and YAML if not.
// Every problem is reported in one *ValidationError.
func Parse(data []byte, name string) (*Scenario, error) {
	f := formatYAML
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		f = formatJSON
	case ".yaml", ".yml":
	default:
		if t := bytes.TrimLeft(data, " \t\r\n\ufeff"); len(t) > 0 && t[0] == '{' {
			f = formatJSON
		}
	}
	return parse(data, name, f, true)
}

func parse(data []byte, name string, f format, positions bool) (*Scenario, error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	v := &validator{}
	var root *node
	switch f {
	case formatJSON:
		n, p := parseJSONTree(data)
		if p != nil {
			return nil, &ValidationError{Name: name, Problems: []Problem{*p}}
		}
		root = n
	default:
		n, probs := parseYAMLTree(data)
		if n == nil {
			return nil, &ValidationError{Name: name, Problems: probs}
		}
		root, v.problems = n, probs
	}
	return v.finish(root, name, positions)
}

// validator walks the tree, filling a Scenario and collecting problems.
type validator struct {
	problems []Problem
}

func (v *validator) finish(root *node, name string, positions bool) (*Scenario, error) {
	s := v.scenario(root)
	if len(v.problems) == 0 {
		s.Name = name
		return s, nil
	}
	slices.SortStableFunc(v.problems, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	if !positions {
		for i := range v.problems {
			v.problems[i].Line, v.problems[i].Column = 0, 0
		}
	}
	return nil, &ValidationError{Name: name, Problems: v.problems}
}

func (v *validator) add(p pos, path, format string, args ...any) {
	v.problems = append(v.problems, Problem{Line: p.line, Column: p.col, Path: path, Message: fmt.Sprintf(format, args...)})
}

// object holds the fields of one object being validated.
type object struct {
	v      *validator
	n      *node
	path   string
	fields map[string]*field
}

// object checks that n is an object whose field names are all in allowed
// (what names the object in messages) and returns it, or nil.
func (v *validator) object(n *node, path, what string, allowed []string) *object {
	if n.kind != kindObject {
		v.add(n.pos, path, "expected %s, got %s", what, n.kind)
		return nil
	}
	o := &object{v: v, n: n, path: path, fields: map[string]*field{}}
	for i := range n.fields {
		f := &n.fields[i]
		fp := yamlnode.Path(path, f.key)
		switch {
		case !slices.Contains(allowed, f.key):
			v.add(f.pos, fp, "unknown field %q in %s (expected one of %s)", f.key, what, strings.Join(allowed, ", "))
		case o.fields[f.key] != nil:
			v.add(f.pos, fp, "duplicate field %q", f.key)
		default:
			o.fields[f.key] = f
		}
	}
	return o
}

// get returns a field's value, reporting it missing when required.
func (o *object) get(key string, required bool) *node {
	f := o.fields[key]
	if f == nil {
		if required {
			o.v.add(o.n.pos, yamlnode.Path(o.path, key), "required field is missing")
		}
		return nil
	}
	return f.val
}

func (o *object) wrongType(n *node, key, want string) {
	o.v.add(n.pos, yamlnode.Path(o.path, key), "expected %s, got %s", want, n.kind)
}

// str reads a string field; nonEmpty rejects "".
func (o *object) str(key string, required, nonEmpty bool) (string, bool) {
	n := o.get(key, required)
	if n == nil {
		return "", false
	}
	if n.kind != kindString {
		o.wrongType(n, key, "a string")
		return "", false
	}
	if nonEmpty && strings.TrimSpace(n.str) == "" {
		o.v.add(n.pos, yamlnode.Path(o.path, key), "must not be empty")
		return "", false
	}
	return n.str, true
}

// enum reads a string field that must be one of values.
func (o *object) enum(key string, required bool, what string, values ...string) string {
	n := o.get(key, required)
	if n == nil {
		return ""
	}
	if n.kind != kindString {
		o.wrongType(n, key, "a string")
		return ""
	}
	if !slices.Contains(values, n.str) {
		o.v.add(n.pos, yamlnode.Path(o.path, key), "unknown %s %q (expected one of %s)", what, n.str, strings.Join(values, ", "))
		return ""
	}
	return n.str
}

// integer reads an integer field in [lo, hi].
func (o *object) integer(key string, required bool, lo, hi int64) (int64, bool) {
	n := o.get(key, required)
	if n == nil {
		return 0, false
	}
	return o.v.integer(n, yamlnode.Path(o.path, key), lo, hi)
}

func (v *validator) integer(n *node, path string, lo, hi int64) (int64, bool) {
	if n.kind != kindNumber {
		v.add(n.pos, path, "expected an integer, got %s", n.kind)
		return 0, false
	}
	i, err := strconv.ParseInt(n.str, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(n.str, 64)
		if ferr != nil || f != math.Trunc(f) || f < math.MinInt64 || f > math.MaxInt64 {
			v.add(n.pos, path, "expected an integer, got %s", n.str)
			return 0, false
		}
		i = int64(f)
	}
	if i < lo || i > hi {
		v.add(n.pos, path, "must be between %d and %d, got %d", lo, hi, i)
		return 0, false
	}
	return i, true
}

// strings reads a field holding an array of strings.
func (o *object) strings(key string, required, nonEmptyItems bool) []string {
	n := o.get(key, required)
	if n == nil {
		return nil
	}
	p := yamlnode.Path(o.path, key)
	if n.kind != kindArray {
		o.wrongType(n, key, "an array of strings")
		return nil
	}
	out := []string{}
	for i, it := range n.items {
		ip := fmt.Sprintf("%s[%d]", p, i)
		switch {
		case it.kind != kindString:
			o.v.add(it.pos, ip, "expected a string, got %s", it.kind)
		case nonEmptyItems && strings.TrimSpace(it.str) == "":
			o.v.add(it.pos, ip, "must not be empty")
		default:
			out = append(out, it.str)
		}
	}
	return out
}

// maxMS bounds delays (one day) so that durations cannot overflow.
const maxMS = 24 * 60 * 60 * 1000

// maxTokens bounds usage figures.
const maxTokens = 1 << 40

func (v *validator) scenario(root *node) *Scenario {
	s := &Scenario{}
	o := v.object(root, "", "a scripted scenario object",
		[]string{"schemaVersion", "id", "description", "expectedOutcome", "metadata", "frames", "assertions", "workspaceManifestPath", "releaseGate", "subtasks"})
	if o == nil {
		return s
	}
	if sv, ok := o.str("schemaVersion", true, false); ok {
		if sv != SchemaVersion {
			v.add(o.get("schemaVersion", false).pos, "schemaVersion", "unsupported schema version %q (expected %q)", sv, SchemaVersion)
		}
		s.SchemaVersion = sv
	}
	s.ID, _ = o.str("id", true, true)
	s.Description, _ = o.str("description", true, true)
	s.ExpectedOutcome = Outcome(o.enum("expectedOutcome", false, "outcome", string(OutcomePass), string(OutcomeFail)))
	s.WorkspaceManifestPath, _ = o.str("workspaceManifestPath", false, true)
	if rg := o.get("releaseGate", false); rg != nil {
		if rg.kind != kindObject {
			o.wrongType(rg, "releaseGate", "an object")
		} else {
			var b bytes.Buffer
			rg.toJSON(&b)
			s.ReleaseGate = json.RawMessage(b.Bytes())
		}
	}
	if m := o.get("metadata", true); m != nil {
		s.Metadata = v.metadata(m)
	}
	if f := o.get("frames", true); f != nil {
		s.Frames = v.frames(f, s)
	}
	if a := o.get("assertions", false); a != nil {
		s.Assertions = v.assertions(a)
	}
	if st := o.get("subtasks", false); st != nil {
		s.Subtasks = v.subtasks(st)
	}
	return s
}

// subtasks reads the subtasks' scenarios: an array of scenario objects,
// none of which has subtasks of its own (a subtask cannot spawn one).
// Problems inside one are reported with its position and its own paths.
func (v *validator) subtasks(n *node) []*Scenario {
	if n.kind != kindArray {
		v.add(n.pos, "subtasks", "expected an array of scenarios, got %s", n.kind)
		return nil
	}
	out := make([]*Scenario, 0, len(n.items))
	for i, item := range n.items {
		sub := v.scenario(item)
		if len(sub.Subtasks) > 0 {
			v.add(item.pos, fmt.Sprintf("subtasks[%d].subtasks", i), "a subtask's scenario cannot have subtasks (a subtask cannot spawn subtasks)")
		}
		out = append(out, sub)
	}
	return out
}

func (v *validator) metadata(n *node) Metadata {
	var m Metadata
	o := v.object(n, "metadata", "a metadata object", []string{"recordedFrom", "recordedAt", "modelOriginal", "toolsExpected", "auditEvents"})
	if o == nil {
		return m
	}
	m.RecordedFrom, _ = o.str("recordedFrom", false, false)
	if at, ok := o.str("recordedAt", true, true); ok {
		if _, err := time.Parse(time.RFC3339, at); err != nil {
			v.add(o.get("recordedAt", false).pos, "metadata.recordedAt", "expected an RFC 3339 timestamp such as 2026-01-02T15:04:05Z, got %q", at)
		}
		m.RecordedAt = at
	}
	m.ModelOriginal, _ = o.str("modelOriginal", false, false)
	m.ToolsExpected = o.strings("toolsExpected", true, true)
	if dup := firstDuplicate(m.ToolsExpected); dup != "" {
		v.add(o.get("toolsExpected", false).pos, "metadata.toolsExpected", "tool %q is listed twice", dup)
	}
	m.AuditEvents = o.strings("auditEvents", false, true)
	return m
}

func firstDuplicate(xs []string) string {
	seen := map[string]bool{}
	for _, x := range xs {
		if seen[x] {
			return x
		}
		seen[x] = true
	}
	return ""
}

// fieldPos is the position of an object's field value, or of the object
// when it has no such field.
func (n *node) fieldPos(key string) pos {
	for _, f := range n.fields {
		if f.key == key {
			return f.val.pos
		}
	}
	return n.pos
}

// callSite records where a tool call id was first used.
type callSite struct {
	path string
}

func (v *validator) frames(n *node, s *Scenario) []Frame {
	if n.kind != kindArray {
		v.add(n.pos, "frames", "expected an array of frames, got %s", n.kind)
		return nil
	}
	if len(n.items) == 0 {
		v.add(n.pos, "frames", "a scenario needs at least one frame")
		return nil
	}
	ids := map[string]callSite{}
	frames := make([]Frame, 0, len(n.items))
	for k, fn := range n.items {
		fp := fmt.Sprintf("frames[%d]", k)
		f := Frame{Index: k}
		o := v.object(fn, fp, "a frame object", []string{"index", "statements"})
		if o == nil {
			frames = append(frames, f)
			continue
		}
		if in := o.get("index", true); in != nil {
			if i, ok := v.integer(in, fp+".index", math.MinInt64, math.MaxInt64); ok && i != int64(k) {
				v.add(in.pos, fp+".index", "expected %d, got %d (frame indexes are contiguous from 0, in order)", k, i)
			}
		}
		if sn := o.get("statements", true); sn != nil {
			f.Statements = v.statements(sn, fp+".statements", k, s, ids)
		}
		frames = append(frames, f)
	}
	return frames
}

// statementFields lists the fields each statement kind allows.
func statementFields(k StatementKind) []string {
	switch k {
	case KindText:
		return []string{"kind", "text", "chunks", "streamMs"}
	case KindDelay:
		return []string{"kind", "ms"}
	case KindToolCall:
		return []string{"kind", "tool", "input", "id", "expectedResult"}
	case KindError:
		return []string{"kind", "type", "message"}
	case KindEnd:
		return []string{"kind", "reason"}
	case KindThinking:
		return []string{"kind", "text"}
	case KindUsage:
		return []string{"kind", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"}
	default: // wait_for_user
		return []string{"kind"}
	}
}

func (v *validator) statements(n *node, path string, frame int, s *Scenario, ids map[string]callSite) []Statement {
	if n.kind != kindArray {
		v.add(n.pos, path, "expected an array of statements, got %s", n.kind)
		return nil
	}
	if len(n.items) == 0 {
		v.add(n.pos, path, "a frame needs at least one statement")
		return nil
	}
	out := make([]Statement, 0, len(n.items))
	terminal, reported := -1, false
	for i, sn := range n.items {
		sp := fmt.Sprintf("%s[%d]", path, i)
		st, ok := v.statement(sn, sp)
		if !ok {
			out = append(out, st)
			continue
		}
		switch {
		case terminal >= 0 && !reported:
			v.add(sn.pos, sp, "unreachable: the %s statement at %s[%d] already ends the frame", out[terminal].Kind, path, terminal)
			reported = true
		case terminal < 0 && st.Kind.terminal():
			terminal = i
		}
		if st.Kind == KindToolCall && st.Tool != "" {
			if s.Metadata.ToolsExpected != nil && !slices.Contains(s.Metadata.ToolsExpected, st.Tool) {
				v.add(sn.fieldPos("tool"), sp+".tool", "tool %q is not listed in metadata.toolsExpected", st.Tool)
			}
			id := st.ID
			if id == "" {
				id = DefaultToolCallID(s.ID, frame, i)
			}
			if prev, dup := ids[id]; dup {
				v.add(sn.fieldPos("id"), sp+".id", "tool call id %q is already used by %s", id, prev.path)
			} else {
				ids[id] = callSite{path: sp}
			}
		}
		out = append(out, st)
	}
	return out
}

// statement validates one statement; ok is false when its kind is unknown.
func (v *validator) statement(n *node, path string) (st Statement, ok bool) {
	if n.kind != kindObject {
		v.add(n.pos, path, "expected a statement object, got %s", n.kind)
		return st, false
	}
	var kindNode *node
	for _, f := range n.fields {
		if f.key == "kind" {
			kindNode = f.val
			break
		}
	}
	kinds := statementKinds()
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	switch {
	case kindNode == nil:
		v.add(n.pos, path+".kind", "required field is missing (one of %s)", strings.Join(names, ", "))
		return st, false
	case kindNode.kind != kindString:
		v.add(kindNode.pos, path+".kind", "expected a string, got %s", kindNode.kind)
		return st, false
	case !slices.Contains(names, kindNode.str):
		v.add(kindNode.pos, path+".kind", "unknown statement kind %q (expected one of %s)", kindNode.str, strings.Join(names, ", "))
		return st, false
	}
	st.Kind = StatementKind(kindNode.str)
	o := v.object(n, path, fmt.Sprintf("a %s statement", st.Kind), statementFields(st.Kind))
	switch st.Kind {
	case KindText:
		text, hasText := o.str("text", false, false)
		st.Text = text
		cn := o.get("chunks", false)
		if cn == nil && o.get("text", false) == nil {
			v.add(n.pos, path+".text", "required field is missing (give text, chunks or both)")
		}
		if cn != nil {
			st.Chunks = o.strings("chunks", false, false)
			if st.Chunks != nil && len(st.Chunks) == 0 {
				v.add(cn.pos, path+".chunks", "must hold at least one chunk")
			}
			joined := strings.Join(st.Chunks, "")
			if !hasText {
				st.Text = joined
			} else if cn.kind == kindArray && len(st.Chunks) == len(cn.items) && joined != text {
				v.add(cn.pos, path+".chunks", "the chunks join to %q, which differs from text %q", joined, text)
			}
		}
		st.StreamMS, _ = o.integer("streamMs", false, 0, maxMS)
	case KindThinking:
		st.Text, _ = o.str("text", true, true)
	case KindDelay:
		st.MS, _ = o.integer("ms", true, 0, maxMS)
	case KindToolCall:
		st.Tool, _ = o.str("tool", true, true)
		st.ID, _ = o.str("id", false, true)
		st.ExpectedResult = ExpectedResult(o.enum("expectedResult", false, "expected result",
			string(ExpectSuccess), string(ExpectError), string(ExpectAny)))
		st.Input = json.RawMessage("{}")
		if in := o.get("input", false); in != nil && in.kind != kindNull {
			var b bytes.Buffer
			in.toJSON(&b)
			st.Input = json.RawMessage(b.Bytes())
		}
	case KindError:
		st.ErrorType = ErrorType(o.enum("type", true, "error type", string(ErrorTransient), string(ErrorFatal)))
		st.Message, _ = o.str("message", true, true)
	case KindEnd:
		st.Reason = EndReason(o.enum("reason", true, "end reason", string(EndComplete), string(EndAborted), string(EndLimitExceeded)))
	case KindUsage:
		st.Usage.InputTokens, _ = o.integer("input_tokens", false, 0, maxTokens)
		st.Usage.OutputTokens, _ = o.integer("output_tokens", false, 0, maxTokens)
		st.Usage.CacheReadTokens, _ = o.integer("cache_read_tokens", false, 0, maxTokens)
		st.Usage.CacheWriteTokens, _ = o.integer("cache_write_tokens", false, 0, maxTokens)
	}
	return st, true
}

// assertionFields lists the fields each assertion kind allows.
func assertionFields(k AssertionKind) []string {
	common := []string{"id", "kind", "severity", "note"}
	switch k {
	case AssertToolCalled, AssertToolNotCalled:
		return append(common, "tool", "toolCallId")
	case AssertFileExists:
		return append(common, "path")
	case AssertFileContents:
		return append(common, "path", "contains", "equals")
	default: // audit_event_emitted
		return append(common, "eventType")
	}
}

func (v *validator) assertions(n *node) []Assertion {
	if n.kind != kindArray {
		v.add(n.pos, "assertions", "expected an array of assertions, got %s", n.kind)
		return nil
	}
	kinds := assertionKinds()
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	ids := map[string]string{}
	out := make([]Assertion, 0, len(n.items))
	for i, an := range n.items {
		ap := fmt.Sprintf("assertions[%d]", i)
		if an.kind != kindObject {
			v.add(an.pos, ap, "expected an assertion object, got %s", an.kind)
			continue
		}
		var a Assertion
		var kindNode *node
		for _, f := range an.fields {
			if f.key == "kind" {
				kindNode = f.val
				break
			}
		}
		switch {
		case kindNode == nil:
			v.add(an.pos, ap+".kind", "required field is missing (one of %s)", strings.Join(names, ", "))
			continue
		case kindNode.kind != kindString:
			v.add(kindNode.pos, ap+".kind", "expected a string, got %s", kindNode.kind)
			continue
		case !slices.Contains(names, kindNode.str):
			v.add(kindNode.pos, ap+".kind", "unknown assertion kind %q (expected one of %s)", kindNode.str, strings.Join(names, ", "))
			continue
		}
		a.Kind = AssertionKind(kindNode.str)
		o := v.object(an, ap, fmt.Sprintf("a %s assertion", a.Kind), assertionFields(a.Kind))
		if id, ok := o.str("id", true, true); ok {
			if prev, dup := ids[id]; dup {
				v.add(o.get("id", false).pos, ap+".id", "assertion id %q is already used by %s", id, prev)
			}
			ids[id] = ap
			a.ID = id
		}
		a.Severity = Severity(o.enum("severity", false, "severity", string(SeverityError), string(SeverityWarning)))
		a.Note, _ = o.str("note", false, false)
		switch a.Kind {
		case AssertToolCalled, AssertToolNotCalled:
			a.Tool, _ = o.str("tool", true, true)
			a.ToolCallID, _ = o.str("toolCallId", false, true)
		case AssertFileExists, AssertFileContents:
			if p, ok := o.str("path", true, true); ok {
				if _, valid := workspacePath(p); !valid {
					v.add(o.get("path", false).pos, ap+".path", "%q must be a relative path inside the workspace", p)
				}
				a.Path = p
			}
			if a.Kind == AssertFileContents {
				if c, ok := o.str("contains", false, false); ok {
					a.Contains = &c
				}
				if e, ok := o.str("equals", false, false); ok {
					a.Equals = &e
				}
				if o.get("contains", false) == nil && o.get("equals", false) == nil {
					v.add(an.pos, ap, "a file_contents assertion needs contains or equals")
				}
			}
		case AssertAuditEventEmitted:
			a.EventType, _ = o.str("eventType", true, true)
		}
		out = append(out, a)
	}
	return out
}

// workspacePath converts an assertion path to an fs.FS path.
func workspacePath(p string) (string, bool) {
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") || filepath.VolumeName(p) != "" {
		return "", false
	}
	c := path.Clean(filepath.ToSlash(p))
	return c, fs.ValidPath(c) && c != "."
}
