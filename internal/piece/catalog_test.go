package piece

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// pieceYAML is a valid piece called name whose only movement has the given
// persona, so tests can tell definitions apart.
func pieceYAML(name, persona string) string {
	return "name: " + name + `
description: d
max_movements: 2
initial_movement: a
movements:
  - name: a
    edit: false
    persona: ` + persona + `
    instruction: i
    allowed_tools: []
    rules: []
`
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// summary is what a test compares of a catalog: name → source, persona,
// shadowed and rejected sources.
type summary struct {
	Source, Persona    string
	Builtin            bool
	Shadowed, Rejected []string
}

func summarize(c *Catalog) map[string]summary {
	out := map[string]summary{}
	for _, e := range c.List() {
		out[e.Piece.Name] = summary{e.Source, e.Piece.Movements[0].Persona, e.Builtin, e.Shadowed, e.Rejected}
	}
	return out
}

func TestLoadFSOverrides(t *testing.T) {
	t.Parallel()
	builtin := fstest.MapFS{
		"general.yaml": {Data: []byte(pieceYAML("general", "builtin-general"))},
		"code.yaml":    {Data: []byte(pieceYAML("code", "builtin-code"))},
		"chat.yaml":    {Data: []byte(pieceYAML("chat", "builtin-chat"))},
		"README.md":    {Data: []byte("not a piece")},
	}
	root := t.TempDir()
	home := filepath.Join(root, "home", ".maestro", "pieces")
	project := filepath.Join(root, "proj", ".maestro", "pieces")
	writeFiles(t, home, map[string]string{
		"code.yaml":    pieceYAML("code", "home-code"),
		"general.yaml": pieceYAML("general", "home-general"),
		"mine.yml":     pieceYAML("mine", "home-mine"),
		"notes.txt":    "ignored",
		".hidden.yaml": "ignored: [",
	})
	writeFiles(t, project, map[string]string{
		"code.yaml":    pieceYAML("code", "project-code"),
		"general.yaml": "name: general\ndescription: broken\n", // invalid: keeps home's
		"chat.yaml":    pieceYAML("talk", "wrong-name"),        // name mismatch: keeps built-in
		"new.yaml":     "name: [",                              // invalid, no earlier definition
	})
	if err := os.Mkdir(filepath.Join(project, "sub.yaml"), 0o755); err != nil { // a directory: ignored
		t.Fatal(err)
	}

	c, err := LoadFS(t.Context(), builtin, DefaultDirs(filepath.Join(root, "home"), filepath.Join(root, "proj"))...)
	if err != nil {
		t.Fatalf("LoadFS: %v", err)
	}
	want := map[string]summary{
		"chat": {Source: "builtin:chat.yaml", Persona: "builtin-chat", Builtin: true,
			Rejected: []string{filepath.Join(project, "chat.yaml")}},
		"code": {Source: filepath.Join(project, "code.yaml"), Persona: "project-code", Builtin: true,
			Shadowed: []string{"builtin:code.yaml", filepath.Join(home, "code.yaml")}},
		"general": {Source: filepath.Join(home, "general.yaml"), Persona: "home-general", Builtin: true,
			Shadowed: []string{"builtin:general.yaml"}, Rejected: []string{filepath.Join(project, "general.yaml")}},
		"mine": {Source: filepath.Join(home, "mine.yml"), Persona: "home-mine"},
	}
	if diff := cmp.Diff(want, summarize(c)); diff != "" {
		t.Errorf("catalog mismatch (-want +got):\n%s", diff)
	}

	var problems []string
	for _, p := range c.Problems() {
		var errs *Errors
		if !errors.As(p, &errs) {
			t.Errorf("problem %v is %T, want *Errors", p, p)
		}
		problems = append(problems, p.Error())
	}
	wantProblems := []string{
		filepath.Join(project, "chat.yaml") + `:1:7: name: expected "chat" to match the file name chat.yaml, found "talk"`,
		filepath.Join(project, "general.yaml") + ":1:1: max_movements: required field is missing; expected a positive integer\n" +
			filepath.Join(project, "general.yaml") + ":1:1: initial_movement: required field is missing; expected the name of one of the movements\n" +
			filepath.Join(project, "general.yaml") + ":1:1: movements: required field is missing; expected a non-empty list of movements",
		filepath.Join(project, "new.yaml") + ":2:1: YAML syntax error: did not find expected node content (while parsing a flow node)",
	}
	if diff := cmp.Diff(wantProblems, problems); diff != "" {
		t.Errorf("problems mismatch (-want +got):\n%s", diff)
	}

	e, ok := c.Get("code")
	if !ok || e.Piece.Movements[0].Persona != "project-code" {
		t.Errorf("Get(code) = %+v, %v; want the project override", e, ok)
	}
	if _, ok := c.Get("new"); ok {
		t.Error("Get(new) found a piece whose only file is invalid")
	}
	if _, ok := c.Get("missing"); ok {
		t.Error("Get(missing) = true")
	}
}

func TestLoadFSDuplicateExtensions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"x.yaml": pieceYAML("x", "from-yaml"),
		"x.yml":  pieceYAML("x", "from-yml"),
	})
	c, err := LoadFS(t.Context(), fstest.MapFS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	// Directory entries come sorted: x.yaml is read first and kept.
	want := map[string]summary{"x": {Source: filepath.Join(dir, "x.yaml"), Persona: "from-yaml",
		Rejected: []string{filepath.Join(dir, "x.yml")}}}
	if diff := cmp.Diff(want, summarize(c)); diff != "" {
		t.Errorf("catalog mismatch (-want +got):\n%s", diff)
	}
	wantProblems := []string{filepath.Join(dir, "x.yml") + `: piece "x" is also defined by x.yaml in the same directory; keep one file per piece`}
	var got []string
	for _, p := range c.Problems() {
		got = append(got, p.Error())
	}
	if diff := cmp.Diff(wantProblems, got); diff != "" {
		t.Errorf("problems mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadFSMissingAndBadDirectories(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	notDir := filepath.Join(root, "file")
	writeFiles(t, root, map[string]string{"file": "x"})
	c, err := LoadFS(t.Context(), fstest.MapFS{"a.yaml": {Data: []byte(pieceYAML("a", "p"))}},
		filepath.Join(root, "does-not-exist"), notDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(c.List()); got != 1 {
		t.Errorf("List has %d pieces, want 1", got)
	}
	problems := c.Problems()
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "reading piece directory "+notDir) {
		t.Errorf("Problems = %v, want one about %s", problems, notDir)
	}
}

func TestLoadFSInvalidBuiltinFails(t *testing.T) {
	t.Parallel()
	_, err := LoadFS(t.Context(), fstest.MapFS{"bad.yaml": {Data: []byte("name: bad\n")}})
	var errs *Errors
	if err == nil || !errors.As(err, &errs) || !strings.HasPrefix(err.Error(), "loading built-in piece bad.yaml: builtin:bad.yaml:1:1: description") {
		t.Errorf("LoadFS error = %v, want the built-in's validation errors", err)
	}
}

func TestLoadFSCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := LoadFS(ctx, fstest.MapFS{"a.yaml": {Data: []byte(pieceYAML("a", "p"))}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("LoadFS error = %v, want context.Canceled", err)
	}
}

func TestLoadBuiltins(t *testing.T) {
	t.Parallel()
	c, err := Load(t.Context())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	var names []string
	for _, e := range c.List() {
		names = append(names, e.Piece.Name)
		if !e.Builtin || e.Source != "builtin:"+e.Piece.Name+".yaml" {
			t.Errorf("%s: Builtin=%v Source=%q", e.Piece.Name, e.Builtin, e.Source)
		}
	}
	if diff := cmp.Diff(builtinNames, names); diff != "" {
		t.Errorf("List names mismatch (-want +got):\n%s", diff)
	}
	if len(c.Problems()) != 0 {
		t.Errorf("Problems = %v", c.Problems())
	}
}

func TestDefaultDirs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		home, work string
		want       []string
	}{
		{"/h", "/w", []string{"/h/.maestro/pieces", "/w/.maestro/pieces"}},
		{"/h", "/h", []string{"/h/.maestro/pieces"}},
		{"", "/w", []string{"/w/.maestro/pieces"}},
		{"/h", "", []string{"/h/.maestro/pieces"}},
		{"", "", nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, DefaultDirs(tt.home, tt.work)); diff != "" {
			t.Errorf("DefaultDirs(%q, %q) mismatch (-want +got):\n%s", tt.home, tt.work, diff)
		}
	}
}
