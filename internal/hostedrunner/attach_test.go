package hostedrunner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/protocol/prototest"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
	"github.com/maestro-run/maestro/internal/transport/transporttest"
)

// serveRunner builds a runner with its session API (no lease sweep) and
// serves it over a real listener until the test ends.
func serveRunner(t *testing.T, cfg Config, opts Options) (*Runner, *httptest.Server) {
	t.Helper()
	r, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	attach := NewAttach(r, httpattach.Config{SweepInterval: -1})
	srv := httptest.NewServer(r.Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		attach.Close()
		r.Close()
	})
	return r, srv
}

// TestUnknownRouteJSON: a path the runner does not serve, or one of its
// routes asked with another method, answers in the contract's error shape
// like its other routes (net/http answered plain text).
func TestUnknownRouteJSON(t *testing.T) {
	t.Parallel()
	_, srv := serveRunner(t, testConfig(newWorkspace(t)), Options{Now: fixedNow})
	for _, tc := range []struct {
		method, path      string
		status            int
		code, text, allow string
	}{
		{"GET", "/nope", 404, "not_found", "No hosted runner route GET /nope", ""},
		{"GET", DrainPath, 405, "bad_request", "method GET not allowed: " + DrainPath + " answers POST", "POST"},
		{"POST", "/readyz", 405, "bad_request", "method POST not allowed: /readyz answers GET, HEAD", "GET, HEAD"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), tc.method, srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error     string `json:"error"`
			ErrorType string `json:"error_type"`
			Code      string `json:"code"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.status || body.Code != tc.code || body.ErrorType != tc.code || body.Error != tc.text ||
			resp.Header.Get("Allow") != tc.allow || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %+v (%v), Allow %q, Content-Type %q", tc.method, tc.path, resp.StatusCode, body, err, resp.Header.Get("Allow"), resp.Header.Get("Content-Type"))
		}
	}
}

// TestOtherSessionOwnedElsewhere: the runner serves its own session, and
// every route naming another session id answers 409
// runtime_owned_elsewhere with the ownership details (wire contract §11.5,
// §11.6), not 404.
func TestOtherSessionOwnedElsewhere(t *testing.T) {
	t.Parallel()
	cfg := testConfig(newWorkspace(t))
	r, srv := serveRunner(t, cfg, Options{Now: fixedNow})
	own := r.SessionID()
	if own != "session_123" {
		t.Fatalf("bound session %q, want session_123", own)
	}

	do := func(method, path, body string) (int, []byte) {
		t.Helper()
		return transporttest.Call(t, srv.Client(), method, srv.URL+path, "", body, nil)
	}

	type errBody struct {
		Error     string `json:"error"`
		ErrorType string `json:"error_type"`
		Code      string `json:"code"`
		Details   []struct {
			Type     string            `json:"@type"`
			Reason   string            `json:"reason"`
			Domain   string            `json:"domain"`
			Metadata map[string]string `json:"metadata"`
		} `json:"details"`
	}
	wantMeta := map[string]string{
		"runner_session_id": "mrs_123", "owner_instance_id": "pod_123", "workspace_id": "workspace_123",
		"agent_run_id": "run_123", "maestro_session_id": "session_123",
		"requested_maestro_session_id": "other_456", "draining": "false",
	}
	for _, tc := range []struct {
		method, path, body string
	}{
		{"GET", "/api/headless/sessions/other_456", ""},
		{"GET", "/api/headless/sessions/other_456/state", ""},
		{"POST", "/api/headless/sessions", `{"sessionId":"other_456"}`},
		{"POST", "/api/headless/connections", `{"sessionId":"other_456","role":"viewer"}`},
		{"POST", "/api/headless/sessions/other_456/subscribe", `{"role":"viewer"}`},
		{"GET", "/api/headless/sessions/other_456/events", ""},
		{"POST", "/api/headless/sessions/other_456/messages", `{"type":"hello","protocol_version":"2026-04-02"}`},
		{"POST", "/api/headless/sessions/other_456/heartbeat", `{"connectionId":"conn_x"}`},
		{"POST", "/api/headless/sessions/other_456/disconnect", `{"connectionId":"conn_x"}`},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			status, data := do(tc.method, tc.path, tc.body)
			var e errBody
			if err := json.Unmarshal(data, &e); err != nil {
				t.Fatalf("body %s: %v", data, err)
			}
			if status != http.StatusConflict || e.ErrorType != "runtime_owned_elsewhere" || e.Code != "runtime_owned_elsewhere" {
				t.Fatalf("got %d %s, want 409 runtime_owned_elsewhere", status, data)
			}
			if want := "Hosted runner is bound to another session: other_456 (this runner serves session_123)"; e.Error != want {
				t.Errorf("error %q, want %q", e.Error, want)
			}
			// Clients classify "not found" by these texts: a foreign
			// session must not look like a missing one.
			if strings.Contains(e.Error, "not found") {
				t.Errorf("error %q reads as not found", e.Error)
			}
			if len(e.Details) != 1 || e.Details[0].Type != "type.googleapis.com/google.rpc.ErrorInfo" ||
				e.Details[0].Reason != "runtime_owned_elsewhere" || e.Details[0].Domain != "maestro.hosted_runner" {
				t.Fatalf("details %+v", e.Details)
			}
			for k, v := range wantMeta {
				if got := e.Details[0].Metadata[k]; got != v {
					t.Errorf("metadata %s = %q, want %q", k, got, v)
				}
			}
		})
	}

	// The runner's own session is served.
	status, data := do("GET", "/api/headless/sessions/"+own+"/state", "")
	var snap struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(data, &snap); status != http.StatusOK || err != nil || snap.SessionID != own {
		t.Fatalf("own session: %d %s", status, data)
	}
	// Draining shows in the details.
	if _, code, err := r.Drain(t.Context(), DrainRequest{Reason: "ttl_expired"}); err != nil || code != http.StatusOK {
		t.Fatalf("drain: %d %v", code, err)
	}
	status, data = do("GET", "/api/headless/sessions/other_456/state", "")
	var e errBody
	json.Unmarshal(data, &e)
	if status != http.StatusConflict || len(e.Details) != 1 || e.Details[0].Metadata["draining"] != "true" {
		t.Fatalf("while draining: %d %s", status, data)
	}
}

// sseEnvelope is one SSE envelope as a strict client reads it.
type sseEnvelope struct {
	Type     string `json:"type"`
	Reason   string `json:"reason"`
	Cursor   int64  `json:"cursor"`
	Snapshot *struct {
		Cursor int64 `json:"cursor"`
	} `json:"snapshot"`
	raw string
}

// cursor is the envelope's cursor (a snapshot's or reset's
// snapshot.cursor).
func (e sseEnvelope) cursor() int64 {
	if e.Snapshot != nil {
		return e.Snapshot.Cursor
	}
	return e.Cursor
}

// openEvents opens GET …/events?query and returns a channel of its
// envelopes.
func openEvents(t *testing.T, base, session, query string) <-chan sseEnvelope {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/api/headless/sessions/"+session+"/events?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("events?%s: %d %s", query, resp.StatusCode, body)
	}
	ch := make(chan sseEnvelope, 64)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			e := sseEnvelope{raw: data}
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				e.Type = "undecodable"
			}
			ch <- e
		}
	}()
	return ch
}

func nextEnvelope(t *testing.T, ch <-chan sseEnvelope) sseEnvelope {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("event stream ended")
		}
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for an envelope")
	}
	return sseEnvelope{}
}

// TestRestoreResumeStrictCursor: a client of the drained runner resumes
// on the restored one with ?cursor=<the manifest's cursor N> (or an older
// one): its first envelope is reset{restored_from_snapshot}, which
// carries N, the restored runtime's cursor (issue 12 defect 5; wire
// contract §13 would have it greater than any cursor the client applied,
// see docs/remote-attach.md); frames follow from N+1. A negative cursor
// is a replay gap.
func TestRestoreResumeStrictCursor(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	path, manifestCursor := drainedManifest(t, ws)
	cfg := testConfig(ws)
	cfg.RunnerSessionID, cfg.MaestroSessionID, cfg.RestoreManifest = "mrs_456", "", path
	r, srv := serveRunner(t, cfg, Options{Now: fixedNow})
	resetCursor := r.Runtime().Cursor()
	if resetCursor != manifestCursor {
		t.Fatalf("runtime cursor %d after restoring at %d, want %d", resetCursor, manifestCursor, manifestCursor)
	}
	for _, from := range []int64{manifestCursor, manifestCursor - 1, manifestCursor - 3, 0} {
		ch := openEvents(t, srv.URL, r.SessionID(), "cursor="+strconv.FormatInt(from, 10))
		e := nextEnvelope(t, ch)
		if e.Type != "reset" || e.Reason != "restored_from_snapshot" || e.cursor() != resetCursor {
			t.Fatalf("cursor=%d: first envelope %s, want reset{restored_from_snapshot} at cursor %d", from, e.raw, resetCursor)
		}
	}
	live := openEvents(t, srv.URL, r.SessionID(), "cursor="+strconv.FormatInt(manifestCursor, 10))
	nextEnvelope(t, live)
	if e := nextEnvelope(t, openEvents(t, srv.URL, r.SessionID(), "cursor=-1")); e.Type != "reset" || e.Reason != "replay_gap" {
		t.Fatalf("cursor=-1: %s, want reset{replay_gap}", e.raw)
	}
	if e := nextEnvelope(t, openEvents(t, srv.URL, r.SessionID(), "")); e.Type != "reset" || e.Reason != "restored_from_snapshot" || e.cursor() < resetCursor {
		t.Fatalf("no cursor: %s, want reset{restored_from_snapshot}", e.raw)
	}
	postInit(t, srv, r.SessionID())
	// The first new event takes N+1.
	if e := nextEnvelope(t, live); e.cursor() != resetCursor+1 || !strings.Contains(e.raw, `"type":"status"`) {
		t.Fatalf("first frame after the reset at %d: %s, want the init's status at %d", resetCursor, e.raw, resetCursor+1)
	}
}

// TestRestoreResumeAfterDrainSnapshot: a client that watched the drain
// applied its snapshot envelope, at N+1 (the manifest's cursor N plus
// one), and resumes on the restored runner with ?cursor=N+1. It gets
// reset{restored_from_snapshot} first, then the frames from N+1 — before
// any new frame, and after the first one (which takes N+1 too: the
// restored runtime continues at N). Before, the stream sent it nothing
// until a frame after N+1, so it never saw the reset nor frame N+1.
func TestRestoreResumeAfterDrainSnapshot(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	path, n := drainedManifest(t, ws)
	cfg := testConfig(ws)
	cfg.RunnerSessionID, cfg.MaestroSessionID, cfg.RestoreManifest = "mrs_789", "", path
	r, srv := serveRunner(t, cfg, Options{Now: fixedNow})
	after := "cursor=" + strconv.FormatInt(n+1, 10)
	early := openEvents(t, srv.URL, r.SessionID(), after)
	if e := nextEnvelope(t, early); e.Type != "reset" || e.Reason != "restored_from_snapshot" || e.cursor() != n {
		t.Fatalf("cursor=N+1 before any new frame: first envelope %s, want reset{restored_from_snapshot} at %d", e.raw, n)
	}
	postInit(t, srv, r.SessionID())
	if e := nextEnvelope(t, early); e.cursor() != n+1 || !strings.Contains(e.raw, `"type":"status"`) {
		t.Fatalf("after the reset: %s, want the init's status at %d", e.raw, n+1)
	}
	late := openEvents(t, srv.URL, r.SessionID(), after)
	if e := nextEnvelope(t, late); e.Type != "reset" || e.Reason != "restored_from_snapshot" || e.cursor() != n {
		t.Fatalf("cursor=N+1 after a new frame: first envelope %s, want reset{restored_from_snapshot} at %d", e.raw, n)
	}
	if e := nextEnvelope(t, late); e.cursor() != n+1 || !strings.Contains(e.raw, `"type":"status"`) {
		t.Fatalf("after the reset: %s, want the init's status at %d", e.raw, n+1)
	}
}

// TestDrainPublishesSnapshot: a stream open when the runner drains gets,
// after the status Drained, a snapshot envelope (wire contract §14.2 step
// 4) with last_status Drained and is_ready false, at the cursor after the
// manifest's, whether the drain completed (200 drained) or its flush
// failed (503 interrupted); identity then says draining, not ready, with
// the drain's status. Every envelope is checked against the schemas.
func TestDrainPublishesSnapshot(t *testing.T) {
	t.Parallel()
	v := prototest.Validator(t)
	for _, tc := range []struct {
		name     string
		flushErr error
		code     int
		status   string
	}{
		{"drained", nil, http.StatusOK, DrainDrained},
		{"interrupted", errors.New("disk full"), http.StatusServiceUnavailable, DrainInterrupted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, srv := serveRunner(t, testConfig(newWorkspace(t)), Options{Now: fixedNow})
			if tc.flushErr != nil {
				r.flush = func() error { return tc.flushErr }
			}
			events := openEvents(t, srv.URL, r.SessionID(), "")
			if e := nextEnvelope(t, events); e.Type != "snapshot" {
				t.Fatalf("first envelope %s, want the initial snapshot", e.raw)
			}
			resp, err := http.Post(srv.URL+DrainPath, "application/json", strings.NewReader(`{"reason":"ttl_expired"}`))
			if err != nil {
				t.Fatal(err)
			}
			var d DrainResponse
			err = json.NewDecoder(resp.Body).Decode(&d)
			resp.Body.Close()
			if err != nil || resp.StatusCode != tc.code || d.Status != tc.status {
				t.Fatalf("drain: %d %+v %v, want %d %s", resp.StatusCode, d, err, tc.code, tc.status)
			}
			var last string
			for {
				e := nextEnvelope(t, events)
				if err := v.ValidateEnvelope([]byte(e.raw)); err != nil {
					t.Errorf("envelope %s: %v", e.raw, err)
				}
				if e.Type == "message" {
					last = e.raw
					continue
				}
				var snap protocol.Snapshot
				if err := json.Unmarshal([]byte(e.raw), &struct {
					Snapshot *protocol.Snapshot `json:"snapshot"`
				}{&snap}); err != nil {
					t.Fatal(err)
				}
				if e.Type != "snapshot" || snap.State.LastStatus != StatusDrained || snap.State.IsReady || snap.Cursor != *d.Manifest.Runtime.Cursor+1 {
					t.Fatalf("after the drain: %s, want a snapshot with last_status Drained, is_ready false, cursor %d", e.raw, *d.Manifest.Runtime.Cursor+1)
				}
				break
			}
			if !strings.Contains(last, `"message":"Drained"`) {
				t.Errorf("message before the drain snapshot: %s, want the status Drained", last)
			}
			if id := r.Identity(); id.Ready || !id.Draining || id.DrainStatus != tc.status {
				t.Errorf("identity after the drain: %+v", id)
			}
		})
	}
}

// postInit sends the session an init message over HTTP, which the
// runtime answers with a status frame.
func postInit(t *testing.T, srv *httptest.Server, sessionID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", srv.URL+"/api/headless/sessions/"+sessionID+"/messages", strings.NewReader(`{"type":"init"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("init: %d", resp.StatusCode)
	}
}
