package tool

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func globTree() map[string]string {
	return map[string]string{
		".gitignore":             "*.log\n/build/\nvendor/\n",
		".git/HEAD":              "ref: refs/heads/main\n",
		".github/workflows/ci.y": "on: push\n",
		"main.go":                "package main\n",
		"main_test.go":           "package main\n",
		"debug.log":              "x\n",
		"README.md":              "# x\n",
		"build/out.go":           "package out\n",
		"vendor/v/v.go":          "package v\n",
		"internal/a/a.go":        "package a\n",
		"internal/a/a.ts":        "export {}\n",
		"internal/a/a.tsx":       "export {}\n",
		"internal/b/.gitignore":  "gen.go\n!keep.log\n",
		"internal/b/b.go":        "package b\n",
		"internal/b/gen.go":      "package b\n",
		"internal/b/keep.log":    "x\n",
		"internal/b/sub/deep.go": "package sub\n",
	}
}

func lines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestGlob(t *testing.T) {
	t.Parallel()
	root, _ := testWorkspace(t, globTree())
	glob := NewGlob(root)
	tests := []struct {
		in   GlobInput
		want []string
	}{
		{GlobInput{Pattern: "**/*.go"}, []string{
			"internal/a/a.go", "internal/b/b.go", "internal/b/sub/deep.go", "main.go", "main_test.go",
		}},
		{GlobInput{Pattern: "*.go"}, []string{"main.go", "main_test.go"}},
		{GlobInput{Pattern: "./*_test.go"}, []string{"main_test.go"}},
		{GlobInput{Pattern: "**/*.log"}, []string{"internal/b/keep.log"}},
		{GlobInput{Pattern: "internal/*/*.{ts,tsx}"}, []string{"internal/a/a.ts", "internal/a/a.tsx"}},
		{GlobInput{Pattern: "*.go", Path: "internal/b"}, []string{"internal/b/b.go"}},
		{GlobInput{Pattern: "**", Path: "internal/b"}, []string{
			"internal/b/.gitignore", "internal/b/b.go", "internal/b/keep.log", "internal/b/sub/deep.go",
		}},
		{GlobInput{Pattern: "**/.github/**"}, []string{".github/workflows/ci.y"}},
		{GlobInput{Pattern: "[A-Z]*"}, []string{"README.md"}},
		{GlobInput{Pattern: filepath.Join(root.Dir(), "internal", "**", "deep.go")}, []string{"internal/b/sub/deep.go"}},
		// An ignored directory named as the path is searched.
		{GlobInput{Pattern: "*.go", Path: "build"}, []string{"build/out.go"}},
	}
	for _, tt := range tests {
		res := call(t, glob, tt.in)
		if res.IsError {
			t.Errorf("Glob(%+v): error %s", tt.in, res.Content)
			continue
		}
		if diff := cmp.Diff(tt.want, lines(res.Content)); diff != "" {
			t.Errorf("Glob(%+v) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestGlobMessages(t *testing.T) {
	t.Parallel()
	root, _ := testWorkspace(t, globTree())
	glob := NewGlob(root)
	wantResult(t, call(t, glob, GlobInput{Pattern: "*.rs"}), false,
		`no files match "*.rs"`, `use "**/*.rs" to search subdirectories`)
	wantResult(t, call(t, glob, GlobInput{Pattern: "**/*.rs", Path: "internal"}), false, `no files match "**/*.rs" in internal`)
	wantResult(t, call(t, glob, GlobInput{Pattern: "[a-"}), true, "invalid pattern")
	wantResult(t, call(t, glob, GlobInput{Pattern: "{a,b"}), true, "invalid pattern")
	wantResult(t, call(t, glob, GlobInput{Pattern: " "}), true, "pattern is required")
	wantResult(t, call(t, glob, GlobInput{Pattern: "*", Path: "main.go"}), true, "main.go is not a directory")
	wantResult(t, call(t, glob, GlobInput{Pattern: "*", Path: "nope"}), true, "file not found: nope")
}

func TestGlobCap(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	for i := range GlobMaxResults + 5 {
		files[fmt.Sprintf("d/f%04d.txt", i)] = ""
	}
	root, _ := testWorkspace(t, files)
	res := call(t, NewGlob(root), GlobInput{Pattern: "d/*.txt"})
	got := lines(res.Content)
	if len(got) != GlobMaxResults+2 { // paths, blank line, notice
		t.Fatalf("got %d lines", len(got))
	}
	if got[0] != "d/f0000.txt" || got[GlobMaxResults-1] != "d/f0999.txt" {
		t.Errorf("first/last = %q, %q", got[0], got[GlobMaxResults-1])
	}
	wantResult(t, res, false, "[showing the first 1000 of 1005 matching files, sorted by path; use a more specific pattern or path]")
}

func TestExpandBraces(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
		err  bool
	}{
		{in: "a", want: []string{"a"}},
		{in: "*.{go,mod}", want: []string{"*.go", "*.mod"}},
		{in: "{a,b}/{c,d}", want: []string{"a/c", "a/d", "b/c", "b/d"}},
		{in: "x{a,{b,c}}y", want: []string{"xay", "xby", "xcy"}},
		{in: "{a}", want: []string{"{a}"}},
		{in: "{a}{b,c}", want: []string{"{a}b", "{a}c"}},
		{in: `\{a,b}`, want: []string{`\{a,b}`}},
		{in: "{,x}y", want: []string{"y", "xy"}},
		{in: "{a,b", err: true},
		{in: strings.Repeat("{a,b,c,d}", 5), err: true},
	}
	for _, tt := range tests {
		got, err := expandBraces(tt.in)
		if (err != nil) != tt.err {
			t.Errorf("expandBraces(%q) error = %v, want error %v", tt.in, err, tt.err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" && !tt.err {
			t.Errorf("expandBraces(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

// TestSearchToolsSeeChanges: Glob and Grep read the workspace file index,
// and each call sees the files created, renamed and removed just before
// it, with no wait.
func TestSearchToolsSeeChanges(t *testing.T) {
	t.Parallel()
	root, _ := testWorkspace(t, globTree())
	glob, grep := NewGlob(root), NewGrep(root)
	p := func(rel string) string { return filepath.Join(root.Dir(), filepath.FromSlash(rel)) }
	steps := []struct {
		name      string
		do        func() error
		glob      []string // paths of **/*.txt
		grepLines []string // lines with "fresh"
	}{
		{"none yet", func() error { return nil }, nil, nil},
		{"create", func() error {
			if err := os.MkdirAll(p("new/dir"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(p("new/dir/n.txt"), []byte("fresh\n"), 0o644)
		}, []string{"new/dir/n.txt"}, []string{"new/dir/n.txt:1:fresh"}},
		{"rename the directory", func() error { return os.Rename(p("new/dir"), p("new/moved")) },
			[]string{"new/moved/n.txt"}, []string{"new/moved/n.txt:1:fresh"}},
		{"ignore it", func() error { return os.WriteFile(p("new/.gitignore"), []byte("moved/\n"), 0o644) }, nil, nil},
		{"unignore and remove", func() error {
			if err := os.Remove(p("new/.gitignore")); err != nil {
				return err
			}
			return os.Remove(p("new/moved/n.txt"))
		}, nil, nil},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		res := call(t, glob, GlobInput{Pattern: "**/*.txt"})
		got := lines(res.Content)
		if strings.HasPrefix(res.Content, "no files") {
			got = nil
		}
		if diff := cmp.Diff(st.glob, got); diff != "" {
			t.Errorf("%s: Glob (-want +got):\n%s", st.name, diff)
		}
		res = call(t, grep, GrepInput{Pattern: "fresh", Glob: "*.txt"})
		got = lines(res.Content)
		if strings.HasPrefix(res.Content, "no matches") {
			got = nil
		}
		if diff := cmp.Diff(st.grepLines, got); diff != "" {
			t.Errorf("%s: Grep (-want +got):\n%s", st.name, diff)
		}
	}
}
