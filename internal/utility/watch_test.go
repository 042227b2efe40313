package utility

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/protocol"
)

// startWatch starts a watch and returns its started message.
func (f *fixture) startWatch(t *testing.T, owner string, req protocol.UtilityFileWatchStart) protocol.UtilityFileWatchStarted {
	t.Helper()
	if err := f.m.WatchStart(t.Context(), owner, req); err != nil {
		t.Fatalf("WatchStart(%s): %v", req.WatchID, err)
	}
	started, _ := next(t, f.rec, func(m protocol.UtilityFileWatchStarted) bool { return m.WatchID == req.WatchID })
	return started
}

// change is the part of a watch event the tests compare.
type change struct {
	Type  protocol.ChangeType
	Rel   string
	IsDir bool
}

// waitChange waits for a change of kind typ to rel under watch id
// (other events may come first: without a debounce delay, one write can
// be reported as create then modify), checks its paths and timestamp, and
// returns it.
func (f *fixture) waitChange(t *testing.T, id, root string, typ protocol.ChangeType, rel string) change {
	t.Helper()
	ev, _ := next(t, f.rec, func(m protocol.UtilityFileWatchEvent) bool {
		return m.WatchID == id && m.RelativePath == filepath.FromSlash(rel) && m.ChangeType == typ
	})
	if want := filepath.Join(root, filepath.FromSlash(rel)); ev.Path != want {
		t.Errorf("event path = %q, want %q", ev.Path, want)
	}
	if ev.Timestamp <= 0 {
		t.Errorf("event timestamp = %d, want epoch milliseconds", ev.Timestamp)
	}
	return change{Type: ev.ChangeType, Rel: filepath.ToSlash(ev.RelativePath), IsDir: ev.IsDirectory}
}

// waitChanges waits until each of the changes has been reported, in any
// order (their debounce timers run independently).
func (f *fixture) waitChanges(t *testing.T, id, root string, want ...change) {
	t.Helper()
	missing := map[change]bool{}
	for _, c := range want {
		missing[c] = true
	}
	for len(missing) > 0 {
		ev, _ := next(t, f.rec, func(m protocol.UtilityFileWatchEvent) bool {
			c := change{m.ChangeType, filepath.ToSlash(m.RelativePath), m.IsDirectory}
			return m.WatchID == id && missing[c]
		})
		if w := filepath.Join(root, ev.RelativePath); ev.Path != w {
			t.Errorf("event path = %q, want %q", ev.Path, w)
		}
		delete(missing, change{ev.ChangeType, filepath.ToSlash(ev.RelativePath), ev.IsDirectory})
	}
}

func TestWatchEvents(t *testing.T) {
	t.Parallel()
	for _, debounce := range []int{0, 20} {
		t.Run("debounce="+str(debounce), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			write(t, f.dir, "existing/old.txt", "old\n")
			started := f.startWatch(t, "A", protocol.UtilityFileWatchStart{WatchID: "w", DebounceMS: ptr(debounce)})
			want := protocol.UtilityFileWatchStarted{WatchID: "w", RootDir: f.dir, DebounceMS: debounce, OwnerConnectionID: "A"}
			if diff := cmp.Diff(want, started); diff != "" {
				t.Errorf("started mismatch (-want +got):\n%s", diff)
			}

			// A nested tree created at once: new directories are watched
			// and what was made in them before that is reported.
			if err := os.MkdirAll(filepath.Join(f.dir, "a", "b", "c"), 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, f.dir, "a/b/c/new.txt", "1")
			f.waitChanges(t, "w", f.dir,
				change{protocol.ChangeCreate, "a", true},
				change{protocol.ChangeCreate, "a/b", true},
				change{protocol.ChangeCreate, "a/b/c", true},
				change{protocol.ChangeCreate, "a/b/c/new.txt", false},
			)

			// Modify, rename and delete inside the new directories.
			fh, err := os.OpenFile(filepath.Join(f.dir, "a", "b", "c", "new.txt"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fh.WriteString("2"); err != nil {
				t.Fatal(err)
			}
			fh.Close()
			if got, w := f.waitChange(t, "w", f.dir, protocol.ChangeModify, "a/b/c/new.txt"), (change{protocol.ChangeModify, "a/b/c/new.txt", false}); got != w {
				t.Errorf("event = %+v, want %+v", got, w)
			}
			if err := os.Rename(filepath.Join(f.dir, "a", "b", "c", "new.txt"), filepath.Join(f.dir, "a", "b", "moved.txt")); err != nil {
				t.Fatal(err)
			}
			f.waitChanges(t, "w", f.dir,
				change{protocol.ChangeRename, "a/b/c/new.txt", false},
				change{protocol.ChangeCreate, "a/b/moved.txt", false},
			)
			if err := os.Remove(filepath.Join(f.dir, "a", "b", "moved.txt")); err != nil {
				t.Fatal(err)
			}
			if got, w := f.waitChange(t, "w", f.dir, protocol.ChangeDelete, "a/b/moved.txt"), (change{protocol.ChangeDelete, "a/b/moved.txt", false}); got != w {
				t.Errorf("event = %+v, want %+v", got, w)
			}
			// A watched directory removed.
			if err := os.Remove(filepath.Join(f.dir, "a", "b", "c")); err != nil {
				t.Fatal(err)
			}
			if got, w := f.waitChange(t, "w", f.dir, protocol.ChangeDelete, "a/b/c"), (change{protocol.ChangeDelete, "a/b/c", true}); got != w {
				t.Errorf("event = %+v, want %+v", got, w)
			}
			// Existing directories were watched from the start.
			if err := os.Remove(filepath.Join(f.dir, "existing", "old.txt")); err != nil {
				t.Fatal(err)
			}
			if got, w := f.waitChange(t, "w", f.dir, protocol.ChangeDelete, "existing/old.txt"), (change{protocol.ChangeDelete, "existing/old.txt", false}); got != w {
				t.Errorf("event = %+v, want %+v", got, w)
			}

			if err := f.m.WatchStop("B", protocol.UtilityFileWatchStop{WatchID: "w"}); err != nil {
				wantError(t, err, 403, "Headless file watch w is owned by another connection")
			} else {
				t.Error("stop by another connection succeeded")
			}
			if err := f.m.WatchStop("A", protocol.UtilityFileWatchStop{WatchID: "w"}); err != nil {
				t.Fatalf("WatchStop: %v", err)
			}
			stopped, _ := next(t, f.rec, func(m protocol.UtilityFileWatchStopped) bool { return m.WatchID == "w" })
			if diff := cmp.Diff(protocol.UtilityFileWatchStopped{WatchID: "w", Reason: "Stopped by controller"}, stopped); diff != "" {
				t.Errorf("stopped mismatch (-want +got):\n%s", diff)
			}
			if _, ws := f.m.Snapshot(); len(ws) != 0 {
				t.Errorf("Snapshot after stop = %+v", ws)
			}
			// Nothing follows stopped.
			msgs := f.rec.messages()
			if _, ok := msgs[len(msgs)-1].(protocol.UtilityFileWatchStopped); !ok {
				t.Errorf("last message = %T, want the stopped message", msgs[len(msgs)-1])
			}
			// Stopping again, or an unknown watch, is a no-op.
			if err := f.m.WatchStop("A", protocol.UtilityFileWatchStop{WatchID: "w"}); err != nil {
				t.Errorf("second WatchStop: %v", err)
			}
		})
	}
}

func TestWatchPatterns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if err := os.MkdirAll(filepath.Join(f.dir, "src", "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	started := f.startWatch(t, "", protocol.UtilityFileWatchStart{
		WatchID: "p", RootDir: "src", IncludePatterns: []string{"**/*.go", "**/*.md"}, ExcludePatterns: []string{"gen/**", "**/skip_*"},
	})
	root := filepath.Join(f.dir, "src")
	want := protocol.UtilityFileWatchStarted{WatchID: "p", RootDir: root, IncludePatterns: []string{"**/*.go", "**/*.md"},
		ExcludePatterns: []string{"gen/**", "**/skip_*"}, DebounceMS: DefaultDebounceMS}
	if diff := cmp.Diff(want, started); diff != "" {
		t.Errorf("started mismatch (-want +got):\n%s", diff)
	}
	// Excluded or not included first, then one that is reported: events
	// arrive in order, so seeing the last one proves the others were
	// dropped.
	write(t, root, "node_modules/dep.go", "x")
	write(t, root, "gen/x.go", "x")
	write(t, root, "skip_me.go", "x")
	write(t, root, "notes.txt", "x")
	write(t, root, "debug.log", "x")
	write(t, root, "main.go", "x")
	got, skipped := next(t, f.rec, func(m protocol.UtilityFileWatchEvent) bool { return true })
	if got.RelativePath != "main.go" || got.ChangeType != protocol.ChangeCreate {
		t.Errorf("first event = %+v, want create main.go", got)
	}
	if len(skipped) != 0 {
		t.Errorf("unexpected messages: %s", describe(skipped))
	}
	write(t, root, "deep/er/readme.md", "x")
	if c := f.waitChange(t, "p", root, protocol.ChangeCreate, "deep/er/readme.md"); c.IsDir {
		t.Errorf("event = %+v, want a file", c)
	}
}

func TestMergeChange(t *testing.T) {
	t.Parallel()
	c, m, d, r := protocol.ChangeCreate, protocol.ChangeModify, protocol.ChangeDelete, protocol.ChangeRename
	tests := []struct {
		prev, next, want protocol.ChangeType
		keep             bool
	}{
		{c, m, c, true}, {c, c, c, true}, {c, d, "", false}, {c, r, "", false},
		{m, m, m, true}, {m, d, d, true}, {m, r, r, true},
		{d, c, m, true}, {r, c, m, true}, {d, m, m, true},
	}
	for _, tc := range tests {
		got, keep := mergeChange(tc.prev, tc.next)
		if got != tc.want || keep != tc.keep {
			t.Errorf("mergeChange(%s, %s) = %q, %v; want %q, %v", tc.prev, tc.next, got, keep, tc.want, tc.keep)
		}
	}
}

func TestWatchErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	write(t, f.dir, "file.txt", "")
	f.startWatch(t, "A", protocol.UtilityFileWatchStart{WatchID: "dup"})
	tests := []struct {
		name string
		req  protocol.UtilityFileWatchStart
		code int
		text string
	}{
		{"duplicate", protocol.UtilityFileWatchStart{WatchID: "dup"}, 400, "Utility file watch already exists: dup"},
		{"outside", protocol.UtilityFileWatchStart{WatchID: "x", RootDir: "../outside"}, 403, "Path is outside workspace root: " + f.out},
		{"missing", protocol.UtilityFileWatchStart{WatchID: "x", RootDir: "nodir"}, 404,
			"Utility file watch root directory does not exist: " + filepath.Join(f.dir, "nodir")},
		{"file", protocol.UtilityFileWatchStart{WatchID: "x", RootDir: "file.txt"}, 400,
			"Utility file watch root is not a directory: " + filepath.Join(f.dir, "file.txt")},
		{"bad pattern", protocol.UtilityFileWatchStart{WatchID: "x", IncludePatterns: []string{"[a-"}}, 400,
			`Invalid file watch include pattern "[a-": syntax error in pattern: "[a-": unterminated character class`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, f.m.WatchStart(t.Context(), "A", tc.req), tc.code, tc.text)
		})
	}
	if _, ws := f.m.Snapshot(); len(ws) != 1 || ws[0].WatchID != "dup" {
		t.Errorf("Snapshot = %+v, want only the first watch", ws)
	}
}

// TestWatchStartStopRace starts and stops watches concurrently: every
// watch ends stopped, none stays registered, and a started message, when
// there is one, comes before the stopped one.
func TestWatchStartStopRace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i := range 20 {
		write(t, f.dir, "d"+str(i)+"/x/y.txt", "x")
	}
	const n = 30
	var wg sync.WaitGroup
	for i := range n {
		id := "r" + str(i)
		wg.Go(func() {
			if err := f.m.WatchStart(t.Context(), "A", protocol.UtilityFileWatchStart{WatchID: id}); err != nil {
				t.Errorf("WatchStart: %v", err)
			}
		})
		wg.Go(func() {
			if err := f.m.WatchStop("A", protocol.UtilityFileWatchStop{WatchID: id}); err != nil {
				t.Errorf("WatchStop: %v", err)
			}
		})
	}
	wg.Wait()
	// Stop those whose start won the race.
	f.m.StopAll("interrupt")
	if _, ws := f.m.Snapshot(); len(ws) != 0 {
		t.Errorf("watches left: %+v", ws)
	}
	f.m.mu.Lock()
	left := len(f.m.watches)
	f.m.mu.Unlock()
	if left != 0 {
		t.Errorf("%d watches still registered", left)
	}
	state := map[string]string{}
	for _, msg := range f.rec.messages() {
		switch m := msg.(type) {
		case protocol.UtilityFileWatchStarted:
			if state[m.WatchID] != "" {
				t.Errorf("watch %s: started after %s", m.WatchID, state[m.WatchID])
			}
			state[m.WatchID] = "started"
		case protocol.UtilityFileWatchStopped:
			if state[m.WatchID] == "stopped" {
				t.Errorf("watch %s: stopped twice", m.WatchID)
			}
			state[m.WatchID] = "stopped"
		case protocol.UtilityFileWatchEvent:
			if state[m.WatchID] != "started" {
				t.Errorf("watch %s: event while %q", m.WatchID, state[m.WatchID])
			}
		}
	}
	for id, s := range state {
		if s != "stopped" {
			t.Errorf("watch %s ended %q, want stopped", id, s)
		}
	}
}
