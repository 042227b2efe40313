package hostedrunner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/protocol"
)

// MaxDrainBody caps the drain request body (64 KB, wire contract §11.2).
const MaxDrainBody = 64 << 10

// Standard drain reasons and requesters (wire contract §14.2).
const (
	ReasonKubernetesPreStop = "kubernetes_prestop"
	ReasonProcessShutdown   = "process_shutdown"
	RequesterWebServer      = "maestro_web_server"
)

// DrainRequest is the drain body: each field accepts its snake_case and
// camelCase names (and reason also stop_reason).
type DrainRequest struct {
	Reason      string
	RequestedBy string
	ExportPaths []string
}

// DecodeDrainRequest decodes an optional drain body: at most MaxDrainBody
// bytes, no NUL byte, a JSON object with no unknown field.
func DecodeDrainRequest(body []byte) (DrainRequest, error) {
	var d DrainRequest
	if len(body) > MaxDrainBody {
		return d, fmt.Errorf("drain request body is larger than %d bytes", MaxDrainBody)
	}
	if bytes.IndexByte(body, 0) >= 0 {
		return d, errors.New("drain request body contains a NUL byte")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return d, nil
	}
	var raw struct {
		Reason       *string  `json:"reason"`
		StopReason   *string  `json:"stop_reason"`
		RequestedBy  *string  `json:"requested_by"`
		RequestedBy2 *string  `json:"requestedBy"`
		ExportPaths  []string `json:"export_paths"`
		ExportPaths2 []string `json:"exportPaths"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		if msg, ok := httpedge.JSONTypeText(err); ok {
			return d, fmt.Errorf("drain request body: %s", msg) // it named Go types
		}
		return d, fmt.Errorf("drain request body: expected {reason?, requested_by?, export_paths?: [string]}: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return d, errors.New("drain request body: expected one JSON object")
	}
	first := func(ps ...*string) string {
		for _, p := range ps {
			if p != nil && *p != "" {
				return *p
			}
		}
		return ""
	}
	d.Reason = first(raw.Reason, raw.StopReason)
	d.RequestedBy = first(raw.RequestedBy, raw.RequestedBy2)
	d.ExportPaths = raw.ExportPaths
	if d.ExportPaths == nil {
		d.ExportPaths = raw.ExportPaths2
	}
	if err := checkDrainText("reason", d.Reason); err != nil {
		return d, err
	}
	if err := checkDrainText("requested_by", d.RequestedBy); err != nil {
		return d, err
	}
	for i, p := range d.ExportPaths {
		if strings.IndexByte(p, 0) >= 0 {
			return d, fmt.Errorf("drain request body: export_paths[%d]: contains a NUL character", i)
		}
	}
	return d, nil
}

// MaxDrainText bounds the drain's reason and requested_by.
const MaxDrainText = 256

// checkDrainText refuses a reason or requested_by that would be unsafe to
// log or to store in the manifest: longer than MaxDrainText bytes, not
// UTF-8, or with control characters (NUL included, which the body check
// misses when it comes escaped as \u0000).
func checkDrainText(field, v string) error {
	switch {
	case len(v) > MaxDrainText:
		return fmt.Errorf("drain request body: %s: expected at most %d bytes, found %d", field, MaxDrainText, len(v))
	case !utf8.ValidString(v):
		return fmt.Errorf("drain request body: %s: expected UTF-8 text", field)
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return fmt.Errorf("drain request body: %s: expected text without control characters (NUL, newlines, escapes)", field)
	}
	return nil
}

// DrainResponse is the drain answer (wire contract §14.2).
type DrainResponse struct {
	ProtocolVersion string    `json:"protocol_version"`
	Status          string    `json:"status"`
	RunnerSessionID string    `json:"runner_session_id"`
	RequestedBy     *string   `json:"requested_by"`
	Reason          *string   `json:"reason"`
	ManifestPath    string    `json:"manifest_path"`
	Manifest        *Manifest `json:"manifest"`
}

// BadRequestError is a drain refused before anything changed (400).
type BadRequestError struct{ Err error }

func (e *BadRequestError) Error() string { return e.Err.Error() }
func (e *BadRequestError) Unwrap() error { return e.Err }

// Drain drains the runner (wire contract §14.2): it validates the export paths
// (nothing changes if one is refused), marks the runner draining so that
// new attach traffic gets 503, stops the runtime's work, flushes the
// session log, writes the snapshot manifest and publishes a snapshot
// envelope to the subscribers. It returns the response
// and its HTTP status: 200 drained, 503 interrupted (the flush failed; the
// manifest is still written). A second drain returns the first one's
// answer.
func (r *Runner) Drain(ctx context.Context, req DrainRequest) (*DrainResponse, int, error) {
	r.drainMu.Lock()
	defer r.drainMu.Unlock()
	if r.drained != nil {
		return r.drained, r.drainCode, nil
	}
	inputs := req.ExportPaths
	if len(inputs) == 0 {
		inputs = []string{"."}
	}
	exports := make([]ExportPath, 0, len(inputs))
	for _, in := range inputs {
		e, err := ResolveExport(r.cfg.WorkspaceRoot, in)
		if err != nil {
			return nil, http.StatusBadRequest, &BadRequestError{err}
		}
		exports = append(exports, e)
	}

	// The work in flight when the drain begins (the manifest's
	// work_continuity): stopping it below clears the state's lists.
	inFlight := workContinuity(r.rt.Snapshot().State)
	r.mu.Lock()
	r.draining = true
	wasReady := r.ready
	r.mu.Unlock()
	if r.attach != nil {
		r.attach.SetDraining(req.Reason)
	}
	if wasReady {
		r.rt.Broadcast(protocol.Status{Message: "Hosted runner is draining: " + cmpOr(req.Reason, defaultDrainReason)})
	}

	// Stop the work: cancel requests, stop utilities, abort the run. The
	// runtime stays open until the drain has published its last status
	// and snapshot (release): the session API disposes of a runtime once
	// its shutdown is done, and a frame published after that is dropped
	// (the Drained status would miss the manifest and the subscribers).
	stopped, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	go r.rt.ShutdownThen(func() {
		close(stopped)
		<-release
	})
	tctx, cancel := context.WithTimeout(ctx, r.opts.DrainTimeout)
	defer cancel()
	var flushErr error
	select {
	case <-stopped:
	case <-tctx.Done():
		flushErr = fmt.Errorf("drain_timeout: the runtime's work did not stop within %s", r.opts.DrainTimeout)
	}
	if wasReady {
		r.rt.Broadcast(protocol.Status{Message: StatusDrained})
	}
	snap := r.rt.Snapshot()
	cursor := snap.Cursor
	if flushErr == nil {
		flushErr = r.flush()
	}
	flush := FlushCompleted
	switch {
	case errors.Is(flushErr, errNoLog) || flushErr == nil && cursor == 0:
		flush, flushErr = FlushSkipped, nil
	case flushErr != nil:
		flush = FlushFailed
	}
	if rm := r.restore; rm != nil && rm.Runtime.FlushStatus != FlushCompleted && flush != FlushFailed {
		// A runner restored from an incomplete hand-off never took the
		// session over (it was never ready): its drain hands on the same
		// incomplete record, not a completed one a control plane would
		// restore as ready.
		flush = rm.Runtime.FlushStatus
		if flush == FlushFailed {
			flushErr = fmt.Errorf("restored from a hand-off whose runtime flush failed: %s", cmpOr(rm.Runtime.Error, defaultRestoreFailedErr))
		} else if rm.Runtime.Error != "" {
			flushErr = errors.New(rm.Runtime.Error)
		}
	}

	now := r.now()
	snapData, err := json.Marshal(snap)
	if err != nil {
		return nil, http.StatusInternalServerError, fmt.Errorf("encode the runtime snapshot: %w", err)
	}
	root, err := openSnapshotRoot(r.cfg)
	if err != nil {
		return nil, http.StatusInternalServerError, fmt.Errorf("drain: %w", err)
	}
	defer root.Close()
	name := manifestName(r.cfg.RunnerSessionID, now)
	// The session log goes beside the manifest: what a restore on another
	// machine continues the conversation from.
	sessionFile := ""
	if flush != FlushSkipped {
		sname := sessionFileName(name)
		if err := root.WriteStreamAtomic(sname, 0o600, r.slog.Export); err != nil {
			if flushErr == nil {
				flush, flushErr = FlushFailed, fmt.Errorf("the session file: %w", err)
			}
		} else {
			sessionFile = r.cfg.snapshotPath(sname)
		}
	}
	m := &Manifest{
		ProtocolVersion:  ManifestProtocol,
		RunnerSessionID:  r.cfg.RunnerSessionID,
		WorkspaceID:      r.cfg.WorkspaceID,
		AgentRunID:       r.cfg.AgentRunID,
		MaestroSessionID: r.sessionID,
		Reason:           req.Reason,
		RequestedBy:      req.RequestedBy,
		CreatedAt:        timestamp(now),
		WorkspaceRoot:    r.cfg.WorkspaceRoot,
		Runtime: ManifestRuntime{
			FlushStatus: flush, SessionID: r.sessionID, SessionFile: sessionFile,
			ProtocolVersion: protocol.Version, Cursor: &cursor,
		},
		WorkspaceExport: WorkspaceExport{Mode: ExportMode, Paths: exports},
		Snapshot:        snapData,
		RetentionPolicy: Retention(),
	}
	if flushErr != nil {
		m.Runtime.Error = flushErr.Error()
	}
	status := DrainDrained
	if flush == FlushFailed {
		status = DrainInterrupted
	}
	m.WorkContinuity = &inFlight
	m.PlatformEvidence = platformEvidence(m, r.cfg.snapshotPath(name), status)
	if err := writeManifest(root, name, m); err != nil {
		return nil, http.StatusInternalServerError, fmt.Errorf("drain: %w", err)
	}
	path := r.cfg.snapshotPath(name)
	resp := &DrainResponse{
		ProtocolVersion: DrainProtocol, Status: DrainDrained, RunnerSessionID: r.cfg.RunnerSessionID,
		RequestedBy: nilIfEmpty(req.RequestedBy), Reason: nilIfEmpty(req.Reason),
		ManifestPath: path, Manifest: m,
	}
	code := http.StatusOK
	if status == DrainInterrupted {
		resp.Status, code = status, http.StatusServiceUnavailable
	}
	r.mu.Lock()
	r.ready = false
	r.drained, r.drainCode, r.drainedAt = resp, code, now
	r.mu.Unlock()
	// Wire contract §14.2 step 4: with draining set and ready cleared,
	// a snapshot envelope (last_status Drained, is_ready false) tells
	// the clients still attached that the drain is over. It takes the
	// cursor after the manifest's (snapshot envelopes take a cursor of
	// their own, wire contract §12).
	r.rt.PublishSnapshot("", nil)
	if r.suspended != nil {
		// The session is suspended, not closed: a restore resumes it.
		r.suspended()
		r.followed, r.suspended = nil, nil
	}
	if m.Runtime.Error != "" {
		r.log.Warn("hosted runner drained", "status", resp.Status, "flush_status", flush, "error", m.Runtime.Error, "manifest", path, "cursor", cursor)
	} else {
		r.log.Info("hosted runner drained", "status", resp.Status, "flush_status", flush, "manifest", path, "cursor", cursor)
	}
	return resp, code, nil
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
