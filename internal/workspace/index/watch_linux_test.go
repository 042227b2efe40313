package index

import (
	"path/filepath"
	"testing"
	"time"
)

// TestChangedSince: a directory changed now is reported changed since a
// moment ago, not since a time to come.
func TestChangedSince(t *testing.T) {
	w, err := newWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	dir := t.TempDir()
	write(t, dir, "f", "")
	if !w.changedSince(dir, time.Now().Add(-changeMargin)) {
		t.Error("a directory changed just now is not reported changed")
	}
	if w.changedSince(dir, time.Now().Add(time.Hour)) {
		t.Error("a directory is reported changed in the future")
	}
	if !w.changedSince(filepath.Join(dir, "missing"), time.Now()) {
		t.Error("a directory that cannot be read must count as changed")
	}
}

// TestWarmWaitsForWatches: after Warm (serve sessions' eager build) the
// watches are in place, so the session's first search waits for nothing.
func TestWarmWaitsForWatches(t *testing.T) {
	dir := seedTree(t)
	x := New(openRoot(t, dir))
	defer x.Close()
	if err := x.Warm(t.Context()); err != nil {
		t.Fatal(err)
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.setup != nil || x.w == nil || len(x.byWD) == 0 {
		t.Fatalf("after Warm: setup pending %v, watching %v, %d watches", x.setup != nil, x.w != nil, len(x.byWD))
	}
}
