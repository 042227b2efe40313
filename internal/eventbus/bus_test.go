package eventbus

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// replaceFrom writes the state into the file it is given, which is gone
// afterwards, and writes it anew when that file is missing.
func TestReplaceFrom(t *testing.T) {
	dir := t.TempDir()
	mark, state := filepath.Join(dir, closeFile), filepath.Join(dir, cursorFile)
	if err := writeJSON(state, sessionState{Cursor: 1, Offset: 10}); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(mark, closeMark{Cursor: 7, Reason: "completed"}); err != nil {
		t.Fatal(err)
	}
	long := sessionState{Cursor: 7, Offset: 700, Started: true, Closed: 7, Calls: map[string]string{"c": "Read"}}
	if err := replaceFrom(mark, state, long); err != nil {
		t.Fatal(err)
	}
	var got sessionState
	if ok, err := readJSON(state, &got); !ok || err != nil || got.Closed != 7 || got.Offset != 700 || got.Calls["c"] != "Read" {
		t.Fatalf("state after replaceFrom: %+v %v %v", got, ok, err)
	}
	for _, gone := range []string{mark, state + ".tmp"} {
		if _, err := os.Stat(gone); err == nil {
			t.Errorf("%s left", filepath.Base(gone))
		}
	}
	// A state shorter than the file it is written into.
	if err := writeJSON(mark, closeMark{Cursor: 9, Reason: strings.Repeat("r", 500)}); err != nil {
		t.Fatal(err)
	}
	if err := replaceFrom(mark, state, sessionState{Cursor: 9}); err != nil {
		t.Fatal(err)
	}
	got = sessionState{}
	if ok, err := readJSON(state, &got); !ok || err != nil || got.Cursor != 9 || got.Offset != 0 {
		t.Fatalf("state after replaceFrom a longer file: %+v %v %v", got, ok, err)
	}
	// From a file that is not there: written anew.
	if err := replaceFrom(mark, state, sessionState{Cursor: 8}); err != nil {
		t.Fatal(err)
	}
	got = sessionState{}
	if ok, err := readJSON(state, &got); !ok || err != nil || got.Cursor != 8 || got.Offset != 0 {
		t.Fatalf("state after replaceFrom without its file: %+v %v %v", got, ok, err)
	}
}
