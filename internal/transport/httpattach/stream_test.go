package httpattach_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/protocol/prototest"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// statuses publishes n status frames (one per init) as the controller.
func statuses(t *testing.T, s *server, id, subID string, n int) {
	t.Helper()
	for i := range n {
		s.mustSend(id, subID, fmt.Sprintf(`{"type":"init","append_system_prompt":"p%d"}`, i))
	}
}

// evictedSession returns a session whose ring (16 frames) has evicted the
// first of 40 statuses sent by its controller subscription c.
func evictedSession(t *testing.T) (s *server, id string, c subSnap) {
	t.Helper()
	s = newServer(t, options{bufferFrames: 16})
	id = s.createSession(nil)
	c = s.subscribe(id, map[string]any{"role": "controller"})
	statuses(t, s, id, c.SubscriptionID, 40)
	return s, id, c
}

// TestCursorReplayOrder: ?cursor=N replays exactly the buffered messages
// after N, in cursor order, then live ones.
func TestCursorReplayOrder(t *testing.T) {
	t.Parallel()
	s, id, c := newControlledSession(t)
	live := s.open(id, "", nil)
	snap := live.next()
	if snap.Type != "snapshot" {
		t.Fatalf("first envelope %s", snap.raw)
	}
	statuses(t, s, id, c.SubscriptionID, 10)
	all := live.until("status")
	for len(all) < 10 {
		all = append(all, live.until("status")...)
	}
	mid := all[3].Cursor
	resumed := s.open(id, "cursor="+strconv.FormatInt(mid, 10), nil)
	for _, want := range all[4:] {
		got := resumed.next()
		if got.raw != want.raw {
			t.Fatalf("replay after cursor %d:\n got  %s\n want %s", mid, got.raw, want.raw)
		}
	}
	s.mustSend(id, c.SubscriptionID, `{"type":"init"}`)
	if e := resumed.next(); e.msgType() != "status" || e.Cursor <= all[len(all)-1].Cursor {
		t.Fatalf("live frame after the replay: %s", e.raw)
	}
	// A cursor at the head replays nothing; the next frame is live.
	head := s.open(id, "cursor=1000000", nil)
	s.mustSend(id, c.SubscriptionID, `{"type":"init","thinking_level":"low"}`)
	if e := head.next(); !strings.Contains(e.raw, "thinking_level") {
		t.Fatalf("after a cursor past the head: %s", e.raw)
	}
}

// TestReplayGap: a cursor older than the ring (or negative) gets
// reset{replay_gap} with a snapshot, then live frames.
func TestReplayGap(t *testing.T) {
	t.Parallel()
	s, id, c := evictedSession(t)
	var cur struct {
		Cursor int64 `json:"cursor"`
	}
	s.call("GET", "/api/headless/sessions/"+id+"/state", nil, nil, &cur)
	for _, q := range []string{"cursor=1", "cursor=-1", "cursor=0"} {
		st := s.open(id, q, nil)
		e := st.next()
		if e.Type != "reset" || e.Reason != "replay_gap" || e.snapCursor() != cur.Cursor {
			t.Fatalf("%s: first envelope %s, want reset{replay_gap} at cursor %d", q, e.raw, cur.Cursor)
		}
		s.mustSend(id, c.SubscriptionID, `{"type":"init"}`)
		if e := st.next(); e.Type != "message" || e.Cursor <= cur.Cursor {
			t.Fatalf("%s: after the reset: %s", q, e.raw)
		}
		s.call("GET", "/api/headless/sessions/"+id, nil, nil, &cur)
	}
	st, body := s.call("GET", "/api/headless/sessions/"+id+"/events?cursor=abc", nil, nil, nil)
	wantError(t, st, body, http.StatusBadRequest, "bad_request", `query.cursor must be an integer, got "abc"`)
}

// stuckWriter is an SSE client that stops reading: every write after the
// first blocks until release is closed.
type stuckWriter struct {
	hdr     http.Header
	mu      sync.Mutex
	buf     bytes.Buffer
	writes  int
	blocked chan struct{} // closed when a write blocks
	release chan struct{}
	wrote   chan struct{} // signalled after each write
	once    sync.Once
}

func (w *stuckWriter) Header() http.Header { return w.hdr }
func (w *stuckWriter) WriteHeader(int)     {}
func (w *stuckWriter) Flush()              {}
func (w *stuckWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.writes++
	n := w.writes
	w.mu.Unlock()
	if n > 1 {
		w.once.Do(func() { close(w.blocked) })
		<-w.release
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	defer func() {
		select {
		case w.wrote <- struct{}{}:
		default:
		}
	}()
	return w.buf.Write(p)
}

func (w *stuckWriter) envelopes(t *testing.T) []envelope {
	w.mu.Lock()
	defer w.mu.Unlock()
	v := prototest.Validator(t)
	var out []envelope
	for _, frame := range strings.Split(w.buf.String(), "\n\n") {
		data, ok := strings.CutPrefix(frame, "data: ")
		if !ok {
			continue
		}
		if err := v.ValidateEnvelope([]byte(data)); err != nil {
			t.Errorf("envelope does not validate: %s: %v", data, err)
		}
		var e envelope
		json.Unmarshal([]byte(data), &e)
		e.raw = data
		out = append(out, e)
	}
	return out
}

// TestLaggedSubscriber: a subscriber that stops reading while more than
// MaxBacklog frames are published gets one reset{lagged} with a fresh
// snapshot instead of the backlog.
func TestLaggedSubscriber(t *testing.T) {
	t.Parallel()
	never := func(time.Duration) (<-chan time.Time, func()) { return nil, func() {} }
	s := newServer(t, options{cfg: httpattach.Config{MaxBacklog: 32, NewTicker: never}})
	id := s.createSession(nil)
	c := s.subscribe(id, map[string]any{"role": "controller"})

	w := &stuckWriter{hdr: http.Header{}, blocked: make(chan struct{}), release: make(chan struct{}), wrote: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, "GET", "/api/headless/sessions/"+id+"/events", nil)
	done := make(chan struct{})
	go func() { defer close(done); s.h.ServeHTTP(w, req) }()
	// The snapshot is written; the first status blocks the writer.
	select {
	case <-w.wrote:
	case <-time.After(20 * time.Second):
		t.Fatal("the stream never wrote its snapshot")
	}
	s.mustSend(id, c.SubscriptionID, `{"type":"init"}`)
	select {
	case <-w.blocked:
	case <-time.After(20 * time.Second):
		t.Fatal("the stream never wrote a second envelope")
	}
	statuses(t, s, id, c.SubscriptionID, 100)
	var cur struct {
		Cursor int64 `json:"cursor"`
	}
	s.call("GET", "/api/headless/sessions/"+id+"/state", nil, nil, &cur)
	close(w.release)
	// One more frame after the reset proves the stream goes on.
	s.mustSend(id, c.SubscriptionID, `{"type":"init","thinking_level":"high"}`)
	deadline := time.After(20 * time.Second)
	for {
		envs := w.envelopes(t)
		if n := len(envs); n > 0 && strings.Contains(envs[n-1].raw, "thinking_level") {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("the stream did not resume after the reset: %d envelopes", len(w.envelopes(t)))
		case <-w.wrote:
		}
	}
	cancel()
	<-done
	envs := w.envelopes(t)
	if envs[0].Type != "snapshot" || envs[1].Type != "message" {
		t.Fatalf("stream start: %s, %s", envs[0].raw, envs[1].raw)
	}
	if envs[2].Type != "reset" || envs[2].Reason != "lagged" || envs[2].snapCursor() < cur.Cursor {
		t.Fatalf("after the stall: %s, want reset{lagged} at cursor ≥ %d", envs[2].raw, cur.Cursor)
	}
	if len(envs) > 3+32 {
		t.Fatalf("%d envelopes: the backlog was delivered instead of reset", len(envs))
	}
	for _, e := range envs[3:] {
		if e.Type != "message" || e.Cursor <= envs[2].snapCursor() {
			t.Fatalf("after the reset: %s", e.raw)
		}
	}
}

// TestHeartbeat: every tick sends {"type":"heartbeat","cursor":current},
// except to streams that opted out.
func TestHeartbeat(t *testing.T) {
	t.Parallel()
	tickers := make(chan chan time.Time, 4)
	s := newServer(t, options{cfg: httpattach.Config{NewTicker: func(d time.Duration) (<-chan time.Time, func()) {
		if d != 15*time.Second {
			t.Errorf("heartbeat interval %s, want 15s", d)
		}
		c := make(chan time.Time)
		tickers <- c
		return c, func() {}
	}}})
	id := s.createSession(nil)
	hb := s.open(id, "", nil)
	hbTicks := <-tickers
	quiet := s.open(id, "optOutNotifications=heartbeat,status", nil)
	quietTicks := <-tickers
	hb.next()
	quiet.next()
	var cur struct {
		Cursor int64 `json:"cursor"`
	}
	s.call("GET", "/api/headless/sessions/"+id, nil, nil, &cur)
	for range 2 {
		hbTicks <- time.Now()
		quietTicks <- time.Now()
		e := hb.next()
		if e.Type != "heartbeat" || e.Cursor != cur.Cursor || e.raw != fmt.Sprintf(`{"type":"heartbeat","cursor":%d}`, cur.Cursor) {
			t.Fatalf("heartbeat envelope %s, want cursor %d", e.raw, cur.Cursor)
		}
	}
	// The opted-out stream got no heartbeat: its next envelope is the
	// next message (status is opted out too, connection_info is not).
	s.subscribe(id, map[string]any{"role": "viewer"})
	if e := quiet.next(); e.Type != "message" || e.msgType() != "connection_info" {
		t.Fatalf("opted-out stream: %s", e.raw)
	}
}

// TestRestoredFromSnapshot: MarkRestored publishes one
// reset{restored_from_snapshot} into the stream, with the next cursor; a
// stream resuming from before it starts with it, one resuming after it
// does not; a stream without cursor and an explicit stream start with
// one.
// MarkRestored on a handler that has not served the session yet (a
// hosted runner at startup) publishes it too.
func TestRestoredFromSnapshot(t *testing.T) {
	t.Parallel()
	s, id, c := newControlledSession(t)
	state := func() int64 {
		var cur struct {
			Cursor int64 `json:"cursor"`
		}
		s.call("GET", "/api/headless/sessions/"+id+"/state", nil, nil, &cur)
		return cur.Cursor
	}
	before := state()
	s.h.MarkRestored(id)
	s.h.MarkRestored(id) // once only
	if got := state(); got != before+1 {
		t.Fatalf("cursor after MarkRestored: %d, want %d", got, before+1)
	}
	for _, tt := range []struct {
		query      string
		wantCursor int64
	}{
		{"", before + 1},
		{"cursor=" + strconv.FormatInt(before, 10), before + 1},
		// From further back: the reset first, in place of the frames
		// its snapshot includes.
		{"cursor=0", before + 1},
		{"cursor=1", before + 1},
		{"subscriptionId=" + c.SubscriptionID, before + 1},
	} {
		e := s.open(id, tt.query, nil).next()
		if e.Type != "reset" || e.Reason != "restored_from_snapshot" || e.snapCursor() != tt.wantCursor {
			t.Fatalf("%q: first envelope %s, want reset{restored_from_snapshot} at cursor %d", tt.query, e.raw, tt.wantCursor)
		}
	}
	after := s.open(id, "cursor="+strconv.FormatInt(before+1, 10), nil)
	s.mustSend(id, c.SubscriptionID, `{"type":"prompt","content":"after restore"}`)
	if e := after.next(); e.Type != "message" || e.Cursor <= before+1 {
		t.Fatalf("resumed after the reset: %s, want the next message", e.raw)
	}
	after.until("response_end")

	// A second handler over the same runtimes, which has not bound the
	// session: MarkRestored binds it and publishes the reset.
	h2 := httpattach.NewHandler(httpattach.Config{Sessions: s.sessions, SweepInterval: -1})
	defer h2.Close()
	cur := state()
	h2.MarkRestored(id)
	if e := after.next(); e.Type != "reset" || e.Reason != "restored_from_snapshot" || e.snapCursor() != cur+1 {
		t.Fatalf("after MarkRestored on another handler: %s, want reset{restored_from_snapshot} at cursor %d", e.raw, cur+1)
	}
}

// TestDraining: after SetDraining new attach traffic gets 503
// runtime_not_ready with Retry-After; reads still work.
func TestDraining(t *testing.T) {
	t.Parallel()
	s, id, c := newControlledSession(t)
	s.h.SetDraining("kubernetes_prestop")
	if !s.h.Draining() {
		t.Fatal("Draining() is false after SetDraining")
	}
	msg := "Hosted runner is draining: kubernetes_prestop"
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/api/headless/sessions", `{}`},
		{"POST", "/api/headless/connections", `{}`},
		{"POST", "/api/headless/sessions/" + id + "/subscribe", `{}`},
		{"POST", "/api/headless/sessions/" + id + "/messages", `{"type":"init"}`},
		{"GET", "/api/headless/sessions/" + id + "/events", ``},
	} {
		st, body := s.call(r.method, r.path, r.body, hdr{"x-maestro-headless-subscriber-id": c.SubscriptionID}, nil)
		wantError(t, st, body, http.StatusServiceUnavailable, "runtime_not_ready", msg)
	}
	if st, body := s.call("GET", "/api/headless/sessions/"+id+"/state", nil, nil, nil); st != 200 {
		t.Fatalf("state while draining: %d %s", st, body)
	}
	s.h.SetUnavailable("") // does not undo draining
	st, body := s.call("POST", "/api/headless/sessions", `{}`, nil, nil)
	wantError(t, st, body, http.StatusServiceUnavailable, "runtime_not_ready", msg)
}

// TestUnavailable: SetUnavailable refuses attaches with its message until
// cleared.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	s := newServer(t, options{})
	id := s.createSession(nil)
	s.h.SetUnavailable("Restore incomplete: runtime flush skipped")
	st, body := s.call("POST", "/api/headless/sessions/"+id+"/subscribe", `{}`, nil, nil)
	wantError(t, st, body, http.StatusServiceUnavailable, "runtime_not_ready", "Restore incomplete: runtime flush skipped")
	s.h.SetUnavailable("")
	s.subscribe(id, nil)
}

// TestReattachSubscription: frames published before a subscription's
// first stream wait for it; a second stream on the same subscription
// replaces the first.
func TestReattachSubscription(t *testing.T) {
	t.Parallel()
	s, id, c := newControlledSession(t)
	s.mustSend(id, c.SubscriptionID, `{"type":"init","thinking_level":"low"}`)
	a := s.open(id, "subscriptionId="+c.SubscriptionID, nil)
	first := a.next()
	if first.msgType() != "status" {
		t.Fatalf("queued frame: %s", first.raw)
	}
	b := s.open(id, "", hdr{"x-composer-headless-subscriber-id": c.SubscriptionID})
	a.Ended()
	s.mustSend(id, c.SubscriptionID, `{"type":"init","thinking_level":"high"}`)
	if e := b.next(); e.msgType() != "status" || e.Cursor <= first.Cursor {
		t.Fatalf("second stream: %s after %s", e.raw, first.raw)
	}
}
