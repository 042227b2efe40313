package utility

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/workspace"
)

// TestHideStateDir: a directory of Config.Hide (Maestro's own state, put
// inside the workspace by the operator) is never reported by a file watch
// nor returned by a file search; its neighbours are.
func TestHideStateDir(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	write(t, f.dir, "mstate/sessions/s1/events.jsonl", "{}\n")
	write(t, f.dir, "src/events.go", "package src\n")
	root, err := workspace.Open(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(t)
	m := New(Config{Root: root, Emit: rec.emit, Hide: []string{filepath.Join(f.dir, "mstate"), "/elsewhere"}})
	t.Cleanup(func() {
		m.Close()
		root.Close()
	})

	res, err := m.FileSearch(t.Context(), protocol.UtilityFileSearch{SearchID: "s", Query: "events"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 1 || res.Results[0].Path != "src/events.go" {
		t.Errorf("search for events: %+v, want only src/events.go", res.Results)
	}

	zero := 0
	if err := m.WatchStart(t.Context(), "A", protocol.UtilityFileWatchStart{WatchID: "w", DebounceMS: &zero}); err != nil {
		t.Fatal(err)
	}
	next[protocol.UtilityFileWatchStarted](t, rec, nil)
	// The hidden writes come first: inotify reports in order, so once the
	// neighbour's event is in, any event of the hidden ones would be too.
	write(t, f.dir, "mstate/sessions/s1/events.jsonl", "{}\n{}\n")
	write(t, f.dir, "mstate/sessions/s2/session.json", "{}")
	write(t, f.dir, "src/later.go", "package src\n")
	_, skipped := next(t, rec, func(e protocol.UtilityFileWatchEvent) bool { return e.RelativePath == "src/later.go" })
	for _, msg := range skipped {
		if e, ok := msg.(protocol.UtilityFileWatchEvent); ok && strings.HasPrefix(e.RelativePath, "mstate") {
			t.Errorf("watch reported the hidden %s %s", e.ChangeType, e.RelativePath)
		}
	}
}
