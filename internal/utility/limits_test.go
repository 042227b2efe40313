package utility

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/workspace"
	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

// TestFileReadRefusesFIFO: utility_file_read of a FIFO (or of a link to
// one) answers at once with an error instead of blocking, and the Manager
// closes promptly afterwards (a blocked read used to hold shutdown for
// good).
func TestFileReadRefusesFIFO(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fifo := filepath.Join(f.dir, "pipe")
	wstest.MakeFIFO(t, fifo)
	if err := os.Symlink("pipe", filepath.Join(f.dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"pipe", "link", fifo} {
		err := wstest.Within(t, fifo, func() error {
			_, err := f.m.FileRead(t.Context(), protocol.UtilityFileRead{ReadID: "r", Path: p})
			return err
		})
		wantError(t, err, 400, "Not a regular file: "+p+" (a FIFO)")
	}
	wstest.Within(t, fifo, func() error { return f.m.Close() })
}

// TestFileSearchWithPlantedFIFOs: a FIFO among the files, or planted as a
// .gitignore or .git/info/exclude, neither hangs utility_file_search nor
// is listed.
func TestFileSearchWithPlantedFIFOs(t *testing.T) {
	t.Parallel()
	for _, planted := range []string{"main.fifo", ".gitignore", ".git/info/exclude", "sub/.gitignore"} {
		t.Run(planted, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			write(t, f.dir, "sub/main.go", "package main\n")
			fifo := filepath.Join(f.dir, filepath.FromSlash(planted))
			wstest.MakeFIFO(t, fifo)
			res := wstest.Within(t, fifo, func() protocol.UtilityFileSearchResults {
				res, err := f.m.FileSearch(t.Context(), protocol.UtilityFileSearch{SearchID: "s", Query: "main", Cwd: "sub"})
				if err != nil {
					return protocol.UtilityFileSearchResults{SearchID: "error: " + err.Error()}
				}
				return res
			})
			if res.SearchID != "s" {
				t.Fatalf("FileSearch: %s", res.SearchID)
			}
			var paths []string
			for _, r := range res.Results {
				paths = append(paths, r.Path)
			}
			if len(paths) != 1 || !strings.HasSuffix(paths[0], "main.go") {
				t.Errorf("results = %q, want only main.go", paths)
			}
		})
	}
}

// TestFileWatchWithFIFO: a watch over a tree holding a FIFO starts and
// reports a new FIFO without opening it.
func TestFileWatchWithFIFO(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	fifo := filepath.Join(f.dir, "old.fifo")
	wstest.MakeFIFO(t, fifo)
	wstest.Within(t, fifo, func() bool {
		f.startWatch(t, "A", protocol.UtilityFileWatchStart{WatchID: "w", DebounceMS: ptr(0)})
		return true
	})
	wstest.MakeFIFO(t, filepath.Join(f.dir, "new", "new.fifo"))
	f.waitChanges(t, "w", f.dir, change{protocol.ChangeCreate, "new", true}, change{protocol.ChangeCreate, "new/new.fifo", false})
}

// TestErrorsEchoBoundedPrefix: what a client sends (a 10 MB path, id or
// pattern) is echoed in an error as a bounded prefix only.
func TestErrorsEchoBoundedPrefix(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	long := strings.Repeat("p", 10<<20)
	ops := map[string]func() error{
		"read missing": func() error {
			_, err := f.m.FileRead(t.Context(), protocol.UtilityFileRead{ReadID: "r", Path: long})
			return err
		},
		"read outside": func() error {
			_, err := f.m.FileRead(t.Context(), protocol.UtilityFileRead{ReadID: "r", Path: "/" + long})
			return err
		},
		"read cwd": func() error {
			_, err := f.m.FileRead(t.Context(), protocol.UtilityFileRead{ReadID: "r", Path: "a", Cwd: long})
			return err
		},
		"search cwd": func() error {
			_, err := f.m.FileSearch(t.Context(), protocol.UtilityFileSearch{SearchID: "s", Query: "a", Cwd: long})
			return err
		},
		"watch pattern": func() error {
			return f.m.WatchStart(t.Context(), "A", protocol.UtilityFileWatchStart{WatchID: "w", IncludePatterns: []string{"[" + long}})
		},
		"watch root": func() error {
			return f.m.WatchStart(t.Context(), "A", protocol.UtilityFileWatchStart{WatchID: "w", RootDir: long})
		},
		"stdin id": func() error {
			return f.m.CommandStdin("A", protocol.UtilityCommandStdin{CommandID: long})
		},
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			err := op()
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error = %v, want *Error", err)
			}
			if len(e.Message) > 4*workspace.MaxEcho {
				t.Errorf("error is %d bytes: %.300s…", len(e.Message), e.Message)
			}
		})
	}
}
