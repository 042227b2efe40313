package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/server"
)

// The attacks of this file are those of issue 14 item 2: inside its
// sandbox the agent can replace the directories of its workspace that the
// API later reads or writes from outside the sandbox. Nothing outside the
// workspace may be read, listed or written through them.

// agentDir is the directory a queued task's agent writes: its workspace.
func agentDir(dataDir string, taskID int64) string {
	return queue.WorkDir(dataDir, taskID)
}

// plantSecret writes a secret file in a directory outside every task and
// returns the directory.
func plantSecret(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPlantedOutputLink: output/ replaced by a link to / or to a directory
// holding a secret; the deliverables list and downloads read nothing
// through it.
func TestPlantedOutputLink(t *testing.T) {
	t.Parallel()
	secretDir := plantSecret(t)
	tests := []struct {
		name     string
		target   string
		download []string // paths that exist through the link
	}{
		{"output → /", "/", []string{"etc/passwd", "etc/hostname"}},
		{"output → a directory holding a secret", secretDir, []string{"secret.txt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, sqliteStore(t), nil)
			ct := e.createTask("planted output", nil)
			task := "/api/v1/tasks/" + strconv.FormatInt(ct.Task.ID, 10)
			work := agentDir(e.dataDir, ct.Task.ID)
			if err := os.MkdirAll(work, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(tt.target, filepath.Join(work, "output")); err != nil {
				t.Fatal(err)
			}
			code, body := e.do("GET", task+"/deliverables", nil)
			if code != http.StatusForbidden {
				t.Errorf("list: status %d, want 403; body %.300s", code, body)
			}
			if strings.Contains(string(body), "secret") || strings.Contains(string(body), "passwd") {
				t.Errorf("list shows what lies behind the link: %.300s", body)
			}
			for _, p := range tt.download {
				code, body := e.do("GET", task+"/deliverables/"+p, nil)
				if code == http.StatusOK || strings.Contains(string(body), "secret\n") || strings.Contains(string(body), "root:") {
					t.Errorf("download %s through the link: status %d, body %.200s", p, code, body)
				}
			}
		})
	}
}

// TestPlantedLinksInsideOutput: links inside output/ (to a file, to a
// directory, to a file of output/ itself) and a FIFO are neither listed
// nor served (the FIFO without blocking); regular files beside them are.
func TestPlantedLinksInsideOutput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	ct := e.createTask("links inside output", nil)
	task := "/api/v1/tasks/" + strconv.FormatInt(ct.Task.ID, 10)
	out := filepath.Join(agentDir(e.dataDir, ct.Task.ID), "output")
	if err := os.MkdirAll(filepath.Join(out, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(out, "report.md"), []byte("# report\n"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(out, "passwd"))
	os.Symlink("/etc", filepath.Join(out, "etc"))
	os.Symlink("../report.md", filepath.Join(out, "sub", "alias.md"))
	os.Symlink("..", filepath.Join(out, "sub", "up"))
	// A FIFO would hang a reader that opens it blocking.
	must(t, syscall.Mkfifo(filepath.Join(out, "pipe"), 0o644))

	var files struct {
		Files []struct{ Path string } `json:"files"`
	}
	e.must(http.StatusOK, "GET", task+"/deliverables", nil, &files)
	if len(files.Files) != 1 || files.Files[0].Path != "report.md" {
		t.Errorf("deliverables = %+v, want report.md alone", files.Files)
	}
	for _, p := range []string{"passwd", "etc/passwd", "sub/alias.md", "sub/up/report.md", "pipe"} {
		code, body := e.do("GET", task+"/deliverables/"+p, nil)
		if code != http.StatusBadRequest || strings.Contains(string(body), "root:") || strings.Contains(string(body), "# report") {
			t.Errorf("download %s: status %d, want 400; body %.200s", p, code, body)
		}
	}
}

// TestPlantedInputLink: input/ (or a directory in it) replaced by a link
// to a directory outside the workspace or to another task's input/; an
// upload writes nothing there.
func TestPlantedInputLink(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// plant makes the link in work (the task's workspace) and returns
		// the directory it leads to.
		plant func(t *testing.T, e *env, work string) string
		path  string
	}{
		{"input → outside", func(t *testing.T, e *env, work string) string {
			dir := t.TempDir()
			must(t, os.Symlink(dir, filepath.Join(work, "input")))
			return dir
		}, "a.txt"},
		{"input → another task's input", func(t *testing.T, e *env, work string) string {
			other := e.createTask("victim", nil)
			dir := filepath.Join(agentDir(e.dataDir, other.Task.ID), "input")
			must(t, os.MkdirAll(dir, 0o755))
			rel, err := filepath.Rel(work, dir)
			must(t, err)
			must(t, os.Symlink(rel, filepath.Join(work, "input")))
			return dir
		}, "a.txt"},
		{"input/docs → outside", func(t *testing.T, e *env, work string) string {
			dir := t.TempDir()
			must(t, os.MkdirAll(filepath.Join(work, "input"), 0o755))
			must(t, os.Symlink(dir, filepath.Join(work, "input", "docs")))
			return dir
		}, "docs/a.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, sqliteStore(t), nil)
			ct := e.createTask("planted input", nil)
			work := agentDir(e.dataDir, ct.Task.ID)
			must(t, os.MkdirAll(work, 0o755))
			target := tt.plant(t, e, work)
			code, body := e.do("PUT", "/api/v1/tasks/"+strconv.FormatInt(ct.Task.ID, 10)+"/uploads/"+tt.path, "planted\n")
			if code != http.StatusBadRequest {
				t.Errorf("upload: status %d, want 400; body %s", code, body)
			}
			ents, err := os.ReadDir(target)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != 0 {
				t.Errorf("the upload wrote %s into the link's target", ents[0].Name())
			}
		})
	}
}

// TestUploadNames: names that are not valid UTF-8, hold control
// characters or are huge are refused with a 400 naming the field, and a
// huge name is not echoed whole.
func TestUploadNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	ct := e.createTask("names", nil)
	up := "/api/v1/tasks/" + strconv.FormatInt(ct.Task.ID, 10) + "/uploads/"
	huge := strings.Repeat("a", 200_000)
	for _, c := range []struct{ name, path, msg string }{
		{"invalid UTF-8", "bad%FFname.txt", "valid UTF-8"},
		{"control character", "a%01b.txt", "control character"},
		{"newline", "a%0Ab.txt", "control character"},
		{"DEL", "a%7Fb.txt", "control character"},
		{"huge", huge, "bytes"},
	} {
		code, body := e.do("PUT", up+c.path, "x")
		wantPathRefused(t, c.name, code, body, c.msg)
	}
	ents, _ := os.ReadDir(filepath.Join(agentDir(e.dataDir, ct.Task.ID), "input"))
	if len(ents) != 0 {
		t.Errorf("refused uploads stored %s", ents[0].Name())
	}

	// The multipart create checks its file names the same way.
	task := mpart{name: "task", body: `{"title":"t"}`}
	for _, c := range []struct{ name, filename, msg string }{
		{"invalid UTF-8", "bad\xffname.txt", "valid UTF-8"},
		// Header lines cannot carry control characters; RFC 2231's
		// filename* can.
		{"control character", "x\"; filename*=utf-8''a%01b.txt; x=\"y", "control character"},
		{"huge", strings.Repeat("b", 100_000), "bytes"},
	} {
		e := newEnv(t, sqliteStore(t), nil)
		body, ctype := multipartBody(t, task, mpart{name: "file", filename: c.filename, body: "x"})
		code, data := e.do("POST", "/api/v1/tasks", body, "Content-Type", ctype)
		wantPathRefused(t, "multipart "+c.name, code, data, c.msg)
		if left := uploadsLeft(t, e.dataDir); len(left) != 0 {
			t.Errorf("multipart %s: staged %v", c.name, left)
		}
	}
}

// wantPathRefused checks an upload's refusal for its name: a 400 on field
// "path" whose message contains msg, and an answer that does not echo a
// huge name whole.
func wantPathRefused(t *testing.T, what string, code int, body []byte, msg string) {
	t.Helper()
	var ae apiError
	json.Unmarshal(body, &ae)
	if code != http.StatusBadRequest || ae.Field != "path" || !strings.Contains(ae.Error, msg) {
		t.Errorf("%s: status %d, error %+v; want 400 on field path saying %q", what, code, ae, msg)
	}
	if len(body) > 2000 {
		t.Errorf("%s: the answer is %d bytes: the name is echoed whole", what, len(body))
	}
}

// TestDeliverablesListCapped: a listing stops at the configured number of
// entries and says it was cut short.
func TestDeliverablesListCapped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), func(c *server.Config) { c.MaxListEntries = 50 })
	ct := e.createTask("many files", nil)
	out := filepath.Join(agentDir(e.dataDir, ct.Task.ID), "output")
	must(t, os.MkdirAll(out, 0o755))
	for i := range 120 {
		must(t, os.WriteFile(filepath.Join(out, "f"+strconv.Itoa(i)), nil, 0o644))
	}
	var list struct {
		Files     []struct{ Path string } `json:"files"`
		Truncated bool                    `json:"truncated"`
	}
	e.must(http.StatusOK, "GET", "/api/v1/tasks/"+strconv.FormatInt(ct.Task.ID, 10)+"/deliverables", nil, &list)
	if !list.Truncated || len(list.Files) == 0 || len(list.Files) > 50 {
		t.Errorf("listing: %d files, truncated %v; want at most 50 and truncated", len(list.Files), list.Truncated)
	}
	// Under the cap the listing is whole.
	e2 := newEnv(t, sqliteStore(t), nil)
	ct2 := e2.createTask("few files", nil)
	out2 := filepath.Join(agentDir(e2.dataDir, ct2.Task.ID), "output")
	must(t, os.MkdirAll(out2, 0o755))
	must(t, os.WriteFile(filepath.Join(out2, "one"), nil, 0o644))
	list.Truncated, list.Files = false, nil
	code, body := e2.do("GET", "/api/v1/tasks/"+strconv.FormatInt(ct2.Task.ID, 10)+"/deliverables", nil)
	if code != 200 || strings.Contains(string(body), "truncated") {
		t.Errorf("small listing: %d %s", code, body)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestDeliverablesOfOldLayout: a task directory of the layout before
// work/ and state/ (output/ directly in it) is migrated when the API
// opens it, and its deliverables are served.
func TestDeliverablesOfOldLayout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), func(c *server.Config) { c.TaskDir = queue.TaskDir })
	ct := e.createTask("old layout", nil)
	dir := queue.TaskDir(e.dataDir, ct.Task.ID)
	must(t, os.MkdirAll(filepath.Join(dir, "output"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "logs"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "output", "report.md"), []byte("# report\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "logs", "run-state.json"), []byte("{}"), 0o600))
	task := "/api/v1/tasks/" + strconv.FormatInt(ct.Task.ID, 10)
	var files struct {
		Files []struct{ Path string } `json:"files"`
	}
	e.must(http.StatusOK, "GET", task+"/deliverables", nil, &files)
	if len(files.Files) != 1 || files.Files[0].Path != "report.md" {
		t.Errorf("deliverables = %+v", files.Files)
	}
	if code, body := e.do("GET", task+"/deliverables/report.md", nil); code != 200 || string(body) != "# report\n" {
		t.Errorf("download: %d %s", code, body)
	}
	if _, err := os.Stat(filepath.Join(queue.StateDir(e.dataDir, ct.Task.ID), "logs", "run-state.json")); err != nil {
		t.Errorf("the run state was not moved to state/: %v", err)
	}
}
