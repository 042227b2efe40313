package session

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/workspace"
)

func openIn(t *testing.T, dir string) *Store {
	t.Helper()
	d, err := workspace.OpenTrusted(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return NewStoreIn(d, dir)
}

// TestStoreInLinkPlantedLater: a session of NewStoreIn whose directory is
// replaced by a link to elsewhere keeps writing its metadata into its own
// directory (moved, not followed): nothing lands where the link points.
func TestStoreInLinkPlantedLater(t *testing.T) {
	t.Parallel()
	dir, out := t.TempDir(), t.TempDir()
	s, err := openIn(t, dir).Create(Meta{Workspace: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	s.Message(llm.UserText("hello"))
	moved := filepath.Join(dir, "moved")
	if err := os.Rename(s.Dir(), moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out, s.Dir()); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTitle("title"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.ExportTo(&buf); err != nil || !strings.Contains(buf.String(), "hello") {
		t.Errorf("export: %v %q", err, buf.String())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("written through the planted link: %v", entries)
	}
	if data, err := os.ReadFile(filepath.Join(moved, "session.json")); err != nil || !strings.Contains(string(data), `"title": "title"`) {
		t.Errorf("metadata in the session's own directory: %v %s", err, data)
	}
}

// TestImport: a log exported from one store seeds a session of another
// with the same records (cursors kept) and the conversation as history;
// broken or oversized logs are refused.
func TestImport(t *testing.T) {
	t.Parallel()
	src, err := NewStore(t.TempDir()).Create(Meta{Workspace: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	src.Message(llm.UserText("first question"))
	src.Event(protocol.ResponseStart{ResponseID: "r1"})
	src.Message(llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text("First answer.")}})
	var log bytes.Buffer
	if err := src.ExportTo(&log); err != nil {
		t.Fatal(err)
	}
	want := src.History()
	src.Close()

	dst := openIn(t, t.TempDir())
	s, err := dst.Import(Meta{Workspace: "/w2"}, bytes.NewReader(log.Bytes()), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, s.History()); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if s.Cursor() != 3 {
		t.Errorf("cursor %d, want 3", s.Cursor())
	}
	s.Event(protocol.ResponseEnd{ResponseID: "r1"})
	if s.Cursor() != 4 {
		t.Errorf("cursor after an append %d, want 4", s.Cursor())
	}
	s.Close()

	tests := []struct {
		name, log string
		max       int64
		want      string
	}{
		{"too large", log.String(), 10, "larger than 10 bytes"},
		{"not a record", "not json\n", 1 << 20, "corrupt session record"},
		{"cursor going back", `{"cursor":2,"kind":"event","event":{"type":"status","message":"a"}}` + "\n" + `{"cursor":1,"kind":"event","event":{"type":"status","message":"b"}}` + "\n", 1 << 20, "cursors must increase"},
	}
	for _, tt := range tests {
		if _, err := dst.Import(Meta{}, strings.NewReader(tt.log), tt.max); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", tt.name, err, tt.want)
		}
	}
}
