package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/mcp"
	"github.com/maestro-run/maestro/internal/staging"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/taskdir"
	"github.com/maestro-run/maestro/internal/telemetry"
	"github.com/maestro-run/maestro/internal/workspace"
)

// NoopPiece is the piece name the queue's engine runner completes at once
// (api.NoopPiece).
const NoopPiece = api.NoopPiece

// newTask is a create request that passed checkCreateTask: payload is its
// Payload decoded.
type newTask struct {
	api.CreateTaskRequest
	payload map[string]json.RawMessage
}

// createTask answers POST /tasks. A JSON body creates the task; a
// multipart/form-data body carries the same JSON object in a first part
// named "task", then the task's input files in parts named "file" (the
// filename is the path under input/). The files are written to a staging
// directory before the task exists, and the job's payload names it, so the
// runner moves them into input/ before the run starts: no job can see the
// task without its files.
func (s *Server) createTask(w http.ResponseWriter, r *http.Request) {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "multipart/form-data" {
		s.createTaskMultipart(w, r)
		return
	}
	var req newTask
	if !decodeJSON(w, r, &req.CreateTaskRequest, false) {
		return
	}
	if !s.checkCreateTask(w, r, &req) {
		return
	}
	s.insertTask(w, r, req, nil, "")
}

// checkCreateTask validates a create request and normalises its payload.
func (s *Server) checkCreateTask(w http.ResponseWriter, r *http.Request, req *newTask) bool {
	if strings.TrimSpace(req.Title) == "" {
		writeFieldError(w, http.StatusUnprocessableEntity, "title", "required: a short description of the work")
		return false
	}
	if req.Piece != "" && req.Piece != NoopPiece {
		ok, err := s.pieceExists(r.Context(), req.Piece)
		if err != nil {
			s.storeError(w, r, err)
			return false
		}
		if !ok {
			writeFieldError(w, http.StatusUnprocessableEntity, "piece", fmt.Sprintf("no piece %q; GET /api/v1/pieces lists them (leave it empty to let the classifier choose)", req.Piece))
			return false
		}
	}
	if !s.checkExecutor(w, req.CreateTaskRequest) || !s.checkAgentSession(w, r, req.CreateTaskRequest) {
		return false
	}
	if string(req.Payload) == "null" {
		req.Payload = nil
	}
	if len(req.Payload) > 0 {
		if req.Payload[0] != '{' || json.Unmarshal(req.Payload, &req.payload) != nil {
			writeFieldError(w, http.StatusUnprocessableEntity, "payload", "expected a JSON object")
			return false
		}
		if !checkPayloadNames(w, req.payload) {
			return false
		}
		if _, ok := req.payload[staging.PayloadField]; ok {
			writeFieldError(w, http.StatusUnprocessableEntity, "payload."+staging.PayloadField,
				"reserved: the server sets it for files sent with the task (POST /api/v1/tasks as multipart/form-data)")
			return false
		}
		if raw, ok := req.payload[payloadMCPServers]; ok && !s.checkMCPServers(w, r, raw) {
			return false
		}
		if !checkPayloadFields(w, req.Payload, req.payload["replay"]) {
			return false
		}
	}
	return true
}

// workerPayloadFields are the names of the payload fields a worker reads
// (queue.Payload's; a test keeps them so).
var workerPayloadFields = []string{"replay", "task", "no_piece", staging.PayloadField, "executor", "agent",
	"subtask", "agent_session", payloadMCPServers, "metadata"}

// checkPayloadNames refuses a payload key that names a field a worker
// reads only when its case is ignored ({"No_Piece": true}): the worker's
// decoder folds case and would take it, although docs/api.md names the
// fields in lower case and the rest of a body is matched exactly. Other
// keys are the client's own.
func checkPayloadNames(w http.ResponseWriter, payload map[string]json.RawMessage) bool {
	for _, k := range slices.Sorted(maps.Keys(payload)) {
		for _, name := range workerPayloadFields {
			if k != name && strings.EqualFold(k, name) {
				writeFieldError(w, http.StatusUnprocessableEntity, "payload."+k, fmt.Sprintf("did you mean %q? A worker would read it as %s; field names match exactly, as docs/api.md writes them", name, name))
				return false
			}
		}
	}
	return true
}

// payloadFields are the payload fields a worker reads with a type
// (queue.Payload): a value of another type, or a replay scenario that
// does not parse, would fail the job once a worker claims it, so the
// create refuses them, naming the field.
type payloadFields struct {
	Task    string `json:"task"`
	NoPiece bool   `json:"no_piece"`
}

// checkPayloadFields checks a create's payload (raw, a JSON object) and
// its replay scenario (as the worker reads it: a JSON object, or a JSON
// string holding YAML or JSON text); it answers 422 and returns false when
// a worker could not run them.
func checkPayloadFields(w http.ResponseWriter, raw, scenario json.RawMessage) bool {
	var pf payloadFields
	if err := json.Unmarshal(raw, &pf); err != nil {
		if field, msg, ok := httpedge.JSONTypeError(err); ok && field != "" {
			writeFieldError(w, http.StatusUnprocessableEntity, "payload."+field, msg)
			return false
		}
	}
	if len(scenario) == 0 || string(scenario) == "null" {
		return true
	}
	src := []byte(scenario)
	var text string
	if json.Unmarshal(scenario, &text) == nil {
		src = []byte(text)
	}
	if _, err := replay.Parse(src, "payload.replay"); err != nil {
		// The error names the field already ("invalid scripted scenario
		// payload.replay: 1:1: …", docs/replay.md).
		httpedge.WriteError(w, httpedge.REST, &httpedge.Error{Status: http.StatusUnprocessableEntity, Message: err.Error(), Field: "payload.replay"})
		return false
	}
	return true
}

// payloadMCPServers is the payload field naming a task's MCP servers
// (queue.Payload.MCPServers).
const payloadMCPServers = "mcp_servers"

// checkMCPServers validates a payload's mcp_servers: a list of the slugs
// of servers Config.MCPLookup knows.
func (s *Server) checkMCPServers(w http.ResponseWriter, r *http.Request, raw json.RawMessage) bool {
	field := "payload." + payloadMCPServers
	var slugs []string
	if err := json.Unmarshal(raw, &slugs); err != nil {
		writeFieldError(w, http.StatusUnprocessableEntity, field, "expected a list of MCP server names (the slugs under mcp_servers in the server's config.yaml)")
		return false
	}
	if _, err := mcp.Resolve(r.Context(), s.cfg.MCPLookup, slugs); err != nil {
		if errors.As(err, new(*mcp.MissingError)) {
			writeFieldError(w, http.StatusUnprocessableEntity, field, err.Error())
			return false
		}
		s.storeError(w, r, err)
		return false
	}
	return true
}

// checkExecutor validates the executor fields of a create request
// (docs/api.md, "Executors"); it answers the request and returns false
// when they are wrong.
func (s *Server) checkExecutor(w http.ResponseWriter, req api.CreateTaskRequest) bool {
	agents := s.cfg.Info.Agents
	switch {
	case req.Executor != "" && !slices.Contains(api.Executors(), req.Executor):
		writeFieldError(w, http.StatusUnprocessableEntity, "executor",
			fmt.Sprintf("%q is not an executor: expected one of %s (leave it empty for the server's default)", req.Executor, strings.Join(api.Executors(), ", ")))
	case req.Executor == api.ExecutorAgentCLI && req.Agent == "":
		writeFieldError(w, http.StatusUnprocessableEntity, "agent", "required with executor agent-cli: "+agentChoice(agents))
	case req.Executor == api.ExecutorAgentCLI && len(agents) == 0 && s.cfg.Info.Worker != "":
		// This process runs jobs and has no agent CLI to run one on: the
		// job would fail once claimed.
		writeFieldError(w, http.StatusUnprocessableEntity, "agent", fmt.Sprintf("%q: no agent CLI is installed where this server runs jobs (maestro agents list says why); install one, or choose another executor", req.Agent))
	case req.Executor == api.ExecutorAgentCLI && len(agents) > 0 && !slices.Contains(agents, req.Agent):
		writeFieldError(w, http.StatusUnprocessableEntity, "agent", fmt.Sprintf("%q is not an agent CLI this server runs: %s", req.Agent, agentChoice(agents)))
	case req.Executor != api.ExecutorAgentCLI && req.Agent != "":
		writeFieldError(w, http.StatusUnprocessableEntity, "agent", `only with executor "agent-cli"`)
	case req.Executor != api.ExecutorAgentCLI && req.AgentSession != "":
		writeFieldError(w, http.StatusUnprocessableEntity, "agent_session", `only with executor "agent-cli" (a session of that agent CLI to resume)`)
	default:
		return true
	}
	return false
}

// checkAgentSession refuses an agent_session that the chosen agent CLI's
// stored sessions do not hold (422 naming the field and the id). It
// accepts the id unchecked where the sessions cannot be listed: an agent
// this server has no definition for, or one whose definition reads no
// session storage (docs/api.md, "Executors").
func (s *Server) checkAgentSession(w http.ResponseWriter, r *http.Request, req api.CreateTaskRequest) bool {
	if req.AgentSession == "" {
		return true
	}
	reg, _, err := s.agentRegistry()
	if err != nil {
		return true
	}
	def, ok := reg.Get(req.Agent)
	if !ok || def.SessionStorage == "" || def.SessionStorage == "none" {
		return true
	}
	st, err := agentcli.NewSessionStore(def.SessionStorage, s.getenv)
	if err != nil {
		return true
	}
	_, err = st.Read(r.Context(), req.AgentSession)
	switch {
	case errors.Is(err, agentcli.ErrSessionNotFound):
		writeFieldError(w, http.StatusUnprocessableEntity, "agent_session",
			fmt.Sprintf("%s has no stored session %q (GET %s/%s/sessions?project=DIR lists them)", def.ID, req.AgentSession, api.AgentsPath, def.ID))
		return false
	case err != nil:
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("read session %s of %s: %v", req.AgentSession, def.ID, err))
		return false
	}
	return true
}

// agentChoice says which agent CLIs a task may name.
func agentChoice(agents []string) string {
	if len(agents) == 0 {
		return "the id of an installed agent CLI (maestro agents list)"
	}
	return "expected one of " + strings.Join(agents, ", ")
}

// insertTask creates the task and its job (req has passed checkCreateTask);
// staged, when not empty, is the key of the staging directory holding
// files, which the job's payload names.
func (s *Server) insertTask(w http.ResponseWriter, r *http.Request, req newTask, files []api.FileRef, staged string) {
	if staged != "" || req.Executor != "" {
		fields := req.payload
		if fields == nil {
			fields = map[string]json.RawMessage{}
		}
		if staged != "" {
			fields[staging.PayloadField], _ = json.Marshal(staged)
		}
		if req.Executor != "" {
			// The typed fields replace the payload's own (docs/queue.md,
			// "Executors").
			fields["executor"], _ = json.Marshal(req.Executor)
			delete(fields, "agent")
			if req.Agent != "" {
				fields["agent"], _ = json.Marshal(req.Agent)
			}
			delete(fields, "agent_session")
			if req.AgentSession != "" {
				fields["agent_session"], _ = json.Marshal(req.AgentSession)
			}
		}
		req.Payload, _ = json.Marshal(fields)
	}
	// The job carries the request's trace context: its worker's spans
	// continue the trace (docs/events.md, "Traces").
	if p, err := telemetry.WithPayload(r.Context(), req.Payload); err == nil {
		req.Payload = p
	}
	task, job, err := s.st.CreateTask(r.Context(), store.NewTask{
		Owner: actor(r), Title: req.Title, Body: req.Body, Piece: req.Piece,
		Profile: req.Profile, TaskClass: req.TaskClass, Priority: req.Priority,
		MaxAttempts: req.MaxAttempts, Payload: req.Payload,
	})
	if err != nil {
		if staged != "" {
			s.dropStaged(staged)
		}
		s.storeError(w, r, err)
		return
	}
	if staged != "" {
		// Without this file the sweep still keeps the directory while the
		// job is unfinished (it scans the unfinished jobs' payloads).
		s.recordStagedJob(r, staged, job.ID)
	}
	traceTask(r, task, job)
	s.audit(r, api.ActionTaskCreate, taskTarget(task.ID), api.TaskCreateAudit{JobID: job.ID, Title: task.Title, Piece: task.Piece, Files: files})
	w.Header().Set("Location", api.TasksPath+"/"+strconv.FormatInt(task.ID, 10))
	writeJSON(w, http.StatusCreated, api.CreateTaskResponse{Task: task, Job: job, Files: files})
}

// createTaskMultipart handles a multipart POST /tasks: the "task" part
// first, then "file" parts.
func (s *Server) createTaskMultipart(w http.ResponseWriter, r *http.Request) {
	if s.cfg.DataDir == "" {
		writeError(w, http.StatusNotImplemented, "this server has no data directory, so a task cannot carry files; send the task as JSON")
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, http.StatusBadRequest, "request body: expected multipart/form-data with a boundary: "+err.Error())
		return
	}
	part, err := mr.NextPart()
	if err != nil || part.FormName() != api.TaskPart {
		writeFieldError(w, http.StatusBadRequest, "task", `expected the first part to be named "task" and hold the task as a JSON object (the fields of a JSON POST /api/v1/tasks)`)
		return
	}
	var req newTask
	if !decodePartJSON(w, part, &req.CreateTaskRequest) {
		return
	}
	if !s.checkCreateTask(w, r, &req) {
		return
	}
	var rnd [16]byte
	rand.Read(rnd[:])
	key := hex.EncodeToString(rnd[:])
	dir := staging.Dir(s.cfg.DataDir, key)
	files, ok := s.stageFiles(w, mr, dir)
	if !ok {
		os.RemoveAll(dir)
		return
	}
	if len(files) == 0 {
		os.RemoveAll(dir)
		s.insertTask(w, r, req, nil, "")
		return
	}
	if !s.stageInArtifacts(w, r, dir, key) {
		return
	}
	s.insertTask(w, r, req, files, key)
}

// stageFiles writes the "file" parts of mr into dir. It answers the
// request and returns false on an error.
func (s *Server) stageFiles(w http.ResponseWriter, mr *multipart.Reader, dir string) ([]api.FileRef, bool) {
	limit := s.cfg.MaxUpload
	var files []api.FileRef
	var root *os.Root
	defer func() {
		if root != nil {
			root.Close()
		}
	}()
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return files, true
		}
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				writeError(w, http.StatusRequestEntityTooLarge, "request body is too large")
				return nil, false
			}
			writeError(w, http.StatusBadRequest, "request body: reading the multipart data failed: "+err.Error())
			return nil, false
		}
		if part.FormName() != api.FilePart {
			writeFieldError(w, http.StatusBadRequest, part.FormName(), `unknown part; after "task" every part is a "file" with a filename`)
			return nil, false
		}
		p, ok := cleanRelPath(w, partFileName(part), "input/")
		if !ok {
			return nil, false
		}
		for _, f := range files {
			if f.Path == p {
				writeFieldError(w, http.StatusUnprocessableEntity, "file", fmt.Sprintf("%q is sent twice", p))
				return nil, false
			}
			if strings.HasPrefix(p, f.Path+"/") || strings.HasPrefix(f.Path, p+"/") {
				writeFieldError(w, http.StatusUnprocessableEntity, "file", fmt.Sprintf("%q and %q: a file cannot also be a directory", f.Path, p))
				return nil, false
			}
		}
		if len(files) == api.MaxTaskFiles {
			writeFieldError(w, http.StatusUnprocessableEntity, "file", fmt.Sprintf("expected at most %d files; upload more with PUT /api/v1/tasks/{id}/uploads/{path}", api.MaxTaskFiles))
			return nil, false
		}
		if root == nil {
			if err := os.MkdirAll(dir, staging.Perm); err != nil {
				s.log.Error("create upload staging directory", "dir", dir, "err", err)
				writeError(w, http.StatusInternalServerError, "internal error: cannot create the upload staging directory")
				return nil, false
			}
			if root, err = os.OpenRoot(dir); err != nil {
				s.log.Error("open upload staging directory", "dir", dir, "err", err)
				writeError(w, http.StatusInternalServerError, "internal error: cannot open the upload staging directory")
				return nil, false
			}
		}
		var f *os.File
		if d := path.Dir(p); d != "." {
			err = root.MkdirAll(d, 0o755) // "docs/a.txt" is input/docs/a.txt
		}
		if err == nil {
			f, err = root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		}
		if err != nil {
			s.log.Error("create staged upload", "path", p, "err", err)
			writeError(w, http.StatusInternalServerError, "internal error: cannot store the upload")
			return nil, false
		}
		n, err := io.Copy(f, io.LimitReader(part, limit+1))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil && n > limit {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("file %s: expected at most %d bytes", p, limit))
			return nil, false
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("file %s: reading the body failed: %v", p, err))
			return nil, false
		}
		files = append(files, api.FileRef{Path: p, Size: n})
	}
}

// partFileName is a file part's filename as sent: its path under input/.
// multipart.Part.FileName keeps only the last element (filepath.Base),
// which put "docs/a.txt" at input/a.txt and took "../a.txt" as a.txt.
func partFileName(part *multipart.Part) string {
	_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

// decodePartJSON decodes the JSON object of a multipart part strictly, as
// decodeJSON does for a body.
func decodePartJSON(w http.ResponseWriter, part io.Reader, v any) bool {
	data, err := io.ReadAll(io.LimitReader(part, maxJSONBody+1))
	if err == nil && len(data) > maxJSONBody {
		writeFieldError(w, http.StatusBadRequest, "task", fmt.Sprintf("expected a JSON object of at most %d bytes", maxJSONBody))
		return false
	}
	if err == nil {
		err = httpedge.DecodeJSON(data, v)
	}
	if err == nil {
		return true
	}
	if writeFieldDecodeError(w, err, "task") {
		return false
	}
	msg := err.Error()
	switch err {
	case io.EOF:
		msg = "found nothing"
	case httpedge.ErrJSONTrailing:
		writeFieldError(w, http.StatusBadRequest, "task", "expected one JSON object, found more data after it")
		return false
	}
	writeFieldError(w, http.StatusBadRequest, "task", fmt.Sprintf("expected a JSON object of at most %d bytes: %s", maxJSONBody, strings.TrimPrefix(msg, "json: ")))
	return false
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	states, ok := queryStates(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	servePage(s, w, r, "before", 50, func(ctx context.Context, before int64, limit int) ([]store.Task, error) {
		return s.st.ListTasks(ctx, store.TaskFilter{Owner: q.Get("owner"), States: states, Search: q.Get("q"), BeforeID: before, Limit: limit})
	}, func(tasks []store.Task, limit int) api.TaskList {
		return api.TaskList{Tasks: nonNil(tasks), NextBefore: nextCursor(tasks, limit, func(t store.Task) int64 { return t.ID })}
	})
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	task, err := s.st.GetTask(r.Context(), id)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	jobs, err := s.st.ListJobs(r.Context(), store.JobFilter{TaskID: id})
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	var comments []store.Comment
	for after := int64(0); ; {
		page, err := s.st.ListComments(r.Context(), id, after, store.MaxListLimit)
		if err != nil {
			s.storeError(w, r, err)
			return
		}
		comments = append(comments, page...)
		if len(page) < store.MaxListLimit {
			break
		}
		after = page[len(page)-1].ID
	}
	writeJSON(w, http.StatusOK, api.TaskDetail{Task: task, Jobs: nonNil(jobs), Comments: nonNil(comments)})
}

func (s *Server) addComment(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	var req api.CommentRequest
	if !decodeJSON(w, r, &req, false) {
		return
	}
	if strings.TrimSpace(req.Body) == "" {
		writeFieldError(w, http.StatusUnprocessableEntity, "body", "required: the comment's text (an answer resumes a job waiting for one)")
		return
	}
	c, resumed, err := s.st.AddComment(r.Context(), store.NewComment{
		TaskID: id, AuthorKind: store.AuthorUser, Author: actor(r), Body: req.Body, ResumeWaiting: true,
	})
	if errors.Is(err, store.ErrNotFound) {
		// The store's error quotes the database's constraint.
		writeError(w, http.StatusNotFound, fmt.Sprintf("task %d: not found", id))
		return
	}
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	// Followers of the task's latest job see the comment in its log.
	ctx := context.WithoutCancel(r.Context())
	if task, err := s.st.GetTask(ctx, id); err == nil && task.JobID != 0 {
		data, _ := json.Marshal(api.CommentEvent{CommentID: c.ID, AuthorKind: c.AuthorKind, Author: c.Author, Body: c.Body})
		if _, err := s.st.AppendSystemJobEvents(ctx, task.JobID, []store.NewJobEvent{{Type: store.JobEventComment, Data: data}}); err != nil {
			s.log.Warn("comment event not appended", "task", id, "job", task.JobID, "err", err)
		}
	}
	ids := []int64{} // [] when it resumed nothing, as the answer's resumed_jobs
	for _, j := range resumed {
		ids = append(ids, j.ID)
	}
	s.audit(r, api.ActionTaskComment, taskTarget(id), api.TaskCommentAudit{CommentID: c.ID, ResumedJobs: ids})
	writeJSON(w, http.StatusCreated, api.CommentResponse{Comment: c, ResumedJobs: nonNil(resumed)})
}

// taskDir returns the task (404 when unknown) and its directory, which
// Maestro created and the agent cannot write; the agent's workspace is
// its work/ (internal/taskdir).
func (s *Server) taskDir(w http.ResponseWriter, r *http.Request) (int64, string, bool) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return 0, "", false
	}
	if _, err := s.st.GetTask(r.Context(), id); err != nil {
		s.storeError(w, r, err)
		return 0, "", false
	}
	if s.cfg.DataDir == "" {
		writeError(w, http.StatusNotImplemented, "this server has no data directory, so it keeps no task files")
		return 0, "", false
	}
	return id, s.cfg.TaskDir(s.cfg.DataDir, id), true
}

// taskFile is taskDir and the {path} of the request, checked by
// cleanRelPath as a path inside `where`.
func (s *Server) taskFile(w http.ResponseWriter, r *http.Request, where string) (id int64, dir, p string, ok bool) {
	if id, dir, ok = s.taskDir(w, r); ok {
		p, ok = cleanRelPath(w, r.PathValue("path"), where)
	}
	return id, dir, p, ok
}

// openOutput opens the task's output/ for reading, with no symbolic link
// followed at any component from the task directory down. It returns nil
// without answering when the task has no output/ yet; it answers the
// request and returns ok false on an error.
func (s *Server) openOutput(w http.ResponseWriter, dir string) (out *workspace.Dir, ok bool) {
	work, err := taskdir.OpenWork(dir, false)
	if err == nil {
		defer work.Close()
		out, err = work.OpenPath("output")
	}
	switch {
	case err == nil:
		return out, true
	case errors.Is(err, workspace.ErrOutside):
		writeError(w, http.StatusForbidden, "the task's output/ is a symbolic link, not a directory: nothing is listed or served through it")
		return nil, false
	case errors.Is(err, fs.ErrNotExist):
		return nil, true
	default:
		s.log.Error("open output directory", "dir", dir, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error: cannot open the task's output directory")
		return nil, false
	}
}

// listDeliverables answers GET /tasks/{id}/deliverables: the regular
// files under output/, sorted by path. Symbolic links (and what lies behind them) and
// other non-regular files are left out; the walk stops at
// Config.MaxListEntries entries, 64 levels or maxListPathBytes bytes of
// paths, with "truncated": true.
func (s *Server) listDeliverables(w http.ResponseWriter, r *http.Request) {
	id, dir, ok := s.taskDir(w, r)
	if !ok {
		return
	}
	if s.cfg.Artifacts != nil {
		s.listArtifactDeliverables(w, r, id)
		return
	}
	resp := api.DeliverableList{Files: []api.Deliverable{}}
	out, ok := s.openOutput(w, dir)
	if !ok {
		return
	}
	if out == nil {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	defer out.Close()
	pathBytes := 0
	err := out.Walk(workspace.WalkLimits{MaxEntries: s.cfg.MaxListEntries}, func(p string, d fs.DirEntry) error {
		if pathBytes += len(p); pathBytes > maxListPathBytes {
			return fmt.Errorf("%w: more than %d bytes of paths", workspace.ErrWalkLimit, maxListPathBytes)
		}
		if !d.Type().IsRegular() {
			return nil // directories, links and special files are not listed
		}
		// Ask the file itself, opened as the download opens it: an entry's
		// Info from a listing of a subdirectory is looked up by path.
		f, err := out.OpenFilePath(p)
		if err != nil {
			return nil
		}
		info, err := f.Stat()
		f.Close()
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		resp.Files = append(resp.Files, api.Deliverable{Path: p, Size: info.Size(), Modified: info.ModTime().UTC()})
		return nil
	})
	slices.SortFunc(resp.Files, func(a, b api.Deliverable) int { return strings.Compare(a.Path, b.Path) })
	switch {
	case errors.Is(err, workspace.ErrWalkLimit):
		resp.Truncated = true
	case err != nil:
		s.log.Error("list output directory", "dir", dir, "err", err)
	}
	writeJSON(w, http.StatusOK, resp)
}

// Limits of the paths a client names in a task's input/ or output/.
const (
	// maxPathBytes bounds a whole path (the system's PATH_MAX).
	maxPathBytes = 4096
	// maxNameBytes bounds one component (the system's NAME_MAX).
	maxNameBytes = 255
	// maxListPathBytes bounds the paths one deliverables listing visits,
	// summed (the answer's size), besides Config.MaxListEntries.
	maxListPathBytes = 4 << 20
)

// cleanRelPath checks a path taken from the URL or a multipart file name:
// at most maxPathBytes bytes of valid UTF-8 without control characters,
// relative, no "..", no NUL, not empty. It answers 400 on the field "path"
// (quoting at most httpedge.MaxEcho bytes of p) and returns false otherwise.
func cleanRelPath(w http.ResponseWriter, p, where string) (string, bool) {
	broken := checkPathText(p)
	c := ""
	if broken == "" {
		c, broken = workspace.CheckSlashPath(p)
	}
	if broken != "" {
		writeFieldError(w, http.StatusBadRequest, "path", fmt.Sprintf("expected a relative path inside %s, %s (found %s)", where, broken, httpedge.Echo(p)))
		return "", false
	}
	return c, true
}

// checkPathText returns the rule the text of p breaks, or "".
func checkPathText(p string) string {
	switch {
	case len(p) > maxPathBytes:
		return fmt.Sprintf("of at most %d bytes", maxPathBytes)
	case !utf8.ValidString(p):
		return "in valid UTF-8"
	case strings.IndexFunc(p, unicode.IsControl) >= 0:
		return "without control characters"
	}
	for seg := range strings.SplitSeq(p, "/") {
		if len(seg) > maxNameBytes {
			return fmt.Sprintf("with names of at most %d bytes", maxNameBytes)
		}
	}
	return ""
}

// getDeliverable answers GET /tasks/{id}/deliverables/{path}: a regular
// file under output/, reached without following any symbolic link.
func (s *Server) getDeliverable(w http.ResponseWriter, r *http.Request) {
	id, dir, p, ok := s.taskFile(w, r, "output/")
	if !ok {
		return
	}
	if s.cfg.Artifacts != nil {
		s.getArtifactDeliverable(w, r, id, p)
		return
	}
	out, ok := s.openOutput(w, dir)
	if !ok {
		return
	}
	if out == nil {
		writeFieldError(w, http.StatusNotFound, "path", fmt.Sprintf("no deliverable %s: the task has no output yet", httpedge.Echo(p)))
		return
	}
	defer out.Close()
	f, err := out.OpenFilePath(p)
	switch {
	case errors.Is(err, workspace.ErrOutside):
		writeFieldError(w, http.StatusBadRequest, "path", fmt.Sprintf("%s leads through a symbolic link: only regular files of the task's output/ are served", httpedge.Echo(p)))
		return
	case errors.Is(err, fs.ErrNotExist):
		writeFieldError(w, http.StatusNotFound, "path", fmt.Sprintf("no deliverable %s; GET the deliverables list for the files", httpedge.Echo(p)))
		return
	case err != nil:
		writeFieldError(w, http.StatusBadRequest, "path", fmt.Sprintf("%s is not a file; GET the deliverables list for the files", httpedge.Echo(p)))
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		writeFieldError(w, http.StatusBadRequest, "path", fmt.Sprintf("%s is not a file; GET the deliverables list for the files", httpedge.Echo(p)))
		return
	}
	serveDeliverable(w, r, p, info.ModTime(), f)
}

// serveDeliverable answers with the deliverable p's content as an
// attachment. Agents write these files: never let a browser run them on
// the API's origin.
func serveDeliverable(w http.ResponseWriter, r *http.Request, p string, modified time.Time, content io.ReadSeeker) {
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	w.Header().Set("Content-Security-Policy", "sandbox")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(&contentErrors{ResponseWriter: w, r: r}, r, p, modified, content)
}

// contentErrors gives http.ServeContent's errors the API's JSON body: it
// answers a Range past the end (416), a failed If-Match or
// If-Unmodified-Since (412) and a failed read in plain text or with no
// body.
type contentErrors struct {
	http.ResponseWriter
	r       *http.Request
	written bool // an error was answered: drop ServeContent's body
}

func (c *contentErrors) WriteHeader(code int) {
	if code < http.StatusBadRequest {
		c.ResponseWriter.WriteHeader(code)
		return
	}
	c.written = true
	c.Header().Del("Content-Disposition") // the error is no download
	switch code {
	case http.StatusRequestedRangeNotSatisfiable:
		size := strings.TrimPrefix(c.Header().Get("Content-Range"), "bytes */")
		writeFieldError(c.ResponseWriter, code, "Range", fmt.Sprintf("expected byte ranges within the file's %s bytes, found %s", size, httpedge.Echo(c.r.Header.Get("Range"))))
	case http.StatusPreconditionFailed:
		writeError(c.ResponseWriter, code, "the file changed since the version If-Match or If-Unmodified-Since names; download it again")
	default:
		writeError(c.ResponseWriter, code, "internal error: reading the file failed")
	}
}

func (c *contentErrors) Write(b []byte) (int, error) {
	if c.written {
		return len(b), nil
	}
	return c.ResponseWriter.Write(b)
}

// ReadFrom keeps the connection's ReadFrom (sendfile) for the content.
func (c *contentErrors) ReadFrom(src io.Reader) (int64, error) {
	if c.written {
		return io.Copy(io.Discard, src)
	}
	return io.Copy(c.ResponseWriter, src)
}

// Unwrap lets http.ResponseController reach the connection.
func (c *contentErrors) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// upload answers PUT /tasks/{id}/uploads/{path}: the body becomes the file
// path under input/, written to a temporary file beside it and renamed
// over it. Every directory from the task directory down is reached
// without following a symbolic link, so a link the agent planted in its
// workspace cannot lead the write elsewhere.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	id, dir, p, ok := s.taskFile(w, r, "input/")
	if !ok {
		return
	}
	limit := s.cfg.MaxUpload
	tooLarge := func() {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("upload %s: expected at most %d bytes", p, limit))
	}
	if r.ContentLength > limit {
		tooLarge()
		return
	}
	if s.cfg.Artifacts != nil {
		s.uploadToArtifacts(w, r, id, p)
		return
	}
	throughLink := func() {
		writeFieldError(w, http.StatusBadRequest, "path", fmt.Sprintf("%q leads through a symbolic link: uploads go only into directories of the task's input/", p))
	}
	work, err := taskdir.OpenWork(dir, true)
	if err != nil {
		s.log.Error("open the task's workspace", "dir", dir, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error: cannot open the task's workspace")
		return
	}
	defer work.Close()
	in, err := work.MkdirPath(path.Join("input", path.Dir(p)), 0o755)
	if err != nil {
		if errors.Is(err, workspace.ErrOutside) {
			throughLink()
			return
		}
		writeFieldError(w, http.StatusConflict, "path", fmt.Sprintf("cannot create the directory of %q: %v", p, pathErrText(err)))
		return
	}
	defer in.Close()
	base := path.Base(p)
	if info, err := in.Lstat(base); err == nil && info.IsDir() {
		writeFieldError(w, http.StatusConflict, "path", fmt.Sprintf("%q is a directory", p))
		return
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := ".upload-" + hex.EncodeToString(rnd[:]) + ".tmp"
	f, err := in.Create(tmp, 0o644)
	if err != nil {
		s.log.Error("create upload file", "task", id, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error: cannot create the upload file")
		return
	}
	n, err := io.Copy(f, http.MaxBytesReader(w, r.Body, limit))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		in.Remove(tmp)
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			tooLarge()
			return
		}
		writeError(w, http.StatusBadRequest, fmt.Sprintf("upload %s: reading the body failed: %v", p, err))
		return
	}
	if err := in.Rename(tmp, in, base); err != nil {
		in.Remove(tmp)
		s.log.Error("store upload", "task", id, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error: cannot store the upload")
		return
	}
	s.uploaded(w, r, id, p, n)
}

// uploaded audits the stored upload of n bytes at input/p of task id and
// answers 201 with it.
func (s *Server) uploaded(w http.ResponseWriter, r *http.Request, id int64, p string, n int64) {
	up := api.FileRef{Path: p, Size: n}
	s.audit(r, api.ActionTaskUpload, taskTarget(id), up)
	writeJSON(w, http.StatusCreated, up)
}

// pathErrText is an error's text without the Op and path prefix.
func pathErrText(err error) string {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return pe.Err.Error()
	}
	return err.Error()
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
