package httpattach_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/httpedge/edgetest"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/protocol/prototest"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
	"github.com/maestro-run/maestro/internal/transport/transporttest"
	"github.com/maestro-run/maestro/internal/utility"
	"github.com/maestro-run/maestro/internal/workspace"
)

// options configure a test server.
type options struct {
	// scenario is a replay scenario in testdata/scenarios (default: one
	// frame answering "ok").
	scenario string
	// approval is the runtimes' initial approval mode (default auto).
	approval protocol.ApprovalMode
	// cfg is copied into the handler's Config (Sessions is set here).
	cfg httpattach.Config
	// workspace is the workspace directory (default a fresh one).
	workspace string
	// bufferFrames overrides the runtime ring (default the request's).
	bufferFrames int
	// now is the runtimes' clock.
	now func() time.Time
	// turn, when set, runs prompts in place of the agent.
	turn runtime.TurnFunc
}

// server is an httptest server running the handler over real runtimes
// (replay provider, real tools and utilities in a temporary workspace).
type server struct {
	t         testing.TB
	srv       *httptest.Server
	h         *httpattach.Handler
	sessions  *httpattach.SessionMap
	workspace string
	token     string
}

func newServer(t testing.TB, o options) *server {
	t.Helper()
	v := prototest.Validator(t)
	if o.workspace == "" {
		o.workspace = t.TempDir()
	}
	if o.approval == "" {
		o.approval = protocol.ApprovalAuto
	}
	scenPath := ""
	if o.scenario != "" {
		scenPath = filepath.Join("testdata", "scenarios", o.scenario+".yaml")
	}
	scen := transporttest.Scenario(t, scenPath)
	root, err := workspace.Open(o.workspace)
	if err != nil {
		t.Fatalf("open workspace: %v", err)
	}
	t.Cleanup(func() { root.Close() })
	tools := transporttest.Tools(t, root)
	store := session.NewStore(t.TempDir())
	var logs []*session.Session
	var logsMu sync.Mutex
	newRuntime := func(_ context.Context, req httpattach.CreateRequest) (*runtime.Runtime, string, error) {
		cfg, sess, err := transporttest.Session(store, root, replay.New(scen), tools, v)
		if err != nil {
			return nil, "", err
		}
		logsMu.Lock()
		logs = append(logs, sess)
		logsMu.Unlock()
		mode := o.approval
		if req.ApprovalMode != "" {
			mode = req.ApprovalMode
		}
		frames := req.ReplayRing
		if o.bufferFrames > 0 {
			frames = o.bufferFrames
		}
		cfg.ApprovalMode = mode
		cfg.BufferFrames = frames
		cfg.Now = o.now
		cfg.Turn = o.turn
		cfg.Utilities = func(emit func(protocol.Message)) runtime.Utilities {
			return utility.New(utility.Config{Root: root, Emit: emit})
		}
		rt, err := runtime.New(cfg)
		return rt, sess.ID(), err
	}
	sessions := httpattach.NewSessionMap(newRuntime)
	cfg := o.cfg
	cfg.Sessions = sessions
	h := httpattach.NewHandler(cfg)
	srv := httptest.NewServer(h)
	s := &server{t: t, srv: srv, h: h, sessions: sessions, workspace: root.Dir(), token: cfg.Token}
	t.Cleanup(func() {
		srv.CloseClientConnections()
		sessions.Close()
		srv.Close()
		h.Close()
		logsMu.Lock()
		defer logsMu.Unlock()
		for _, l := range logs {
			l.Close()
		}
	})
	return s
}

// hdr is a set of request headers.
type hdr map[string]string

// call sends a request and decodes the JSON answer into out (when not
// nil); it returns the status and the raw body.
func (s *server) call(method, path string, body any, h hdr, out any) (int, []byte) {
	s.t.Helper()
	status, data := transporttest.Call(s.t, s.srv.Client(), method, s.srv.URL+path, s.token, body, h)
	if out != nil && status == http.StatusOK {
		if err := json.Unmarshal(data, out); err != nil {
			s.t.Fatalf("decode %s %s answer %s: %v", method, path, data, err)
		}
	}
	return status, data
}

// do sends a request with the server's token and the headers h; the
// caller closes the answer's body.
func (s *server) do(ctx context.Context, method, path string, body io.Reader, h hdr) *http.Response {
	s.t.Helper()
	resp, err := s.srv.Client().Do(transporttest.Request(s.t, ctx, method, s.srv.URL+path, s.token, body, h))
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// wantError checks an error answer's status, code and text.
func wantError(t testing.TB, status int, body []byte, wantStatus int, wantCode, wantText string) {
	t.Helper()
	edgetest.WantError(t, "answer", status, body, wantStatus, wantCode, wantText)
}

// createSession creates a session and returns its id.
func (s *server) createSession(body map[string]any) string {
	s.t.Helper()
	var snap struct {
		SessionID string `json:"session_id"`
	}
	st, data := s.call("POST", "/api/headless/sessions", body, nil, &snap)
	if st != 200 || snap.SessionID == "" {
		s.t.Fatalf("create session: %d %s", st, data)
	}
	return snap.SessionID
}

// subSnap is a subscription snapshot.
type subSnap struct {
	ConnectionID             string          `json:"connection_id"`
	SubscriptionID           string          `json:"subscription_id"`
	Role                     string          `json:"role"`
	ControllerLeaseGranted   bool            `json:"controller_lease_granted"`
	ControllerSubscriptionID *string         `json:"controller_subscription_id"`
	ControllerConnectionID   *string         `json:"controller_connection_id"`
	LeaseExpiresAt           *string         `json:"lease_expires_at"`
	HeartbeatIntervalMS      int64           `json:"heartbeat_interval_ms"`
	Snapshot                 json.RawMessage `json:"snapshot"`
}

// newControlledSession starts a server with default options, creates a
// session on it and subscribes a controller: the opening of most tests.
func newControlledSession(t testing.TB) (*server, string, subSnap) {
	t.Helper()
	s := newServer(t, options{})
	id := s.createSession(nil)
	return s, id, s.subscribe(id, map[string]any{"role": "controller"})
}

// subscribe makes an explicit subscription.
func (s *server) subscribe(id string, body map[string]any) subSnap {
	s.t.Helper()
	var out subSnap
	st, data := s.call("POST", "/api/headless/sessions/"+id+"/subscribe", body, nil, &out)
	if st != 200 {
		s.t.Fatalf("subscribe %v: %d %s", body, st, data)
	}
	if err := prototest.Validator(s.t).ValidateSnapshot(out.Snapshot); err != nil {
		s.t.Errorf("subscription snapshot does not validate: %v", err)
	}
	return out
}

// send posts a protocol message as the subscription.
func (s *server) send(id, subID string, msg string) (int, []byte) {
	s.t.Helper()
	h := hdr{}
	if subID != "" {
		h["x-maestro-headless-subscriber-id"] = subID
	}
	return s.call("POST", "/api/headless/sessions/"+id+"/messages", msg, h, nil)
}

// mustSend posts a message and requires 200.
func (s *server) mustSend(id, subID, msg string) {
	s.t.Helper()
	if st, data := s.send(id, subID, msg); st != 200 {
		s.t.Fatalf("send %s: %d %s", msg, st, data)
	}
}

// envelope is one decoded SSE envelope.
type envelope struct {
	Type     string          `json:"type"`
	Cursor   int64           `json:"cursor"`
	Reason   string          `json:"reason"`
	Message  json.RawMessage `json:"message"`
	Snapshot json.RawMessage `json:"snapshot"`
	raw      string
}

// msgType is the type of a message envelope's message.
func (e envelope) msgType() string {
	var m struct {
		Type string `json:"type"`
	}
	json.Unmarshal(e.Message, &m)
	return m.Type
}

// snapCursor is the cursor of a snapshot or reset envelope's snapshot.
func (e envelope) snapCursor() int64 {
	var s struct {
		Cursor int64 `json:"cursor"`
	}
	json.Unmarshal(e.Snapshot, &s)
	return s.Cursor
}

// sse is a client of one event stream; every envelope it reads is
// validated against the protocol's schemas.
type sse struct {
	*transporttest.SSE
	t      testing.TB
	resp   *http.Response
	cancel context.CancelFunc
}

// open starts an event stream; query is appended to the URL.
func (s *server) open(id, query string, h hdr) *sse {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	path := "/api/headless/sessions/" + id + "/events"
	if query != "" {
		path += "?" + query
	}
	s.t.Cleanup(cancel)
	resp := s.do(ctx, "GET", path, nil, h)
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		s.t.Fatalf("open events: %d %s", resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		s.t.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	v := prototest.Validator(s.t)
	st := &sse{SSE: transporttest.ReadSSE(s.t, resp.Body, 20*time.Second, v.ValidateEnvelope), t: s.t, resp: resp, cancel: cancel}
	s.t.Cleanup(st.close)
	return st
}

func (st *sse) close() {
	st.cancel()
	st.resp.Body.Close()
}

// next returns the next envelope, failing after a timeout.
func (st *sse) next() envelope {
	st.t.Helper()
	data := st.Next()
	var e envelope
	json.Unmarshal(data, &e)
	e.raw = string(data)
	return e
}

// until reads envelopes until a message of type typ and returns all of
// them, that one last.
func (st *sse) until(typ string) []envelope {
	st.t.Helper()
	var out []envelope
	for {
		e := st.next()
		out = append(out, e)
		if e.Type == "message" && e.msgType() == typ {
			return out
		}
	}
}
