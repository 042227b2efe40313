package hostedrunner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/maestro-run/maestro/internal/session"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/httpedge/edgetest"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
)

var _ = flag.Bool("update", false, "rewrite golden files") // read by proctest.Golden

// fakeAttach records what the runner tells the session API.
type fakeAttach struct {
	mu          sync.Mutex
	draining    string
	unavailable string
	restored    []string
	// notify, when set, receives each SetUnavailable message.
	notify chan string
}

func (f *fakeAttach) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusTeapot)
}
func (f *fakeAttach) SetDraining(reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.draining = "draining:" + reason
}
func (f *fakeAttach) SetUnavailable(msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unavailable = msg
	if f.notify != nil {
		f.notify <- msg
	}
}
func (f *fakeAttach) MarkRestored(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.restored = append(f.restored, id)
}

var fixedNow = func() time.Time { return time.Date(2026, 4, 23, 0, 0, 0, 0, time.UTC) }

// newWorkspace returns a workspace with a file and a directory.
func newWorkspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	return ws
}

func testConfig(ws string) Config {
	return Config{
		RunnerSessionID: "mrs_123", OwnerInstanceID: "pod_123", WorkspaceID: "workspace_123",
		AgentRunID: "run_123", MaestroSessionID: "session_123", WorkspaceRoot: ws,
		SnapshotRoot: filepath.Join(ws, ".maestro", "runner-snapshots"), Listen: "127.0.0.1:0",
		// Beside the workspace, not in it (the test's temporary root
		// removes both).
		StateDir: ws + "-state",
	}
}

func newRunner(t *testing.T, cfg Config) (*Runner, *fakeAttach) {
	t.Helper()
	r, err := New(cfg, Options{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	a := &fakeAttach{}
	r.SetAttach(a)
	return r, a
}

// controller connects a controller and subscribes from now on.
type controller struct {
	t    *testing.T
	conn *runtime.Conn
	sub  *runtime.Subscription
}

// connect connects a controller that negotiates no capabilities.
func connect(t *testing.T, r *Runner) *controller {
	t.Helper()
	return connectWith(t, r, nil)
}

// connectWith connects a controller negotiating caps (nil: none) and
// subscribes it from now on.
func connectWith(t *testing.T, r *Runner, caps *protocol.Capabilities) *controller {
	t.Helper()
	c, err := r.Runtime().Connect(runtime.ConnectOptions{Role: protocol.RoleController, ProtocolVersion: protocol.Version, Capabilities: caps})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Subscribe(runtime.SubscribeOptions{From: runtime.FromNow})
	if err != nil {
		t.Fatal(err)
	}
	return &controller{t: t, conn: c, sub: s}
}

// until reads frames until one matches, and returns it.
func (c *controller) until(match func(runtime.Frame) bool) runtime.Frame {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		f, err := c.sub.Next(ctx)
		if err != nil {
			c.t.Fatalf("waiting for a frame: %v", err)
		}
		if match(f) {
			return f
		}
	}
}

func isStatus(msg string) func(runtime.Frame) bool {
	return func(f runtime.Frame) bool {
		s, ok := f.Message.(protocol.Status)
		return ok && s.Message == msg
	}
}

func TestResolveExport(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	outside := t.TempDir()
	for _, l := range [][2]string{{outside, "out"}, {filepath.Join(ws, "src"), "in"}, {"../../etc", "rel-out"}} {
		if err := os.Symlink(l[0], filepath.Join(ws, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		in, rel, typ string
		escape       bool
	}{
		{in: ".", rel: ".", typ: "directory"},
		{in: "notes.txt", rel: "notes.txt", typ: "file"},
		{in: "src/", rel: "src", typ: "directory"},
		{in: filepath.Join(ws, "notes.txt"), rel: "notes.txt", typ: "file"},
		{in: "missing/deeper", rel: "missing/deeper", typ: "missing"},
		{in: "in", rel: "src", typ: "directory"},
		{in: "in/new.txt", rel: "src/new.txt", typ: "missing"},
		{in: "..", escape: true},
		{in: "src/../../x", escape: true},
		{in: outside, escape: true},
		{in: "out", escape: true},
		{in: "out/anything", escape: true},
		{in: "rel-out", escape: true},
	}
	for _, tt := range tests {
		e, err := ResolveExport(ws, tt.in)
		if tt.escape {
			if !errors.Is(err, ErrExportEscape) || !strings.Contains(err.Error(), "Export path escapes hosted runner workspace root: "+tt.in) {
				t.Errorf("%q: error %v, want an escape", tt.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		if e.RelativePath != tt.rel || e.Type != tt.typ || e.Input != tt.in || e.Path != filepath.Join(ws, tt.rel) {
			t.Errorf("%q: got %+v, want relative_path %q type %q", tt.in, e, tt.rel, tt.typ)
		}
	}
	if _, err := ResolveExport(ws, ""); err == nil {
		t.Error("empty export path accepted")
	}
}

func TestDecodeDrainRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body string
		want DrainRequest
		err  string
	}{
		{body: "", want: DrainRequest{}},
		{body: "  ", want: DrainRequest{}},
		{body: `{"reason":"r","requested_by":"p","export_paths":["a"]}`, want: DrainRequest{Reason: "r", RequestedBy: "p", ExportPaths: []string{"a"}}},
		{body: `{"stop_reason":"r","requestedBy":"p","exportPaths":["a","b"]}`, want: DrainRequest{Reason: "r", RequestedBy: "p", ExportPaths: []string{"a", "b"}}},
		{body: `{"reason":"r","stop_reason":"s"}`, want: DrainRequest{Reason: "r"}},
		{body: `{"bogus":1}`, err: "unknown field"},
		{body: `{"reason":1}`, err: "drain request body: reason: expected a string, found JSON number"},
		{body: `{"export_paths":"."}`, err: "drain request body: export_paths: expected a JSON array, found JSON string"},
		{body: `{"export_paths":[1]}`, err: "drain request body: export_paths: expected a string, found JSON number"},
		{body: `["ttl_expired"]`, err: "drain request body: expected a JSON object, found JSON array"},
		{body: "{\"reason\":\"a\x00\"}", err: "NUL byte"},
		{body: `{} {}`, err: "one JSON object"},
		{body: `{"reason":"` + strings.Repeat("x", MaxDrainBody) + `"}`, err: "larger than"},
	}
	for _, tt := range tests {
		got, err := DecodeDrainRequest([]byte(tt.body))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%.40q: error %v, want %q", tt.body, err, tt.err)
			}
			continue
		}
		if err != nil || got.Reason != tt.want.Reason || got.RequestedBy != tt.want.RequestedBy || strings.Join(got.ExportPaths, ",") != strings.Join(tt.want.ExportPaths, ",") {
			t.Errorf("%q: got %+v, %v; want %+v", tt.body, got, err, tt.want)
		}
	}
}

// drainAfterPrompt runs one prompt and drains the runner over HTTP.
func drainAfterPrompt(t *testing.T, r *Runner, body string) (*http.Response, []byte) {
	t.Helper()
	c := connect(t, r)
	if err := c.conn.Handle(context.Background(), protocol.Prompt{Content: "hello"}); err != nil {
		t.Fatal(err)
	}
	c.until(isStatus("Prompt: hello"))
	if err := r.Runtime().WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.conn.Close()
	srv := httptest.NewServer(r.Handler())
	t.Cleanup(srv.Close)
	resp, err := http.Post(srv.URL+DrainPath, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	return resp, buf.Bytes()
}

func TestDrainManifestGolden(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	r, a := newRunner(t, testConfig(ws))
	resp, body := drainAfterPrompt(t, r, `{"reason":"ttl_expired","requested_by":"platform","export_paths":[".","notes.txt","src","later.txt"]}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("drain: %d %s", resp.StatusCode, body)
	}
	var d DrainResponse
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	if d.ProtocolVersion != DrainProtocol || d.Status != DrainDrained || d.RunnerSessionID != "mrs_123" {
		t.Errorf("drain response head: %+v", d)
	}
	wantPath := filepath.Join(ws, ".maestro", "runner-snapshots", "mrs_123-2026-04-23T00_00_00_000Z.json")
	if d.ManifestPath != wantPath {
		t.Errorf("manifest_path %q, want %q", d.ManifestPath, wantPath)
	}
	onDisk, err := os.ReadFile(d.ManifestPath)
	if err != nil {
		t.Fatal(err)
	}
	proctest.Golden(t, "testdata/drain-manifest.golden.json", Normalize(onDisk, ws))
	// The response carries the same manifest.
	inResp, _ := json.Marshal(d.Manifest)
	if !bytes.Equal(Normalize(inResp, ws), Normalize(onDisk, ws)) {
		t.Error("the response's manifest differs from the file")
	}
	if a.draining != "draining:ttl_expired" {
		t.Errorf("attach told %q, want draining:ttl_expired", a.draining)
	}
	id := r.Identity()
	if id.Ready || !id.Draining || id.DrainStatus != DrainDrained || id.DrainManifestPath != wantPath {
		t.Errorf("identity after drain: %+v", id)
	}
	// A second drain answers the same.
	d2, code, err := r.Drain(context.Background(), DrainRequest{Reason: "again"})
	if err != nil || code != http.StatusOK || d2.ManifestPath != wantPath {
		t.Errorf("second drain: %v %d %+v", err, code, d2)
	}
}

func TestDrainInterrupted(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	r, _ := newRunner(t, testConfig(ws))
	r.flush = func() error { return errors.New("disk full") }
	resp, body := drainAfterPrompt(t, r, "")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("drain: %d %s", resp.StatusCode, body)
	}
	var d DrainResponse
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	if d.Status != DrainInterrupted || d.Manifest.Runtime.FlushStatus != FlushFailed || d.Manifest.Runtime.Error != "disk full" || d.Reason != nil {
		t.Errorf("interrupted drain: %+v runtime %+v", d, d.Manifest.Runtime)
	}
	if ps := d.Manifest.WorkspaceExport.Paths; len(ps) != 1 || ps[0].RelativePath != "." || ps[0].Type != "directory" {
		t.Errorf("default export paths: %+v", ps)
	}
}

// A drain during a turn waiting for approval stops it: the request is
// cancelled and the manifest's snapshot has nothing pending.
func TestDrainStopsWork(t *testing.T) {
	t.Parallel()
	r, _ := newRunner(t, testConfig(newWorkspace(t)))
	c := connect(t, r)
	if err := c.conn.Handle(context.Background(), protocol.Prompt{Content: ApprovalPrefix + `{"request_id":"req_d","tool":"bash","args":{},"reason":"r"}`}); err != nil {
		t.Fatal(err)
	}
	c.until(func(f runtime.Frame) bool { _, ok := f.Message.(protocol.ServerRequest); return ok })
	d, code, err := r.Drain(context.Background(), DrainRequest{Reason: "kubernetes_prestop"})
	if err != nil || code != http.StatusOK || d.Manifest.Runtime.FlushStatus != FlushCompleted {
		t.Fatalf("drain: %v %d %+v", err, code, d)
	}
	f := c.until(func(f runtime.Frame) bool { _, ok := f.Message.(protocol.ServerRequestResolved); return ok })
	if res := f.Message.(protocol.ServerRequestResolved); res.RequestID != "req_d" || res.Resolution != protocol.ResolutionCancelled {
		t.Errorf("resolution on drain: %+v", res)
	}
	c.until(isStatus(StatusDrained))
	var snap protocol.Snapshot
	if err := json.Unmarshal(d.Manifest.Snapshot, &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.State.PendingApprovals) != 0 || snap.State.IsResponding || snap.State.IsReady || snap.Cursor != *d.Manifest.Runtime.Cursor {
		t.Errorf("manifest snapshot: pending %v responding %v ready %v cursor %d/%d", snap.State.PendingApprovals, snap.State.IsResponding, snap.State.IsReady, snap.Cursor, *d.Manifest.Runtime.Cursor)
	}
}

func TestDrainRefusesEscape(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	if err := os.Symlink(t.TempDir(), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	r, a := newRunner(t, testConfig(ws))
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	for _, body := range []string{`{"export_paths":["link/secret"]}`, "{\"reason\":\"x\u0000\"}", `{"exportPaths":[".."]}`} {
		resp, err := http.Post(srv.URL+DrainPath, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var e edgetest.ErrorBody
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || e.ErrorType != "bad_request" {
			t.Errorf("%q: %d %+v, want 400 bad_request", body, resp.StatusCode, e)
		}
	}
	resp, err := http.Post(srv.URL+DrainPath, "application/json", strings.NewReader(`{"reason":"`+strings.Repeat("x", MaxDrainBody)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: %d, want 413", resp.StatusCode)
	}
	if id := r.Identity(); !id.Ready || id.Draining || a.draining != "" {
		t.Errorf("a refused drain changed the runner: %+v, attach %q", id, a.draining)
	}
}

func TestIdentityAndHealth(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	cfg := testConfig(ws)
	cfg.OwnerInstanceID = ""
	r, _ := newRunner(t, cfg)
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	get := func(path string) (int, string, http.Header) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, strings.TrimSpace(b.String()), resp.Header
	}
	code, body, h := get(IdentityPath)
	if code != 200 || body != `{"protocol_version":"evalops.remote-runner.identity.v1","runner_session_id":"mrs_123","ready":true,"draining":false}` || h.Get("Cache-Control") != "no-store" {
		t.Errorf("identity: %d %s %v", code, body, h)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body, _ := get(p); code != 200 || body != `{"ok":true}` {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
	if code, _, _ := get("/api/headless/sessions/x/state"); code != http.StatusTeapot {
		t.Errorf("/api not routed to the attach handler: %d", code)
	}
	if _, _, err := r.Drain(context.Background(), DrainRequest{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body, _ := get(p); code != 503 || !strings.Contains(body, `"status":"draining"`) {
			t.Errorf("%s after drain: %d %s", p, code, body)
		}
	}
}

// TestShutdownMessageNotReady: a shutdown message ends the runner's one
// session, and the runner says so: identity ready:false, /readyz 503 with
// the reason, attach traffic unavailable. Identity and /readyz said ready
// and a new controller attached to the closed session; a drain or Close
// is not reported this way.
func TestShutdownMessageNotReady(t *testing.T) {
	t.Parallel()
	r, a := newRunner(t, testConfig(newWorkspace(t)))
	a.notify = make(chan string, 1)
	c := connect(t, r)
	if err := c.conn.Handle(context.Background(), protocol.Shutdown{}); err != nil {
		t.Fatal(err)
	}
	if id := r.Identity(); id.Ready || id.Draining {
		t.Errorf("identity after shutdown: %+v, want not ready, not draining", id)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/readyz", nil)
	req.Host = "127.0.0.1:8080"
	r.Handler().ServeHTTP(rec, req)
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), MsgShutDown) {
		t.Errorf("/readyz after shutdown: %d %s", rec.Code, rec.Body)
	}
	select {
	case msg := <-a.notify:
		if msg != MsgShutDown {
			t.Errorf("attach unavailable with %q, want %q", msg, MsgShutDown)
		}
	case <-time.After(10 * time.Second):
		t.Error("the session API was not made unavailable")
	}

	drained, _ := newRunner(t, testConfig(newWorkspace(t)))
	if _, _, err := drained.Drain(context.Background(), DrainRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, draining, msg := drained.Ready(); !draining || msg == MsgShutDown {
		t.Errorf("a drained runner: draining %v, last error %q; want draining, not shut down", draining, msg)
	}
}

func TestFixtureApproval(t *testing.T) {
	t.Parallel()
	r, _ := newRunner(t, testConfig(newWorkspace(t)))
	c := connect(t, r)
	content := ApprovalPrefix + `{"request_id":"req_1","tool":"bash","args":{"command":"rm -rf /"},"reason":"Dangerous"}`
	if err := c.conn.Handle(context.Background(), protocol.Prompt{Content: content}); err != nil {
		t.Fatal(err)
	}
	c.until(isStatus("Prompt: " + content))
	f := c.until(func(f runtime.Frame) bool { _, ok := f.Message.(protocol.ServerRequest); return ok })
	req := f.Message.(protocol.ServerRequest)
	if req.RequestID != "req_1" || req.RequestType != protocol.RequestApproval || req.Tool != "bash" || req.Reason != "Dangerous" || string(req.Args) != `{"command":"rm -rf /"}` {
		t.Errorf("server_request: %+v args %s", req, req.Args)
	}
	no := false
	if err := c.conn.Handle(context.Background(), protocol.ServerRequestResponse{RequestID: "req_1", RequestType: protocol.RequestApproval, Approved: &no}); err != nil {
		t.Fatal(err)
	}
	f = c.until(func(f runtime.Frame) bool { _, ok := f.Message.(protocol.ServerRequestResolved); return ok })
	res := f.Message.(protocol.ServerRequestResolved)
	if res.RequestID != "req_1" || res.Resolution != protocol.ResolutionDenied || res.ResolvedBy != protocol.ResolvedByUser {
		t.Errorf("server_request_resolved: %+v", res)
	}
	c.until(isStatus("Approval denied: bash"))
	if err := r.Runtime().WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := r.Runtime().Snapshot(); s.State.IsResponding || len(s.State.PendingApprovals) != 0 {
		t.Errorf("after the turn: is_responding %v, pending %v", s.State.IsResponding, s.State.PendingApprovals)
	}
	// A malformed approval prompt is a non-fatal error.
	if err := c.conn.Handle(context.Background(), protocol.Prompt{Content: ApprovalPrefix + "{"}); err != nil {
		t.Fatal(err)
	}
	c.until(func(f runtime.Frame) bool {
		e, ok := f.Message.(protocol.Error)
		return ok && strings.Contains(e.Message, "fixture approval prompt")
	})
}

// drainedManifest drains a runner after one prompt and returns the
// manifest path and cursor.
func drainedManifest(t *testing.T, ws string) (string, int64) {
	t.Helper()
	r, _ := newRunner(t, testConfig(ws))
	_, body := drainAfterPrompt(t, r, "")
	var d DrainResponse
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return d.ManifestPath, *d.Manifest.Runtime.Cursor
}

func TestRestoreCompleted(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	path, cursor := drainedManifest(t, ws)
	cfg := testConfig(ws)
	cfg.RunnerSessionID, cfg.MaestroSessionID = "mrs_456", ""
	cfg.RestoreManifest, _ = filepath.Rel(ws, path)
	cfg.RestoreManifest = filepath.Join(ws, cfg.RestoreManifest)
	r, a := newRunner(t, cfg)
	if r.SessionID() != "session_123" {
		t.Errorf("session id %q, want session_123 from the manifest", r.SessionID())
	}
	if len(a.restored) != 1 || a.restored[0] != "session_123" || a.unavailable != "" {
		t.Errorf("attach: restored %v unavailable %q", a.restored, a.unavailable)
	}
	id := r.Identity()
	if !id.Ready || id.RunnerSessionID != "mrs_456" {
		t.Errorf("identity: %+v", id)
	}
	snap := r.Runtime().Snapshot()
	// Issue 12 defect 5: the restored runtime's cursor is the manifest's.
	if snap.SessionID != "session_123" || snap.Cursor != cursor || !snap.State.IsReady || snap.State.LastStatus != StatusRestored {
		t.Errorf("restored snapshot: session %q cursor %d (manifest %d) ready %v status %q", snap.SessionID, snap.Cursor, cursor, snap.State.IsReady, snap.State.LastStatus)
	}
	c := connect(t, r)
	from, err := c.conn.Subscribe(runtime.SubscribeOptions{From: runtime.FromCursor, Cursor: cursor})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.conn.Handle(context.Background(), protocol.Prompt{Content: "again"}); err != nil {
		t.Fatal(err)
	}
	f := c.until(isStatus("Prompt: again"))
	if f.Cursor <= snap.Cursor {
		t.Errorf("prompt status cursor %d, want after %d", f.Cursor, snap.Cursor)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if first, err := from.Next(ctx); err != nil || first.Cursor != cursor+1 {
		t.Errorf("first frame after the restore at cursor %d: %d (%T, %v), want %d", cursor, first.Cursor, first.Message, err, cursor+1)
	}
	// The conversation log continues the drained one, in the state dir.
	if got := r.slog.file; !strings.HasPrefix(got, filepath.Join(cfg.StateDir, "sessions")+"/") {
		t.Errorf("session file %q, want it under %s", got, cfg.StateDir)
	}
}

func TestRestoreLastInit(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	r, _ := newRunner(t, testConfig(ws))
	c := connect(t, r)
	sys := "You are restored."
	if err := c.conn.Handle(context.Background(), protocol.Init{SystemPrompt: &sys, ApprovalMode: protocol.ApprovalAuto}); err != nil {
		t.Fatal(err)
	}
	c.until(isStatus("Initialized: system_prompt, approval_mode"))
	d, _, err := r.Drain(context.Background(), DrainRequest{})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	cfg := testConfig(ws)
	cfg.RestoreManifest = d.ManifestPath
	r2, _ := newRunner(t, cfg)
	li := r2.Runtime().Snapshot().LastInit
	if li == nil || li.SystemPrompt == nil || *li.SystemPrompt != sys || li.ApprovalMode != protocol.ApprovalAuto {
		t.Errorf("restored last_init: %+v", li)
	}
	if s := r2.Runtime().Snapshot().State; s.LastStatus != StatusRestored || s.ConnectionCount != 0 {
		t.Errorf("after restore: last_status %q, %d connections", s.LastStatus, s.ConnectionCount)
	}
}

func TestRestoreIncomplete(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	path, cursor := drainedManifest(t, ws)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, flush, errText, wantStatus, wantErr string
		drainCode                                 int
		drainStatus, drainFlush                   string
	}{
		{"failed", "failed", "disk full", StatusRestoreFailed, "disk full", 503, DrainInterrupted, FlushFailed},
		{"legacy interrupted", "interrupted", "", StatusRestoreFailed, defaultRestoreFailedErr, 503, DrainInterrupted, FlushFailed},
		{"skipped", "skipped", "", StatusRestoreSkipped, defaultRestoreSkipErr, 200, DrainDrained, FlushSkipped},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			rt := m["runtime"].(map[string]any)
			rt["flush_status"] = tt.flush
			if tt.errText != "" {
				rt["error"] = tt.errText
			}
			out, _ := json.Marshal(m)
			mp := filepath.Join(ws, "m"+string(rune('0'+i))+".json")
			if err := os.WriteFile(mp, out, 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := testConfig(ws)
			cfg.RestoreManifest = mp
			r, a := newRunner(t, cfg)
			id := r.Identity()
			if id.Ready || id.Draining {
				t.Errorf("identity: %+v", id)
			}
			if a.unavailable != tt.wantErr || len(a.restored) != 1 {
				t.Errorf("attach: unavailable %q restored %v", a.unavailable, a.restored)
			}
			s := r.Runtime().Snapshot()
			if s.State.IsReady || s.State.LastStatus != tt.wantStatus || s.State.LastError != tt.wantErr || s.State.LastErrorType != protocol.ErrorProtocol || s.Cursor <= cursor || s.SessionID != "session_123" {
				t.Errorf("state: ready %v status %q error %q type %q cursor %d", s.State.IsReady, s.State.LastStatus, s.State.LastError, s.State.LastErrorType, s.Cursor)
			}
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/readyz", nil)
			req.Host = "127.0.0.1:8080" // httptest's example.com is not a name of the runner
			r.Handler().ServeHTTP(rec, req)
			if rec.Code != 503 || !strings.Contains(rec.Body.String(), tt.wantErr) {
				t.Errorf("/readyz: %d %s", rec.Code, rec.Body)
			}
			// Its drain hands on the incomplete record: a manifest saying
			// completed would be restored as ready.
			d, code, err := r.Drain(context.Background(), DrainRequest{})
			if err != nil || code != tt.drainCode || d.Status != tt.drainStatus || d.Manifest.Runtime.FlushStatus != tt.drainFlush || !strings.Contains(d.Manifest.Runtime.Error, tt.errText) || d.Manifest.PlatformEvidence.Status != tt.drainStatus {
				t.Errorf("drain: %v %d %s runtime %+v", err, code, d.Status, d.Manifest.Runtime)
			}
		})
	}
}

func TestRestoreInvalid(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	path, _ := drainedManifest(t, ws)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, from, to, err string
	}{
		{"protocol", ManifestProtocol, "evalops.remote-runner.snapshot-manifest.v0", "protocol_version"},
		{"mode", ExportMode, "gcs", "workspace_export.mode"},
		{"relative path escape", `"relative_path": "."`, `"relative_path": "../x"`, "escapes"},
		{"absolute relative path", `"relative_path": "."`, `"relative_path": "/etc"`, "relative to the workspace root"},
		{"flush status", `"flush_status": "completed"`, `"flush_status": "maybe"`, "runtime.flush_status"},
		{"not json", `{`, `[`, "not a snapshot manifest"},
		// Not in Go's words ("cannot unmarshal number into Go struct field
		// ManifestRuntime.runtime.flush_status of type string").
		{"field type", `"flush_status": "completed"`, `"flush_status": 5`, "not a snapshot manifest: runtime.flush_status: expected a string, found JSON number"},
	}
	for i, tt := range tests {
		mp := filepath.Join(ws, "bad"+string(rune('0'+i))+".json")
		if err := os.WriteFile(mp, bytes.Replace(data, []byte(tt.from), []byte(tt.to), 1), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(ws)
		cfg.RestoreManifest = mp
		if _, err := New(cfg, Options{}); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.err)
		}
	}
	// A manifest that is not there is named by the path looked at (the
	// error said "open none.json", with no directory).
	cfg := testConfig(ws)
	cfg.RestoreManifest = filepath.Join(ws, "none.json")
	if _, err := New(cfg, Options{}); err == nil || !strings.Contains(err.Error(), "restore manifest "+cfg.RestoreManifest+":") {
		t.Errorf("a missing restore manifest: error %v, want it named %s", err, cfg.RestoreManifest)
	}
}

// TestSessionInfoGitBranch: the hosted runner's session_info carries the
// workspace's git branch as stdio sessions do, on a fresh start and on a
// restore (read from the workspace it is restored into).
func TestSessionInfoGitBranch(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".git", "HEAD"), []byte("ref: refs/heads/feature/drain\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, _ := newRunner(t, testConfig(ws))
	c := connect(t, r)
	if err := c.conn.Handle(context.Background(), protocol.Prompt{Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	c.until(isStatus("Prompt: hi"))
	if b, ok := r.Runtime().Snapshot().State.GitBranch.Get(); !ok || b != "feature/drain" {
		t.Errorf("git_branch %q (%v), want feature/drain", b, ok)
	}
	path, _ := drainedManifest(t, ws)
	cfg := testConfig(ws)
	cfg.RunnerSessionID, cfg.RestoreManifest = "mrs_456", path
	restored, _ := newRunner(t, cfg)
	if b, ok := restored.Runtime().Snapshot().State.GitBranch.Get(); !ok || b != "feature/drain" {
		t.Errorf("restored git_branch %q (%v), want feature/drain", b, ok)
	}
}

// TestDrainWorkContinuity: a drain that finds an approval pending records
// it in the manifest's work_continuity and in platform_evidence's copy
// (with the list counts), as docs/spec/seed-headless-protocol.md shows
// them; a drain of an idle runner records zeros.
func TestDrainWorkContinuity(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		pending bool
	}{{"approval pending", true}, {"idle", false}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, _ := newRunner(t, testConfig(newWorkspace(t)))
			if tt.pending {
				c := connect(t, r)
				content := ApprovalPrefix + `{"request_id":"req_1","tool":"bash","args":{"command":"ls"},"reason":"Look"}`
				if err := c.conn.Handle(context.Background(), protocol.Prompt{Content: content}); err != nil {
					t.Fatal(err)
				}
				c.until(func(f runtime.Frame) bool { _, ok := f.Message.(protocol.ServerRequest); return ok })
			}
			d, code, err := r.Drain(context.Background(), DrainRequest{Reason: "ttl_expired"})
			if err != nil || code != http.StatusOK {
				t.Fatalf("drain: %d %v", code, err)
			}
			want := 0
			if tt.pending {
				want = 1
			}
			wc := d.Manifest.WorkContinuity
			if wc == nil || wc.ProtocolVersion != WorkContinuityProtocol || wc.PendingRequestCount != want || wc.CodexSubagentToolCallIDs == nil || wc.CodexSubagentToolCallCount != nil {
				t.Fatalf("work_continuity: %+v, want %d pending request(s)", wc, want)
			}
			ev := d.Manifest.PlatformEvidence
			if ev == nil || ev.Status != DrainDrained || ev.RuntimeFlushStatus != d.Manifest.Runtime.FlushStatus || ev.ManifestPath != d.ManifestPath ||
				ev.WorkContinuity.PendingRequestCount != want || ev.WorkContinuity.CodexSubagentEdgeCount == nil || *ev.WorkContinuity.CodexSubagentEdgeCount != 0 ||
				len(ev.EvidenceRefs) != 3 || ev.EvidenceRefs[2] != "platform-agent-run:run_123" {
				t.Errorf("platform_evidence: %+v", ev)
			}
		})
	}
}

// A harness that sends its next prompt as soon as it sees "Prompt: …" is
// never refused as busy: the status goes out once the turn is over.
func TestFixturePromptsBackToBack(t *testing.T) {
	t.Parallel()
	r, _ := newRunner(t, testConfig(newWorkspace(t)))
	c := connect(t, r)
	for i := range 50 {
		content := fmt.Sprintf("p%d", i)
		if err := c.conn.Handle(context.Background(), protocol.Prompt{Content: content}); err != nil {
			t.Fatalf("prompt %s sent on seeing the previous status: %v", content, err)
		}
		c.until(isStatus("Prompt: " + content))
	}
}

// TestRestoredSessionKeepsItsIDOnTheBus: the restored runner's session
// log has an id of its own, but on the event bus it continues the
// suspended session: FollowRestored gets the manifest's session id (its
// resumed and closed events named the new log's id, which no started or
// suspended event had named).
func TestRestoredSessionKeepsItsIDOnTheBus(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	path, cursor := drainedManifest(t, ws)
	cfg := testConfig(ws)
	cfg.RunnerSessionID, cfg.MaestroSessionID, cfg.RestoreManifest = "mrs_456", "", path
	var gotID string
	var gotCursor int64
	r, err := New(cfg, Options{Now: fixedNow, FollowRestored: func(dir string, meta session.Meta, from int64) func(int64, string) {
		gotID, gotCursor = meta.ID, from
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if gotID != "session_123" || gotCursor != cursor {
		t.Errorf("FollowRestored(%q, cursor %d), want the suspended session session_123 at %d", gotID, gotCursor, cursor)
	}
}
