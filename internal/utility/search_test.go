package utility

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/workspace"
	"github.com/maestro-run/maestro/internal/workspace/walk"
)

// scorePath scores a path (relative to the search directory) the way the
// walk does.
func scorePath(query, path string) int {
	lower := appendLower(nil, path)
	base := lower[strings.LastIndexByte(string(lower), '/')+1:]
	return newScorer(query).score(lower, base, utf16Len(path))
}

func TestScore(t *testing.T) {
	t.Parallel()
	tests := []struct {
		query, path string
		want        int
	}{
		{"main.go", "main.go", 10000 - 7},                         // base equals
		{"main.go", "cmd/main.go", 10000 - 11},                    // base equals, at depth
		{"cmd/main.go", "cmd/main.go", 9500 - 11},                 // path equals
		{"main", "src/main.go", 8000 - 11},                        // base starts with
		{"MAIN", "src/Main.go", 8000 - 11},                        // case-insensitive
		{"ain", "src/main.go", 7000 - 10*1 - 11},                  // base contains at 1
		{"src/m", "src/main.go", 6000 - 0 - 11},                   // path contains at 0
		{"c/ma", "src/main.go", 6000 - 10*2 - 11},                 // path contains at 2
		{"foo bar", "bar/foo.go", 5000 - 10},                      // every token present
		{"foo baz", "bar/foo.go", 0},                              // a token missing
		{"mgo", "main.go", 3000 + (12 + 8 + 12) - 7},              // base subsequence
		{"smg", "src/main.go", 2000 + (12 + 9 + 8) - 11},          // path subsequence
		{"xyz", "main.go", 0},                                     // no match
		{"é", "café.txt", 7000 - 10*3 - 8},                        // non-ASCII: UTF-16 lengths
		{"cf", "café.txt", 3000 + (12 + 11) - 8},                  // gap counted in characters
		{"a😀b", "a😀b.txt", 8000 - 8},                              // astral: two code units
		{"zzzzzzzzzzzzzzzz", strings.Repeat("z", 16), 10000 - 16}, // equality beats all
	}
	for _, tc := range tests {
		if got := scorePath(tc.query, tc.path); got != tc.want {
			t.Errorf("score(%q, %q) = %d, want %d", tc.query, tc.path, got, tc.want)
		}
	}
}

// searchTree builds a workspace exercising what the walk skips.
func searchTree(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	for _, p := range []string{
		"src/main.go", "src/Main_test.go", "docs/readme.md", "sub/keep_main.go",
		"sub/local_main.go", ".hidden/main.go", ".main.go", "ignored/main.go", "main.log",
		"sub/deeper/main_x.go",
	} {
		write(t, f.dir, p, "x\n")
	}
	write(t, f.dir, ".gitignore", "ignored/\n*.log\n")
	write(t, f.dir, "sub/.gitignore", "local_main.go\n")
	if err := os.Symlink("src/main.go", filepath.Join(f.dir, "link_main.go")); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFileSearch(t *testing.T) {
	t.Parallel()
	f := searchTree(t)
	res := func(path string, score int) protocol.FileSearchResult {
		return protocol.FileSearchResult{Path: path, Score: float64(score)}
	}
	tests := []struct {
		name string
		req  protocol.UtilityFileSearch
		want protocol.UtilityFileSearchResults
	}{
		{
			name: "ranked, gitignore, hidden and links skipped",
			req:  protocol.UtilityFileSearch{SearchID: "s1", Query: " main "},
			want: protocol.UtilityFileSearchResults{SearchID: "s1", Query: "main", Cwd: f.dir, Results: []protocol.FileSearchResult{
				res("src/main.go", 8000-11),
				res("src/Main_test.go", 8000-16),
				res("sub/deeper/main_x.go", 8000-20),
				res("sub/keep_main.go", 7000-50-16),
			}},
		},
		{
			name: "limit",
			req:  protocol.UtilityFileSearch{SearchID: "s2", Query: "main", Limit: ptr(2)},
			want: protocol.UtilityFileSearchResults{SearchID: "s2", Query: "main", Cwd: f.dir, Truncated: true, Results: []protocol.FileSearchResult{
				res("src/main.go", 8000-11),
				res("src/Main_test.go", 8000-16),
			}},
		},
		{
			name: "limit below 1 means 1",
			req:  protocol.UtilityFileSearch{SearchID: "s3", Query: "main", Limit: ptr(0)},
			want: protocol.UtilityFileSearchResults{SearchID: "s3", Query: "main", Cwd: f.dir, Truncated: true, Results: []protocol.FileSearchResult{
				res("src/main.go", 8000-11),
			}},
		},
		{
			name: "paths relative to cwd",
			req:  protocol.UtilityFileSearch{SearchID: "s4", Query: "main.go", Cwd: "src"},
			want: protocol.UtilityFileSearchResults{SearchID: "s4", Query: "main.go", Cwd: filepath.Join(f.dir, "src"), Results: []protocol.FileSearchResult{
				res("main.go", 10000-7),
				res("Main_test.go", 3000+(4*12+(12-5)+2*12)-12), // base subsequence, gap 5 before "."
			}},
		},
		{
			name: "gitignore of the cwd applies",
			req:  protocol.UtilityFileSearch{SearchID: "s5", Query: "local", Cwd: "sub"},
			want: protocol.UtilityFileSearchResults{SearchID: "s5", Query: "local", Cwd: filepath.Join(f.dir, "sub"), Results: []protocol.FileSearchResult{}},
		},
		{
			name: "empty query",
			req:  protocol.UtilityFileSearch{SearchID: "s6", Query: "   "},
			want: protocol.UtilityFileSearchResults{SearchID: "s6", Query: "", Cwd: f.dir, Results: []protocol.FileSearchResult{}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := f.m.FileSearch(t.Context(), tc.req)
			if err != nil {
				t.Fatalf("FileSearch: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FileSearch mismatch (-want +got):\n%s", diff)
			}
			if err := validFrame(got); err != nil {
				t.Errorf("result does not validate: %v", err)
			}
		})
	}
}

func TestFileSearchErrors(t *testing.T) {
	t.Parallel()
	f := searchTree(t)
	write(t, f.dir, "file.txt", "")
	tests := []struct {
		cwd  string
		code int
		text string
	}{
		{"../outside", 403, "Path is outside workspace root: " + f.out},
		{f.out, 403, "Path is outside workspace root: " + f.out},
		{"nodir", 404, "Working directory not found: nodir"},
		{"file.txt", 400, "Working directory is not a directory: file.txt"},
	}
	for _, tc := range tests {
		_, err := f.m.FileSearch(t.Context(), protocol.UtilityFileSearch{SearchID: "s", Query: "main", Cwd: tc.cwd})
		wantError(t, err, tc.code, tc.text)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.m.FileSearch(ctx, protocol.UtilityFileSearch{SearchID: "s", Query: "main"}); err == nil {
		t.Error("FileSearch with a cancelled context succeeded")
	}
}

// TestFileSearchCandidatesMatchRipgrep checks that the files the search
// considers are exactly those `rg --files` lists, on a real tree.
func TestFileSearchCandidatesMatchRipgrep(t *testing.T) {
	t.Parallel()
	rg, err := exec.LookPath("rg")
	if err != nil {
		proctest.SkipOrFail(t, "ripgrep (rg) not installed: scripts/install-deps.sh installs it")
	}
	for _, tree := range []string{
		filepath.Join(runtime.GOROOT(), "src", "net"),
		searchTree(t).dir,
	} {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		cmd := exec.CommandContext(ctx, rg, "--files", "--no-config", "--no-require-git", ".")
		cmd.Dir = tree
		out, err := cmd.Output()
		cancel()
		if err != nil {
			t.Fatalf("rg --files in %s: %v", tree, err)
		}
		var want []string
		chars := map[rune]bool{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			p := strings.TrimPrefix(line, "./")
			want = append(want, p)
			for _, r := range strings.ToLower(p) {
				chars[r] = true
			}
		}
		root, err := workspace.Open(tree)
		if err != nil {
			t.Fatal(err)
		}
		// Every file contains one of the characters found, so the union
		// of the single-character searches is every candidate.
		seen := map[string]bool{}
		for r := range chars {
			s := newSearch(t.Context(), root, ".", string(r), 1<<30)
			matches, _, err := s.run()
			if err != nil {
				t.Fatal(err)
			}
			for _, mt := range matches {
				seen[mt.path] = true
			}
		}
		root.Close()
		got := make([]string, 0, len(seen))
		for p := range seen {
			got = append(got, p)
		}
		slices.Sort(want)
		slices.Sort(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("candidates in %s differ from rg --files (-rg +search):\n%s", tree, diff)
		}
	}
}

// TestFileSearchIndexMatchesWalk: a search scored from the workspace index
// (lower-cased names kept by the index, directories rejected by their
// names together) finds exactly what scoring a fresh walk finds, for
// queries in any case, with several tokens and beyond ASCII.
func TestFileSearchIndexMatchesWalk(t *testing.T) {
	t.Parallel()
	f := searchTree(t)
	for _, p := range []string{
		"pkg/HTTPServer.go", "pkg/http/server.go", "pkg/http/Server_Test.go", "Éclair/ÜBER.txt",
		"Éclair/straße.md", "docs/İstanbul.md", "docs/a b/main notes.txt", "deep/x/y/z/MAIN.GO",
	} {
		write(t, f.dir, p, "x\n")
	}
	for _, q := range []string{"main", "MAIN", "httpserver", "server.go", "http ser", "über", "éclair", "strasse", "straße", "i̇stanbul", "e", "z/main", "a b", "xyzzy"} {
		for _, base := range []string{".", "pkg", "docs"} {
			fromIndex, totalIndex, err := newSearch(t.Context(), f.m.root, base, q, MaxSearchLimit).run()
			if err != nil {
				t.Fatalf("%q in %s: %v", q, base, err)
			}
			s := newSearch(t.Context(), f.m.root, base, q, MaxSearchLimit)
			if err := walk.Walk(t.Context(), f.m.root, base, func() walk.Worker { return s.newWorker() }); err != nil {
				t.Fatal(err)
			}
			fromWalk := s.best.Sorted()
			if diff := cmp.Diff(fromWalk, fromIndex, cmp.AllowUnexported(match{})); diff != "" || s.total != totalIndex {
				t.Errorf("%q in %s: index and walk differ (-walk +index), totals %d / %d:\n%s", q, base, s.total, totalIndex, diff)
			}
		}
	}
}

// TestFileSearchTopMatchesFullRanking: a search that keeps only its top
// matches, skipping the files and directories that cannot beat the worst
// one kept once more files matched than its limit, returns exactly the
// head of the full ranking and says whether it was truncated, from the
// index and from a walk alike.
func TestFileSearchTopMatchesFullRanking(t *testing.T) {
	t.Parallel()
	root, err := workspace.Open(filepath.Join(runtime.GOROOT(), "src", "net"))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, q := range []string{"e", "conn", "_test", "http/", "http/server.go", "s t", "go", "zz"} {
		full, total, err := newSearch(t.Context(), root, ".", q, 1<<30).run()
		if err != nil {
			t.Fatal(err)
		}
		if total != len(full) {
			t.Fatalf("%q: %d matches, total %d", q, len(full), total)
		}
		for _, limit := range []int{1, 7, 50, MaxSearchLimit} {
			want := full[:min(limit, len(full))]
			got, gotTotal, err := newSearch(t.Context(), root, ".", q, limit).run()
			if err != nil {
				t.Fatal(err)
			}
			s := newSearch(t.Context(), root, ".", q, limit)
			if err := walk.Walk(t.Context(), root, ".", func() walk.Worker { return s.newWorker() }); err != nil {
				t.Fatal(err)
			}
			for name, r := range map[string]struct {
				matches []match
				total   int
			}{"index": {got, gotTotal}, "walk": {s.best.Sorted(), s.total}} {
				if diff := cmp.Diff(want, r.matches, cmp.AllowUnexported(match{})); diff != "" {
					t.Errorf("%q, limit %d, %s: top matches differ from the full ranking (-full +top):\n%s", q, limit, name, diff)
				}
				if (r.total > limit) != (len(full) > limit) {
					t.Errorf("%q, limit %d, %s: total %d, %d matches in all: truncated wrongly", q, limit, name, r.total, len(full))
				}
			}
		}
	}
}

// TestFileSearchIndexPassesMatchWalk: scoring the index rule by rule
// (names equal to the query, then starting with it, found by looking for
// it in a directory's packed names; the others read once) with the
// names' character masks unknown (the first search) and known (after),
// finds what a fresh walk finds, with names whose lower-cased forms move
// (non-ASCII upper case), directory names that lower-case to ASCII (the
// Kelvin sign), names equal to the query, hidden ones, names longer than
// a FileMask records, and limits that cut ties.
func TestFileSearchIndexPassesMatchWalk(t *testing.T) {
	t.Parallel()
	f := searchTree(t)
	for _, p := range []string{
		"\u212Aelvin/x/main.go", "İx/İy/abc.go", "ÉCLAIR/Kx/y.txt", "ÉCLAIR/main", "ÉCLAIR/MAIN.go",
		"a/B/C/d.go", "a/main", "a/.main", "a/mainmain", "a/xmain", "b/Main", "b/MAIN.txt", "b/e", "b/E.go",
		"c/e/e", "c/e/ee", "c/ex/ye", "main", "e",
		"b/" + strings.Repeat("x", 70) + "_main_e.go", "b/" + strings.Repeat("y", 62) + "e", // longer than a FileMask says
	} {
		write(t, f.dir, p, "x\n")
	}
	for i, q := range []string{"main", "e", "kelvin", "kxmain", "ixabc", "éclair", "bcd", "kmain", "e/e", "a main", "ma", "xyz"} {
		for _, base := range []string{".", "sub", "b"} {
			for _, limit := range []int{1, 2, 7, MaxSearchLimit} {
				got, gotTotal, err := newSearch(t.Context(), f.m.root, base, q, limit).run()
				if err != nil {
					t.Fatal(err)
				}
				s := newSearch(t.Context(), f.m.root, base, q, limit)
				if err := walk.Walk(t.Context(), f.m.root, base, func() walk.Worker { return s.newWorker() }); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(s.best.Sorted(), got, cmp.AllowUnexported(match{})); diff != "" || (gotTotal > limit) != (s.total > limit) {
					t.Errorf("%q in %s, limit %d (search %d): index and walk differ (-walk +index), totals %d / %d:\n%s", q, base, limit, i, s.total, gotTotal, diff)
				}
			}
		}
	}
}
