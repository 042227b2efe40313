package tool

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

func grepTree() map[string]string {
	return map[string]string{
		".gitignore":         "*.log\n/build/\n",
		".git/config":        "needle in git\n",
		"a.go":               "package a\n\n// Needle here\nfunc needle() {}\n",
		"b.txt":              "no match\nneedle\n",
		"debug.log":          "needle in log\n",
		"build/gen.go":       "needle in build\n",
		"sub/.gitignore":     "local.txt\n!keep.log\n",
		"sub/local.txt":      "needle local\n",
		"sub/keep.log":       "needle kept\n",
		"sub/deep/c.go":      "x\ny\nneedle := 1\n",
		"sub/deep/bin.dat":   "needle\x00binary\n",
		"sub/deep/nl.txt":    "needle\r\nneedle\r\n",
		".hidden/h.txt":      "needle hidden\n",
		"long/line.txt":      strings.Repeat("a", 600) + "needle" + "\n",
		"unicode/u.txt":      "Ünïcödé needle\n",
		"zzz/last.go":        "needle last\n",
		"sub/deep/nomatch.c": "nothing\n",
	}
}

func TestGrep(t *testing.T) {
	t.Parallel()
	root, _ := testWorkspace(t, grepTree())
	// A symbolic link inside is not followed by the walk.
	wstest.Symlink(t, "a.go", filepath.Join(root.Dir(), "link.go"))
	grepTool := NewGrep(root)
	long := "long/line.txt:1:" + strings.Repeat("a", 500) + "… [line cut: 606 bytes in all]"
	tests := []struct {
		name string
		in   GrepInput
		want []string
	}{
		{"all", GrepInput{Pattern: "needle"}, []string{
			".hidden/h.txt:1:needle hidden",
			"a.go:4:func needle() {}",
			"b.txt:2:needle",
			long,
			"sub/deep/c.go:3:needle := 1",
			"sub/deep/nl.txt:1:needle",
			"sub/deep/nl.txt:2:needle",
			"sub/keep.log:1:needle kept",
			"unicode/u.txt:1:Ünïcödé needle",
			"zzz/last.go:1:needle last",
		}},
		{"ignore case", GrepInput{Pattern: "NEEDLE", IgnoreCase: true, Glob: "*.go"}, []string{
			"a.go:3:// Needle here",
			"a.go:4:func needle() {}",
			"sub/deep/c.go:3:needle := 1",
			"zzz/last.go:1:needle last",
		}},
		{"case sensitive", GrepInput{Pattern: "Needle"}, []string{"a.go:3:// Needle here"}},
		{"inline flag", GrepInput{Pattern: "(?i)NEEDLE h"}, []string{".hidden/h.txt:1:needle hidden", "a.go:3:// Needle here"}},
		{"glob by name", GrepInput{Pattern: "needle", Glob: "*.{go,log}"}, []string{
			"a.go:4:func needle() {}",
			"sub/deep/c.go:3:needle := 1",
			"sub/keep.log:1:needle kept",
			"zzz/last.go:1:needle last",
		}},
		{"glob by path", GrepInput{Pattern: "needle", Glob: "sub/**/*.go"}, []string{"sub/deep/c.go:3:needle := 1"}},
		{"path dir", GrepInput{Pattern: "needle", Path: "sub"}, []string{
			"sub/deep/c.go:3:needle := 1",
			"sub/deep/nl.txt:1:needle",
			"sub/deep/nl.txt:2:needle",
			"sub/keep.log:1:needle kept",
		}},
		{"path dir with glob", GrepInput{Pattern: "needle", Path: "sub", Glob: "deep/*.go"}, []string{"sub/deep/c.go:3:needle := 1"}},
		{"path file", GrepInput{Pattern: "needle", Path: "sub/deep/c.go"}, []string{"sub/deep/c.go:3:needle := 1"}},
		{"ignored file named", GrepInput{Pattern: "needle", Path: "debug.log"}, []string{"debug.log:1:needle in log"}},
		{"ignored dir named", GrepInput{Pattern: "needle", Path: "build"}, []string{"build/gen.go:1:needle in build"}},
		{"regexp", GrepInput{Pattern: `^func \w+\(\)`}, []string{"a.go:4:func needle() {}"}},
		{"alternation", GrepInput{Pattern: `hidden|kept`}, []string{".hidden/h.txt:1:needle hidden", "sub/keep.log:1:needle kept"}},
		{"no literal", GrepInput{Pattern: `^[xy]$`}, []string{"sub/deep/c.go:1:x", "sub/deep/c.go:2:y"}},
		{"dollar before crlf", GrepInput{Pattern: `needle\r$`, Path: "sub/deep"}, []string{"sub/deep/nl.txt:1:needle", "sub/deep/nl.txt:2:needle"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := call(t, grepTool, tt.in)
			if res.IsError {
				t.Fatalf("error: %s", res.Content)
			}
			if diff := cmp.Diff(tt.want, lines(res.Content)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestGrepMessages(t *testing.T) {
	t.Parallel()
	root, _ := testWorkspace(t, grepTree())
	grepTool := NewGrep(root)
	res := call(t, grepTool, GrepInput{Pattern: "needle", MaxResults: 3})
	want := []string{
		".hidden/h.txt:1:needle hidden",
		"a.go:4:func needle() {}",
		"b.txt:2:needle",
		"",
		"[showing the first 3 of 10 matching lines (in 9 files), sorted by path and line; narrow the pattern, path or glob, or raise max_results]",
	}
	if diff := cmp.Diff(want, lines(res.Content)); diff != "" {
		t.Errorf("max_results (-want +got):\n%s", diff)
	}
	wantResult(t, call(t, grepTool, GrepInput{Pattern: "absent"}), false, `no matches for "absent"`)
	wantResult(t, call(t, grepTool, GrepInput{Pattern: "absent", Path: "sub", Glob: "*.go"}), false, `no matches for "absent" in sub (files matching "*.go")`)
	wantResult(t, call(t, grepTool, GrepInput{Pattern: "needle", Path: "sub/deep/bin.dat"}), false, "sub/deep/bin.dat is a binary file; not searched")
	wantResult(t, call(t, grepTool, GrepInput{Pattern: "a(b"}), true, "invalid pattern")
	wantResult(t, call(t, grepTool, GrepInput{Pattern: "x", Glob: "[z-a]"}), true, "invalid glob")
	wantResult(t, call(t, grepTool, GrepInput{Pattern: "x", Path: "nope"}), true, "file not found: nope")
	wantResult(t, call(t, grepTool, GrepInput{Pattern: "x", MaxResults: -1}), true, "max_results must not be negative")
	wantResult(t, call(t, grepTool, GrepInput{}), true, "pattern")
}

func TestGrepCancelled(t *testing.T) {
	t.Parallel()
	root, _ := testWorkspace(t, grepTree())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := NewGrep(root).Run(ctx, Call{Input: []byte(`{"pattern":"needle"}`)})
	if err == nil {
		t.Fatal("Grep with a cancelled context returned no error")
	}
}

// TestGrepDeterministic runs the same search over a larger tree many times
// concurrently and checks the output never changes.
func TestGrepDeterministic(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		var b strings.Builder
		for j := range 50 {
			if rng.IntN(10) == 0 {
				fmt.Fprintf(&b, "line %d has the target %d\n", j, i)
			} else {
				fmt.Fprintf(&b, "line %d is filler\n", j)
			}
		}
		files[fmt.Sprintf("d%d/e%d/f%d.txt", i%7, i%13, i)] = b.String()
	}
	root, _ := testWorkspace(t, files)
	grepTool := NewGrep(root)
	first := call(t, grepTool, GrepInput{Pattern: "target", MaxResults: 50}).Content
	if !strings.Contains(first, "[showing the first 50 of") {
		t.Fatalf("expected a truncated result:\n%s", first)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				if got := call(t, grepTool, GrepInput{Pattern: "target", MaxResults: 50}).Content; got != first {
					t.Errorf("output changed between runs:\n%s", cmp.Diff(first, got))
				}
			}
		})
	}
	wg.Wait()
}

// TestGrepChunks searches files larger than the chunk size: line numbers
// carry across chunks, a line longer than a chunk is found, and a NUL in a
// later chunk makes the file binary.
func TestGrepChunks(t *testing.T) {
	t.Parallel()
	var big strings.Builder
	var want []string
	for i := 1; i <= 500; i++ {
		if i%97 == 0 {
			fmt.Fprintf(&big, "match %d\n", i)
			want = append(want, fmt.Sprintf("big.txt:%d:match %d", i, i))
		} else {
			fmt.Fprintf(&big, "filler line %d\n", i)
		}
	}
	big.WriteString(strings.Repeat("w", 300) + " match wide\n")
	want = append(want, "big.txt:501:"+strings.Repeat("w", 300)+" match wide")
	big.WriteString("match at the end without newline")
	want = append(want, "big.txt:502:match at the end without newline")
	root, _ := testWorkspace(t, map[string]string{
		"big.txt":    big.String(),
		"latebin.md": strings.Repeat("match text\n", 50) + "\x00",
	})
	for _, chunk := range []int{64, 100, 1 << 20} {
		for _, in := range []GrepInput{{Pattern: "match"}, {Pattern: "match", Path: "big.txt"}, {Pattern: `m[a]tch`}} {
			res, err := grep(t.Context(), root, in, chunk)
			if err != nil || res.IsError {
				t.Fatalf("chunk %d, %+v: %v %s", chunk, in, err, res.Content)
			}
			if diff := cmp.Diff(want, lines(res.Content)); diff != "" {
				t.Errorf("chunk %d, %+v (-want +got):\n%s", chunk, in, diff)
			}
		}
	}
}

// TestLineMatcher compares the prefiltered scan with a plain line-by-line
// regexp match, over patterns that take every path of the matcher.
func TestLineMatcher(t *testing.T) {
	t.Parallel()
	text := strings.Join([]string{
		"func fooContext(ctx context.Context) error {",
		"	return nil",
		"}",
		"The KELVIN sign: \u212a and the long s: \u017f",
		"kitchen sink",
		"Straße",
		"",
		"x",
		"xx yy",
		"tab\tseparated",
		"ends with a b",
		"a",
		"b",
		"ÉCOLE école",
		"no newline at the end",
	}, "\n")
	patterns := []struct {
		pattern    string
		ignoreCase bool
	}{
		{`func \w+Context\(`, false},
		{`context`, false},
		{`context`, true},
		{`kelvin`, true},
		{`k`, true},
		{`sink`, true},
		{`S`, true},
		{`école`, true},
		{`straße`, true},
		{`x*`, false},
		{`^$`, false},
		{`^x`, false},
		{`y$`, false},
		{`a\s*b`, false},
		{`a\nb`, false},
		{`\bnil\b`, false},
		{`nil|error`, false},
		{`(?i:ret)urn|TAB`, false},
		{`(?i)RETURN|(?-i:tab)`, false},
		{`(?i)tab\tSEP`, false},
		{`(?i)e SIGN`, false},
		{`(?i)at the END`, false},
		{`[A-Z]+`, false},
		{`(foo)+Context`, false},
		{`o{2,}`, false},
		{`\x{212a}`, false},
		{`.`, false},
		{`end$`, false},
	}
	data := []byte(text)
	for _, p := range patterns {
		m, want, got := scanLines(t, p.pattern, p.ignoreCase, data)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pattern %q (ignore case %v, literals %v, fold %v, exact %v) matched lines (-want +got):\n%s",
				p.pattern, p.ignoreCase, m.lits, m.fold, m.exact, diff)
		}
	}
}

func TestRequiredLiterals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern string
		lits    []string
		fold    bool
	}{
		{`func \w+Context\(`, []string{"Context("}, false},
		{`hello`, []string{"hello"}, false},
		{`(?i)hello`, []string{"hello"}, true},
		{`(?i)kelvin`, []string{"elvin"}, true},
		{`(?i)sks`, nil, false},
		{`foo|barbaz`, []string{"foo", "barbaz"}, false},
		{`(?i)foo|bar`, []string{"foo", "bar"}, true},
		{`a+b*`, []string{"a"}, false},
		{`(abc)+`, []string{"abc"}, false},
		{`x{2,}yy`, []string{"yy"}, false},
		{`[a-z]+`, nil, false},
		{`foo|\w+`, nil, false},
		{`x?`, nil, false},
		{`(?i)école`, []string{"cole"}, true},
		{`(?i)Foo|(?-i:BAR)`, []string{"foo", "BAR"}, true},
	}
	for _, tt := range tests {
		re, err := syntax.Parse(tt.pattern, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		lits, fold, ok := requiredLiterals(re.Simplify())
		if !ok {
			lits, fold = nil, false
		}
		if diff := cmp.Diff(tt.lits, lits); diff != "" || fold != tt.fold {
			t.Errorf("requiredLiterals(%q) = %q fold %v, want %q fold %v", tt.pattern, lits, fold, tt.lits, tt.fold)
		}
	}
}

func TestTopMatchesOrderIndependent(t *testing.T) {
	t.Parallel()
	type file struct {
		path  string
		lines []int
	}
	files := []file{{"b", []int{1, 5}}, {"a", []int{2, 3, 9}}, {"c", []int{1}}, {"a/x", []int{4}}}
	var want []string
	for _, order := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {2, 0, 3, 1}} {
		top := &topMatches{max: 4}
		for _, i := range order {
			var ms []lineMatch
			for _, l := range files[i].lines {
				ms = append(ms, lineMatch{line: l, text: "t"})
			}
			top.add(files[i].path, ms, len(ms))
		}
		var got []string
		for _, m := range top.sorted() {
			got = append(got, fmt.Sprintf("%s:%d", m.path, m.line))
		}
		if want == nil {
			want = got
			if diff := cmp.Diff([]string{"a:2", "a:3", "a:9", "a/x:4"}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		} else if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("order %v (-want +got):\n%s", order, diff)
		}
		if top.total != 7 || top.files != 4 {
			t.Errorf("total %d files %d, want 7 and 4", top.total, top.files)
		}
	}
}

func TestGrepSkipsUnreadable(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		// Root reads everything, so permissions cannot make an entry
		// unreadable: run this test again as an unprivileged user.
		runAsNobody(t, "TestGrepSkipsUnreadable")
		return
	}
	root, _ := testWorkspace(t, map[string]string{"ok.txt": "needle\n", "locked/x.txt": "needle\n"})
	if err := os.Chmod(filepath.Join(root.Dir(), "locked"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(root.Dir(), "locked"), 0o755) })
	res := call(t, NewGrep(root), GrepInput{Pattern: "needle"})
	wantResult(t, res, false, "ok.txt:1:needle", "[1 files or directories could not be read]")
}

// TestLineMatcherRandom compares the prefiltered scan with line-by-line
// regexp matching on random text over a small alphabet, where overlapping
// and case-varied near misses are common.
func TestLineMatcherRandom(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	const alphabet = "aAbBqQ-\n\u212a"
	runes := []rune(alphabet)
	randString := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteRune(runes[rng.IntN(len(runes))])
		}
		return b.String()
	}
	for range 300 {
		text := randString(200)
		lit := strings.ReplaceAll(randString(1+rng.IntN(4)), "\n", "")
		if lit == "" {
			continue
		}
		for _, pattern := range []string{regexp.QuoteMeta(lit), regexp.QuoteMeta(lit) + "|q-", "a" + regexp.QuoteMeta(lit) + "+"} {
			for _, ic := range []bool{false, true} {
				_, want, got := scanLines(t, pattern, ic, []byte(text))
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("pattern %q ignore case %v on %q (-want +got):\n%s", pattern, ic, text, diff)
				}
			}
		}
	}
}

// scanLines compiles pattern and returns the numbers of the lines of data
// that the matcher's scan finds (got) and that its regexp matches line by
// line (want). A match whose end is not at a line's end fails t.
func scanLines(t *testing.T, pattern string, ignoreCase bool, data []byte) (m *lineMatcher, want, got []int) {
	t.Helper()
	m, err := compileLineMatcher(pattern, ignoreCase)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(data), "\n") {
		if m.line.MatchString(line) {
			want = append(want, i+1)
		}
	}
	m.scan(data, func(start, end int) {
		got = append(got, bytes.Count(data[:start], []byte{'\n'})+1)
		if end < len(data) && data[end] != '\n' {
			t.Errorf("%q: line end %d is not at a newline", pattern, end)
		}
	})
	return m, want, got
}

// runAsNobody re-runs the named test of this test binary as uid/gid 65534
// and fails unless it passes there.
func runAsNobody(t *testing.T, name string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "maestro-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "tool.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+dir, "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("%s as nobody: %v\n%s", name, err, out)
	}
}
