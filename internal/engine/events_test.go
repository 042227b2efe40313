package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRecordRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	events := []Event{
		RunStarted{Piece: "code", Task: "fix it", InitialMovement: "plan", MaxMovements: 20, Subtask: 2},
		Classified{Piece: "code", Reason: "a code change", Offered: []string{"code", "general"}},
		MovementStarted{Movement: "plan", Number: 1, MaxMovements: 20, Entry: EntryStart, Tools: []string{"Read", "complete"}},
		ToolsOmitted{Movement: "plan", Tools: []OmittedTool{{"WebSearch", "not available in this build"}}},
		Reminder{Movement: "plan", Count: 1, Max: 2},
		Pressure{Movement: "plan", Source: PressureContext, Level: LevelWarn, Percent: 71, Tokens: 7100, Window: 10000},
		Transition{From: "plan", To: "implement", Summary: "the plan", Forced: true, Reason: reasonContext},
		Lessons{Movement: "plan", Added: []string{"use go test"}, Total: 1},
		SubtaskSpawned{ID: 1, Name: "a", Piece: "general", Task: "t", Movement: "plan"},
		SubtaskFinished{ID: 1, Name: "a", Status: StatusSucceeded, Result: "ok", File: "subtasks/01-a.md"},
		Waiting{Movement: "plan", For: "user", Question: "which?"},
		Resumed{Movement: "plan", Entry: EntryAnswer, Answer: "this"},
		Complete{Movement: "verify", Status: StatusSucceeded, Result: "done"},
		FirewallBlock{Movement: "dig", Tool: "WebFetch", URL: "http://10.0.0.1/", Host: "10.0.0.1", Address: "10.0.0.1", Class: "private", Stage: "url"},
	}
	seen := map[EventKind]bool{}
	for i, ev := range events {
		rec := Record{RunID: "run_1", Seq: i + 1, Time: at, Event: ev}
		data, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(data), `{"kind":"`+string(ev.Kind())+`","run_id":"run_1","seq":`) {
			t.Errorf("encoding of %s: %s", ev.Kind(), data)
		}
		var back Record
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if diff := cmp.Diff(rec, back); diff != "" {
			t.Errorf("%s round trip (-want +got):\n%s", ev.Kind(), diff)
		}
		if ev.Describe() == "" {
			t.Errorf("%s has no description", ev.Kind())
		}
		seen[ev.Kind()] = true
	}
	if len(seen) != 14 {
		t.Errorf("%d kinds covered; add the new kinds to this test", len(seen))
	}
	for _, bad := range []string{
		`{"kind":"party","run_id":"r","seq":1,"time":"2026-11-22T10:00:00Z","data":{}}`,
		`{"kind":"reminder","run_id":"r","seq":1,"time":"2026-11-22T10:00:00Z","data":{"movement":"a","extra":1}}`,
		`{"kind":"reminder","run_id":"r","seq":1,"time":"2026-11-22T10:00:00Z","data":{},"more":true}`,
	} {
		var r Record
		if err := json.Unmarshal([]byte(bad), &r); err == nil {
			t.Errorf("decoded %s", bad)
		}
	}
}

func TestLoopCount(t *testing.T) {
	t.Parallel()
	cases := []struct {
		history []string
		next    string
		count   int
		with    string
	}{
		{nil, "a", 0, ""},
		{[]string{"a"}, "a", 1, ""},
		{[]string{"b", "a", "a"}, "a", 2, ""},
		{[]string{"a", "b"}, "a", 1, "b"},
		{[]string{"plan", "implement", "verify", "implement", "verify"}, "implement", 2, "verify"},
		{[]string{"plan", "implement", "verify", "implement"}, "verify", 1, "implement"},
		{[]string{"a", "b", "", "a", "b"}, "a", 1, "b"},
		{[]string{"a", "b", ""}, "a", 0, ""},
		{[]string{"a", "b", "c"}, "a", 0, ""},
		{[]string{"a", "a", "b"}, "a", 1, "b"},
	}
	for _, tc := range cases {
		count, with := loopCount(tc.history, tc.next)
		if count != tc.count || with != tc.with {
			t.Errorf("loopCount(%v, %s) = %d, %q; want %d, %q", tc.history, tc.next, count, with, tc.count, tc.with)
		}
	}
}

func TestStateFileIsReplacedAtomically(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := &State{Version: StateVersion, RunID: "r", Piece: "p", Status: StatusRunning, History: []string{}, Lessons: []string{}}
	for i := range 3 {
		st.Movements = i
		if err := st.save(dir, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "run-state.json" {
		t.Errorf("logs/ holds %v, want only run-state.json (no temporary files left)", entries)
	}
	back, err := LoadState(dir)
	if err != nil || back.Movements != 2 {
		t.Fatalf("LoadState = %+v, %v", back, err)
	}
	// A state written by another version, or damaged, is refused clearly.
	os.WriteFile(filepath.Join(dir, StateFile), []byte(`{"version":99}`), 0o600)
	if _, err := LoadState(dir); err == nil || !strings.Contains(err.Error(), "version 99") {
		t.Errorf("future version: %v", err)
	}
	os.WriteFile(filepath.Join(dir, StateFile), []byte(`{"version":1,"surprise":true}`), 0o600)
	if _, err := LoadState(dir); err == nil || !strings.Contains(err.Error(), "surprise") {
		t.Errorf("unknown field: %v", err)
	}
	if _, err := LoadState(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no run state") {
		t.Errorf("empty directory: %v", err)
	}
	// One process at a time.
	unlock, err := lockRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockRun(dir); err == nil {
		t.Error("a second lock succeeded")
	}
	unlock()
	unlock2, err := lockRun(dir)
	if err != nil {
		t.Errorf("relock after release: %v", err)
	} else {
		unlock2()
	}
}

// FuzzRecordUnmarshal: decoding never panics, and what decodes re-encodes
// to a record that decodes to the same value.
func FuzzRecordUnmarshal(f *testing.F) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, ev := range []Event{
		Transition{From: "a", To: "b", Summary: "s"},
		Pressure{Movement: "a", Source: PressureCycle, Level: LevelAbort, Count: 3, Limit: 2, With: "b"},
		MovementStarted{Movement: "a", Number: 1, Entry: EntryStart, Tools: []string{"Read"}},
	} {
		data, err := json.Marshal(Record{RunID: "r", Seq: 1, Time: at, Event: ev})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"kind":"complete","data":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Record
		if json.Unmarshal(data, &r) != nil {
			return
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("re-encode %q: %v", data, err)
		}
		var back Record
		if err := json.Unmarshal(again, &back); err != nil {
			t.Fatalf("decode of re-encoded %s: %v", again, err)
		}
		if diff := cmp.Diff(r, back); diff != "" {
			t.Errorf("round trip (-first +second):\n%s", diff)
		}
	})
}

// TestCompleteDescribe: a run Maestro ended says why; one that succeeded
// by its movement's default_next says so, where "run succeeded in work:
// the agent's final message has no valid … tag" read like a failure.
func TestCompleteDescribe(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ev   Complete
		want string
	}{
		{Complete{Movement: "verify", Status: StatusSucceeded, Result: "done"}, "run succeeded in verify"},
		{Complete{Movement: "work", Status: StatusSucceeded, Reason: reasonNoTag},
			"run succeeded in work by its default_next, since the agent's final message has no valid [NEXT:…] or [STATUS:…] tag and matches no rule condition"},
		{Complete{Movement: "review", Status: StatusAborted, Reason: reasonNoTag}, "run aborted in review: " + reasonNoTag},
	} {
		if got := tc.ev.Describe(); got != tc.want {
			t.Errorf("Describe() = %q, want %q", got, tc.want)
		}
	}
}
