package tool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/workspace"
	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

// promptly runs tl with input and fails the test unless it answers within
// wstest.Timeout, or answers with a Go error.
func promptly(t *testing.T, fifo string, tl Tool, input any) Result {
	t.Helper()
	raw, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res Result
		err error
	}
	a := wstest.Within(t, fifo, func() answer {
		res, err := tl.Run(context.Background(), Call{ID: "t", Input: raw})
		return answer{res, err}
	})
	if a.err != nil {
		t.Fatalf("%s(%.200s): unexpected Go error: %v", tl.Spec().Name, raw, a.err)
	}
	return a.res
}

// TestFileToolsRefuseFIFOs: a FIFO, or a link to one, named to Read, Edit,
// Write or Grep is refused at once with "not a regular file"; Glob leaves
// it out; Write does not replace it.
func TestFileToolsRefuseFIFOs(t *testing.T) {
	t.Parallel()
	root, _ := testWorkspace(t, map[string]string{"a.txt": "hello\n"})
	fifo := filepath.Join(root.Dir(), "pipe")
	wstest.MakeFIFO(t, fifo)
	wstest.Symlink(t, "pipe", filepath.Join(root.Dir(), "link"))
	tests := []struct {
		name  string
		tool  Tool
		input func(path string) any
	}{
		{"Read", NewRead(root), func(p string) any { return ReadInput{Path: p} }},
		{"Read ranged", NewRead(root), func(p string) any { return ReadInput{Path: p, Offset: 1, Limit: 1} }},
		{"Edit", NewEdit(root), func(p string) any { return EditInput{Path: p, OldString: "a", NewString: "b"} }},
		{"Write", NewWrite(root), func(p string) any { return WriteInput{Path: p, Content: "x"} }},
		{"Grep", NewGrep(root), func(p string) any { return GrepInput{Pattern: "x", Path: p} }},
	}
	for _, tt := range tests {
		for _, p := range []string{"pipe", "link"} {
			res := promptly(t, fifo, tt.tool, tt.input(p))
			t.Run(tt.name+"/"+p, func(t *testing.T) {
				wantResult(t, res, true, "not a regular file: ", "(a FIFO)")
			})
		}
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
		t.Errorf("the FIFO was replaced: %v, %v", fi, err)
	}
	res := promptly(t, fifo, NewGlob(root), GlobInput{Pattern: "*"})
	if strings.Contains(res.Content, "pipe") {
		t.Errorf("Glob lists the FIFO:\n%s", res.Content)
	}
	res = promptly(t, fifo, NewGrep(root), GrepInput{Pattern: "hello"})
	wantResult(t, res, false, "a.txt:1:hello")
}

// TestPlantedIgnoreFilesDoNotHang: a .gitignore or .git/info/exclude that
// is a FIFO does not hang Glob or Grep (their ignore rules are read from
// the workspace); the FIFO's rules simply do not apply.
func TestPlantedIgnoreFilesDoNotHang(t *testing.T) {
	t.Parallel()
	for _, planted := range []string{".gitignore", ".git/info/exclude", "sub/.gitignore"} {
		t.Run(planted, func(t *testing.T) {
			t.Parallel()
			root, _ := testWorkspace(t, map[string]string{"a.txt": "hello\n", "sub/b.txt": "hello\n"})
			fifo := filepath.Join(root.Dir(), filepath.FromSlash(planted))
			wstest.MakeFIFO(t, fifo)
			res := promptly(t, fifo, NewGlob(root), GlobInput{Pattern: "**/*.txt"})
			wantResult(t, res, false, "a.txt", "sub/b.txt")
			res = promptly(t, fifo, NewGrep(root), GrepInput{Pattern: "hello", Path: "sub"})
			wantResult(t, res, false, "sub/b.txt:1:hello")
		})
	}
}

// TestFileSizeLimits: Read, Edit and Write share one configurable limit.
// Write refuses content over it before touching the disk; Edit refuses a
// file over it, and an edit that would grow the file past it.
func TestFileSizeLimits(t *testing.T) {
	t.Parallel()
	const limit = 1000
	lim := FileLimits{MaxFileBytes: limit}
	root, _ := testWorkspace(t, map[string]string{
		"at.txt":   strings.Repeat("a", limit-1) + "\n",
		"over.txt": strings.Repeat("a", limit) + "\n",
	})
	read, edit, write := NewReadWith(root, lim), NewEditWith(root, lim), NewWriteWith(root, lim)

	wantResult(t, call(t, read, ReadInput{Path: "over.txt"}), true, "over.txt is 1001 bytes, over the 1000 bytes limit")
	wantResult(t, call(t, read, ReadInput{Path: "at.txt"}), false, "aaaa")

	wantResult(t, call(t, edit, EditInput{Path: "over.txt", OldString: "a", NewString: "b", ReplaceAll: true}), true,
		"over.txt is 1001 bytes, over the 1000 bytes limit for Edit")
	wantResult(t, call(t, edit, EditInput{Path: "at.txt", OldString: "a", NewString: "bb", ReplaceAll: true}), true,
		"the edit would make at.txt 1999 bytes, over the 1000 bytes limit for Edit")
	wantResult(t, call(t, edit, EditInput{Path: "at.txt", OldString: "\n", NewString: "b"}), false, "edited at.txt")

	wantResult(t, call(t, write, WriteInput{Path: "new.txt", Content: strings.Repeat("x", limit+1)}), true,
		"content is 1001 bytes, over the 1000 bytes limit for Write")
	if _, err := os.Lstat(filepath.Join(root.Dir(), "new.txt")); !os.IsNotExist(err) {
		t.Errorf("Write over the limit created the file: %v", err)
	}
	wantResult(t, call(t, write, WriteInput{Path: "new.txt", Content: strings.Repeat("x", limit)}), false, "created new.txt (1000 bytes)")

	// The default is 10 MiB for all three.
	if got := (FileLimits{}).maxFileBytes(); got != 10<<20 {
		t.Errorf("default limit = %d", got)
	}
}

// TestEditLargeFileBoundedMemory: Edit refuses a large file from its size,
// without reading it (a 3 GB file used to cost 6.3 GB of memory). The
// file here is sparse: 64 MiB that take no disk space.
func TestEditLargeFileBoundedMemory(t *testing.T) {
	root, _ := testWorkspace(t, nil)
	big := filepath.Join(root.Dir(), "big.txt")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 64<<20); err != nil {
		t.Fatal(err)
	}
	edit := NewEdit(root)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res := call(t, edit, EditInput{Path: "big.txt", OldString: "x", NewString: "y"})
	runtime.ReadMemStats(&after)
	wantResult(t, res, true, "over the 10 MiB limit for Edit")
	grew := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d bytes", grew)
	if grew > 1<<20 {
		t.Errorf("Edit of a 64 MiB file allocated %d bytes; want < 1 MiB", grew)
	}
}

// TestErrorsEchoBoundedPrefix: a 10 MB path or pattern is not repeated
// whole in the error the model sees.
func TestErrorsEchoBoundedPrefix(t *testing.T) {
	t.Parallel()
	root, _ := testWorkspace(t, nil)
	long := strings.Repeat("p", 10<<20)
	tests := []struct {
		name  string
		tool  Tool
		input any
	}{
		{"Read missing", NewRead(root), ReadInput{Path: long}},
		{"Read outside", NewRead(root), ReadInput{Path: "../" + long}},
		{"Edit", NewEdit(root), EditInput{Path: long, OldString: "a", NewString: "b"}},
		{"Write", NewWrite(root), WriteInput{Path: long, Content: "x"}},
		{"Glob pattern", NewGlob(root), GlobInput{Pattern: "[" + long}},
		{"Glob path", NewGlob(root), GlobInput{Pattern: "*", Path: long}},
		{"Grep pattern", NewGrep(root), GrepInput{Pattern: "(" + long}},
		{"Grep path", NewGrep(root), GrepInput{Pattern: "x", Path: long}},
		{"Grep glob", NewGrep(root), GrepInput{Pattern: "x", Glob: "[" + long}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, tt.tool, tt.input)
			if !res.IsError {
				t.Fatalf("no error: %.200s", res.Content)
			}
			if len(res.Content) > 4*workspace.MaxEcho {
				t.Errorf("error is %d bytes: %.300s…", len(res.Content), res.Content)
			}
		})
	}
}
