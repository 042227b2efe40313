package piece

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/yamlnode"
)

// Parse decodes and validates one piece file. file names the source in
// error messages (a path, or a label such as "builtin:code.yaml"). On
// success it returns the piece; otherwise it returns nil and an [*Errors]
// listing every fault of the file in position order.
//
// Parse is the only validator: the catalog loader, the piece tools, the
// REST API and the CLI all call it.
func Parse(file string, data []byte) (*Piece, error) {
	d := decoder{file: file}
	p := d.parse(data)
	if len(d.errs) > 0 {
		slices.SortStableFunc(d.errs, func(a, b Error) int {
			if a.Line != b.Line {
				return a.Line - b.Line
			}
			return a.Col - b.Col
		})
		return nil, &Errors{List: d.errs}
	}
	return p, nil
}

// Validate reports whether data is a valid piece, with the same errors as
// [Parse].
func Validate(file string, data []byte) error {
	_, err := Parse(file, data)
	return err
}

// Field names, in the order documentation and [Marshal] use.
var (
	pieceFields = []string{
		"name", "description", "max_movements", "initial_movement",
		"triggers", "required_mcp", "model", "movements",
	}
	movementFields = []string{
		"name", "agent", "edit", "persona", "instruction", "allowed_tools",
		"allowed_commands", "allowed_ssh_connections", "rules", "default_next",
		"text_answer", "model", "max_consecutive_revisits",
	}
	ruleFields    = []string{"condition", "next"}
	triggerFields = []string{"keywords"}
)

// renamedFields maps names other piece dialects use (takt's later
// workflow/step vocabulary, camelCase) to ours, for "did you mean".
func renamedField(key string) string {
	switch key {
	case "steps":
		return "movements"
	case "initial_step":
		return "initial_movement"
	case "max_steps":
		return "max_movements"
	}
	return ""
}

const emptyDocument = "empty document; expected a piece: a mapping with name, description, max_movements, initial_movement and movements"

// decoder walks one YAML node tree into a Piece, collecting every fault.
type decoder struct {
	file string
	errs []Error
}

// ref is a movement reference checked once every movement name is known.
type ref struct {
	node  *yaml.Node
	path  string
	value string
	kind  refKind
}

type refKind int

const (
	refInitial     refKind = iota // initial_movement: a movement
	refRuleNext                   // rules[].next: a movement or WAIT_SUBTASKS
	refDefaultNext                // default_next: a movement or any sentinel
)

func (d *decoder) errorf(n *yaml.Node, field, format string, args ...any) {
	e := Error{File: d.file, Field: field, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Col = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

func (d *decoder) parse(data []byte) *Piece {
	if len(data) > MaxFileSize {
		d.errs = append(d.errs, Error{File: d.file, Message: fmt.Sprintf(
			"file is %d bytes; expected at most %d bytes", len(data), MaxFileSize)})
		return nil
	}
	l, err := yaml.NewLoader(bytes.NewReader(data))
	if err != nil {
		d.errs = append(d.errs, Error{File: d.file, Message: "creating YAML loader: " + err.Error()})
		return nil
	}
	var doc yaml.Node
	if err := l.Load(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.errs = append(d.errs, Error{File: d.file, Line: 1, Col: 1, Message: emptyDocument})
		} else {
			d.yamlError(err, data)
		}
		return nil
	}
	var extra yaml.Node
	switch err := l.Load(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		d.yamlError(err, data)
	default:
		at := &extra
		if len(extra.Content) > 0 {
			at = extra.Content[0]
		}
		d.errorf(at, "", "found a second YAML document; expected exactly one piece per file")
	}
	if len(doc.Content) == 0 {
		d.errs = append(d.errs, Error{File: d.file, Line: 1, Col: 1, Message: emptyDocument})
		return nil
	}
	root := deref(doc.Content[0])
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		d.errorf(root, "", emptyDocument)
		return nil
	}
	if root.Kind != yaml.MappingNode {
		d.errorf(root, "", "expected a piece (a mapping of fields), found %s", yamlnode.Describe(root))
		return nil
	}
	return d.piece(root)
}

// yamlError records a syntax or structure error reported by the YAML
// library, keeping its position.
func (d *decoder) yamlError(err error, data []byte) {
	var list *yaml.LoadErrors
	if errors.As(err, &list) {
		for _, e := range list.Errors {
			d.loadError(e, data)
		}
		return
	}
	var one *yaml.LoadError
	if errors.As(err, &one) {
		d.loadError(one, data)
		return
	}
	d.errs = append(d.errs, Error{File: d.file, Message: "YAML: " + err.Error()})
}

func (d *decoder) loadError(e *yaml.LoadError, data []byte) {
	msg := "YAML syntax error: " + strings.TrimPrefix(e.Message, "yaml: ")
	if e.ContextMsg != "" {
		msg += " (" + e.ContextMsg
		if e.ContextMark.Line > 0 && e.ContextMark != e.Mark {
			msg += fmt.Sprintf(" started at %d:%d", e.ContextMark.Line, e.ContextMark.Column)
		}
		msg += ")"
	}
	if i := e.Mark.Index; e.Mark.Line > 0 && i >= 0 && i < len(data) && data[i] == '\t' {
		msg += "; tabs cannot indent YAML, use spaces"
	}
	d.errs = append(d.errs, Error{File: d.file, Line: e.Mark.Line, Col: e.Mark.Column, Message: msg})
}

// deref resolves an alias to a copy of its target positioned at the alias,
// so faults in reused values are reported where they are used.
func deref(n *yaml.Node) *yaml.Node {
	if n.Kind != yaml.AliasNode || n.Alias == nil {
		return n
	}
	t := *deref(n.Alias)
	t.Line, t.Column = n.Line, n.Column
	return &t
}

func itemPath(parent, key string, i int) string {
	return yamlnode.Path(parent, key) + "[" + strconv.Itoa(i) + "]"
}

// model decodes a model field: provider/model with a provider Maestro has
// (or a bare catalogue id), as --model and config.yaml's model are
// checked. A provider Maestro lacks (ollama/qwen3) would otherwise fail
// only when the movement starts.
func (d *decoder) model(v *yaml.Node, field string) string {
	s, ok := d.str(v, field)
	if ok {
		d.checkModel(v, field, s)
	}
	return s
}

// checkModel reports a model value (v, at field) that --model would refuse.
func (d *decoder) checkModel(v *yaml.Node, field, s string) {
	if problem := config.CheckModel(s); problem != "" {
		d.errorf(v, field, "%s", problem)
	}
}

// mapping visits the key/value pairs of the mapping n, reporting keys that
// are duplicated, unknown (with a suggestion), not plain strings, or merge
// keys; visit sees only the first occurrence of each known key. The values
// passed to visit are dereferenced. The result flags, by index in known, the
// fields an unknown key was taken for, so that a misspelt required field is
// reported once (as a typo) rather than also as missing.
func (d *decoder) mapping(n *yaml.Node, parent string, known []string, visit func(key string, k, v *yaml.Node)) (typos [16]bool) {
	var seen [16]*yaml.Node // key nodes by index in known
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.AliasNode {
			k = deref(k)
		}
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, parent, "expected a field name, found %s as a key", yamlnode.Describe(k))
			continue
		}
		if k.ShortTag() == "!!merge" {
			d.errorf(k, yamlnode.Path(parent, k.Value),
				"merge keys (<<) are not supported; write the fields out, reusing values with anchors and aliases if needed")
			continue
		}
		idx := slices.Index(known, k.Value)
		if idx < 0 {
			if hint := d.unknownField(k, parent, known); hint != "" {
				typos[slices.Index(known, hint)] = true
			}
			continue
		}
		if first := seen[idx]; first != nil {
			d.errorf(k, yamlnode.Path(parent, k.Value), "duplicate key; first defined at %d:%d", first.Line, first.Column)
			continue
		}
		seen[idx] = k
		visit(k.Value, k, deref(v))
	}
	return typos
}

// unknownField reports an unknown key and returns the known field it
// suggested, if any.
func (d *decoder) unknownField(k *yaml.Node, parent string, known []string) string {
	field := yamlnode.Path(parent, k.Value)
	hint := renamedField(k.Value)
	if hint == "" || !slices.Contains(known, hint) {
		hint = suggest(k.Value, known)
	}
	if hint != "" {
		d.errorf(k, field, "unknown field %s; did you mean %q?", yamlnode.Quote(k.Value), hint)
		return hint
	}
	d.errorf(k, field, "unknown field %s; expected one of %s", yamlnode.Quote(k.Value), strings.Join(known, ", "))
	return ""
}

// missing reports a required field absent from the mapping n.
func (d *decoder) missing(n *yaml.Node, parent, key, want string) {
	d.errorf(n, yamlnode.Path(parent, key), "required field is missing; expected %s", want)
}

// str decodes a non-empty string scalar.
func (d *decoder) str(v *yaml.Node, field string) (string, bool) {
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!str" {
		if strings.TrimSpace(v.Value) == "" {
			d.errorf(v, field, "expected a non-empty string, found %s", yamlnode.Describe(v))
			return "", false
		}
		return v.Value, true
	}
	d.errorf(v, field, "expected a string, found %s%s", yamlnode.Describe(v), quoteHint(v))
	return "", false
}

// slug reads the string at v like str and reports it unless it is 1-64
// of [a-z0-9-] ('_' too when underscore); want says what was expected.
func (d *decoder) slug(v *yaml.Node, field string, underscore bool, want string) (string, bool) {
	s, ok := d.str(v, field)
	if ok && !isSlug(s, 64, underscore) {
		d.errorf(v, field, "expected %s, found %s", want, yamlnode.Quote(s))
	}
	return s, ok
}

// quoteHint suggests quoting a scalar that YAML read as another type.
func quoteHint(v *yaml.Node) string {
	if v.Kind == yaml.ScalarNode {
		switch v.ShortTag() {
		case "!!int", "!!float", "!!bool":
			return " (quote it to make it a string)"
		}
	}
	return ""
}

// boolean decodes true or false.
func (d *decoder) boolean(v *yaml.Node, field string) (bool, bool) {
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!bool" {
		var b bool
		if err := v.Decode(&b); err == nil {
			return b, true
		}
	}
	d.errorf(v, field, "expected a boolean (true or false), found %s", yamlnode.Describe(v))
	return false, false
}

// positive decodes a positive integer.
func (d *decoder) positive(v *yaml.Node, field string) (int, bool) {
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!int" {
		var i int
		if err := v.Decode(&i); err != nil {
			d.errorf(v, field, "expected a positive integer, found integer %s (out of range)", v.Value)
			return 0, false
		}
		if i > 0 {
			return i, true
		}
	}
	d.errorf(v, field, "expected a positive integer, found %s", yamlnode.Describe(v))
	return 0, false
}

// strList decodes a list of non-empty strings (possibly empty, never nil on
// success). check, when set, vets each entry and returns a message for a
// bad one. Duplicate entries are faults.
func (d *decoder) strList(v *yaml.Node, field string, check func(string) string) ([]string, bool) {
	if v.Kind != yaml.SequenceNode {
		d.errorf(v, field, "expected a list of strings, found %s", yamlnode.Describe(v))
		return nil, false
	}
	out := make([]string, 0, len(v.Content))
	ok := true
	for i, it := range v.Content {
		it = deref(it)
		s, good := d.str(it, field+"["+strconv.Itoa(i)+"]")
		if !good {
			ok = false
			continue
		}
		if check != nil {
			if msg := check(s); msg != "" {
				d.errorf(it, field+"["+strconv.Itoa(i)+"]", "%s", msg)
				ok = false
				continue
			}
		}
		if j := slices.Index(out, s); j >= 0 {
			first := deref(v.Content[indexOfValue(v, s)])
			d.errorf(it, field+"["+strconv.Itoa(i)+"]", "duplicate entry %s; first listed at %d:%d", yamlnode.Quote(s), first.Line, first.Column)
			ok = false
			continue
		}
		out = append(out, s)
	}
	return out, ok
}

// indexOfValue returns the index of the first item of seq whose value is s.
func indexOfValue(seq *yaml.Node, s string) int {
	for i, it := range seq.Content {
		if deref(it).Value == s {
			return i
		}
	}
	return 0
}

func (d *decoder) piece(n *yaml.Node) *Piece {
	p := &Piece{}
	var (
		refs        []ref
		names       []string     // every movement name found, valid or not
		nameNodes   []*yaml.Node // parallel to names
		movementsOK bool
		seen        [16]bool // by index in pieceFields
	)
	typos := d.mapping(n, "", pieceFields, func(key string, k, v *yaml.Node) {
		seen[slices.Index(pieceFields, key)] = true
		switch key {
		case "name":
			if s, ok := d.slug(v, key, false, "1-64 lowercase letters, digits and hyphens ([a-z0-9-])"); ok {
				p.Name, p.NamePos = s, Pos{v.Line, v.Column}
			}
		case "description":
			p.Description, _ = d.str(v, key)
		case "max_movements":
			p.MaxMovements, _ = d.positive(v, key)
		case "initial_movement":
			if s, ok := d.str(v, key); ok {
				p.InitialMovement = s
				refs = append(refs, ref{v, key, s, refInitial})
			}
		case "triggers":
			p.Triggers = d.triggers(v)
		case "required_mcp":
			p.RequiredMCP, _ = d.strList(v, key, func(s string) string {
				if isSlug(s, 64, true) {
					return ""
				}
				return "expected an MCP server slug of 1-64 characters [a-z0-9_-], found " + yamlnode.Quote(s)
			})
		case "model":
			p.Model = d.model(v, key)
		case "movements":
			if v.Kind != yaml.SequenceNode {
				d.errorf(v, key, "expected a non-empty list of movements, found %s", yamlnode.Describe(v))
				return
			}
			if len(v.Content) == 0 {
				d.errorf(v, key, "expected a non-empty list of movements, found an empty list")
				return
			}
			movementsOK = true
			p.Movements = make([]Movement, 0, len(v.Content))
			for i, it := range v.Content {
				it = deref(it)
				path := "movements[" + strconv.Itoa(i) + "]"
				if it.Kind != yaml.MappingNode {
					d.errorf(it, path, "expected a movement (a mapping of fields), found %s", yamlnode.Describe(it))
					movementsOK = false
					continue
				}
				m, nameNode, mrefs := d.movement(it, path)
				if nameNode == nil {
					movementsOK = false // the set of names is incomplete
				} else {
					if j := slices.Index(names, m.Name); j >= 0 {
						d.errorf(nameNode, path+".name", "duplicate movement name %s; first defined at %d:%d",
							yamlnode.Quote(m.Name), nameNodes[j].Line, nameNodes[j].Column)
					} else {
						names = append(names, m.Name)
						nameNodes = append(nameNodes, nameNode)
					}
				}
				refs = append(refs, mrefs...)
				p.Movements = append(p.Movements, m)
			}
		}
	})
	required := [...]struct{ key, want string }{
		{"name", "a piece name of lowercase letters, digits and hyphens"},
		{"description", "a non-empty string telling the classifier when to choose this piece"},
		{"max_movements", "a positive integer"},
		{"initial_movement", "the name of one of the movements"},
		{"movements", "a non-empty list of movements"},
	}
	for _, r := range required {
		if i := slices.Index(pieceFields, r.key); !seen[i] && !typos[i] {
			d.missing(n, "", r.key, r.want)
		}
	}
	for _, r := range refs {
		d.checkRef(r, names, movementsOK)
	}
	return p
}

func (d *decoder) triggers(v *yaml.Node) *Triggers {
	if v.Kind != yaml.MappingNode {
		d.errorf(v, "triggers", "expected a mapping with keywords, found %s", yamlnode.Describe(v))
		return nil
	}
	t := &Triggers{}
	d.mapping(v, "triggers", triggerFields, func(key string, k, v *yaml.Node) {
		t.Keywords, _ = d.strList(v, "triggers.keywords", nil)
	})
	return t
}

// movement decodes one movement. It returns the node of a string name (nil
// when the name is missing or not a string) and the references to check.
func (d *decoder) movement(n *yaml.Node, path string) (Movement, *yaml.Node, []ref) {
	m := Movement{Pos: Pos{n.Line, n.Column}}
	var (
		nameNode            *yaml.Node
		refs                []ref
		seen                [16]bool // by index in movementFields
		editOK              bool
		toolsNode, cmdsNode *yaml.Node
		modelNode           *yaml.Node
	)
	typos := d.mapping(n, path, movementFields, func(key string, k, v *yaml.Node) {
		seen[slices.Index(movementFields, key)] = true
		field := path + "." + key
		switch key {
		case "name":
			s, ok := d.str(v, field)
			if !ok {
				return
			}
			m.Name, nameNode = s, v
			switch {
			case IsSentinel(s):
				d.errorf(v, field, "%s is a reserved sentinel; expected a movement name of 1-64 lowercase letters, digits, '_' and '-'", s)
			case !isSlug(s, 64, true):
				d.errorf(v, field, "expected 1-64 lowercase letters, digits, '_' and '-' ([a-z0-9_-]), found %s", yamlnode.Quote(s))
			}
		case "agent":
			m.Agent, _ = d.slug(v, field, true, "an agent adapter name of 1-64 characters [a-z0-9_-]")
		case "edit":
			m.Edit, editOK = d.boolean(v, field)
		case "persona":
			m.Persona, _ = d.str(v, field)
		case "instruction":
			m.Instruction, _ = d.str(v, field)
		case "allowed_tools":
			m.AllowedTools, _ = d.strList(v, field, checkTool)
			if v.Kind == yaml.SequenceNode {
				toolsNode = v
			}
		case "allowed_commands":
			m.AllowedCommands, _ = d.strList(v, field, func(s string) string {
				if isCommandName(s) {
					return ""
				}
				return "expected a command name (1-64 of [A-Za-z0-9._+-], no spaces or slashes), found " + yamlnode.Quote(s)
			})
			cmdsNode = k
		case "allowed_ssh_connections":
			m.AllowedSSHConnections, _ = d.strList(v, field, func(s string) string {
				if s == "*" || isConnectionID(s) {
					return ""
				}
				return `expected "*" or a connection id of at least 8 lowercase hex digits and hyphens, found ` + yamlnode.Quote(s)
			})
		case "rules":
			if v.Kind != yaml.SequenceNode {
				d.errorf(v, field, "expected a list of rules (use [] for none), found %s", yamlnode.Describe(v))
				return
			}
			m.Rules = make([]Rule, 0, len(v.Content))
			for i, it := range v.Content {
				it = deref(it)
				rpath := field + "[" + strconv.Itoa(i) + "]"
				if it.Kind != yaml.MappingNode {
					d.errorf(it, rpath, "expected a rule (a mapping with condition and next), found %s", yamlnode.Describe(it))
					continue
				}
				r, nextNode := d.rule(it, rpath)
				if nextNode != nil {
					refs = append(refs, ref{nextNode, rpath + ".next", r.Next, refRuleNext})
				}
				m.Rules = append(m.Rules, r)
			}
		case "default_next":
			if s, ok := d.str(v, field); ok {
				m.DefaultNext = s
				refs = append(refs, ref{v, field, s, refDefaultNext})
			}
		case "text_answer":
			if s, ok := d.str(v, field); ok {
				if s != TextAnswerResult && s != TextAnswerDefaultNext {
					d.errorf(v, field, "expected %s or %s, found %s", TextAnswerResult, TextAnswerDefaultNext, yamlnode.Quote(s))
				}
				m.TextAnswer = s
			}
		case "model":
			m.Model, _ = d.str(v, field)
			modelNode = v
		case "max_consecutive_revisits":
			m.MaxConsecutiveRevisits, _ = d.positive(v, field)
		}
	})
	required := [...]struct{ key, want string }{
		{"name", "a movement name unique within the piece"},
		{"edit", "a boolean (true or false); true exposes Write and Edit"},
		{"persona", "a non-empty string (the system-prompt persona)"},
		{"instruction", "a non-empty string (the movement's task)"},
		{"allowed_tools", "a list of tool names (use [] for none)"},
		{"rules", "a list of rules (use [] for none)"},
	}
	for _, r := range required {
		if i := slices.Index(movementFields, r.key); !seen[i] && !typos[i] {
			d.missing(n, path, r.key, r.want)
		}
	}
	if modelNode != nil && m.Model != "" {
		switch {
		case m.Agent != "":
			// An agent movement runs on its CLI; its model was ignored.
			d.errorf(modelNode, path+".model", "an agent movement runs on the model of its CLI (%s), which a piece does not choose; remove model: here (maestro run --model %s/MODEL chooses the CLI's model for a run)", m.Agent, m.Agent)
		default:
			d.checkModel(modelNode, path+".model", m.Model)
		}
	}
	d.movementTools(&m, path, toolsNode, cmdsNode, editOK, seen[slices.Index(movementFields, "allowed_ssh_connections")])
	return m, nameNode, refs
}

// movementTools checks the rules that tie allowed_tools to other fields.
func (d *decoder) movementTools(m *Movement, path string, tools, cmds *yaml.Node, editOK, sshSeen bool) {
	hasBash := false
	if tools != nil {
		for i, it := range tools.Content {
			it = deref(it)
			switch name := it.Value; {
			case name == "Bash":
				hasBash = true
			case (name == "Write" || name == "Edit") && editOK && !m.Edit:
				d.errorf(it, itemPath(path, "allowed_tools", i),
					"%s needs edit: true, found edit: false; set edit: true or remove %s", name, name)
			case isSSHTool(name) && !sshSeen:
				d.errorf(it, path+".allowed_ssh_connections",
					`required field is missing; expected a list because allowed_tools lists %s (connection ids, ["*"] for any, or [] to deny all)`, name)
				sshSeen = true // report once per movement
			}
		}
	}
	if cmds != nil && tools != nil && !hasBash {
		d.errorf(cmds, path+".allowed_commands", "has no effect: Bash is not in allowed_tools; add Bash or remove allowed_commands")
	}
}

// checkTool vets one allowed_tools entry.
func checkTool(s string) string {
	if isKnownTool(s) {
		return ""
	}
	if strings.HasPrefix(s, mcpPrefix) {
		return checkMCPTool(s)
	}
	names := make([]string, 0, 48)
	for _, t := range KnownTools() {
		names = append(names, t.Name)
	}
	if hint := suggest(s, names); hint != "" {
		return fmt.Sprintf("unknown tool %s; did you mean %q?", yamlnode.Quote(s), hint)
	}
	return fmt.Sprintf("unknown tool %s; expected a tool listed in docs/pieces.md or an MCP pattern mcp__<server>__*", yamlnode.Quote(s))
}

// rule decodes one rule; it returns the next node when next is a string.
func (d *decoder) rule(n *yaml.Node, path string) (Rule, *yaml.Node) {
	r := Rule{Pos: Pos{n.Line, n.Column}}
	var nextNode *yaml.Node
	var seenCond, seenNext bool
	typos := d.mapping(n, path, ruleFields, func(key string, k, v *yaml.Node) {
		switch key {
		case "condition":
			seenCond = true
			r.Condition, _ = d.str(v, path+".condition")
		case "next":
			seenNext = true
			if s, ok := d.str(v, path+".next"); ok {
				r.Next, nextNode = s, v
			}
		}
	})
	if !seenCond && !typos[0] {
		d.missing(n, path, "condition", "a non-empty string telling the model when to take this rule")
	}
	if !seenNext && !typos[1] {
		d.missing(n, path, "next", "a movement name or WAIT_SUBTASKS")
	}
	return r, nextNode
}

// checkRef checks a reference to a movement once all names are known.
// When the movements could not all be read (namesKnown false) it reports
// only misused sentinels, to avoid a cascade of unknown-movement errors.
func (d *decoder) checkRef(r ref, names []string, namesKnown bool) {
	if slices.Contains(names, r.value) {
		return
	}
	var want string
	candidates := names
	switch r.kind {
	case refInitial:
		if IsSentinel(r.value) {
			d.errorf(r.node, r.path, "expected the name of a movement, found sentinel %s; a run must start with a movement", r.value)
			return
		}
		want = "expected the name of a movement (" + strings.Join(names, ", ") + ")"
	case refRuleNext:
		candidates = append(slices.Clip(names), WaitSubtasks)
		switch r.value {
		case WaitSubtasks:
			return
		case Complete, Abort, Ask:
			d.errorf(r.node, r.path, "%s is a terminal sentinel, reachable only through the complete tool (status %s); expected a movement name or WAIT_SUBTASKS",
				r.value, completeStatus(r.value))
			return
		}
		want = "expected a movement name (" + strings.Join(names, ", ") + ") or WAIT_SUBTASKS"
	case refDefaultNext:
		if IsSentinel(r.value) {
			return
		}
		want = "expected a movement name (" + strings.Join(names, ", ") + ") or one of COMPLETE, ABORT, ASK, WAIT_SUBTASKS"
		candidates = append(slices.Clip(names), Complete, Abort, Ask, WaitSubtasks)
	}
	if !namesKnown {
		return
	}
	msg := want + ", found " + yamlnode.Quote(r.value)
	if hint := suggest(r.value, candidates); hint != "" {
		msg += fmt.Sprintf("; did you mean %q?", hint)
	}
	d.errorf(r.node, r.path, "%s", msg)
}

// completeStatus is the complete tool status that corresponds to a
// terminal sentinel.
func completeStatus(sentinel string) string {
	switch sentinel {
	case Complete:
		return "success"
	case Abort:
		return "aborted"
	}
	return "needs_user_input"
}
