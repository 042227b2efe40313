package server_test

import (
	"github.com/maestro-run/maestro/internal/api"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/server"
)

// TestArtifactStoreFiles: with Config.Artifacts, PUT …/uploads/{path}
// stores the body as the task's work/input/{path} in the store, and the
// deliverables are listed and served from the task's work/output/ there
// (the data directory is not read).
func TestArtifactStoreFiles(t *testing.T) {
	t.Parallel()
	a, err := blobstore.OpenLocal(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	e := newEnv(t, sqliteStore(t), func(c *server.Config) { c.Artifacts = a })
	ct := e.createTask("t", nil)
	task := "/api/v1/tasks/" + strconv.FormatInt(ct.Task.ID, 10)
	prefix := blobstore.TaskPrefix(ct.Task.ID)
	ctx := t.Context()

	e.must(http.StatusCreated, "PUT", task+"/uploads/docs/brief.txt", "the brief", nil)
	if data, err := blobstore.ReadAll(ctx, a, prefix+"/work/input/docs/brief.txt", 100); err != nil || string(data) != "the brief" {
		t.Fatalf("uploaded object = %q, %v", data, err)
	}
	e.wantError(http.StatusRequestEntityTooLarge, "PUT", task+"/uploads/big.bin", strings.Repeat("x", server.DefaultMaxUpload+1))
	if _, err := a.Stat(ctx, prefix+"/work/input/big.bin"); !blobstore.IsNotExist(err) {
		t.Fatalf("an oversized upload was stored (%v)", err)
	}

	var files api.DeliverableList
	e.must(http.StatusOK, "GET", task+"/deliverables", nil, &files)
	if len(files.Files) != 0 {
		t.Fatalf("deliverables before any output: %+v", files)
	}
	for key, data := range map[string]string{"report.md": "# report\n", "sub/data.json": `{"a":1}`} {
		if err := blobstore.PutBytes(ctx, a, prefix+"/work/output/"+key, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	e.must(http.StatusOK, "GET", task+"/deliverables", nil, &files)
	var listed []string
	for _, f := range files.Files {
		listed = append(listed, f.Path+":"+strconv.FormatInt(f.Size, 10))
	}
	if got := strings.Join(listed, ","); got != "report.md:9,sub/data.json:7" {
		t.Fatalf("deliverables %s", got)
	}
	code, body := e.do("GET", task+"/deliverables/sub/data.json", nil)
	if code != http.StatusOK || string(body) != `{"a":1}` {
		t.Fatalf("download: %d %s", code, body)
	}
	code, body = e.do("GET", task+"/deliverables/report.md", nil, "Range", "bytes=2-")
	if code != http.StatusPartialContent || string(body) != "report\n" {
		t.Fatalf("ranged download: %d %q", code, body)
	}
	e.wantError(http.StatusNotFound, "GET", task+"/deliverables/missing.txt", nil)
	e.wantError(http.StatusBadRequest, "GET", task+"/deliverables/..%2Fsecret", nil)
}
