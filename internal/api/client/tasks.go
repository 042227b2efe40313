package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"time"

	"github.com/maestro-run/maestro/internal/api"
)

// CreateTask creates a task (POST /api/v1/tasks); its first job is queued
// at once.
func (c *Client) CreateTask(ctx context.Context, req api.CreateTaskRequest) (api.CreateTaskResponse, error) {
	return callAs[api.CreateTaskResponse](ctx, c, http.MethodPost, api.TasksPath, req)
}

// CreateTaskWithFiles creates a task with input files in one request
// (multipart/form-data: the task's JSON, then one part per file, named by
// its base name and streamed from disk), so its job cannot start before
// the files are in input/.
func (c *Client) CreateTaskWithFiles(ctx context.Context, req api.CreateTaskRequest, files []string) (api.CreateTaskResponse, error) {
	var out api.CreateTaskResponse
	task, err := json.Marshal(req)
	if err != nil {
		return out, fmt.Errorf("encode the task: %w", err)
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		pw.CloseWithError(writeTaskParts(mw, task, files))
	}()
	err = c.do(ctx, http.MethodPost, api.TasksPath, pr, mw.FormDataContentType(), &out)
	pr.CloseWithError(io.ErrClosedPipe) // stops the writer if the request ended early
	return out, err
}

// writeTaskParts writes the multipart body of CreateTaskWithFiles.
func writeTaskParts(mw *multipart.Writer, task []byte, files []string) error {
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="`+api.TaskPart+`"`)
	h.Set("Content-Type", "application/json")
	w, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := w.Write(task); err != nil {
		return err
	}
	for _, name := range files {
		if err := writeFilePart(mw, name); err != nil {
			return err
		}
	}
	return mw.Close()
}

func writeFilePart(mw *multipart.Writer, name string) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("file %s: %w", name, err)
	}
	defer f.Close()
	w, err := mw.CreateFormFile(api.FilePart, filepath.Base(name))
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("file %s: %w", name, err)
	}
	return nil
}

// Page is where a list that runs newest first starts and how long it is.
type Page struct {
	// Before starts the list below this id (0: at the newest); a list's
	// NextBefore is the Before of its next page.
	Before int64
	// Limit is the most entries (0: the server's default).
	Limit int
}

func (p Page) query() query { return newQuery().num("before", p.Before).num("limit", int64(p.Limit)) }

// ListTasks lists tasks, newest first (GET /api/v1/tasks); owner, when
// not empty, keeps that owner's.
func (c *Client) ListTasks(ctx context.Context, owner string, p Page) (api.TaskList, error) {
	return c.FindTasks(ctx, TaskQuery{Owner: owner}, p)
}

// TaskQuery selects tasks for FindTasks; empty fields do not filter.
type TaskQuery struct {
	Owner string
	// State is job states separated by commas: tasks whose latest job is
	// in one of them.
	State string
	// Search is text the title or body contains (ignoring case), or an id.
	Search string
}

// FindTasks lists the tasks a query selects, newest first (GET
// /api/v1/tasks with owner, state and q).
func (c *Client) FindTasks(ctx context.Context, q TaskQuery, p Page) (api.TaskList, error) {
	return getAs[api.TaskList](ctx, c, api.TasksPath, p.query().str("owner", q.Owner).str("state", q.State).str("q", q.Search))
}

// Task returns a task with its jobs and comments.
func (c *Client) Task(ctx context.Context, id int64) (api.TaskDetail, error) {
	return getAs[api.TaskDetail](ctx, c, idPath(api.TasksPath, id), nil)
}

// Comment adds a comment to a task; a job waiting for an answer resumes
// with it.
func (c *Client) Comment(ctx context.Context, taskID int64, body string) (api.CommentResponse, error) {
	return callAs[api.CommentResponse](ctx, c, http.MethodPost, idPath(api.TasksPath, taskID, "/comments"), api.CommentRequest{Body: body})
}

// Deliverables lists the files of a task's output/.
func (c *Client) Deliverables(ctx context.Context, taskID int64) (api.DeliverableList, error) {
	return getAs[api.DeliverableList](ctx, c, idPath(api.TasksPath, taskID, "/deliverables"), nil)
}

// Upload writes body as the file p under the task's input/ (PUT
// /api/v1/tasks/{id}/uploads/{path}); size is its length, or -1 when
// unknown.
func (c *Client) Upload(ctx context.Context, taskID int64, p string, body io.Reader, size int64) (api.FileRef, error) {
	var out api.FileRef
	path := idPath(api.TasksPath, taskID, "/uploads/", escapePath(p))
	req, err := c.newRequest(ctx, http.MethodPut, path, body, "application/octet-stream")
	if err != nil {
		return out, err
	}
	req.ContentLength = size
	resp, err := c.send(c.stream, req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBody)).Decode(&out); err != nil {
		return out, fmt.Errorf("PUT %s: unexpected answer: %w", path, err)
	}
	return out, nil
}

// DownloadDeliverable copies the deliverable p of a task (a file of its
// output/) into w and returns its size. There is no overall timeout (files
// may be large), but a stall is: the download is abandoned when nothing
// arrives for IdleTimeout. A body shorter than the announced length is an
// error.
func (c *Client) DownloadDeliverable(ctx context.Context, taskID int64, p string, w io.Writer) (int64, error) {
	idle := c.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := c.newRequest(ctx, http.MethodGet, idPath(api.TasksPath, taskID, "/deliverables/", escapePath(p)), nil, "")
	if err != nil {
		return 0, err
	}
	timer := time.AfterFunc(idle, cancel)
	defer timer.Stop()
	n, err := func() (int64, error) {
		resp, err := c.send(c.stream, req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		n, err := io.Copy(w, &idleReader{r: resp.Body, t: timer, d: idle})
		if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
			err = fmt.Errorf("received %d of %d bytes", n, resp.ContentLength)
		}
		return n, err
	}()
	if err != nil && ctx.Err() != nil && parent.Err() == nil {
		return n, fmt.Errorf("nothing received for %s: %w", idle, err)
	}
	return n, err
}

// idleReader pushes the idle timer back on every read that gets data.
type idleReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.t.Reset(r.d)
	}
	return n, err
}
