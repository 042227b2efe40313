package session

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
)

func TestAppendAndResume(t *testing.T) {
	t.Parallel()
	store := NewStore(t.TempDir())
	s, err := store.Create(Meta{Workspace: "/w", Provider: "replay", Model: "maestro-replay-v1", ExecutorType: "replay", Replay: "builtin:demo"})
	if err != nil {
		t.Fatal(err)
	}
	s.Message(llm.UserText("hello"))
	s.Event(protocol.ResponseStart{ResponseID: "r1"})
	s.Event(protocol.ResponseChunk{ResponseID: "r1", Content: "hi"})
	s.Message(llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("hi")}})
	if err := s.SetTitle("hello world"); err != nil {
		t.Fatal(err)
	}
	id := s.ID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopen by prefix: history and cursor come back, appends continue.
	s2, err := store.Open(id[:13])
	if err != nil {
		t.Fatal(err)
	}
	if got := s2.Cursor(); got != 4 {
		t.Errorf("cursor = %d, want 4", got)
	}
	if diff := cmp.Diff([]string{"hello", "hi"}, texts(s2.History())); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if s2.Meta().Title != "hello world" || s2.Meta().Replay != "builtin:demo" {
		t.Errorf("meta = %+v", s2.Meta())
	}
	s2.Event(protocol.Status{Message: "again"})
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}

	var cursors []int64
	var kinds []string
	for rec, err := range store.Records(id, 0) {
		if err != nil {
			t.Fatal(err)
		}
		cursors = append(cursors, rec.Cursor)
		kinds = append(kinds, rec.Kind+":"+rec.EventType())
	}
	if diff := cmp.Diff([]int64{1, 2, 3, 4, 5}, cursors); diff != "" {
		t.Errorf("cursors (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"message:", "event:response_start", "event:response_chunk", "message:", "event:status"}, kinds); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	// Reading from a cursor returns only what follows it.
	n := 0
	for rec, err := range store.Records(id, 3) {
		if err != nil || rec.Cursor <= 3 {
			t.Fatalf("rec=%+v err=%v", rec, err)
		}
		n++
	}
	if n != 2 {
		t.Errorf("records after 3 = %d, want 2", n)
	}
}

func TestBusyAndNotFound(t *testing.T) {
	t.Parallel()
	store := NewStore(t.TempDir())
	s, err := store.Create(Meta{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := store.Open(s.ID()); !errors.Is(err, ErrBusy) {
		t.Errorf("second open: err = %v, want ErrBusy", err)
	}
	for _, id := range []string{"0198c3a2-0000-7000-8000-000000000000", "deadbeefcafe", "abc"} {
		if _, err := store.Open(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("open %q: err = %v, want ErrNotFound", id, err)
		}
	}
}

func TestTornLastLineRepaired(t *testing.T) {
	t.Parallel()
	store := NewStore(t.TempDir())
	s, err := store.Create(Meta{})
	if err != nil {
		t.Fatal(err)
	}
	s.Message(llm.UserText("kept"))
	path := s.LogPath()
	id := s.ID()
	s.Close()
	// A crash mid-write leaves half a record.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"cursor":2,"kind":"mess`)
	f.Close()

	s2, err := store.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	s2.Event(protocol.Status{Message: "after crash"})
	s2.Close()
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], `"cursor":2`) || !strings.Contains(lines[1], "after crash") {
		t.Errorf("log after repair:\n%s", data)
	}
}

func TestCorruptRecordIsAnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := NewStore(dir)
	s, _ := store.Create(Meta{})
	id, path := s.ID(), s.LogPath()
	s.Close()
	os.WriteFile(path, []byte("not json\n"), 0o600)
	if _, err := store.Open(id); err == nil || !strings.Contains(err.Error(), "corrupt record") {
		t.Errorf("err = %v", err)
	}
	// The corrupt file is left untouched for inspection.
	if data, _ := os.ReadFile(filepath.Join(dir, id, "events.jsonl")); string(data) != "not json\n" {
		t.Errorf("log was modified: %q", data)
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	store := NewStore(t.TempDir())
	if metas, err := store.List(); err != nil || len(metas) != 0 {
		t.Fatalf("empty store: %v %v", metas, err)
	}
	var ids []string
	for range 3 {
		s, err := store.Create(Meta{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID())
		s.Close()
	}
	metas, err := store.List()
	if err != nil || len(metas) != 3 {
		t.Fatalf("list: %v %v", metas, err)
	}
}

func texts(msgs []llm.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.TextContent())
	}
	return out
}

func BenchmarkAppendEvent(b *testing.B) {
	s, err := NewStore(b.TempDir()).Create(Meta{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ev := protocol.ResponseChunk{ResponseID: "resp_1_abcdef", Content: "some streamed text"}
	for b.Loop() {
		s.Event(ev)
	}
}

// The agent CLI's session id is on disk as soon as it is set (a process
// killed before Close keeps it) and comes back on reopen.
func TestSetAgentSession(t *testing.T) {
	t.Parallel()
	store := NewStore(t.TempDir())
	s, err := store.Create(Meta{Agent: "claude-code", Provider: "claude-code", Model: "default"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"cli-1", "cli-1", "cli-2"} {
		if err := s.SetAgentSession(id); err != nil {
			t.Fatal(err)
		}
		metas, err := store.List()
		if err != nil {
			t.Fatal(err)
		}
		if len(metas) != 1 || metas[0].AgentSession != id || metas[0].Agent != "claude-code" {
			t.Errorf("after SetAgentSession(%q), before Close: stored meta = %+v", id, metas)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := store.Open(s.ID())
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if m := s2.Meta(); m.Agent != "claude-code" || m.AgentSession != "cli-2" {
		t.Errorf("reopened meta = %+v, want agent claude-code, agent_session cli-2", m)
	}
}
