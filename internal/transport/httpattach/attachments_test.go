package httpattach_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// TestAttachmentUpload: POST …/attachments?name= stores the body inside
// the session's workspace under .maestro-attachments (a second file of
// the same name beside it) and answers the path a prompt names; a name
// that is not one plain file name, a body over the limit, a viewer, and a
// directory linked out of the workspace are refused, and nothing is
// written outside the workspace.
func TestAttachmentUpload(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	s, id, ctl := newControlledSession(t)
	viewer := s.subscribe(id, map[string]any{"role": "viewer"})
	upload := func(sub, name string, body []byte) (int, []byte) {
		t.Helper()
		resp := s.do(t.Context(), "POST", "/api/headless/sessions/"+id+"/attachments?name="+url.QueryEscape(name), bytes.NewReader(body),
			hdr{"x-maestro-headless-subscriber-id": sub, "Content-Type": "application/octet-stream"})
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, data
	}
	stored := func(status int, data []byte) string {
		t.Helper()
		var a struct {
			Path  string `json:"path"`
			Bytes int64  `json:"bytes"`
		}
		if status != http.StatusCreated || json.Unmarshal(data, &a) != nil {
			t.Fatalf("upload: %d %s, want 201 and the stored path", status, data)
		}
		return a.Path
	}

	p := stored(upload(ctl.SubscriptionID, "notes.txt", []byte("first\n")))
	p2 := stored(upload(ctl.SubscriptionID, "notes.txt", []byte("second\n")))
	if p != ".maestro-attachments/notes.txt" || p2 != ".maestro-attachments/notes-2.txt" {
		t.Errorf("stored paths %q and %q, want .maestro-attachments/notes.txt and notes-2.txt", p, p2)
	}
	for path, want := range map[string]string{p: "first\n", p2: "second\n"} {
		if got, err := os.ReadFile(filepath.Join(s.workspace, path)); err != nil || string(got) != want {
			t.Errorf("%s holds %q (%v), want %q", path, got, err, want)
		}
	}

	refused := []struct {
		what, sub, name string
		body            []byte
		status          int
		code            string
	}{
		{"no name", ctl.SubscriptionID, "", []byte("x"), 400, "bad_request"},
		{"a parent directory", ctl.SubscriptionID, "../escape.txt", []byte("x"), 400, "bad_request"},
		{"an absolute path", ctl.SubscriptionID, outside + "/abs.txt", []byte("x"), 400, "bad_request"},
		{"dot-dot", ctl.SubscriptionID, "..", []byte("x"), 400, "bad_request"},
		{"over the limit", ctl.SubscriptionID, "big.bin", make([]byte, httpattach.MaxAttachmentBytes+1), 413, "bad_request"},
		{"a viewer", viewer.SubscriptionID, "v.txt", []byte("x"), 403, "access_denied"},
	}
	for _, c := range refused {
		status, data := upload(c.sub, c.name, c.body)
		if status != c.status || !bytes.Contains(data, []byte(c.code)) {
			t.Errorf("%s: %d %s, want %d %s", c.what, status, data, c.status, c.code)
		}
	}

	// The role header makes a viewer even of the controller's subscription.
	resp := s.do(t.Context(), "POST", "/api/headless/sessions/"+id+"/attachments?name=h.txt", bytes.NewReader([]byte("x")),
		hdr{"x-maestro-headless-subscriber-id": ctl.SubscriptionID, "x-maestro-headless-role": "viewer", "Content-Type": "application/octet-stream"})
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !bytes.Contains(data, []byte("access_denied")) {
		t.Errorf("upload with the viewer role header: %d %s, want 403 access_denied", resp.StatusCode, data)
	}

	// The attachments directory made a link out of the workspace: refused.
	if err := os.RemoveAll(filepath.Join(s.workspace, httpattach.AttachmentsDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(s.workspace, httpattach.AttachmentsDir)); err != nil {
		t.Fatal(err)
	}
	if status, data := upload(ctl.SubscriptionID, "out.txt", []byte("x")); status != http.StatusForbidden {
		t.Errorf("upload through a link out of the workspace: %d %s, want 403", status, data)
	}
	if entries, err := os.ReadDir(outside); err != nil || len(entries) != 0 {
		t.Errorf("outside the workspace: %v (%v), want nothing written", entries, err)
	}
}
