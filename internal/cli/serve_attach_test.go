package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/httpedge/edgetest"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/transport/transporttest"
)

// attachServe is a `maestro serve` run in process for the remote-attach
// tests.
type attachServe struct {
	t     *testing.T
	url   string
	token string
	// stop cancels serve and returns its exit code.
	stop func() int
	log  *syncOut
}

// startAttachServe runs `maestro serve` without workers on a free
// loopback port with env; stop ends it (the test's cleanup does so too).
func startAttachServe(t *testing.T, env map[string]string, args ...string) *attachServe {
	t.Helper()
	return serveInProcess(t, env, append([]string{"--workers", "0"}, args...))
}

// serveInProcess runs `maestro serve --listen 127.0.0.1:0 args...` in process
// with env and waits for its URL; stop ends it (the test's cleanup does so
// too, and fails the test on a non-zero exit).
func serveInProcess(t *testing.T, env map[string]string, args []string) *attachServe {
	t.Helper()
	out := &syncOut{re: regexp.MustCompile(`http://127\.0\.0\.1:\d+`), found: make(chan string, 1)}
	errOut := &syncOut{}
	ios := &IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut, Getenv: func(k string) string { return env[k] }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, ios, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...))
	}()
	s := &attachServe{t: t, token: env["MAESTRO_API_TOKEN"], log: errOut}
	stopped, code := false, -1
	s.stop = func() int {
		if stopped {
			return code
		}
		stopped = true
		cancel()
		select {
		case code = <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("serve did not stop within 30 s:\n%s", errOut.String())
		}
		return code
	}
	t.Cleanup(func() {
		if c := s.stop(); c != 0 {
			t.Errorf("serve exited %d:\n%s", c, errOut.String())
		}
		if t.Failed() {
			t.Logf("serve log:\n%s", errOut.String())
		}
	})
	select {
	case s.url = <-out.found:
	case c := <-done:
		stopped, code = true, c
		t.Fatalf("serve exited %d before listening:\n%s%s", c, out.String(), errOut.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not print its URL within 30 s:\n%s", errOut.String())
	}
	return s
}

// call sends a JSON request with the token (unless headers set
// Authorization to "-", which sends none) and returns the status and
// body.
func (s *attachServe) call(method, path string, body any, headers map[string]string) (int, []byte) {
	s.t.Helper()
	withType := map[string]string{"Content-Type": "application/json"}
	maps.Copy(withType, headers)
	return transporttest.Call(s.t, http.DefaultClient, method, s.url+path, s.token, body, withType)
}

// mustCall is call that expects 200 and decodes the answer into out.
func (s *attachServe) mustCall(method, path string, body any, headers map[string]string, out any) {
	s.t.Helper()
	code, data := s.call(method, path, body, headers)
	if code != http.StatusOK {
		s.t.Fatalf("%s %s: %d %s", method, path, code, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			s.t.Fatalf("%s %s: %s: %v", method, path, data, err)
		}
	}
}

// attachEnvelope is one SSE envelope, strictly decoded.
type attachEnvelope struct {
	Type    string          `json:"type"`
	Cursor  int64           `json:"cursor"`
	Message json.RawMessage `json:"message"`
	msg     map[string]any
}

// attachStream reads one event stream.
type attachStream struct {
	*transporttest.SSE
	t *testing.T
}

func (s *attachServe) stream(path string, headers map[string]string) *attachStream {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s.t.Cleanup(cancel)
	resp, err := http.DefaultClient.Do(transporttest.Request(s.t, ctx, "GET", s.url+path, s.token, nil, headers))
	if err != nil {
		s.t.Fatalf("open %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		s.t.Fatalf("open %s: %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	s.t.Cleanup(func() { resp.Body.Close() })
	return &attachStream{SSE: transporttest.ReadSSE(s.t, resp.Body, 60*time.Second, nil), t: s.t}
}

// next returns the next envelope; the stream ending or a bad envelope
// fails the test.
func (st *attachStream) next() attachEnvelope {
	st.t.Helper()
	var e attachEnvelope
	json.Unmarshal(st.Next(), &e)
	if e.Type == "message" {
		json.Unmarshal(e.Message, &e.msg)
	}
	return e
}

// turn reads message envelopes until the demo's turn completes: the
// response_end of the response whose text starts "Done.". It returns
// them in order.
func (st *attachStream) turn() []attachEnvelope {
	st.t.Helper()
	var out []attachEnvelope
	final := false
	for {
		e := st.next()
		if e.Type != "message" {
			continue
		}
		out = append(out, e)
		switch e.msg["type"] {
		case "response_chunk":
			if c, _ := e.msg["content"].(string); strings.HasPrefix(c, "Done.") {
				final = true
			}
		case "error":
			st.t.Fatalf("error during the turn: %v", e.msg)
		case "response_end":
			if final {
				return out
			}
		}
	}
}

// TestServeAttach drives `maestro serve`'s session API end to end: 401
// without the token, a live session created over HTTP (no model: the
// replay demo, badged replay) in a fresh workspace under the data dir, a
// controller that sends a prompt and reads the whole turn over SSE, a
// viewer that sees the same events, a second controller refused with 409,
// the session log under <data dir>/sessions, and the session shut down
// and saved when serve stops.
func TestServeAttach(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	env := map[string]string{"MAESTRO_HOME": dataDir, "MAESTRO_API_TOKEN": "tok-attach"}
	s := startAttachServe(t, env, "--data-dir", dataDir)

	// The token is required, as on every other route.
	for _, h := range []map[string]string{
		{"Authorization": "-"},
		{"Authorization": "Bearer wrong"},
		{"Authorization": "-", "x-maestro-api-key": "wrong"},
	} {
		code, data := s.call("POST", "/api/headless/sessions", map[string]any{}, h)
		edgetest.WantErrorContaining(t, "create without the token", code, data, http.StatusUnauthorized, "access_denied", "token")
	}
	code, data := s.call("GET", "/api/headless/sessions/x/events", nil, map[string]string{"Authorization": "-"})
	edgetest.WantErrorContaining(t, "events without the token", code, data, http.StatusUnauthorized, "access_denied", "token")

	// Bad create requests name the field.
	for _, tc := range []struct {
		name string
		body map[string]any
		want string
	}{
		{"relative workspace", map[string]any{"workspaceRoot": "some/dir"}, `workspaceRoot "some/dir": expected an absolute path`},
		{"missing workspace", map[string]any{"workspaceRoot": filepath.Join(dataDir, "nope")}, "is not an existing directory"},
		{"replay file", map[string]any{"model": "replay//etc/passwd"}, "only replay scenario is replay/demo"},
		{"unknown provider", map[string]any{"model": "acme/x"}, `model "acme/x": unknown provider`}, {"unconfigured provider", map[string]any{"model": "anthropic/claude-sonnet-4-5"}, `model: anthropic: auth: no Anthropic credentials`},
	} {
		code, data := s.call("POST", "/api/headless/sessions", tc.body, nil)
		edgetest.WantErrorContaining(t, tc.name, code, data, http.StatusBadRequest, "bad_request", tc.want)
	}

	// Create: the answer is the snapshot of a live session.
	var snap struct {
		SessionID string `json:"session_id"`
		Cursor    int64  `json:"cursor"`
		State     struct {
			Cwd      string `json:"cwd"`
			Provider string `json:"provider"`
			IsReady  bool   `json:"is_ready"`
		} `json:"state"`
	}
	s.mustCall("POST", "/api/headless/sessions", map[string]any{"approvalMode": "auto", "clientInfo": map[string]any{"name": "serve-attach-test"}}, nil, &snap)
	id := snap.SessionID
	if id == "" || !snap.State.IsReady || snap.State.Provider != "replay" {
		t.Fatalf("create: %+v", snap)
	}
	ws := snap.State.Cwd
	if rel, err := filepath.Rel(filepath.Join(dataDir, "workspaces"), ws); err != nil || strings.HasPrefix(rel, "..") || strings.Contains(rel, string(filepath.Separator)) {
		t.Fatalf("default workspace %q is not a directory of %s", ws, filepath.Join(dataDir, "workspaces"))
	}
	// The API key header is accepted as well.
	s.mustCall("GET", "/api/headless/sessions/"+id+"/state", nil, map[string]string{"Authorization": "-", "x-maestro-api-key": "tok-attach"}, nil)

	// A controller: register, subscribe, stream.
	var reg struct {
		ConnectionID           string `json:"connection_id"`
		ControllerLeaseGranted bool   `json:"controller_lease_granted"`
		SessionID              string `json:"session_id"`
	}
	s.mustCall("POST", "/api/headless/connections", map[string]any{"sessionId": id, "role": "controller", "protocolVersion": protocol.Version}, nil, &reg)
	if !reg.ControllerLeaseGranted || reg.SessionID != id {
		t.Fatalf("register controller: %+v", reg)
	}
	var sub struct {
		SubscriptionID string `json:"subscription_id"`
	}
	s.mustCall("POST", "/api/headless/sessions/"+id+"/subscribe", map[string]any{"connectionId": reg.ConnectionID, "role": "controller"}, nil, &sub)
	ctrl := s.stream("/api/headless/sessions/"+id+"/events?subscriptionId="+sub.SubscriptionID, nil)

	// A viewer watches from the start of the session: ready says replay.
	viewer := s.stream("/api/headless/sessions/"+id+"/events?cursor=0", map[string]string{"x-maestro-headless-role": "viewer"})
	ready := viewer.next()
	if ready.Type != "message" || ready.msg["type"] != "ready" || ready.msg["executor_type"] != "replay" || ready.msg["session_id"] != id {
		t.Fatalf("viewer's first envelope: %+v", ready.msg)
	}

	// A second controller is refused while the first holds the lease.
	code, data = s.call("POST", "/api/headless/connections", map[string]any{"sessionId": id, "role": "controller"}, nil)
	edgetest.WantErrorContaining(t, "second controller", code, data, http.StatusConflict, "controller_lease_held", "Controller lease is already held by another connection")

	// The controller prompts; the run goes on after the answer.
	var ack struct {
		Accepted bool `json:"accepted"`
	}
	s.mustCall("POST", "/api/headless/sessions/"+id+"/messages", map[string]any{"type": "prompt", "content": "show me what you can do"},
		map[string]string{"x-maestro-headless-subscriber-id": sub.SubscriptionID}, &ack)
	if !ack.Accepted {
		t.Fatal("prompt not accepted")
	}
	got := ctrl.turn()
	seen := viewer.turn()
	types := func(es []attachEnvelope) (out []string) {
		for _, e := range es {
			out = append(out, e.msg["type"].(string))
		}
		return out
	}
	want := []string{"response_start", "response_end", "tool_call", "tool_start", "tool_end", "tool_call", "tool_start", "tool_end", "response_end"}
	for _, typ := range want {
		if !strings.Contains(strings.Join(types(got), " "), typ) {
			t.Fatalf("controller's turn has no %s: %v", typ, types(got))
		}
	}
	// The viewer saw the same messages with the same cursors (it also saw
	// the frames before the controller subscribed).
	var tail []attachEnvelope
	for _, e := range seen {
		if e.Cursor >= got[0].Cursor {
			tail = append(tail, e)
		}
	}
	if len(tail) != len(got) {
		t.Fatalf("viewer saw %d messages of the turn, controller %d:\n%v\n%v", len(tail), len(got), types(tail), types(got))
	}
	for i := range got {
		if tail[i].Cursor != got[i].Cursor || string(tail[i].Message) != string(got[i].Message) {
			t.Fatalf("message %d differs:\nviewer     %d %s\ncontroller %d %s", i, tail[i].Cursor, tail[i].Message, got[i].Cursor, got[i].Message)
		}
	}
	// The demo's tools ran for real in the session's workspace.
	if data, err := os.ReadFile(filepath.Join(ws, "hello-maestro", "greet.txt")); err != nil || !strings.Contains(string(data), "hello, world") {
		t.Fatalf("the demo's file: %q %v", data, err)
	}
	// A viewer may not prompt.
	code, data = s.call("POST", "/api/headless/sessions/"+id+"/messages", map[string]any{"type": "prompt", "content": "x"},
		map[string]string{"x-maestro-headless-role": "viewer"})
	if code != http.StatusForbidden && code != http.StatusConflict {
		t.Fatalf("viewer prompt: %d %s", code, data)
	}

	// Stopping serve ends the streams, shuts the session down and saves
	// its log under <data dir>/sessions.
	if c := s.stop(); c != 0 {
		t.Fatalf("serve exited %d", c)
	}
	ctrl.Ended()
	viewer.Ended()
	log, err := os.ReadFile(filepath.Join(dataDir, "sessions", id, "events.jsonl"))
	if err != nil {
		t.Fatalf("session log: %v", err)
	}
	for _, typ := range []string{`"type":"ready"`, `show me what you can do`, `"type":"response_end"`, `"executor_type":"replay"`} {
		if !bytes.Contains(log, []byte(typ)) {
			t.Errorf("session log has no %s", typ)
		}
	}
	if !strings.Contains(s.log.String(), "headless session closed") {
		t.Errorf("serve did not report the session closed:\n%s", s.log.String())
	}
}

// TestServeAttachWithoutToken: on loopback without a token the session
// API needs none, but keeps serve's protections: a foreign Host
// (DNS rebinding) and a cross-origin browser POST are refused.
func TestServeAttachWithoutToken(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	s := startAttachServe(t, map[string]string{"MAESTRO_HOME": dataDir}, "--data-dir", dataDir)
	ws := t.TempDir()
	var snap struct {
		SessionID string `json:"session_id"`
		State     struct {
			Cwd string `json:"cwd"`
		} `json:"state"`
	}
	s.mustCall("POST", "/api/headless/sessions", map[string]any{"workspaceRoot": ws}, nil, &snap)
	if snap.SessionID == "" || snap.State.Cwd != ws {
		t.Fatalf("create in %s: %+v", ws, snap)
	}
	for _, tc := range []struct {
		name    string
		headers map[string]string
	}{
		{"foreign host", map[string]string{"Host": "attacker.example"}},
		{"cross-origin", map[string]string{"Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site"}},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", s.url+"/api/headless/sessions", strings.NewReader(`{}`))
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		if h := tc.headers["Host"]; h != "" {
			req.Host = h
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tc.name, resp.StatusCode)
		}
	}
	// A shutdown message ends the session: its streams end, it is
	// forgotten and its log saved.
	watch := s.stream("/api/headless/sessions/"+snap.SessionID+"/events", nil)
	if first := watch.next(); first.Type != "snapshot" {
		t.Fatalf("first envelope of an implicit stream: %+v", first)
	}
	s.mustCall("POST", "/api/headless/sessions/"+snap.SessionID+"/messages", map[string]any{"type": "shutdown"}, nil, nil)
	watch.Ended()
	code, data := s.call("GET", "/api/headless/sessions/"+snap.SessionID, nil, nil)
	edgetest.WantErrorContaining(t, "state after shutdown", code, data, http.StatusNotFound, "not_found", "Headless session not found")
	if _, err := os.Stat(filepath.Join(dataDir, "sessions", snap.SessionID, "events.jsonl")); err != nil {
		t.Fatalf("session log: %v", err)
	}
}

// TestServeNoWorkersOnSQLiteWarns: serve --workers 0 on SQLite says at
// start that no job will run (no maestro worker can open the database
// beside it); with workers it says nothing of the kind. Stopped, a serve
// with workers says what becomes of their jobs (it said only 'stopping',
// then nothing for the 10 s of grace).
func TestServeNoWorkersOnSQLiteWarns(t *testing.T) {
	t.Parallel()
	for _, workers := range []string{"0", "1"} {
		dataDir := t.TempDir()
		s := serveInProcess(t, map[string]string{"MAESTRO_HOME": dataDir}, []string{"--data-dir", dataDir, "--workers", workers})
		warned := strings.Contains(s.log.String(), "--workers 0 on SQLite: no job will run")
		if warned != (workers == "0") {
			t.Errorf("--workers %s: warned %v; serve said:\n%s", workers, warned, s.log.String())
		}
		s.stop()
		want := "maestro serve: stopping\n"
		if workers == "1" {
			want = "maestro serve: stopping: no new jobs; running jobs get 10s to finish, then go back to the queue (the attempt does not count; a second Ctrl-C or SIGTERM gives them back at once)\n"
		}
		if !strings.Contains(s.log.String(), want) {
			t.Errorf("--workers %s stopped: serve said:\n%s\nwant %q", workers, s.log.String(), want)
		}
	}
}
