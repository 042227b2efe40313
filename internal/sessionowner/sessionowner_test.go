package sessionowner_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/protocol/prototest"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/sessionowner"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
	"github.com/maestro-run/maestro/internal/store/sqlite/sqlitetest"
	"github.com/maestro-run/maestro/internal/store/storetest"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
	"github.com/maestro-run/maestro/internal/transport/transporttest"
	"github.com/maestro-run/maestro/internal/workspace"
)

const token = "owner-test-token"

// serve is one serve process in miniature: a session registry of real
// replay runtimes, the attach handler, and the routing among serve
// processes, on an httptest server. seen records the headers of the
// requests another serve proxied to it.
type serve struct {
	c   *sessionowner.Cluster
	url string

	mu   sync.Mutex
	seen []http.Header
}

func (s *serve) proxied() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.seen...)
}

// replaySessions returns what makes a session of the scripted replay
// scenario in a fresh workspace, each with its own log.
func replaySessions(t testing.TB) func() (runtime.Config, *session.Session, error) {
	t.Helper()
	v := prototest.Validator(t)
	root, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	tools := transporttest.Tools(t, root)
	logs := session.NewStore(t.TempDir())
	scen := transporttest.Scenario(t, "")
	return func() (runtime.Config, *session.Session, error) {
		return transporttest.Session(logs, root, replay.New(scen), tools, v)
	}
}

// newServe starts a serve named instance on st; the cluster's clock is
// clock.
func newServe(t testing.TB, st store.LiveSessions, instance string, proxy bool, clock *storetest.Clock) *serve {
	t.Helper()
	newSession := replaySessions(t)
	var mu sync.Mutex
	var opened []*session.Session
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range opened {
			l.Close()
		}
	})
	local := httpattach.NewSessionMap(func(_ context.Context, req httpattach.CreateRequest) (*runtime.Runtime, string, error) {
		cfg, sess, err := newSession()
		if err != nil {
			return nil, "", err
		}
		mu.Lock()
		opened = append(opened, sess)
		mu.Unlock()
		cfg.ApprovalMode = protocol.ApprovalAuto
		cfg.BufferFrames = req.ReplayRing
		rt, err := runtime.New(cfg)
		return rt, sess.ID(), err
	})
	s := &serve{}
	srv := httptest.NewUnstartedServer(nil)
	s.url = "http://" + srv.Listener.Addr().String()
	var err error
	s.c, err = sessionowner.New(sessionowner.Config{
		Store: st, Local: local, Instance: instance, Address: s.url, Proxy: proxy,
		StaleAfter: 30 * time.Second, Now: clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := httpattach.NewHandler(httpattach.Config{Sessions: s.c, Token: token, RequireAuth: true, SweepInterval: -1})
	routed := s.c.Handler(h)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(sessionowner.ProxiedHeader) != "" {
			s.mu.Lock()
			s.seen = append(s.seen, r.Header.Clone())
			s.mu.Unlock()
		}
		routed.ServeHTTP(w, r)
	})
	srv.Start()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		s.c.Close()
		srv.Close()
		h.Close()
	})
	return s
}

// pair is serve A and serve B on one SQLite store and one clock.
func pair(t testing.TB, proxyB bool) (a, b *serve, st *sqlite.Store, clock *storetest.Clock) {
	t.Helper()
	clock = storetest.NewClockAt(time.Now().UTC())
	st = sqlitetest.Open(t, sqlite.Options{Now: clock.Now})
	return newServe(t, st, "serve-a", true, clock), newServe(t, st, "serve-b", proxyB, clock), st, clock
}

func call(t testing.TB, method, url string, body any, headers map[string]string) (int, map[string]any) {
	t.Helper()
	code, data := transporttest.Call(t, http.DefaultClient, method, url, token, body, headers)
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s %s: %d %s: %v", method, url, code, data, err)
	}
	return code, out
}

func create(t testing.TB, s *serve) string {
	t.Helper()
	code, snap := call(t, "POST", s.url+"/api/headless/sessions", map[string]any{}, nil)
	id, _ := snap["session_id"].(string)
	if code != 200 || id == "" {
		t.Fatalf("create a session: %d %v", code, snap)
	}
	return id
}

// A session created on A is served through B: requests and the event
// stream are proxied with the client's token, Last-Event-ID and query,
// minus the browser's Origin, and envelopes come through B as A sends
// them.
func TestProxyToOwner(t *testing.T) {
	t.Parallel()
	a, b, _, _ := pair(t, true)
	id := create(t, a)

	code, snap := call(t, "GET", b.url+"/api/headless/sessions/"+id+"/state", nil, map[string]string{"Origin": b.url})
	if code != 200 || snap["session_id"] != id {
		t.Fatalf("state through B: %d %v", code, snap)
	}
	// The listing carries the owner's snapshot on the owner only: A lists
	// the session as its own with its runtime snapshot, B as A's without.
	for _, l := range []struct {
		s     *serve
		local bool
	}{{a, true}, {b, false}} {
		var list sessionowner.SessionList
		code, raw := transporttest.Call(t, http.DefaultClient, "GET", l.s.url+"/api/headless/sessions?state=live", token, nil, nil)
		if err := json.Unmarshal(raw, &list); code != 200 || err != nil || len(list.Sessions) != 1 {
			t.Fatalf("list on %s: %d %s (%v)", l.s.url, code, raw, err)
		}
		got := list.Sessions[0]
		if got.ID != id || got.Local != l.local || (got.Snapshot != nil) != l.local || (l.local && got.Snapshot.SessionID != id) {
			t.Errorf("listed on %s: %s; want local=%v with a snapshot only when local", l.s.url, raw, l.local)
		}
	}
	// A state it does not know listed every session.
	if code, raw := transporttest.Call(t, http.DefaultClient, "GET", a.url+"/api/headless/sessions?state=bogus", token, nil, nil); code != 400 ||
		!strings.Contains(string(raw), `query.state must be live (the open sessions) or left out (every session), got \"bogus\"`) {
		t.Errorf("list ?state=bogus: %d %s", code, raw)
	}
	// A connection registered through B (body sessionId) drives a prompt
	// through B; a stream through B from cursor 0 sees it.
	code, conn := call(t, "POST", b.url+"/api/headless/connections", map[string]any{"sessionId": id, "role": "controller"}, nil)
	if code != 200 || conn["session_id"] != id {
		t.Fatalf("register through B: %d %v", code, conn)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req := transporttest.Request(t, ctx, "GET", b.url+"/api/headless/sessions/"+id+"/events?cursor=0", token, nil,
		map[string]string{"Last-Event-ID": "0", "x-maestro-headless-role": "viewer"})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events through B: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sse := transporttest.ReadSSE(t, resp.Body, 20*time.Second, nil)
	code, ack := call(t, "POST", b.url+"/api/headless/sessions/"+id+"/messages", map[string]any{"type": "prompt", "content": "hi"},
		map[string]string{"x-maestro-headless-connection-id": conn["connection_id"].(string)})
	if code != 200 {
		t.Fatalf("prompt through B: %d %v", code, ack)
	}
	var last int64
	for {
		var e struct {
			Type    string `json:"type"`
			Cursor  int64  `json:"cursor"`
			Message struct {
				Type string `json:"type"`
			} `json:"message"`
		}
		if err := json.Unmarshal(sse.Next(), &e); err != nil {
			t.Fatal(err)
		}
		if e.Type == "message" {
			if e.Cursor <= last {
				t.Fatalf("cursor %d after %d through B", e.Cursor, last)
			}
			last = e.Cursor
		}
		if e.Message.Type == "response_end" {
			break // streamed through B while the stream stays open
		}
	}

	seen := a.proxied()
	if len(seen) < 4 {
		t.Fatalf("A saw %d proxied requests, want at least 4", len(seen))
	}
	for _, h := range seen {
		if h.Get(sessionowner.ProxiedHeader) != "serve-b" || h.Get("Authorization") != "Bearer "+token || h.Get("Origin") != "" {
			t.Errorf("proxied headers %v: want X-Maestro-Proxied-By serve-b, the client's token, no Origin", h)
		}
	}
	if !strings.Contains(strings.Join(headerValues(seen, "Last-Event-ID"), ","), "0") {
		t.Errorf("Last-Event-ID was not forwarded: %v", seen)
	}
	if got := b.proxied(); len(got) != 0 {
		t.Errorf("B received %d proxied requests, want none", len(got))
	}
}

func headerValues(hs []http.Header, name string) []string {
	var out []string
	for _, h := range hs {
		if v := h.Get(name); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// Without proxying, B answers 409 naming A; a request A proxied once is
// never proxied again.
func TestOwnedElsewhere(t *testing.T) {
	t.Parallel()
	a, b, _, _ := pair(t, false)
	id := create(t, a)
	for _, tc := range []struct {
		name, method, path string
		body               any
	}{
		{"state", "GET", "/api/headless/sessions/" + id + "/state", nil},
		{"connections with sessionId", "POST", "/api/headless/connections", map[string]any{"sessionId": id}},
		{"attach with sessionId", "POST", "/api/headless/sessions", map[string]any{"sessionId": id}},
	} {
		code, body := call(t, tc.method, b.url+tc.path, tc.body, nil)
		if code != 409 || body["error_type"] != httpattach.CodeRuntimeOwnedElsewhere || !strings.Contains(body["error"].(string), a.url) {
			t.Errorf("%s through B: %d %v; want 409 %s naming %s", tc.name, code, body, httpattach.CodeRuntimeOwnedElsewhere, a.url)
		}
	}
	code, body := call(t, "GET", a.url+"/api/headless/sessions/"+id+"/state", nil, nil)
	if code != 200 {
		t.Errorf("state on A: %d %v", code, body)
	}
	// A new session (no sessionId) is B's own.
	if id2 := create(t, b); id2 == id {
		t.Errorf("B created %s, A's id", id2)
	}
	// An id nobody recorded keeps the API's 404.
	if code, body := call(t, "GET", b.url+"/api/headless/sessions/nope/state", nil, nil); code != 404 {
		t.Errorf("unknown session through B: %d %v, want 404", code, body)
	}
}

// An owner that stops heartbeating loses its sessions: B ends them with
// the reason, answers 410 and lists them ended; a session shut down by
// its owner and the sessions of a stopped serve are recorded ended too.
func TestEndedSessions(t *testing.T) {
	t.Parallel()
	a, b, st, clock := pair(t, true)
	dead := create(t, a)
	shut := create(t, a)

	clock.Advance(20 * time.Second)
	b.c.Beat(t.Context()) // B heartbeats; A's heartbeat is 20 s old: not stale yet
	if code, _ := call(t, "GET", b.url+"/api/headless/sessions/"+dead+"/state", nil, nil); code != 200 {
		t.Fatalf("state through B while A is alive: %d", code)
	}
	a.c.Beat(t.Context())

	// A shuts one session down itself.
	code, conn := call(t, "POST", a.url+"/api/headless/connections", map[string]any{"sessionId": shut, "role": "controller"}, nil)
	if code != 200 {
		t.Fatalf("register on A: %d %v", code, conn)
	}
	if code, body := call(t, "POST", a.url+"/api/headless/sessions/"+shut+"/messages", map[string]any{"type": "shutdown"},
		map[string]string{"x-maestro-headless-connection-id": conn["connection_id"].(string)}); code != 200 {
		t.Fatalf("shutdown on A: %d %v", code, body)
	}
	waitEnded(t, st, shut)
	// A shut-down session is unknown, through B as on A.
	for _, s := range []*serve{a, b} {
		if code, body := call(t, "GET", s.url+"/api/headless/sessions/"+shut+"/state", nil, nil); code != 404 || body["error_type"] != httpattach.CodeNotFound {
			t.Errorf("state of a shut-down session on %s: %d %v, want 404", s.url, code, body)
		}
	}
	if s, err := st.GetLiveSession(t.Context(), shut); err != nil || s.EndReason != sessionowner.ReasonShutDown {
		t.Errorf("the shut-down session's record: %+v, %v; want ended %q", s, err, sessionowner.ReasonShutDown)
	}

	// A stops heartbeating (its process hangs or died).
	clock.Advance(31 * time.Second)
	code, body := call(t, "GET", b.url+"/api/headless/sessions/"+dead+"/state", nil, nil)
	if code != 410 || body["error_type"] != httpattach.CodeStaleSession || !strings.Contains(body["error"].(string), "stopped heartbeating") {
		t.Errorf("state through B after A stopped heartbeating: %d %v, want 410 stale_session", code, body)
	}
	var list sessionowner.SessionList
	code, raw := transporttest.Call(t, http.DefaultClient, "GET", b.url+"/api/headless/sessions", token, nil, nil)
	if err := json.Unmarshal(raw, &list); code != 200 || err != nil || list.Instance != "serve-b" || len(list.Sessions) != 2 {
		t.Fatalf("list on B: %d %s (%v)", code, raw, err)
	}
	for _, s := range list.Sessions {
		if !s.Ended() || s.Local || s.Instance != "serve-a" {
			t.Errorf("listed %+v: want ended, not local, owned by serve-a", s)
		}
	}
	if code, _ := transporttest.Call(t, http.DefaultClient, "GET", b.url+"/api/headless/sessions", "", nil, nil); code != 401 {
		t.Errorf("list without the token: %d, want 401", code)
	}

	// A serve restarted under B's name ends the records of the earlier
	// one it does not hold, instead of heartbeating them.
	if _, err := st.OwnLiveSession(t.Context(), "earlier", "serve-b", b.url); err != nil {
		t.Fatal(err)
	}
	kept := create(t, b)
	if err := b.c.EndPrevious(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s, err := st.GetLiveSession(t.Context(), "earlier"); err != nil || s.EndReason != sessionowner.ReasonRestarted {
		t.Errorf("a record of an earlier serve-b: %+v, %v; want ended %q", s, err, sessionowner.ReasonRestarted)
	}
	if s, err := st.GetLiveSession(t.Context(), kept); err != nil || s.Ended() {
		t.Errorf("B's live session after EndPrevious: %+v, %v; want live", s, err)
	}

	// B's own session is recorded ended when B stops.
	own := create(t, b)
	b.c.Close()
	if s, err := st.GetLiveSession(t.Context(), own); err != nil || s.EndReason != sessionowner.ReasonServeStopped {
		t.Errorf("B's session after B stopped: %+v, %v; want ended %q", s, err, sessionowner.ReasonServeStopped)
	}
}

// waitEnded waits (at most 10 s) for the record of id to end: the
// runtime's shutdown reaches the registry after the message is answered.
func waitEnded(t *testing.T, st store.LiveSessions, id string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		s, err := st.GetLiveSession(t.Context(), id)
		if err == nil && s.Ended() {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("session %s not recorded ended: %+v, %v", id, s, err)
		}
	}
}

// BenchmarkState is one GET …/state on the owner and through a proxying
// serve (docs/scale-out.md, "Figures").
func BenchmarkState(b *testing.B) {
	a, p, _, _ := pair(b, true)
	id := create(b, a)
	for _, bc := range []struct {
		name string
		s    *serve
	}{{"direct", a}, {"proxied", p}} {
		b.Run(bc.name, func(b *testing.B) {
			url := bc.s.url + "/api/headless/sessions/" + id + "/state"
			for b.Loop() {
				if code, _ := transporttest.Call(b, http.DefaultClient, "GET", url, token, nil, nil); code != 200 {
					b.Fatalf("state: %d", code)
				}
			}
		})
	}
}

// downStore is a store of live sessions that no longer answers, failing
// as a PostgreSQL store does (pgx's text names the user and database).
type downStore struct{ store.LiveSessions }

var errDown = errors.New("failed to connect to `user=maestro database=maestro`: dial tcp 10.0.0.5:5432: connect: connection refused")

func (downStore) OwnLiveSession(context.Context, string, string, string) (store.LiveSession, error) {
	return store.LiveSession{}, errDown
}
func (downStore) GetLiveSession(context.Context, string) (store.LiveSession, error) {
	return store.LiveSession{}, errDown
}
func (downStore) EndStaleLiveSessions(context.Context, time.Time, string) ([]store.LiveSession, error) {
	return nil, errDown
}
func (downStore) ListLiveSessions(context.Context, store.LiveSessionFilter) ([]store.LiveSession, error) {
	return nil, errDown
}

// With the store down, a new session, a request for a session owned
// elsewhere and the listing answer 503 saying the store does not answer;
// the database's user, name and address stay in the server log (they
// were the 503's message, to any client with the token).
func TestStoreDownAnswers503WithoutItsError(t *testing.T) {
	t.Parallel()
	a, _, st, clock := pair(t, true)
	id := create(t, a)
	b := newServe(t, downStore{st}, "serve-b", true, clock)
	for _, tc := range []struct {
		name, method, path, what string
		body                     any
	}{
		{"create", "POST", "/api/headless/sessions", "record the new session's owner", map[string]any{}},
		{"state of A's session", "GET", "/api/headless/sessions/" + id + "/state", "look up the session's owner", nil},
		{"list", "GET", "/api/headless/sessions", "list the live sessions", nil},
	} {
		code, body := call(t, tc.method, b.url+tc.path, tc.body, nil)
		msg, _ := body["error"].(string)
		if want := "Cannot " + tc.what + ": the store does not answer (see the server log); try again"; code != 503 || msg != want {
			t.Errorf("%s with the store down: %d %q; want 503 %q", tc.name, code, msg, want)
		}
	}
}

// A second serve started under a name a running serve (at another
// address, heartbeating) uses is refused, naming the flag and that serve;
// it ended the running serve's sessions, which its other clients then
// got 410 for while that serve still ran them.
func TestEndPreviousRefusesANameInUse(t *testing.T) {
	t.Parallel()
	a, _, st, clock := pair(t, true)
	id := create(t, a)
	twin := newServe(t, st, "serve-a", true, clock)
	err := twin.c.EndPrevious(t.Context())
	if err == nil || !strings.Contains(err.Error(), "--name serve-a is taken: the serve at "+a.url+" runs live sessions under it") {
		t.Fatalf("EndPrevious of a second serve-a: %v; want the name refused", err)
	}
	if s, err := st.GetLiveSession(t.Context(), id); err != nil || s.Ended() {
		t.Errorf("A's session after the refused twin: %+v, %v; want live", s, err)
	}
	// Once A's heartbeat is stale, A is the earlier serve-a: its records end.
	clock.Advance(31 * time.Second)
	if err := twin.c.EndPrevious(t.Context()); err != nil {
		t.Fatalf("EndPrevious after A stopped heartbeating: %v", err)
	}
	if s, err := st.GetLiveSession(t.Context(), id); err != nil || s.EndReason != sessionowner.ReasonRestarted {
		t.Errorf("A's session once stale: %+v, %v; want ended %q", s, err, sessionowner.ReasonRestarted)
	}
}

// The code that makes a session is handed, in the request, where to give
// what to remove should the session be refused once made: the cluster
// runs it after closing the runtime when the store cannot record the
// owner, and never when the session is kept.
func TestRefusedSessionRunsItsMakersUndo(t *testing.T) {
	t.Parallel()
	newSession := replaySessions(t)
	st := sqlitetest.Open(t, sqlite.Options{})
	for _, tc := range []struct {
		name  string
		store store.LiveSessions
		undo  string
	}{
		{"kept", st, ""},
		{"refused", downStore{st}, "undone after the runtime closed"},
	} {
		var undone string
		local := httpattach.NewSessionMap(func(_ context.Context, req httpattach.CreateRequest) (*runtime.Runtime, string, error) {
			cfg, sess, err := newSession()
			if err != nil {
				return nil, "", err
			}
			t.Cleanup(func() { sess.Close() })
			rt, err := runtime.New(cfg)
			if err != nil {
				return nil, "", err
			}
			req.OnRefused(func() {
				select {
				case <-rt.Done():
					undone = "undone after the runtime closed"
				default:
					undone = "undone with the runtime open"
				}
			})
			return rt, sess.ID(), nil
		})
		c, err := sessionowner.New(sessionowner.Config{Store: tc.store, Local: local, Instance: "serve-a", Address: "http://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = c.Create(t.Context(), httpattach.CreateRequest{})
		c.Close()
		if (err != nil) != (tc.undo != "") || undone != tc.undo {
			t.Errorf("%s: create error %v, undo %q; want %q", tc.name, err, undone, tc.undo)
		}
	}
}

// On a store one process holds (SQLite), a serve that starts after one
// was killed ends the killed serve's live sessions at once: they were
// listed live (?state=live) until --session-stale-after had passed,
// although nothing could run them. A name reused at another address is
// not "taken" there either.
func TestExclusiveEndsADeadServesSessions(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClockAt(time.Now().UTC())
	st := sqlitetest.Open(t, sqlite.Options{Now: clock.Now})
	for _, r := range [][3]string{{"killed-1", "vm:101", "http://127.0.0.1:7878"}, {"killed-2", "serve-x", "http://127.0.0.1:7000"}} {
		if _, err := st.OwnLiveSession(t.Context(), r[0], r[1], r[2]); err != nil {
			t.Fatal(err)
		}
	}
	next, err := sessionowner.New(sessionowner.Config{Store: st, Local: httpattach.NewSessionMap(nil),
		Instance: "serve-x", Address: "http://127.0.0.1:7001", Exclusive: true, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if err := next.EndPrevious(t.Context()); err != nil {
		t.Fatalf("EndPrevious on an exclusive store: %v", err)
	}
	open, err := st.ListLiveSessions(t.Context(), store.LiveSessionFilter{Open: true})
	if err != nil || len(open) != 0 {
		t.Errorf("open sessions after the next serve started: %+v, %v; want none", open, err)
	}
	if s, err := st.GetLiveSession(t.Context(), "killed-1"); err != nil || s.EndReason != sessionowner.ReasonDied {
		t.Errorf("killed-1: %+v, %v; want ended %q", s, err, sessionowner.ReasonDied)
	}
	if s, err := st.GetLiveSession(t.Context(), "killed-2"); err != nil || s.EndReason != sessionowner.ReasonRestarted {
		t.Errorf("killed-2: %+v, %v; want ended %q", s, err, sessionowner.ReasonRestarted)
	}
}
