package agentcli

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/maestro-run/maestro/internal/yamlnode"
)

//go:embed adapters/*.yaml
var builtinFS embed.FS

// LoadError is one fault of a definition file, located by line and column.
type LoadError struct {
	File      string
	Line, Col int
	// Field is the path of the offending field ("args.resume[0]"); empty
	// for faults of the whole file.
	Field   string
	Message string
}

// Error formats the fault as "file:line:col: field: message".
func (e *LoadError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// LoadErrors is every fault of one file, ordered by position.
type LoadErrors []*LoadError

// Error prints one fault per line.
func (l LoadErrors) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Unwrap exposes each fault to errors.As.
func (l LoadErrors) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// ParseDefinition decodes and validates one definition. file names it in errors.
// Unknown keys, wrong types, unknown parser or storage names, invalid
// regexps and unknown placeholders are all reported with line:col.
func ParseDefinition(file string, data []byte) (*Definition, error) {
	d := &decoder{file: file}
	var doc yaml.Node
	err := yaml.Load(data, &doc)
	if (err != nil && strings.Contains(err.Error(), "no documents")) || (err == nil && doc.Kind == yaml.DocumentNode && len(doc.Content) == 0) {
		// Empty, or comments only: "yaml: no documents in stream" said
		// neither where nor what.
		return nil, LoadErrors{{File: file, Line: 1, Col: 1, Message: "the file is empty: a definition needs at least id, binary and parser"}}
	}
	if err != nil {
		var le *yaml.LoadError
		if errors.As(err, &le) {
			return nil, LoadErrors{{File: file, Line: le.Mark.Line, Col: le.Mark.Column, Message: le.Message}}
		}
		return nil, LoadErrors{{File: file, Line: 1, Col: 1, Message: err.Error()}}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	def := &Definition{Source: file}
	if root.Kind != yaml.MappingNode {
		d.errorf(root, "", "a definition is a mapping, found %s", yamlnode.Describe(root))
		return nil, d.errs
	}
	d.decode(root, reflect.ValueOf(def).Elem(), "")
	if n := find(root, "id"); n != nil {
		def.idLine, def.idCol = n.Line, n.Column
	}
	d.validate(root, def)
	if len(d.errs) > 0 {
		sort.SliceStable(d.errs, func(i, j int) bool {
			a, b := d.errs[i], d.errs[j]
			if a.Line != b.Line {
				return a.Line < b.Line
			}
			return a.Col < b.Col
		})
		return nil, d.errs
	}
	return def, nil
}

type decoder struct {
	file string
	errs LoadErrors
}

func (d *decoder) errorf(n *yaml.Node, field, format string, args ...any) {
	e := &LoadError{File: d.file, Field: field, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Col = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

// decode fills v from n strictly, by the yaml tags of v's type.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch v.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			d.errorf(n, path, "expected a mapping, found %s", yamlnode.Describe(n))
			return
		}
		fields := map[string]int{}
		var names []string
		t := v.Type()
		for i := range t.NumField() {
			tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			fields[tag] = i
			names = append(names, tag)
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if seen[k.Value] {
				d.errorf(k, yamlnode.Path(path, k.Value), "duplicate key")
				continue
			}
			seen[k.Value] = true
			idx, ok := fields[k.Value]
			if !ok {
				d.errorf(k, yamlnode.Path(path, k.Value), "unknown key (known: %s)", strings.Join(names, ", "))
				continue
			}
			d.decode(val, v.Field(idx), yamlnode.Path(path, k.Value))
		}
	case reflect.Slice:
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.errorf(n, path, "expected a list, found %s", yamlnode.Describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
			return
		}
		if n.Kind != yaml.MappingNode {
			d.errorf(n, path, "expected a mapping, found %s", yamlnode.Describe(n))
			return
		}
		m := reflect.MakeMap(v.Type())
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				d.errorf(k, path, "keys must be strings")
				continue
			}
			elem := reflect.New(v.Type().Elem()).Elem()
			d.decode(val, elem, yamlnode.Path(path, k.Value))
			m.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), elem)
		}
		v.Set(m)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
			d.errorf(n, path, "expected a string, found %s", yamlnode.Describe(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		b, err := strconv.ParseBool(n.Value)
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || err != nil {
			d.errorf(n, path, "expected true or false, found %s", yamlnode.Describe(n))
			return
		}
		v.SetBool(b)
	case reflect.Int:
		i, err := strconv.Atoi(n.Value)
		if n.Kind != yaml.ScalarNode || err != nil {
			d.errorf(n, path, "expected an integer, found %s", yamlnode.Describe(n))
			return
		}
		v.SetInt(int64(i))
	default:
		d.errorf(n, path, "unsupported field type %s", v.Type())
	}
}

// find returns the node at a dotted path of mapping keys (nil if absent).
func find(root *yaml.Node, path ...string) *yaml.Node {
	n := root
	for _, key := range path {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

var placeholderRE = regexp.MustCompile(`\{[a-z_]*\}`)

// validate checks the meaning of a decoded definition.
func (d *decoder) validate(root *yaml.Node, def *Definition) {
	at := func(path ...string) *yaml.Node {
		if n := find(root, path...); n != nil {
			return n
		}
		return root
	}
	if def.ID == "" {
		d.errorf(at("id"), "id", "required")
	} else if !regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`).MatchString(def.ID) {
		d.errorf(at("id"), "id", "%q: use lower-case letters, digits, '.', '_' and '-'", def.ID)
	}
	if def.Binary == "" {
		d.errorf(at("binary"), "binary", "required")
	}
	if !slices.Contains(ParserNames(), def.Parser) {
		d.errorf(at("parser"), "parser", "%q is not a parser (known: %s)", def.Parser, strings.Join(ParserNames(), ", "))
	}
	d.validateGenericParser(root, def)
	if pr := def.SlashCommandsProbe; len(pr.Args) > 0 && !validPath(pr.Keys) {
		d.errorf(at("slash_commands_probe"), "slash_commands_probe.keys", "%q is not a path (keys separated by '.', list indices as [n])", pr.Keys)
	}
	if def.SessionStorage != "" && !slices.Contains(StorageNames(), def.SessionStorage) {
		d.errorf(at("session_storage"), "session_storage", "%q is not a session storage (known: %s)", def.SessionStorage, strings.Join(StorageNames(), ", "))
	}
	if def.VersionPattern != "" {
		if _, err := regexp.Compile(def.VersionPattern); err != nil {
			d.errorf(at("version_pattern"), "version_pattern", "invalid regexp: %v", err)
		}
	}
	// Placeholders allowed per builder.
	allowed := map[string][]string{
		"resume": {"{session}"}, "model": {"{model}"}, "working_dir": {"{dir}"},
		"additional_dir": {"{dir}"}, "image": {"{path}"}, "system_prompt": {"{text}"},
		"prompt": {"{prompt}"},
	}
	argsNode := find(root, "args")
	if argsNode != nil && argsNode.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(argsNode.Content); i += 2 {
			k, v := argsNode.Content[i], argsNode.Content[i+1]
			if v.Kind != yaml.SequenceNode {
				continue
			}
			used := false
			for j, tok := range v.Content {
				for _, ph := range placeholderRE.FindAllString(tok.Value, -1) {
					if !slices.Contains(allowed[k.Value], ph) {
						d.errorf(tok, fmt.Sprintf("args.%s[%d]", k.Value, j), "placeholder %s is not available here", ph)
					}
					used = true // a wrong one is reported above
				}
			}
			// A builder without its placeholder passes its flag with
			// nothing: prompt: ["--message"] sent no prompt at all.
			if want := allowed[k.Value]; len(want) > 0 && len(v.Content) > 0 && !used {
				d.errorf(v, "args."+k.Value, "no token holds %s, so the value is never passed (e.g. [\"--flag\", \"%s\"])", want[0], want[0])
			}
		}
	}
	if def.Args.ImagePrompt != "" && !strings.Contains(def.Args.ImagePrompt, "{path}") {
		d.errorf(at("args", "image_prompt"), "args.image_prompt", "must contain {path}")
	}
	if def.Capabilities.Resume && len(def.Args.Resume) == 0 {
		d.errorf(at("capabilities", "resume"), "capabilities.resume", "true but args.resume is empty")
	}
	if def.Capabilities.AdditionalDirectories != (len(def.Args.AdditionalDir) > 0) {
		d.errorf(at("capabilities", "additional_directories"), "capabilities.additional_directories",
			"must be true exactly when args.additional_dir is set")
	}
	for _, c := range CategoryOrder {
		key := string(c)
		list := find(root, "errors", key)
		for i, p := range def.Errors.byCategory(c) {
			if _, err := compilePattern(p); err != nil {
				n := root
				if list != nil && i < len(list.Content) {
					n = list.Content[i]
				}
				d.errorf(n, fmt.Sprintf("errors.%s[%d]", key, i), "invalid regexp: %v", err)
			}
		}
	}
	for code, c := range def.ExitCodes {
		n := at("exit_codes")
		if _, err := strconv.Atoi(code); err != nil {
			d.errorf(n, "exit_codes."+code, "keys are exit statuses (integers)")
		}
		if !slices.Contains(AllCategories, c) {
			d.errorf(n, "exit_codes."+code, "%q is not an error category", c)
		}
	}
}

// validateGenericParser checks text_parser and jsonl: set only for their
// parser, valid regexps and paths, a when on every rule.
func (d *decoder) validateGenericParser(root *yaml.Node, def *Definition) {
	if n := find(root, "text_parser"); n != nil && def.Parser != "text" {
		d.errorf(n, "text_parser", "only read by parser: text")
	}
	if n := find(root, "jsonl"); n != nil && def.Parser != "jsonl" {
		d.errorf(n, "jsonl", "only read by parser: jsonl")
	}
	switch def.Parser {
	case "text":
		tp := find(root, "text_parser")
		for _, key := range []string{"session_id", "input_tokens", "output_tokens", "cost", "error"} {
			if n := find(tp, key); n != nil {
				if _, err := regexp.Compile(n.Value); err != nil {
					d.errorf(n, "text_parser."+key, "invalid regexp: %v", err)
				}
			}
		}
		if n := find(tp, "skip"); n != nil {
			for i, c := range n.Content {
				if _, err := regexp.Compile(c.Value); err != nil {
					d.errorf(c, fmt.Sprintf("text_parser.skip[%d]", i), "invalid regexp: %v", err)
				}
			}
		}
	case "jsonl":
		m := find(root, "jsonl")
		if m == nil {
			d.errorf(root, "jsonl", "parser jsonl needs a jsonl mapping")
			return
		}
		if len(def.JSONL.Text) == 0 {
			d.errorf(m, "jsonl.text", "at least one text rule is required")
		}
		for _, key := range []string{"type", "session_id", "model"} {
			if n := find(m, key); n != nil && !validPath(n.Value) {
				d.errorf(n, "jsonl."+key, "%q is not a path (keys separated by '.', list indices as [n])", n.Value)
			}
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, list := m.Content[i], m.Content[i+1]
			if list.Kind != yaml.SequenceNode {
				continue
			}
			for j, rule := range list.Content {
				field := fmt.Sprintf("jsonl.%s[%d]", k.Value, j)
				if n := find(rule, "when"); n == nil || n.Value == "" {
					d.errorf(rule, field+".when", "required: the event type this rule maps")
				}
				if rule.Kind != yaml.MappingNode {
					continue
				}
				for x := 0; x+1 < len(rule.Content); x += 2 {
					rk, rv := rule.Content[x], rule.Content[x+1]
					if rk.Value != "when" && !validPath(rv.Value) {
						d.errorf(rv, field+"."+rk.Value, "%q is not a path (keys separated by '.', list indices as [n])", rv.Value)
					}
				}
			}
		}
	}
}

// compilePattern compiles an error pattern, case-insensitive unless it
// starts with "(?-i)".
func compilePattern(p string) (*regexp.Regexp, error) {
	if strings.HasPrefix(p, "(?-i)") {
		return regexp.Compile(p)
	}
	return regexp.Compile("(?i)" + p)
}

// Builtin returns the embedded definitions, sorted by id.
func Builtin() ([]*Definition, error) {
	entries, err := fs.ReadDir(builtinFS, "adapters")
	if err != nil {
		return nil, fmt.Errorf("read embedded adapters: %w", err)
	}
	var defs []*Definition
	for _, e := range entries {
		data, err := builtinFS.ReadFile("adapters/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("read embedded adapter %s: %w", e.Name(), err)
		}
		def, err := ParseDefinition("builtin:"+e.Name(), data)
		if err != nil {
			return nil, err
		}
		defs = append(defs, def)
	}
	sort.Slice(defs, func(i, j int) bool { return defs[i].ID < defs[j].ID })
	return defs, nil
}

// Registry is the set of known definitions by id.
type Registry struct {
	defs map[string]*Definition
}

// Load returns the built-in definitions overlaid with every *.yaml (or
// *.yml) file in
// userDir (typically ~/.maestro/agents; a missing directory is fine). A
// user file with a built-in id replaces the built-in one. Invalid user
// files are errors (with line:col), not silently skipped. Two user files
// with the same id are both errors and the id is left out (built-in
// included): which one the user meant is theirs to say.
func Load(userDir string) (*Registry, error) {
	builtin, err := Builtin()
	if err != nil {
		return nil, err
	}
	r := &Registry{defs: map[string]*Definition{}}
	for _, d := range builtin {
		r.defs[d.ID] = d
	}
	if userDir == "" {
		return r, nil
	}
	// *.yml too, as pieces take it: such a file was ignored without a word.
	files, err := filepath.Glob(filepath.Join(userDir, "*.y*ml"))
	if err != nil {
		return nil, fmt.Errorf("list agent definitions in %s: %w", userDir, err)
	}
	files = slices.DeleteFunc(files, func(f string) bool {
		return !strings.HasSuffix(f, ".yaml") && !strings.HasSuffix(f, ".yml")
	})
	var errs []error
	user := map[string]*Definition{}
	dup := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("read agent definition: %w", err))
			continue
		}
		def, err := ParseDefinition(f, bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if first, ok := user[def.ID]; ok {
			if !dup[def.ID] {
				errs = append(errs, dupError(first, def))
			}
			errs = append(errs, dupError(def, first))
			dup[def.ID] = true
			delete(r.defs, def.ID)
			continue
		}
		user[def.ID] = def
		if old, ok := r.defs[def.ID]; ok && strings.HasPrefix(old.Source, "builtin:") {
			def.Overrides = true
		}
		r.defs[def.ID] = def
	}
	return r, errors.Join(errs...)
}

// dupError is the fault of def, whose id other defines too.
func dupError(def, other *Definition) error {
	return LoadErrors{{File: def.Source, Line: def.idLine, Col: def.idCol, Field: "id",
		Message: fmt.Sprintf("%q is defined by %s too; both are left out (one file per id)", def.ID, other.Source)}}
}

// NewRegistry builds a registry from definitions (later ones win).
func NewRegistry(defs ...*Definition) *Registry {
	r := &Registry{defs: map[string]*Definition{}}
	for _, d := range defs {
		r.defs[d.ID] = d
	}
	return r
}

// Get returns the definition with id.
func (r *Registry) Get(id string) (*Definition, bool) {
	d, ok := r.defs[id]
	return d, ok
}

// All returns every definition, sorted by id.
func (r *Registry) All() []*Definition {
	out := make([]*Definition, 0, len(r.defs))
	for _, d := range r.defs {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// IDs returns the ids, sorted.
func (r *Registry) IDs() []string {
	var ids []string
	for _, d := range r.All() {
		ids = append(ids, d.ID)
	}
	return ids
}
