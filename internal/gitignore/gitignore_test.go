package gitignore

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestGlobMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"*.go", "main.go", true},
		{"*.go", ".go", true},
		{"*.go", "a/main.go", false},
		{"*.go", "main.gop", false},
		{"hello.*", "hello.c", true},
		{"hello.*", "hello", false},
		{"?at", "cat", true},
		{"?at", "at", false},
		{"?at", "ünat", false},
		{"?nat", "ünat", true},
		{"[abc]at", "bat", true},
		{"[abc]at", "dat", false},
		{"[a-c]at", "cat", true},
		{"[!a-c]at", "cat", false},
		{"[!a-c]at", "rat", true},
		{"[^a-c]at", "rat", true},
		{"[]]x", "]x", true},
		{"[!]]x", "]x", false},
		{"[[:digit:]]*", "7up", true},
		{"[[:digit:]]*", "up", false},
		{"[[:upper:][:digit:]]", "Q", true},
		{`\*`, "*", true},
		{`\*`, "a", false},
		{`\[x]`, "[x]", true},
		{`a\ b`, "a b", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"a**b", "axb", true},
		{"a**b", "a/b", false},
		{"foo/*", "foo/test.json", true},
		{"foo/*", "foo/bar", true},
		{"foo/*", "foo/bar/hello.c", false},
		{"**/foo", "foo", true},
		{"**/foo", "a/b/foo", true},
		{"**/foo", "a/foo/b", false},
		{"**/foo/bar", "x/foo/bar", true},
		{"**/foo/bar", "foo/bar", true},
		{"**/foo/bar", "foo/x/bar", false},
		{"abc/**", "abc/x", true},
		{"abc/**", "abc/x/y", true},
		{"abc/**", "abc", false},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/y/c", false},
		{"a/**/**/b", "a/b", true},
		{"**/*.go", "x.go", true},
		{"**/*.go", "a/b/c/x.go", true},
		{"**/*.go", "a/b/c/x.c", false},
		{"src/**/*_test.go", "src/a/b_test.go", true},
		{"src/**/*_test.go", "lib/a/b_test.go", false},
		{"**", "anything/at/all", true},
		{"/rooted", "rooted", true},
		{"a//b", "a/b", true},
	}
	for _, tt := range tests {
		g, err := CompileGlob(tt.pattern)
		if err != nil {
			t.Errorf("CompileGlob(%q): %v", tt.pattern, err)
			continue
		}
		if got := g.Match(tt.path); got != tt.want {
			t.Errorf("CompileGlob(%q).Match(%q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
}

func TestGlobBadPatterns(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", "/", "[abc", `abc\`, "[[:nope:]]", "[z-a]"} {
		if _, err := CompileGlob(p); !errors.Is(err, ErrBadPattern) {
			t.Errorf("CompileGlob(%q) error = %v, want ErrBadPattern", p, err)
		}
	}
}

func TestGlobCouldMatchInside(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, dir string
		want         bool
	}{
		{"*.go", ".", true},
		{"*.go", "a", false},
		{"**/*.go", "a/b", true},
		{"src/**/*.go", "src/x", true},
		{"src/**/*.go", "lib", false},
		{"src/*/x.go", "src/a", true},
		{"src/*/x.go", "src/a/b", false},
		{"src/x.go", "src", true},
	}
	for _, tt := range tests {
		g, err := CompileGlob(tt.pattern)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.CouldMatchInside(tt.dir); got != tt.want {
			t.Errorf("CompileGlob(%q).CouldMatchInside(%q) = %v, want %v", tt.pattern, tt.dir, got, tt.want)
		}
	}
}

func TestGlobLiteral(t *testing.T) {
	t.Parallel()
	g, _ := CompileGlob("a/b.go")
	if lit, ok := g.Literal(); !ok || lit != "a/b.go" {
		t.Errorf("Literal() = %q, %v", lit, ok)
	}
	g, _ = CompileGlob("a/*.go")
	if _, ok := g.Literal(); ok {
		t.Error("Literal() reported a wildcard pattern as literal")
	}
}

type probe struct {
	path  string
	isDir bool
	want  bool
}

func checkRules(t *testing.T, content string, probes []probe) {
	t.Helper()
	m := New(fstest.MapFS{".gitignore": {Data: []byte(content)}})
	for _, p := range probes {
		if got := m.Ignored(p.path, p.isDir); got != p.want {
			t.Errorf("rules %q: Ignored(%q, dir=%v) = %v, want %v", content, p.path, p.isDir, got, p.want)
		}
	}
}

// TestGitDocExamples checks the examples of the gitignore(5) manual page.
func TestGitDocExamples(t *testing.T) {
	t.Parallel()
	t.Run("hello.*", func(t *testing.T) {
		checkRules(t, "hello.*\n", []probe{
			{"hello.c", false, true},
			{"a/hello.txt", false, true},
			{"hello.d", true, true},
			{"hello", false, false},
		})
	})
	t.Run("directory only", func(t *testing.T) {
		checkRules(t, "foo/\n", []probe{
			{"foo", true, true},
			{"foo/x.c", false, true},
			{"a/foo", true, true},
			{"foo", false, false},
			{"a/foo", false, false},
		})
	})
	t.Run("leading slash irrelevant with middle slash", func(t *testing.T) {
		for _, rules := range []string{"doc/frotz\n", "/doc/frotz\n"} {
			checkRules(t, rules, []probe{
				{"doc/frotz", false, true},
				{"doc/frotz", true, true},
				{"a/doc/frotz", false, false},
			})
		}
	})
	t.Run("doc/frotz/ vs frotz/", func(t *testing.T) {
		checkRules(t, "doc/frotz/\n", []probe{
			{"doc/frotz", true, true},
			{"a/doc/frotz", true, false},
		})
		checkRules(t, "frotz/\n", []probe{
			{"frotz", true, true},
			{"a/frotz", true, true},
		})
	})
	t.Run("foo/*", func(t *testing.T) {
		checkRules(t, "foo/*\n", []probe{
			{"foo/test.json", false, true},
			{"foo/bar", true, true},
			{"foo/bar/hello.c", false, true}, // inside the ignored foo/bar
			{"foo", true, false},
			{"x/foo/test.json", false, false},
		})
	})
	t.Run("everything except foo/bar", func(t *testing.T) {
		checkRules(t, "# exclude everything except directory foo/bar\n/*\n!/foo\n/foo/*\n!/foo/bar\n", []probe{
			{"top.txt", false, true},
			{"other", true, true},
			{"foo", true, false},
			{"foo/x.txt", false, true},
			{"foo/baz", true, true},
			{"foo/bar", true, false},
			{"foo/bar/deep/file.c", false, false},
		})
	})
	t.Run("leading **", func(t *testing.T) {
		checkRules(t, "**/foo\n**/foo/bar\n", []probe{
			{"foo", false, true},
			{"a/b/foo", true, true},
			{"x/foo/bar", false, true},
		})
	})
	t.Run("trailing **", func(t *testing.T) {
		checkRules(t, "abc/**\n!abc/keep\n", []probe{
			{"abc", true, false},
			{"abc/x", false, true},
			{"abc/x/y", false, true},
			{"abc/keep", false, false},
		})
	})
	t.Run("middle **", func(t *testing.T) {
		checkRules(t, "a/**/b\n", []probe{
			{"a/b", false, true},
			{"a/x/b", false, true},
			{"a/x/y/b", false, true},
			{"a/x/y/c", false, false},
		})
	})
	t.Run("no re-include inside an ignored directory", func(t *testing.T) {
		checkRules(t, "build/\n!build/keep.txt\n", []probe{
			{"build/keep.txt", false, true},
			{"build", true, true},
		})
	})
	t.Run("negation order", func(t *testing.T) {
		checkRules(t, "*.log\n!important.log\n", []probe{
			{"debug.log", false, true},
			{"important.log", false, false},
			{"a/important.log", false, false},
		})
		checkRules(t, "!important.log\n*.log\n", []probe{
			{"important.log", false, true},
		})
	})
	t.Run("escapes, comments, blanks and spaces", func(t *testing.T) {
		checkRules(t, "# comment\n\n\\#hash\n\\!bang\ntrail   \nkeep\\ \nwin\r\n", []probe{
			{"# comment", false, false},
			{"#hash", false, true},
			{"!bang", false, true},
			{"trail", false, true},
			{"trail   ", false, false},
			{"keep ", false, true},
			{"keep", false, false},
			{"win", false, true},
		})
	})
	t.Run(".git always ignored", func(t *testing.T) {
		checkRules(t, "", []probe{
			{".git", true, true},
			{".git/config", false, true},
			{"sub/.git", false, true},
			{".github", true, false},
			{".gitignore", false, false},
		})
	})
	t.Run("invalid patterns are skipped", func(t *testing.T) {
		checkRules(t, "[oops\nok.txt\n", []probe{
			{"[oops", false, false},
			{"ok.txt", false, true},
		})
	})
}

func testTree() fstest.MapFS {
	return fstest.MapFS{
		".gitignore":              {Data: []byte("*.log\n/build/\nnode_modules\n")},
		".git/info/exclude":       {Data: []byte("secret.txt\n")},
		".git/config":             {Data: []byte("x")},
		"a.go":                    {Data: []byte("x")},
		"a.log":                   {Data: []byte("x")},
		"secret.txt":              {Data: []byte("x")},
		"build/out.bin":           {Data: []byte("x")},
		"node_modules/m/index.js": {Data: []byte("x")},
		"sub/.gitignore":          {Data: []byte("!keep.log\n/local\ngen/\n")},
		"sub/keep.log":            {Data: []byte("x")},
		"sub/drop.log":            {Data: []byte("x")},
		"sub/local":               {Data: []byte("x")},
		"sub/deeper/local":        {Data: []byte("x")},
		"sub/deeper/build/x.go":   {Data: []byte("x")},
		"sub/gen/z.go":            {Data: []byte("x")},
		"sub/deeper/keep.log":     {Data: []byte("x")},
	}
}

func TestMatcherNested(t *testing.T) {
	t.Parallel()
	m := New(testTree())
	tests := []probe{
		{"a.go", false, false},
		{"a.log", false, true},
		{"secret.txt", false, true},
		{"build", true, true},
		{"build/out.bin", false, true},
		{"node_modules/m/index.js", false, true},
		{"sub/keep.log", false, false},
		{"sub/deeper/keep.log", false, false},
		{"sub/drop.log", false, true},
		{"sub/local", false, true},
		{"sub/deeper/local", false, false},
		{"sub/deeper/build", true, false}, // /build/ is anchored to the top
		{"sub/gen/z.go", false, true},
		{".git/config", false, true},
		{"", true, false},
	}
	for _, p := range tests {
		if got := m.Ignored(p.path, p.isDir); got != p.want {
			t.Errorf("Ignored(%q, dir=%v) = %v, want %v", p.path, p.isDir, got, p.want)
		}
	}
}

func walkPaths(t *testing.T, fsys fs.FS, root string) []string {
	t.Helper()
	var got []string
	err := Walk(t.Context(), fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		got = append(got, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestWalk(t *testing.T) {
	t.Parallel()
	fsys := testTree()
	want := []string{
		".", ".gitignore", "a.go",
		"sub", "sub/.gitignore", "sub/deeper", "sub/deeper/build", "sub/deeper/build/x.go",
		"sub/deeper/keep.log", "sub/deeper/local", "sub/keep.log",
	}
	if diff := cmp.Diff(want, walkPaths(t, fsys, ".")); diff != "" {
		t.Errorf("Walk(.) (-want +got):\n%s", diff)
	}
	// Starting below the top applies the rules above.
	want = []string{"sub/deeper", "sub/deeper/build", "sub/deeper/build/x.go", "sub/deeper/keep.log", "sub/deeper/local"}
	if diff := cmp.Diff(want, walkPaths(t, fsys, "sub/deeper")); diff != "" {
		t.Errorf("Walk(sub/deeper) (-want +got):\n%s", diff)
	}
	// An ignored directory named explicitly is walked.
	want = []string{"build", "build/out.bin"}
	if diff := cmp.Diff(want, walkPaths(t, fsys, "build")); diff != "" {
		t.Errorf("Walk(build) (-want +got):\n%s", diff)
	}
}

func TestWalkSkip(t *testing.T) {
	t.Parallel()
	var got []string
	err := Walk(t.Context(), testTree(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		got = append(got, p)
		if p == "sub/deeper" {
			return fs.SkipDir
		}
		if p == "sub/keep.log" {
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".", ".gitignore", "a.go", "sub", "sub/.gitignore", "sub/deeper", "sub/keep.log"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestWalkCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	n := 0
	err := Walk(ctx, testTree(), ".", func(p string, d fs.DirEntry, err error) error {
		n++
		if p == "sub" {
			cancel()
		}
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Walk error = %v, want context.Canceled", err)
	}
	if n != 4 {
		t.Errorf("visited %d entries, want 4 (stopped at the first directory after cancel)", n)
	}
}

func TestWalkMissingRoot(t *testing.T) {
	t.Parallel()
	err := Walk(t.Context(), testTree(), "nope", func(p string, d fs.DirEntry, err error) error { return err })
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Walk(nope) error = %v, want ErrNotExist", err)
	}
}

func BenchmarkStackMatch(b *testing.B) {
	m := New(fstest.MapFS{".gitignore": {Data: []byte("*.o\n*.a\n/build/\nnode_modules\n**/gen/*.pb.go\n!keep.o\n")}})
	st := m.Dir(".")
	for b.Loop() {
		st.Match("src/pkg/file.go", false)
		st.Match("src/pkg/gen/x.pb.go", false)
	}
}

// TestIgnoreFilesOnlyRegularAndBounded: an ignore file that is not a
// regular file (a FIFO planted by an agent) or is larger than MaxFileBytes
// is not read, so its rules do not apply; a regular one of normal size is.
func TestIgnoreFilesOnlyRegularAndBounded(t *testing.T) {
	huge := append(bytes.Repeat([]byte("#"), MaxFileBytes), "\n*.txt\n"...)
	tests := []struct {
		name    string
		file    *fstest.MapFile
		ignored bool
	}{
		{"regular", &fstest.MapFile{Data: []byte("*.txt\n")}, true},
		{"fifo", &fstest.MapFile{Data: []byte("*.txt\n"), Mode: fs.ModeNamedPipe}, false},
		{"device", &fstest.MapFile{Data: []byte("*.txt\n"), Mode: fs.ModeDevice | fs.ModeCharDevice}, false},
		{"over the limit", &fstest.MapFile{Data: huge}, false},
	}
	for _, tt := range tests {
		for _, name := range []string{".gitignore", ".git/info/exclude"} {
			m := New(fstest.MapFS{name: tt.file, "a.txt": {}})
			if got := m.Ignored("a.txt", false); got != tt.ignored {
				t.Errorf("%s as %s: Ignored(a.txt) = %v, want %v", name, tt.name, got, tt.ignored)
			}
		}
	}
}
