package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/workspace"
	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

// testWorkspace makes a workspace directory holding files (slash paths →
// content) next to a directory "outside" holding secret.txt, and returns
// the opened root and the outside directory.
func testWorkspace(t *testing.T, files map[string]string) (*workspace.Root, string) {
	t.Helper()
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	wstest.WriteFiles(t, outside, map[string]string{"secret.txt": "top secret\n"})
	wstest.WriteFiles(t, ws, files)
	root, err := workspace.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root, outside
}

// call runs a tool with input marshalled to JSON.
func call(t *testing.T, tl Tool, input any) Result {
	t.Helper()
	raw, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tl.Run(t.Context(), Call{ID: "t", Input: raw})
	if err != nil {
		t.Fatalf("%s(%s): unexpected Go error: %v", tl.Spec().Name, raw, err)
	}
	return res
}

// wantResult checks a result's error flag and that its content contains
// each of the fragments.
func wantResult(t *testing.T, res Result, isError bool, fragments ...string) {
	t.Helper()
	if res.IsError != isError {
		t.Errorf("IsError = %v, want %v; content:\n%s", res.IsError, isError, res.Content)
	}
	for _, f := range fragments {
		if !strings.Contains(res.Content, f) {
			t.Errorf("content does not contain %q:\n%s", f, res.Content)
		}
	}
}

func numbered(lines ...string) string {
	var b strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&b, "%6d\t%s\n", i+1, l)
	}
	return b.String()
}

func TestToolSpecs(t *testing.T) {
	t.Parallel()
	root, _ := testWorkspace(t, nil)
	tests := []struct {
		tool     Tool
		name     string
		readOnly bool
		props    []string
		required []string
	}{
		{NewRead(root), "Read", true, []string{"path", "offset", "limit"}, []string{"path"}},
		{NewWrite(root), "Write", false, []string{"path", "content"}, []string{"path", "content"}},
		{NewEdit(root), "Edit", false, []string{"path", "old_string", "new_string", "replace_all"}, []string{"path", "old_string", "new_string"}},
		{NewGlob(root), "Glob", true, []string{"pattern", "path"}, []string{"pattern"}},
		{NewGrep(root), "Grep", true, []string{"pattern", "path", "glob", "ignore_case", "max_results"}, []string{"pattern"}},
	}
	for _, tt := range tests {
		spec := tt.tool.Spec()
		if spec.Name != tt.name || tt.tool.ReadOnly() != tt.readOnly || spec.Description == "" {
			t.Errorf("%s: name %q, read-only %v, description %q", tt.name, spec.Name, tt.tool.ReadOnly(), spec.Description)
		}
		var schema struct {
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		}
		if err := json.Unmarshal(spec.InputSchema, &schema); err != nil {
			t.Fatal(err)
		}
		var props []string
		for _, p := range tt.props {
			if _, ok := schema.Properties[p]; ok {
				props = append(props, p)
			}
		}
		if diff := cmp.Diff(tt.props, props); diff != "" || len(schema.Properties) != len(tt.props) {
			t.Errorf("%s properties %v (-want +got):\n%s", tt.name, schema.Properties, diff)
		}
		if diff := cmp.Diff(tt.required, schema.Required); diff != "" {
			t.Errorf("%s required (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestRead(t *testing.T) {
	t.Parallel()
	var long2500 strings.Builder
	for i := 1; i <= 2500; i++ {
		fmt.Fprintf(&long2500, "line %d\n", i)
	}
	latin1 := []byte("caf\xe9 au lait, cr\xe8me br\xfbl\xe9e, and plenty of plain ASCII text around it\n")
	invalid := bytes.Repeat([]byte{0xff, 0xfe, 0x80, 'a'}, 100)
	root, _ := testWorkspace(t, map[string]string{
		"three.txt":   "one\ntwo\nthree\n",
		"noeol.txt":   "one\ntwo",
		"crlf.txt":    "one\r\ntwo\r\n",
		"empty.txt":   "",
		"long.txt":    long2500.String(),
		"wide.txt":    strings.Repeat("x", 3000) + "\nshort\n",
		"wideu.txt":   strings.Repeat("é", 2500) + "\n",
		"bin.dat":     "abc\x00def\n",
		"invalid.dat": string(invalid),
		"latin1.txt":  string(latin1),
		"dir/a.txt":   "a\n",
	})
	read := NewRead(root)
	tests := []struct {
		name    string
		in      ReadInput
		isError bool
		want    string // exact content, when set
		has     []string
	}{
		{name: "whole", in: ReadInput{Path: "three.txt"}, want: numbered("one", "two", "three")},
		{name: "no final newline", in: ReadInput{Path: "noeol.txt"}, want: numbered("one", "two")},
		{name: "crlf", in: ReadInput{Path: "crlf.txt"}, want: numbered("one", "two")},
		{name: "absolute inside", in: ReadInput{Path: filepath.Join(root.Dir(), "three.txt")}, want: numbered("one", "two", "three")},
		{name: "range", in: ReadInput{Path: "three.txt", Offset: 2, Limit: 1},
			want: "     2\ttwo\n\n[showing lines 2-2 of 3; call Read with offset 3 to continue]\n"},
		{name: "offset to end", in: ReadInput{Path: "three.txt", Offset: 3}, want: "     3\tthree\n"},
		{name: "limit only", in: ReadInput{Path: "three.txt", Limit: 2}, has: []string{"     1\tone\n     2\ttwo\n", "[showing lines 1-2 of 3; call Read with offset 3 to continue]"}},
		{name: "default limit", in: ReadInput{Path: "long.txt"}, has: []string{"  2000\tline 2000\n", "[showing lines 1-2000 of 2500; call Read with offset 2001 to continue]"}},
		{name: "continue", in: ReadInput{Path: "long.txt", Offset: 2001}, has: []string{"  2001\tline 2001\n", "  2500\tline 2500\n"}},
		{name: "past the end", in: ReadInput{Path: "three.txt", Offset: 10}, isError: true, has: []string{"three.txt has 3 lines; offset 10 is past the end"}},
		{name: "long line cut", in: ReadInput{Path: "wide.txt"}, has: []string{
			"     1\t" + strings.Repeat("x", 2000) + "… [line cut: 3000 bytes in all]\n", "     2\tshort\n", "[1 line(s) longer than 2000 characters were cut]"}},
		{name: "long line cut at characters", in: ReadInput{Path: "wideu.txt"}, has: []string{"     1\t" + strings.Repeat("é", 2000) + "… [line cut: 5000 bytes in all]\n"}},
		{name: "empty", in: ReadInput{Path: "empty.txt"}, want: "(empty.txt is empty)"},
		{name: "binary", in: ReadInput{Path: "bin.dat"}, want: "bin.dat: binary file, 8 bytes; not shown"},
		{name: "invalid utf-8", in: ReadInput{Path: "invalid.dat"}, want: "invalid.dat: binary file, 400 bytes; not shown"},
		{name: "latin-1 text is shown", in: ReadInput{Path: "latin1.txt"}, has: []string{"     1\tcaf\uFFFD au lait"}},
		{name: "directory", in: ReadInput{Path: "dir"}, isError: true, has: []string{"dir is a directory", "use Glob", `"dir/*"`}},
		{name: "missing", in: ReadInput{Path: "nope.txt"}, isError: true, want: "file not found: nope.txt"},
		{name: "negative", in: ReadInput{Path: "three.txt", Offset: -1}, isError: true, has: []string{"must not be negative"}},
		{name: "empty path", in: ReadInput{}, isError: true, has: []string{"path is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := call(t, read, tt.in)
			if tt.want != "" {
				if diff := cmp.Diff(tt.want, res.Content); diff != "" {
					t.Errorf("content (-want +got):\n%s", diff)
				}
				if res.IsError != tt.isError {
					t.Errorf("IsError = %v, want %v", res.IsError, tt.isError)
				}
				return
			}
			wantResult(t, res, tt.isError, tt.has...)
		})
	}
}

func TestReadSizeCap(t *testing.T) {
	t.Parallel()
	root, _ := testWorkspace(t, nil)
	big := bytes.Repeat([]byte("0123456789abcdef\n"), ReadMaxFileBytes/17+100)
	if err := os.WriteFile(filepath.Join(root.Dir(), "big.txt"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	read := NewRead(root)
	res := call(t, read, ReadInput{Path: "big.txt"})
	wantResult(t, res, true, fmt.Sprintf("big.txt is %d bytes, over the 10 MiB limit", len(big)), "offset and limit")
	res = call(t, read, ReadInput{Path: "big.txt", Offset: 5, Limit: 2})
	wantResult(t, res, false, "     5\t0123456789abcdef\n     6\t0123456789abcdef\n", "[showing lines 5-6; call Read with offset 7 to continue]")
}

func TestReadOutputCap(t *testing.T) {
	t.Parallel()
	line := strings.Repeat("y", 1000)
	root, _ := testWorkspace(t, map[string]string{"many.txt": strings.Repeat(line+"\n", 1000)})
	res := call(t, NewRead(root), ReadInput{Path: "many.txt"})
	if len(res.Content) > ReadMaxOutputBytes+1024 {
		t.Errorf("output is %d bytes, over the cap", len(res.Content))
	}
	wantResult(t, res, false, "(output limit of 256 KiB reached)", "call Read with offset")
}

// TestFileToolsRefuseEscapes checks that every file tool refuses paths
// outside the workspace, lexically or through symbolic links, and leaves
// the outside untouched.
func TestFileToolsRefuseEscapes(t *testing.T) {
	t.Parallel()
	root, outside := testWorkspace(t, map[string]string{"in.txt": "inside\n"})
	ws := root.Dir()
	wstest.Symlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(ws, "abs-link"))
	wstest.Symlink(t, "../outside/secret.txt", filepath.Join(ws, "rel-link"))
	wstest.Symlink(t, "../outside", filepath.Join(ws, "dir-link"))
	wstest.Symlink(t, "/etc", filepath.Join(ws, "etc"))
	wstest.Symlink(t, "../outside/created.txt", filepath.Join(ws, "dangling"))

	escapes := []string{
		"../outside/secret.txt",
		"a/../../outside/secret.txt",
		filepath.Join(outside, "secret.txt"),
		"/etc/passwd",
		"abs-link",
		"rel-link",
		"dir-link/secret.txt",
		"etc/passwd",
	}
	writeEscapes := append(escapes, "dangling", "dir-link/new.txt", "etc/maestro-new")
	for _, p := range escapes {
		res := call(t, NewRead(root), ReadInput{Path: p})
		wantResult(t, res, true, "path is outside the workspace: "+p)
		res = call(t, NewEdit(root), EditInput{Path: p, OldString: "top", NewString: "no"})
		wantResult(t, res, true, "path is outside the workspace: "+p)
		res = call(t, NewGrep(root), GrepInput{Pattern: "secret", Path: p})
		wantResult(t, res, true, "path is outside the workspace: "+p)
	}
	for _, p := range writeEscapes {
		res := call(t, NewWrite(root), WriteInput{Path: p, Content: "pwned"})
		wantResult(t, res, true, "path is outside the workspace: "+p)
	}
	for _, p := range []string{"..", "../outside", "dir-link", outside} {
		res := call(t, NewGlob(root), GlobInput{Pattern: "*", Path: p})
		wantResult(t, res, true, "outside the workspace")
	}
	res := call(t, NewGlob(root), GlobInput{Pattern: filepath.Join(outside, "*")})
	wantResult(t, res, true, "pattern is outside the workspace")

	// Nothing outside was changed or created.
	entries, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("outside holds %d entries, want only secret.txt", len(entries))
	}
	if data, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(data) != "top secret\n" {
		t.Errorf("secret.txt = %q", data)
	}
	// A search of the whole workspace does not follow the links out.
	res = call(t, NewGrep(root), GrepInput{Pattern: "secret"})
	wantResult(t, res, false, `no matches for "secret"`)
}

func TestWrite(t *testing.T) {
	t.Parallel()
	root, _ := testWorkspace(t, map[string]string{"old.txt": "old\n", "d/x": "x"})
	write := NewWrite(root)

	res := call(t, write, WriteInput{Path: "new/deep/file.txt", Content: "hello"})
	wantResult(t, res, false)
	if diff := cmp.Diff("created new/deep/file.txt (5 bytes)", res.Content); diff != "" {
		t.Error(diff)
	}
	res = call(t, write, WriteInput{Path: "old.txt", Content: "brand new\n"})
	if diff := cmp.Diff("overwrote old.txt (10 bytes)", res.Content); diff != "" {
		t.Error(diff)
	}
	res = call(t, write, WriteInput{Path: "empty.txt", Content: ""})
	if diff := cmp.Diff("created empty.txt (0 bytes)", res.Content); diff != "" {
		t.Error(diff)
	}
	for name, want := range map[string]string{"new/deep/file.txt": "hello", "old.txt": "brand new\n", "empty.txt": ""} {
		data, err := os.ReadFile(filepath.Join(root.Dir(), name))
		if err != nil || string(data) != want {
			t.Errorf("%s = %q, %v; want %q", name, data, err, want)
		}
	}
	wantResult(t, call(t, write, WriteInput{Path: "d", Content: "x"}), true, "d is a directory")
	wantResult(t, call(t, write, WriteInput{Path: "", Content: "x"}), true, "path is required")
	wantResult(t, call(t, write, map[string]any{"path": "x"}), true, "content")
}

func TestEdit(t *testing.T) {
	t.Parallel()
	const src = "func a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 1\n}\n"
	tests := []struct {
		name    string
		file    string
		in      EditInput
		isError bool
		msg     string
		after   string
	}{
		{
			name:  "one match",
			file:  src,
			in:    EditInput{OldString: "func b() {\n\treturn 1", NewString: "func b() {\n\treturn 2"},
			msg:   "edited f.go: replaced 1 occurrence (line 5)",
			after: strings.Replace(src, "func b() {\n\treturn 1", "func b() {\n\treturn 2", 1),
		},
		{
			name:    "no match",
			file:    src,
			in:      EditInput{OldString: "return 3", NewString: "return 4"},
			isError: true,
			msg:     "old_string not found in f.go",
			after:   src,
		},
		{
			name:    "two matches",
			file:    src,
			in:      EditInput{OldString: "return 1", NewString: "return 2"},
			isError: true,
			msg:     "old_string occurs 2 times in f.go; add context to make it unique or set replace_all",
			after:   src,
		},
		{
			name:  "replace all",
			file:  src,
			in:    EditInput{OldString: "return 1", NewString: "return 2", ReplaceAll: true},
			msg:   "edited f.go: replaced 2 occurrences (lines 2, 6)",
			after: strings.ReplaceAll(src, "return 1", "return 2"),
		},
		{
			name:  "replace all shifting lines",
			file:  "x\nx\nx\n",
			in:    EditInput{OldString: "x", NewString: "y\nz", ReplaceAll: true},
			msg:   "edited f.go: replaced 3 occurrences (lines 1, 3, 5)",
			after: "y\nz\ny\nz\ny\nz\n",
		},
		{
			name:  "deletion",
			file:  "keep\ndrop\nkeep\n",
			in:    EditInput{OldString: "drop\n", NewString: ""},
			msg:   "edited f.go: replaced 1 occurrence (line 2)",
			after: "keep\nkeep\n",
		},
		{
			name:  "crlf file, lf old_string",
			file:  "one\r\ntwo\r\nthree\r\n",
			in:    EditInput{OldString: "one\ntwo", NewString: "uno\ndos"},
			msg:   "replaced 1 occurrence (line 1)",
			after: "uno\r\ndos\r\nthree\r\n",
		},
		{
			name:    "identical",
			file:    src,
			in:      EditInput{OldString: "return 1", NewString: "return 1"},
			isError: true,
			msg:     "old_string and new_string are identical",
			after:   src,
		},
		{
			name:    "empty old_string",
			file:    src,
			in:      EditInput{OldString: "", NewString: "x"},
			isError: true,
			msg:     "old_string is empty",
			after:   src,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root, _ := testWorkspace(t, map[string]string{"f.go": tt.file})
			in := tt.in
			in.Path = "f.go"
			res := call(t, NewEdit(root), in)
			wantResult(t, res, tt.isError, tt.msg)
			data, err := os.ReadFile(filepath.Join(root.Dir(), "f.go"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.after, string(data)); diff != "" {
				t.Errorf("file after edit (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEditErrors(t *testing.T) {
	t.Parallel()
	root, _ := testWorkspace(t, map[string]string{"d/x.txt": "x"})
	edit := NewEdit(root)
	wantResult(t, call(t, edit, EditInput{Path: "missing.go", OldString: "a", NewString: "b"}), true, "file not found: missing.go")
	wantResult(t, call(t, edit, EditInput{Path: "d", OldString: "a", NewString: "b"}), true, "d is a directory")
	wantResult(t, call(t, edit, map[string]any{"path": "d/x.txt", "old_string": "x", "new_string": "y", "bogus": 1}), true, "bogus")
}

func TestEditThroughSymlinkInside(t *testing.T) {
	t.Parallel()
	root, _ := testWorkspace(t, map[string]string{"real.txt": "alpha\n"})
	wstest.Symlink(t, "real.txt", filepath.Join(root.Dir(), "link.txt"))
	res := call(t, NewEdit(root), EditInput{Path: "link.txt", OldString: "alpha", NewString: "beta"})
	wantResult(t, res, false, "replaced 1 occurrence")
	if data, _ := os.ReadFile(filepath.Join(root.Dir(), "real.txt")); string(data) != "beta\n" {
		t.Errorf("real.txt = %q", data)
	}
	if fi, err := os.Lstat(filepath.Join(root.Dir(), "link.txt")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link.txt is no longer a link: %v %v", fi, err)
	}
}
