package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/hostedrunner"
	"github.com/maestro-run/maestro/internal/httpedge/edgetest"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/protocol/prototest"
)

var _ = flag.Bool("update", false, "rewrite golden files") // read by proctest.Golden

// runnerProc is a hosted runner launched through the fixture process
// contract (wire contract §17).
type runnerProc struct {
	t       *testing.T
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  *bytes.Buffer
	base    string
	session string
	token   string
	exited  chan error
	// named registers connections with the session's id: a `maestro
	// serve`, where a registration without one creates a new session.
	named bool
}

// fixtureEnv is the harness's environment (§17) on a machine with no model.
func fixtureEnv(t *testing.T, ws, runnerID string, extra ...string) []string {
	env := append(proctest.NoModelEnv(t.TempDir()),
		"MAESTRO_RUNNER_SESSION_ID="+runnerID,
		"MAESTRO_SESSION_ID=session_123",
		"MAESTRO_WORKSPACE_ROOT="+ws,
		"MAESTRO_HOSTED_RUNNER_LISTEN=127.0.0.1:0",
		"MAESTRO_REMOTE_RUNNER_WORKSPACE_ID=workspace_123",
		"MAESTRO_AGENT_RUN_ID=run_123",
	)
	return append(env, extra...)
}

// startRunner launches the binary and waits for its ready line.
func startRunner(t *testing.T, env []string) *runnerProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, binary, "hosted-runner")
	cmd.Env = env
	p := &runnerProc{t: t, cmd: cmd, stderr: &bytes.Buffer{}, exited: make(chan error, 1)}
	cmd.Stderr = p.stderr
	var out io.ReadCloser
	p.stdin, out = proctest.StartPiped(t, cmd)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, out)
	}()
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() { p.stop() })
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatalf("hosted runner exited without a ready line; stderr:\n%s", p.stderr)
		}
		var ready struct {
			BaseURL   string `json:"baseUrl"`
			SessionID string `json:"sessionId"`
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ready); err != nil || !strings.HasPrefix(ready.BaseURL, "http://127.0.0.1:") || ready.SessionID == "" {
			t.Fatalf("ready line %q: %v", line, err)
		}
		p.base, p.session = ready.BaseURL, ready.SessionID
	case <-time.After(30 * time.Second):
		t.Fatalf("no ready line within 30 s; stderr:\n%s", p.stderr)
	}
	return p
}

// stop closes stdin (the harness's shutdown) and waits for exit 0.
func (p *runnerProc) stop() {
	if p.stdin == nil {
		return
	}
	p.stdin.Close()
	p.stdin = nil
	select {
	case err := <-p.exited:
		if err != nil {
			p.t.Errorf("hosted runner exit: %v; stderr:\n%s", err, p.stderr)
		}
	case <-time.After(20 * time.Second):
		p.cmd.Process.Kill()
		p.t.Errorf("hosted runner did not exit within 20 s of stdin EOF; stderr:\n%s", p.stderr)
	}
}

// call makes one HTTP request and decodes the JSON answer into out (if
// not nil). It returns the status.
func (p *runnerProc) call(method, path string, body any, headers map[string]string, out any) int {
	p.t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			p.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, p.base+path, rd)
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if raw, ok := out.(*[]byte); ok {
			*raw = data
		} else if err := json.Unmarshal(data, out); err != nil {
			p.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

// envelope is one SSE envelope.
type envelope struct {
	Type     string          `json:"type"`
	Cursor   int64           `json:"cursor"`
	Reason   string          `json:"reason"`
	Message  json.RawMessage `json:"message"`
	Snapshot json.RawMessage `json:"snapshot"`
	// raw is the envelope as received (the text after "data: ").
	raw string
	// at is when it was read.
	at time.Time
}

// client is an SSE stream; conn and sub are set for an attached controller.
type client struct {
	p      *runnerProc
	conn   string
	sub    string
	events chan envelope
}

// attach registers a controller, subscribes it and opens its stream.
func (p *runnerProc) attach(caps map[string]any) *client {
	p.t.Helper()
	var reg struct {
		ConnectionID string `json:"connection_id"`
		SessionID    string `json:"session_id"`
	}
	body := map[string]any{"role": "controller", "protocolVersion": protocol.Version, "clientInfo": map[string]any{"name": "e2e"}, "takeControl": true}
	if caps != nil {
		body["capabilities"] = caps
	}
	if p.named {
		body["sessionId"] = p.session
	}
	if code := p.call("POST", "/api/headless/connections", body, nil, &reg); code != 200 || reg.SessionID != p.session {
		p.t.Fatalf("register: %d %+v", code, reg)
	}
	var sub struct {
		SubscriptionID string `json:"subscription_id"`
	}
	if code := p.call("POST", "/api/headless/sessions/"+p.session+"/subscribe", map[string]any{"connectionId": reg.ConnectionID, "role": "controller"}, nil, &sub); code != 200 {
		p.t.Fatalf("subscribe: %d", code)
	}
	c := p.open(http.DefaultClient, "subscriptionId="+sub.SubscriptionID, nil, nil)
	c.conn, c.sub = reg.ConnectionID, sub.SubscriptionID
	return c
}

// open opens an SSE stream on the runner's session (query without the
// "?") through hc. Envelopes are read only once gate is closed (nil: at
// once), so that a test can play a client that stops reading. The
// response head is awaited at most 30 s; the stream lasts until the test
// ends.
func (p *runnerProc) open(hc *http.Client, query string, headers map[string]string, gate <-chan struct{}) *client {
	p.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", p.base+"/api/headless/sessions/"+p.session+"/events?"+query, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	head := time.AfterFunc(30*time.Second, cancel)
	resp, err := hc.Do(req)
	head.Stop()
	if err != nil {
		p.t.Fatalf("GET events?%s: %v", query, err)
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		p.t.Fatalf("GET events?%s: %d %s", query, resp.StatusCode, data)
	}
	c := &client{p: p, events: make(chan envelope, 256)}
	go func() {
		defer resp.Body.Close()
		defer close(c.events)
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return
			}
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			e := envelope{raw: data, at: time.Now()}
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				e.Type = "undecodable: " + err.Error()
			}
			select {
			case c.events <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return c
}

// send posts a protocol message as this controller.
func (c *client) send(m map[string]any) {
	c.p.t.Helper()
	var raw []byte
	code := c.p.call("POST", "/api/headless/sessions/"+c.p.session+"/messages", m,
		map[string]string{"x-maestro-headless-connection-id": c.conn, "x-maestro-headless-subscriber-id": c.sub}, &raw)
	if code != 200 {
		c.p.t.Fatalf("send %v: %d %s", m["type"], code, raw)
	}
}

// next returns the next envelope.
func (c *client) next() envelope {
	c.p.t.Helper()
	select {
	case e, ok := <-c.events:
		if !ok {
			c.p.t.Fatal("event stream ended")
		}
		if strings.HasPrefix(e.Type, "undecodable") {
			c.p.t.Fatalf("SSE envelope %s: %s", e.Type, e.raw)
		}
		return e
	case <-time.After(20 * time.Second):
		c.p.t.Fatal("no envelope within 20 s")
	}
	return envelope{}
}

// until returns the first message envelope whose message matches.
func (c *client) until(match func(m map[string]any) bool) (envelope, map[string]any) {
	c.p.t.Helper()
	for {
		e := c.next()
		if e.Type != "message" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(e.Message, &m); err != nil {
			c.p.t.Fatal(err)
		}
		if match(m) {
			return e, m
		}
	}
}

func isStatusMsg(text string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["type"] == "status" && m["message"] == text }
}

func TestHostedRunnerFixtureContract(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startRunner(t, fixtureEnv(t, ws, "mrs_123", "MAESTRO_REMOTE_RUNNER_OWNER_INSTANCE_ID=pod_123"))
	if p.session != "session_123" {
		t.Errorf("ready sessionId %q, want session_123", p.session)
	}

	var raw []byte
	if code := p.call("GET", hostedrunner.IdentityPath, nil, nil, &raw); code != 200 ||
		strings.TrimSpace(string(raw)) != `{"protocol_version":"evalops.remote-runner.identity.v1","runner_session_id":"mrs_123","owner_instance_id":"pod_123","ready":true,"draining":false}` {
		t.Errorf("identity: %d %s", code, raw)
	}

	c := p.attach(map[string]any{"serverRequests": []string{"approval"}})
	c.send(map[string]any{"type": "prompt", "content": "hello"})
	c.until(isStatusMsg("Prompt: hello"))

	approval := hostedrunner.ApprovalPrefix + `{"request_id":"req_e2e","tool":"bash","args":{"command":"ls"},"reason":"Needs a look"}`
	c.send(map[string]any{"type": "prompt", "content": approval})
	_, req := c.until(func(m map[string]any) bool { return m["type"] == "server_request" })
	if req["request_id"] != "req_e2e" || req["request_type"] != "approval" || req["tool"] != "bash" || req["reason"] != "Needs a look" {
		t.Errorf("server_request: %v", req)
	}
	c.send(map[string]any{"type": "server_request_response", "request_id": "req_e2e", "request_type": "approval", "approved": false, "reason": "no"})
	_, res := c.until(func(m map[string]any) bool { return m["type"] == "server_request_resolved" })
	if res["request_id"] != "req_e2e" || res["resolution"] != "denied" || res["resolved_by"] != "user" {
		t.Errorf("server_request_resolved: %v", res)
	}
	c.until(isStatusMsg("Approval denied: bash"))

	// Drain: the manifest equals the golden file (normalised), and new
	// attach traffic gets 503.
	var d hostedrunner.DrainResponse
	if code := p.call("POST", hostedrunner.DrainPath, map[string]any{"reason": "ttl_expired", "requestedBy": "platform", "export_paths": []string{".", "notes.txt"}}, nil, &d); code != 200 || d.Status != "drained" {
		t.Fatalf("drain: %d %+v", code, d)
	}
	onDisk, err := os.ReadFile(d.ManifestPath)
	if err != nil {
		t.Fatal(err)
	}
	proctest.Golden(t, "testdata/hostedrunner-drain-manifest.golden.json", hostedrunner.Normalize(onDisk, ws))
	var e struct {
		ErrorType string `json:"error_type"`
	}
	if code := p.call("POST", "/api/headless/connections", map[string]any{"role": "controller"}, nil, &e); code != 503 || e.ErrorType != "runtime_not_ready" {
		t.Errorf("attach after drain: %d %+v, want 503 runtime_not_ready", code, e)
	}
	var id hostedrunner.Identity
	if p.call("GET", hostedrunner.IdentityPath, nil, nil, &id); id.Ready || !id.Draining || id.DrainManifestPath != d.ManifestPath {
		t.Errorf("identity after drain: %+v", id)
	}
	if code := p.call("GET", "/readyz", nil, nil, nil); code != 503 {
		t.Errorf("/readyz after drain: %d", code)
	}
	p.stop()
	cursor := *d.Manifest.Runtime.Cursor

	// Restore on a new runner: reset{restored_from_snapshot} first,
	// carrying the manifest's cursor N (issue 12 defect 5), then a new
	// controller prompts and the first new frame takes N+1.
	r := startRunner(t, fixtureEnv(t, ws, "mrs_456", "MAESTRO_REMOTE_RUNNER_RESTORE_MANIFEST="+d.ManifestPath))
	if r.session != "session_123" {
		t.Errorf("restored sessionId %q", r.session)
	}
	if r.call("GET", hostedrunner.IdentityPath, nil, nil, &id); !id.Ready || id.RunnerSessionID != "mrs_456" {
		t.Errorf("restored identity: %+v", id)
	}
	// A client of the drained runner resumes at the manifest's cursor.
	resumed := r.open(http.DefaultClient, "cursor="+strconv.FormatInt(cursor, 10), nil, nil)
	first := resumed.next()
	if first.Type != "reset" || first.Reason != "restored_from_snapshot" {
		t.Fatalf("first envelope after restore: %+v", first)
	}
	var snap struct {
		SessionID string `json:"session_id"`
		Cursor    int64  `json:"cursor"`
	}
	if err := json.Unmarshal(first.Snapshot, &snap); err != nil || snap.SessionID != "session_123" || snap.Cursor != cursor {
		t.Errorf("restored snapshot: %+v, want the manifest cursor %d (%v)", snap, cursor, err)
	}
	c2 := r.attach(nil)
	if next := resumed.next(); next.Cursor != cursor+1 {
		t.Errorf("first frame after the restore: %s, want cursor %d", next.raw, cursor+1)
	}
	c2.send(map[string]any{"type": "prompt", "content": "after restore"})
	env, _ := c2.until(isStatusMsg("Prompt: after restore"))
	if env.Cursor <= snap.Cursor {
		t.Errorf("prompt cursor %d, want after %d", env.Cursor, snap.Cursor)
	}
	r.stop()

	// A manifest whose flush failed restores not ready, with last_error.
	var m map[string]any
	if err := json.Unmarshal(onDisk, &m); err != nil {
		t.Fatal(err)
	}
	rt := m["runtime"].(map[string]any)
	rt["flush_status"], rt["error"] = "failed", "disk full during flush"
	failed := filepath.Join(ws, "failed-manifest.json")
	data, _ := json.Marshal(m)
	if err := os.WriteFile(failed, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f := startRunner(t, fixtureEnv(t, ws, "mrs_789", "REMOTE_RUNNER_RESTORE_MANIFEST=failed-manifest.json"))
	if f.call("GET", hostedrunner.IdentityPath, nil, nil, &id); id.Ready || id.Draining {
		t.Errorf("identity of a failed restore: %+v", id)
	}
	var st protocol.Snapshot
	if code := f.call("GET", "/api/headless/sessions/session_123/state", nil, nil, &st); code != 200 || st.State.IsReady ||
		st.State.LastError != "disk full during flush" || st.State.LastErrorType != protocol.ErrorProtocol || st.State.LastStatus != hostedrunner.StatusRestoreFailed {
		t.Errorf("state of a failed restore: %d ready %v error %q type %q status %q", code, st.State.IsReady, st.State.LastError, st.State.LastErrorType, st.State.LastStatus)
	}
	if code := f.call("POST", "/api/headless/connections", map[string]any{"role": "controller"}, nil, &e); code != 503 || e.ErrorType != "runtime_not_ready" {
		t.Errorf("attach to a failed restore: %d %+v", code, e)
	}
	if code := f.call("GET", "/readyz", nil, nil, nil); code != 503 {
		t.Errorf("/readyz of a failed restore: %d", code)
	}
}

// Auth: with a token required, /api without it is 401 and with it 200;
// the well-known routes stay open. Off loopback, a missing token fails
// start-up naming the variable.
func TestHostedRunnerAuth(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	p := startRunner(t, fixtureEnv(t, ws, "mrs_auth", "MAESTRO_WEB_REQUIRE_KEY=1", "MAESTRO_HOSTED_RUNNER_AUTH_TOKEN=s3cret"))
	var e struct {
		ErrorType string `json:"error_type"`
	}
	if code := p.call("POST", "/api/headless/connections", map[string]any{"role": "controller"}, nil, &e); code != 401 {
		t.Errorf("no token: %d %+v, want 401", code, e)
	}
	if code := p.call("GET", "/api/headless/sessions/session_123/state", nil, map[string]string{"Authorization": "Bearer wrong"}, nil); code != 401 {
		t.Errorf("wrong token: %d, want 401", code)
	}
	if code := p.call("GET", hostedrunner.IdentityPath, nil, nil, nil); code != 200 {
		t.Errorf("identity without a token: %d", code)
	}
	p.token = "s3cret"
	if code := p.call("GET", "/api/headless/sessions/session_123/state", nil, nil, nil); code != 200 {
		t.Errorf("with the token: %d", code)
	}

	// Off loopback (all interfaces; the test still dials 127.0.0.1), auth
	// is required by default.
	open := startRunner(t, fixtureEnv(t, ws, "mrs_any", "MAESTRO_HOSTED_RUNNER_LISTEN=0.0.0.0:0", "MAESTRO_HOSTED_RUNNER_AUTH_TOKEN=tok"))
	if code := open.call("GET", "/api/headless/sessions/session_123/state", nil, nil, nil); code != 401 {
		t.Errorf("0.0.0.0 without a token: %d, want 401", code)
	}
	if code := open.call("GET", "/healthz", nil, nil, nil); code != 200 {
		t.Errorf("/healthz without a token: %d", code)
	}
	open.token = "tok"
	if code := open.call("GET", "/api/headless/sessions/session_123/state", nil, nil, nil); code != 200 {
		t.Errorf("0.0.0.0 with the token: %d", code)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "hosted-runner", "--listen", "0.0.0.0:0")
	cmd.Env = fixtureEnv(t, ws, "mrs_open")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "MAESTRO_HOSTED_RUNNER_AUTH_TOKEN") {
		t.Errorf("0.0.0.0 without a token: %v\n%s", err, out)
	}
}

// startPrompted starts a fixture runner on ws, attaches a controller and
// sends prompt, returning once the runner reports it.
func startPrompted(t *testing.T, ws, runnerID, prompt string) *runnerProc {
	t.Helper()
	p := startRunner(t, fixtureEnv(t, ws, runnerID))
	c := p.attach(nil)
	c.send(map[string]any{"type": "prompt", "content": prompt})
	c.until(isStatusMsg("Prompt: " + prompt))
	return p
}

// SIGTERM drains before exit: a manifest with reason process_shutdown.
func TestHostedRunnerSIGTERMDrains(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	p := startPrompted(t, ws, "mrs_term", "before the signal")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v; stderr:\n%s", err, p.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no exit within 20 s of SIGTERM; stderr:\n%s", p.stderr)
	}
	p.stdin.Close()
	p.stdin = nil
	files, _ := filepath.Glob(filepath.Join(ws, ".maestro", "runner-snapshots", "mrs_term-*.json"))
	if len(files) != 1 {
		t.Fatalf("manifests after SIGTERM: %v; stderr:\n%s", files, p.stderr)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var m hostedrunner.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.Reason != "process_shutdown" || m.RequestedBy != "maestro_web_server" || m.Runtime.FlushStatus != "completed" || m.MaestroSessionID != "session_123" {
		t.Errorf("SIGTERM manifest: reason %q requested_by %q flush %q session %q", m.Reason, m.RequestedBy, m.Runtime.FlushStatus, m.MaestroSessionID)
	}
}

// modelEnv is the harness's environment with the fake Anthropic server srv
// as the model (no fixture agent) and a fresh MAESTRO_HOME.
func modelEnv(t *testing.T, srv *llmtest.Server, ws, runnerID string, extra ...string) []string {
	return append(fixtureEnv(t, ws, runnerID, extra...), "ANTHROPIC_API_KEY=sk-test", "ANTHROPIC_BASE_URL="+srv.URL())
}

// checked returns the next envelope of c after validating it against the
// protocol's schemas.
func (c *client) checked(v *protocol.Validator) envelope {
	c.p.t.Helper()
	e := c.next()
	if err := v.ValidateEnvelope([]byte(e.raw)); err != nil {
		c.p.t.Errorf("envelope %s: %v", e.raw, err)
	}
	return e
}

// untilChecked reads (validating) until an envelope matches.
func (c *client) untilChecked(v *protocol.Validator, match func(e envelope, m map[string]any) bool) envelope {
	c.p.t.Helper()
	for {
		e := c.checked(v)
		var m map[string]any
		if e.Type == "message" {
			if err := json.Unmarshal(e.Message, &m); err != nil {
				c.p.t.Fatal(err)
			}
		}
		if match(e, m) {
			return e
		}
	}
}

// assistantLogged matches the raw_agent_event of the assistant message
// holding text: the runtime publishes it once the message is in the
// session log, so the turn is complete.
func assistantLogged(text string) func(envelope, map[string]any) bool {
	return func(_ envelope, m map[string]any) bool {
		if m["type"] != "raw_agent_event" || m["event_type"] != "message" {
			return false
		}
		ev, _ := json.Marshal(m["event"])
		return strings.Contains(string(ev), `"assistant"`) && strings.Contains(string(ev), text)
	}
}

// drainSnapshot drains p and reads c (validating) up to the drain's
// snapshot envelope: Drained, not ready, at the cursor after the
// manifest's. It returns the drain's answer.
func drainSnapshot(t *testing.T, p *runnerProc, c *client, v *protocol.Validator, seen func(envelope, map[string]any)) hostedrunner.DrainResponse {
	t.Helper()
	var d hostedrunner.DrainResponse
	if code := p.call("POST", hostedrunner.DrainPath, map[string]any{"reason": "ttl_expired"}, nil, &d); code != 200 || d.Status != hostedrunner.DrainDrained {
		t.Fatalf("drain: %d %+v", code, d)
	}
	e := c.untilChecked(v, func(e envelope, m map[string]any) bool {
		if seen != nil {
			seen(e, m)
		}
		return e.Type == "snapshot"
	})
	var snap protocol.Snapshot
	if err := json.Unmarshal(e.Snapshot, &snap); err != nil {
		t.Fatal(err)
	}
	if n := *d.Manifest.Runtime.Cursor; snap.State.LastStatus != hostedrunner.StatusDrained || snap.State.IsReady || snap.Cursor != n+1 {
		t.Errorf("drain snapshot: last_status %q is_ready %v cursor %d, want Drained, false, %d", snap.State.LastStatus, snap.State.IsReady, snap.Cursor, n+1)
	}
	return d
}

// TestHostedRunnerRestoreContinues (issue 12 defects 3 and 5): a
// model-driven runner answers a prompt and drains (the Drained snapshot
// is published); the workspace is copied to a new directory as the
// platform would, and a fresh runner process with an empty MAESTRO_HOME
// restores from the copied manifest: its reset{restored_from_snapshot}
// carries the manifest's cursor N, the first new frame takes N+1, and the
// first prompt sends the model the turns from before the drain. Every
// envelope is checked against the schemas; no session log is left in the
// workspace.
func TestHostedRunnerRestoreContinues(t *testing.T) {
	t.Parallel()
	v := prototest.Validator(t)
	srv := llmtest.NewServer(t,
		llmtest.Turn{Text: []string{"First answer."}, InputTokens: 10, OutputTokens: 3},
		llmtest.Turn{Text: []string{"Second answer."}, InputTokens: 20, OutputTokens: 3})
	ws := t.TempDir()
	p := startRunner(t, modelEnv(t, srv, ws, "mrs_model"))
	c := p.attach(map[string]any{"rawAgentEvents": true})
	c.send(map[string]any{"type": "prompt", "content": "first question"})
	c.untilChecked(v, assistantLogged("First answer."))
	d := drainSnapshot(t, p, c, v, nil)
	p.stop()
	cursor := *d.Manifest.Runtime.Cursor
	rel, err := filepath.Rel(ws, d.ManifestPath)
	if err != nil || strings.HasPrefix(rel, "..") {
		t.Fatalf("manifest %s is not in the workspace %s", d.ManifestPath, ws)
	}
	if sf := d.Manifest.Runtime.SessionFile; filepath.Dir(sf) != filepath.Dir(d.ManifestPath) {
		t.Errorf("runtime.session_file %q is not beside the manifest", sf)
	}
	logs, _ := filepath.Glob(filepath.Join(ws, ".maestro", "sessions", "*"))
	if len(logs) > 0 {
		t.Errorf("session state in the workspace: %v", logs)
	}

	ws2 := filepath.Join(t.TempDir(), "copied")
	if err := os.CopyFS(ws2, os.DirFS(ws)); err != nil {
		t.Fatal(err)
	}
	r := startRunner(t, modelEnv(t, srv, ws2, "mrs_model_2", "MAESTRO_REMOTE_RUNNER_RESTORE_MANIFEST="+rel))
	var st protocol.Snapshot
	if code := r.call("GET", "/api/headless/sessions/"+r.session+"/state", nil, nil, &st); code != 200 || st.Cursor != cursor || !st.State.IsReady {
		t.Errorf("restored state: %d cursor %d ready %v, want cursor %d, ready", code, st.Cursor, st.State.IsReady, cursor)
	}
	// A client of the drained runner resumes at the manifest's cursor:
	// the reset carries N, the first new frame (the controller's
	// connection_info) N+1.
	resumed := r.open(http.DefaultClient, "cursor="+strconv.FormatInt(cursor, 10), nil, nil)
	first := resumed.checked(v)
	var snap protocol.Snapshot
	if err := json.Unmarshal(first.Snapshot, &snap); err != nil || first.Type != "reset" || first.Reason != "restored_from_snapshot" || snap.Cursor != cursor {
		t.Fatalf("first envelope after restore: %s, want reset{restored_from_snapshot} at cursor %d (%v)", first.raw, cursor, err)
	}
	c2 := r.attach(map[string]any{"rawAgentEvents": true})
	if next := resumed.checked(v); next.Cursor != cursor+1 {
		t.Errorf("first frame after the restore: %s, want cursor %d", next.raw, cursor+1)
	}
	c2.send(map[string]any{"type": "prompt", "content": "second question"})
	c2.untilChecked(v, assistantLogged("Second answer."))
	// The restored runner's model request: the turns from before the
	// drain, then the new question, in order.
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[1].Body, &body); err != nil {
		t.Fatal(err)
	}
	var turns []string
	for _, m := range body.Messages {
		turns = append(turns, m.Role+": "+string(m.Content))
	}
	want := []string{"user: first question", "assistant: First answer.", "user: second question"}
	if len(turns) != len(want) {
		t.Fatalf("restored model request turns %q, want %q", turns, want)
	}
	for i, w := range want {
		role, text, _ := strings.Cut(w, ": ")
		if !strings.HasPrefix(turns[i], role+": ") || !strings.Contains(turns[i], text) {
			t.Errorf("turn %d = %s, want %s", i, turns[i], w)
		}
	}
}

// TestHostedRunnerWatchIgnoresOwnState (issue 12 defect 3): a controller
// watches the workspace root of the built runner while a prompt runs a
// tool call (Write) and the runner drains: the watch reports the agent's
// file and nothing of Maestro's own writes (session log, lock), and the
// stream stays small. Every envelope is checked against the schemas.
func TestHostedRunnerWatchIgnoresOwnState(t *testing.T) {
	t.Parallel()
	v := prototest.Validator(t)
	srv := llmtest.NewServer(t,
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "toolu_1", Name: "Write", Input: `{"path":"hello.txt","content":"hi"}`}}, InputTokens: 5, OutputTokens: 5},
		llmtest.Turn{Text: []string{"Done."}, InputTokens: 9, OutputTokens: 1})
	ws := t.TempDir()
	p := startRunner(t, modelEnv(t, srv, ws, "mrs_watch"))
	c := p.attach(map[string]any{"rawAgentEvents": true, "utilityOperations": []string{"file_watch"}})
	c.send(map[string]any{"type": "init", "approval_mode": "auto"})
	c.send(map[string]any{"type": "utility_file_watch_start", "watch_id": "w1", "debounce_ms": 0})
	c.untilChecked(v, func(_ envelope, m map[string]any) bool { return m["type"] == "utility_file_watch_started" })
	var reported []string
	sawAgentFile := false
	seen := func(_ envelope, m map[string]any) {
		if m["type"] != "utility_file_watch_event" {
			return
		}
		rel, _ := m["relative_path"].(string)
		switch {
		case rel == "hello.txt":
			sawAgentFile = true
		case strings.HasPrefix(rel, ".hello.txt.") && strings.HasSuffix(rel, ".tmp"):
			// The Write tool's temporary file: the agent's write.
		default:
			reported = append(reported, rel)
		}
	}
	c.send(map[string]any{"type": "prompt", "content": "write hello.txt"})
	frames := 0
	c.untilChecked(v, func(e envelope, m map[string]any) bool {
		seen(e, m)
		frames++
		return assistantLogged("Done.")(e, m)
	})
	if _, err := os.Stat(filepath.Join(ws, "hello.txt")); err != nil {
		t.Fatalf("the tool call did not run: %v", err)
	}
	drainSnapshot(t, p, c, v, func(e envelope, m map[string]any) { seen(e, m); frames++ })
	if len(reported) > 0 {
		t.Errorf("the watch reported Maestro's own files: %q", reported)
	}
	if !sawAgentFile {
		t.Error("the watch did not report the agent's hello.txt")
	}
	if frames > 200 {
		t.Errorf("%d envelopes for one prompt, one tool call and a drain: the watch feeds on something", frames)
	}
}

// TestHostedRunnerUtilityPathPrefixes (issue 12 defect 2, each
// path-bearing utility): over HTTP, a path that does not exist yet is
// judged by its longest existing prefix (wire contract §10, hosted rule).
// Under a symlink that leaves the workspace, or under a directory outside
// it, the POST itself answers 403 workspace_violation for the path of
// utility_file_read, the cwd of utility_file_search and
// utility_command_start and the root_dir of utility_file_watch_start;
// the same requests naming a not-yet-existing path inside the workspace
// are not: accepted (200), or 404 not_found where the operation needs the
// directory at once (a command's cwd, a watch's root), and none of their
// answers on the stream, every one schema-checked, says the path is
// outside.
func TestHostedRunnerUtilityPathPrefixes(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	p := startRunner(t, fixtureEnv(t, ws, "mrs_path_prefixes"))
	v := prototest.Validator(t)
	c := p.attach(map[string]any{"utilityOperations": []string{"command_exec", "file_search", "file_read", "file_watch"}})
	headers := map[string]string{"x-maestro-headless-connection-id": c.conn, "x-maestro-headless-subscriber-id": c.sub}

	// Each utility with the field that names its path; id is its id field.
	type utility struct{ typ, id, field string }
	utilities := []utility{
		{"utility_file_read", "read_id", "path"},
		{"utility_file_search", "search_id", "cwd"},
		{"utility_command_start", "command_id", "cwd"},
		{"utility_file_watch_start", "watch_id", "root_dir"},
	}
	message := func(u utility, id, path string) map[string]any {
		m := map[string]any{"type": u.typ, u.id: id, u.field: path}
		switch u.typ {
		case "utility_file_search":
			m["query"] = "x"
		case "utility_command_start":
			m["command"] = "true"
		}
		return m
	}
	for i, u := range utilities {
		for _, path := range []string{
			"link/not/yet",                           // relative, through the escaping symlink
			filepath.Join(ws, "link", "new", "deep"), // absolute, through the symlink
			filepath.Join(outside, "new", "deep"),    // absolute, under an outside directory
		} {
			code, raw := p.post(p.sessionPath("/messages"), message(u, "out"+strconv.Itoa(i), path), headers)
			edgetest.WantError(t, u.typ+" "+u.field+"="+path, code, raw, 403, "workspace_violation", "Path is outside hosted workspace root")
		}
	}
	for i, u := range utilities {
		for j, path := range []string{"fresh/not/yet", filepath.Join(ws, "fresh2", "deep")} {
			code, raw := p.post(p.sessionPath("/messages"), message(u, "in"+strconv.Itoa(i)+strconv.Itoa(j), path), headers)
			if code == 200 {
				continue
			}
			// A command or watch needs its directory now: 404 not_found.
			var e edgetest.ErrorBody
			if err := json.Unmarshal(raw, &e); err != nil || code != 404 || e.Code != "not_found" || strings.Contains(e.Error, "outside") {
				t.Errorf("%s %s=%s inside the workspace: %d %s, want 200 or 404 not_found", u.typ, u.field, path, code, raw)
			}
		}
	}

	if code := p.call("POST", p.sessionPath("/messages"), map[string]any{"type": "prompt", "content": "hello"}, headers, nil); code != 200 {
		t.Fatalf("prompt: %d", code)
	}
	for _, e := range c.collect(isStatusMsg("Prompt: hello")) {
		if err := v.ValidateEnvelope([]byte(e.raw)); err != nil {
			t.Errorf("envelope %s does not validate: %v", e.raw, err)
		}
		if strings.Contains(e.raw, "outside") {
			t.Errorf("a request inside the workspace was judged outside: %s", e.raw)
		}
	}
}
