//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/hostedrunner"
	"github.com/maestro-run/maestro/internal/httpedge/edgetest"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// The issue-7 attach scenarios against the built binary, through the
// fixture process contract (§17) and nothing but HTTP + SSE: the
// controller lease, viewers, cursor replay and its resets, utility
// operations and a drain refused for an escaping export path. Each
// scenario runs its own runner process, in parallel.
func TestHostedRunnerAttachScenarios(t *testing.T) {
	t.Parallel()
	for _, sc := range []struct {
		name string
		run  func(t *testing.T, p *runnerProc, ws string)
	}{
		{"controller_lease", scenarioLease},
		{"viewer_read_only", scenarioViewer},
		{"cursor_replay_and_gap", scenarioReplay},
		{"lagged_subscriber", scenarioLagged},
		{"utilities", scenarioUtilities},
		{"drain_refuses_symlink_escape", scenarioDrainEscape},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			sc.run(t, startRunner(t, fixtureEnv(t, ws, "mrs_"+sc.name)), ws)
		})
	}
}

// connSnap is the part of a connection or subscription snapshot the
// scenarios check.
type connSnap struct {
	ConnectionID           string  `json:"connection_id"`
	SubscriptionID         string  `json:"subscription_id"`
	Role                   string  `json:"role"`
	ControllerLeaseGranted bool    `json:"controller_lease_granted"`
	ControllerConnectionID *string `json:"controller_connection_id"`
}

func (s connSnap) controller() string {
	if s.ControllerConnectionID == nil {
		return "<null>"
	}
	return *s.ControllerConnectionID
}

// post sends a JSON body and returns the status and the raw answer.
func (p *runnerProc) post(path string, body any, headers map[string]string) (int, []byte) {
	p.t.Helper()
	var raw []byte
	code := p.call("POST", path, body, headers, &raw)
	return code, raw
}

// sessionPath is /api/headless/sessions/<session><rest>.
func (p *runnerProc) sessionPath(rest string) string {
	return "/api/headless/sessions/" + p.session + rest
}

// as returns the headers that send a message as subscription sub.
func as(sub string) map[string]string {
	return map[string]string{"x-maestro-headless-subscriber-id": sub}
}

// msg decodes a message envelope's message (nil for other envelopes).
func (e envelope) msg(t *testing.T) map[string]any {
	t.Helper()
	if e.Type != "message" {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(e.Message, &m); err != nil {
		t.Fatalf("message of %s: %v", e.raw, err)
	}
	return m
}

// snapCursor is the cursor of a snapshot or reset envelope's snapshot.
func (e envelope) snapCursor(t *testing.T) int64 {
	t.Helper()
	var s struct {
		Cursor *int64 `json:"cursor"`
	}
	if err := json.Unmarshal(e.Snapshot, &s); err != nil || s.Cursor == nil {
		t.Fatalf("snapshot cursor of %s: %v", e.raw, err)
	}
	return *s.Cursor
}

// frame returns the next envelope other than a heartbeat (one comes
// every 15 s, so a slow machine may see one anywhere).
func (c *client) frame() envelope {
	c.p.t.Helper()
	for {
		if e := c.next(); e.Type != "heartbeat" {
			return e
		}
	}
}

// collect returns every envelope but heartbeats up to and including the
// first message that matches.
func (c *client) collect(match func(m map[string]any) bool) []envelope {
	c.p.t.Helper()
	var out []envelope
	for {
		e := c.frame()
		out = append(out, e)
		if e.Type == "message" && match(e.msg(c.p.t)) {
			return out
		}
	}
}

func isType(typ string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["type"] == typ }
}

// scenarioLease: a second controller is refused with 409 while the lease
// is held; with takeControl it takes the lease, and the old controller's
// messages are then refused with 409; the move shows in connection_info
// and in the old controller's heartbeat.
func scenarioLease(t *testing.T, p *runnerProc, _ string) {
	var a connSnap
	if code := p.call("POST", "/api/headless/connections", map[string]any{"role": "controller"}, nil, &a); code != 200 || !a.ControllerLeaseGranted || a.controller() != a.ConnectionID {
		t.Fatalf("first controller: %d %+v", code, a)
	}
	var asub connSnap
	if code := p.call("POST", p.sessionPath("/subscribe"), map[string]any{"connectionId": a.ConnectionID, "role": "controller"}, nil, &asub); code != 200 || !asub.ControllerLeaseGranted {
		t.Fatalf("first controller's subscribe: %d %+v", code, asub)
	}
	ac := p.open(http.DefaultClient, "subscriptionId="+asub.SubscriptionID, nil, nil)
	if code, raw := p.post(p.sessionPath("/messages"), map[string]any{"type": "prompt", "content": "from a"}, as(asub.SubscriptionID)); code != 200 {
		t.Fatalf("first controller's prompt: %d %s", code, raw)
	}
	ac.until(isStatusMsg("Prompt: from a"))

	// A second controller, without takeControl: 409 on register and on
	// subscribe; a message from nobody in particular is refused too.
	const held = "Controller lease is already held by another connection"
	code, raw := p.post("/api/headless/connections", map[string]any{"role": "controller"}, nil)
	edgetest.WantError(t, "second controller's register", code, raw, 409, "controller_lease_held", held)
	code, raw = p.post(p.sessionPath("/subscribe"), map[string]any{"role": "controller"}, nil)
	edgetest.WantError(t, "second controller's subscribe", code, raw, 409, "controller_lease_held", held)
	code, raw = p.post(p.sessionPath("/messages"), map[string]any{"type": "prompt", "content": "anonymous"}, nil)
	edgetest.WantError(t, "anonymous prompt", code, raw, 409, "controller_lease_held", "Controller lease is currently held by another connection")

	// With takeControl the lease moves.
	var b connSnap
	if code := p.call("POST", "/api/headless/connections", map[string]any{"role": "controller", "takeControl": true}, nil, &b); code != 200 ||
		!b.ControllerLeaseGranted || b.ConnectionID == a.ConnectionID || b.controller() != b.ConnectionID {
		t.Fatalf("takeover: %d %+v", code, b)
	}
	var bsub connSnap
	if code := p.call("POST", p.sessionPath("/subscribe"), map[string]any{"connectionId": b.ConnectionID, "role": "controller"}, nil, &bsub); code != 200 || !bsub.ControllerLeaseGranted {
		t.Fatalf("new controller's subscribe: %d %+v", code, bsub)
	}
	bc := p.open(http.DefaultClient, "subscriptionId="+bsub.SubscriptionID, nil, nil)

	// The old controller is refused, by subscription and by connection.
	const moved = "Controller lease is currently held by another connection"
	code, raw = p.post(p.sessionPath("/messages"), map[string]any{"type": "prompt", "content": "still mine?"}, as(asub.SubscriptionID))
	edgetest.WantError(t, "old controller's prompt", code, raw, 409, "controller_lease_held", moved)
	code, raw = p.post(p.sessionPath("/message"), map[string]any{"type": "interrupt"}, map[string]string{"x-composer-headless-connection-id": a.ConnectionID})
	edgetest.WantError(t, "old controller's interrupt", code, raw, 409, "controller_lease_held", moved)
	var hb connSnap
	if code := p.call("POST", p.sessionPath("/heartbeat"), map[string]any{"subscriptionId": asub.SubscriptionID}, nil, &hb); code != 200 ||
		hb.ConnectionID != a.ConnectionID || hb.ControllerLeaseGranted || hb.controller() != b.ConnectionID {
		t.Errorf("old controller's heartbeat after the takeover: %d %+v", code, hb)
	}

	// The new controller prompts; both streams see it, and the old one
	// saw the takeover in connection_info first.
	if code, raw := p.post(p.sessionPath("/messages"), map[string]any{"type": "prompt", "content": "from b"}, as(bsub.SubscriptionID)); code != 200 {
		t.Fatalf("new controller's prompt: %d %s", code, raw)
	}
	bc.until(isStatusMsg("Prompt: from b"))
	sawTakeover := false
	for _, e := range ac.collect(isStatusMsg("Prompt: from b")) {
		if m := e.msg(t); m["type"] == "connection_info" && m["controller_connection_id"] == b.ConnectionID {
			sawTakeover = true
		}
		if m := e.msg(t); m["type"] == "status" && (m["message"] == "Prompt: still mine?" || m["message"] == "Prompt: anonymous") {
			t.Errorf("a refused prompt ran: %s", e.raw)
		}
	}
	if !sawTakeover {
		t.Errorf("the old controller's stream did not show the takeover in connection_info")
	}
}

// scenarioViewer: a viewer receives the session's frames but may send
// only hello (403 with the contract's text otherwise), and may not
// negotiate requests only a controller answers.
func scenarioViewer(t *testing.T, p *runnerProc, _ string) {
	c := p.attach(nil)
	var v connSnap
	if code := p.call("POST", p.sessionPath("/subscribe"), map[string]any{"role": "viewer", "capabilities": map[string]any{"serverRequests": []string{"approval"}}}, nil, &v); code != 200 ||
		v.Role != "viewer" || v.ControllerLeaseGranted || v.controller() != c.conn {
		t.Fatalf("viewer subscribe: %d %+v", code, v)
	}
	vs := p.open(http.DefaultClient, "subscriptionId="+v.SubscriptionID, nil, nil)

	const denied = "Viewer headless connections cannot send messages"
	for _, m := range []map[string]any{
		{"type": "prompt", "content": "from the viewer"},
		{"type": "interrupt"},
		{"type": "init", "thinking_level": "high"},
		{"type": "shutdown"},
	} {
		code, raw := p.post(p.sessionPath("/messages"), m, as(v.SubscriptionID))
		edgetest.WantError(t, fmt.Sprintf("viewer's %s", m["type"]), code, raw, 403, "access_denied", denied)
	}
	code, raw := p.post(p.sessionPath("/message"), map[string]any{"type": "prompt", "content": "from the viewer"}, map[string]string{"x-maestro-headless-connection-id": v.ConnectionID})
	edgetest.WantError(t, "viewer's prompt by connection header", code, raw, 403, "access_denied", denied)
	code, raw = p.post(p.sessionPath("/messages"), map[string]any{"type": "prompt", "content": "from the viewer"}, map[string]string{"x-maestro-headless-role": "viewer"})
	edgetest.WantError(t, "prompt with the viewer role header", code, raw, 403, "access_denied", denied)
	code, raw = p.post(p.sessionPath("/subscribe"), map[string]any{"role": "viewer", "capabilities": map[string]any{"serverRequests": []string{"user_input"}}}, nil)
	edgetest.WantError(t, "viewer negotiating user_input", code, raw, 400, "bad_request", "viewer headless connections cannot negotiate user_input requests")

	// hello is allowed, and its hello_ok goes to the viewer only.
	if code, raw := p.post(p.sessionPath("/messages"), map[string]any{"type": "hello", "role": "viewer"}, as(v.SubscriptionID)); code != 200 {
		t.Fatalf("viewer's hello: %d %s", code, raw)
	}
	vs.until(isType("hello_ok"))

	// The controller's prompt reaches the viewer; nothing the viewer sent
	// ran, and the controller never saw the viewer's hello_ok.
	c.send(map[string]any{"type": "prompt", "content": "from the controller"})
	for _, e := range c.collect(isStatusMsg("Prompt: from the controller")) {
		if m := e.msg(t); m["type"] == "hello_ok" || m["message"] == "Prompt: from the viewer" {
			t.Errorf("the controller's stream got %s", e.raw)
		}
	}
	for _, e := range vs.collect(isStatusMsg("Prompt: from the controller")) {
		if m := e.msg(t); m["message"] == "Prompt: from the viewer" || m["type"] == "status" && strings.HasPrefix(m["message"].(string), "Initialized") {
			t.Errorf("a refused viewer message ran: %s", e.raw)
		}
	}
	var st struct {
		State struct {
			IsReady bool `json:"is_ready"`
		} `json:"state"`
	}
	if code := p.call("GET", p.sessionPath("/state"), nil, nil, &st); code != 200 || !st.State.IsReady {
		t.Errorf("the viewer's shutdown was not refused: %d ready %v", code, st.State.IsReady)
	}
}

// scenarioReplay: ?cursor=N replays exactly the buffered messages after N,
// in cursor order, then live ones; once N has left the replay ring (more
// than its 1,024 frames published since), or for a negative N, the
// stream starts with reset{replay_gap} and a fresh snapshot instead.
func scenarioReplay(t *testing.T, p *runnerProc, _ string) {
	c := p.attach(nil)
	var seen []envelope
	for i := range 10 {
		c.send(map[string]any{"type": "prompt", "content": fmt.Sprintf("p%d", i)})
		for _, e := range c.collect(isStatusMsg(fmt.Sprintf("Prompt: p%d", i))) {
			if e.Type == "message" {
				seen = append(seen, e)
			}
		}
	}
	var mid int64 = -1
	var after []envelope
	for _, e := range seen {
		if mid >= 0 {
			after = append(after, e)
		}
		if e.msg(t)["message"] == "Prompt: p3" {
			mid = e.Cursor
		}
	}
	if mid < 0 || len(after) < 6 {
		t.Fatalf("recorded %d envelopes, p3 at %d", len(seen), mid)
	}
	resumed := p.open(http.DefaultClient, "cursor="+strconv.FormatInt(mid, 10), nil, nil)
	for _, want := range after {
		if got := resumed.frame(); got.raw != want.raw {
			t.Fatalf("replay after cursor %d:\n got  %s\n want %s", mid, got.raw, want.raw)
		}
	}
	last := after[len(after)-1].Cursor
	c.send(map[string]any{"type": "prompt", "content": "live"})
	for _, e := range resumed.collect(isStatusMsg("Prompt: live")) {
		if e.Type != "message" || e.Cursor <= last {
			t.Fatalf("after the replay: %s, want messages after cursor %d", e.raw, last)
		}
		last = e.Cursor
	}

	// Push mid out of the ring: more frames than it holds (one status per
	// init; the controller's own stream may lag meanwhile, which is fine).
	for range httpattach.DefaultReplayRing + 64 {
		if code, raw := p.post(p.sessionPath("/messages"), map[string]any{"type": "init"}, as(c.sub)); code != 200 {
			t.Fatalf("init: %d %s", code, raw)
		}
	}
	var state struct {
		Cursor int64 `json:"cursor"`
	}
	if code := p.call("GET", p.sessionPath("/state"), nil, nil, &state); code != 200 || state.Cursor < mid+httpattach.DefaultReplayRing {
		t.Fatalf("state: %d cursor %d", code, state.Cursor)
	}
	for _, q := range []string{"cursor=" + strconv.FormatInt(mid, 10), "cursor=-1"} {
		s := p.open(http.DefaultClient, q, nil, nil)
		first := s.frame()
		if first.Type != "reset" || first.Reason != "replay_gap" || first.snapCursor(t) < state.Cursor {
			t.Fatalf("%s: first envelope %.300s, want reset{replay_gap} at cursor ≥ %d", q, first.raw, state.Cursor)
		}
		content := "after the gap " + q
		c.send(map[string]any{"type": "prompt", "content": content})
		for _, e := range s.collect(isStatusMsg("Prompt: " + content)) {
			if e.Type != "message" || e.Cursor <= first.snapCursor(t) {
				t.Fatalf("%s: after the reset: %.300s", q, e.raw)
			}
		}
		if code := p.call("GET", p.sessionPath("/state"), nil, nil, &state); code != 200 {
			t.Fatalf("state: %d", code)
		}
	}
}

// scenarioLagged: a subscriber that stops reading gets, once it reads
// again, one reset{lagged} with a fresh snapshot in place of the backlog.
//
// Forcing this over a real TCP socket: the stuck client asks for a tiny
// receive buffer (SO_RCVBUF before connect, which also turns off receive
// autotuning), then more bytes are published than that buffer plus the
// largest send buffer the kernel may give the runner's socket
// (net.ipv4.tcp_wmem's maximum), so the runner's SSE writer is certainly
// blocked; then more than the 128-frame backlog is published. The runner
// needs no test hook for it.
func scenarioLagged(t *testing.T, p *runnerProc, _ string) {
	c := p.attach(nil)
	gate := make(chan struct{})
	d := &net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	tr := &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true, ReadBufferSize: 4096}
	t.Cleanup(tr.CloseIdleConnections)
	stuck := p.open(&http.Client{Transport: tr}, "", map[string]string{"x-maestro-headless-role": "viewer"}, gate)

	// Big frames until the writer must be blocked: each prompt's status
	// carries its content. The writer's 30 s write deadline bounds how
	// long this may take.
	const chunk = 900 << 10
	fill := maxSendBuffer(t) + 2<<20
	began := time.Now()
	for i := 0; i*chunk < fill; i++ {
		content := fmt.Sprintf("big%d:", i) + strings.Repeat("x", chunk)
		c.send(map[string]any{"type": "prompt", "content": content})
		c.until(isStatusMsg("Prompt: " + content))
	}
	// Then more than the backlog allows.
	for range httpattach.DefaultMaxBacklog + 32 {
		c.send(map[string]any{"type": "init"})
		c.until(isStatusMsg("Init received with no changes"))
	}
	c.send(map[string]any{"type": "prompt", "content": "backlog done"})
	done, _ := c.until(isStatusMsg("Prompt: backlog done"))
	t.Logf("published %d MiB and %d frames in %v while the stream was not read", (fill+chunk-1)/chunk*chunk>>20, httpattach.DefaultMaxBacklog+33, time.Since(began).Round(time.Millisecond))

	if took := time.Since(began); took > httpattach.DefaultWriteTimeout*4/5 {
		t.Fatalf("publishing took %v: near the runner's %v SSE write deadline, after which it ends the stuck stream instead", took, httpattach.DefaultWriteTimeout)
	}
	// Read again: the frames already in the socket buffers, then the reset.
	close(gate)
	first := stuck.frame()
	if first.Type != "snapshot" {
		t.Fatalf("first envelope: %.300s", first.raw)
	}
	var reset envelope
	last := first.snapCursor(t)
	delivered := 0
	for reset.Type == "" {
		e := stuck.frame()
		switch {
		case e.Type == "reset":
			reset = e
		case e.Type != "message" || e.Cursor <= last:
			t.Fatalf("before the reset: %.300s after cursor %d", e.raw, last)
		default:
			last, delivered = e.Cursor, delivered+1
		}
	}
	if reset.Reason != "lagged" || reset.snapCursor(t) < done.Cursor {
		t.Fatalf("reset %.300s, want reset{lagged} with a snapshot at cursor ≥ %d", reset.raw, done.Cursor)
	}
	n := done.Cursor - first.snapCursor(t)
	if int64(delivered) >= n {
		t.Fatalf("%d of %d frames were delivered: the backlog was not dropped", delivered, n)
	}
	t.Logf("%d of %d frames delivered before reset{lagged} at cursor %d", delivered, n, reset.snapCursor(t))
	// The stream goes on live after the reset.
	c.send(map[string]any{"type": "prompt", "content": "after the lag"})
	for _, e := range stuck.collect(isStatusMsg("Prompt: after the lag")) {
		if e.Type != "message" || e.Cursor <= reset.snapCursor(t) {
			t.Fatalf("after the reset: %.300s", e.raw)
		}
	}
}

// maxSendBuffer is the largest send buffer a TCP socket may get (Linux:
// the last field of net.ipv4.tcp_wmem); elsewhere a generous bound.
func maxSendBuffer(t *testing.T) int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem")
	if err != nil {
		return 16 << 20
	}
	f := strings.Fields(string(data))
	n, err := strconv.Atoi(f[len(f)-1])
	if err != nil || n <= 0 {
		t.Fatalf("tcp_wmem %q: %v", data, err)
	}
	return n
}

// scenarioUtilities: file read, file search, command and watch over HTTP;
// commands and watches carry owner_connection_id, another controller may
// not stop them, and they end when their owner disconnects.
func scenarioUtilities(t *testing.T, p *runnerProc, ws string) {
	if err := os.WriteFile(filepath.Join(ws, "notes.md"), []byte("alpha\nbeta\ngamma\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "watched"), 0o755); err != nil {
		t.Fatal(err)
	}
	all := map[string]any{"utilityOperations": []string{"command_exec", "file_search", "file_read", "file_watch"}}
	c := p.attach(all)

	c.send(map[string]any{"type": "utility_file_read", "read_id": "r1", "path": "notes.md", "limit": 2})
	_, read := c.until(isType("utility_file_read_result"))
	if read["read_id"] != "r1" || read["content"] != "alpha\nbeta" || read["truncated"] != true || read["total_lines"] != 3.0 || read["relative_path"] != "notes.md" {
		t.Errorf("file read: %v", read)
	}

	c.send(map[string]any{"type": "utility_file_search", "search_id": "s1", "query": "notes"})
	e, found := c.until(isType("utility_file_search_results"))
	if found["search_id"] != "s1" || !strings.Contains(e.raw, `"path":"notes.md"`) {
		t.Errorf("file search: %s", e.raw)
	}

	c.send(map[string]any{"type": "utility_command_start", "command_id": "c1", "command": "echo hello-e2e", "shell_mode": "shell"})
	var out strings.Builder
	var started, exited map[string]any
	for _, e := range c.collect(isType("utility_command_exited")) {
		m := e.msg(t)
		switch m["type"] {
		case "utility_command_started":
			started = m
		case "utility_command_output":
			out.WriteString(m["content"].(string))
		case "utility_command_exited":
			exited = m
		}
	}
	if started == nil || started["command_id"] != "c1" || started["owner_connection_id"] != c.conn {
		t.Errorf("command started: %v, want owner_connection_id %s", started, c.conn)
	}
	if !strings.Contains(out.String(), "hello-e2e") || exited["success"] != true || exited["exit_code"] != 0.0 {
		t.Errorf("command output %q, exit %v", out.String(), exited)
	}

	c.send(map[string]any{"type": "utility_file_watch_start", "watch_id": "w1", "root_dir": "watched", "debounce_ms": 0})
	if _, w := c.until(isType("utility_file_watch_started")); w["watch_id"] != "w1" || w["owner_connection_id"] != c.conn {
		t.Errorf("watch started: %v, want owner_connection_id %s", w, c.conn)
	}
	if err := os.WriteFile(filepath.Join(ws, "watched", "new.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ev := c.until(isType("utility_file_watch_event")); ev["watch_id"] != "w1" || ev["relative_path"] != "new.txt" {
		t.Errorf("watch event: %v", ev)
	}

	// A long command, owned by c, shows in the state with its owner.
	c.send(map[string]any{"type": "utility_command_start", "command_id": "c2", "command": "sleep 120"})
	c.until(isType("utility_command_started"))
	type owned struct {
		CommandID string `json:"command_id"`
		WatchID   string `json:"watch_id"`
		Owner     string `json:"owner_connection_id"`
	}
	var st struct {
		State struct {
			Commands []owned `json:"active_utility_commands"`
			Watches  []owned `json:"active_file_watches"`
		} `json:"state"`
	}
	p.call("GET", p.sessionPath("/state"), nil, nil, &st)
	if len(st.State.Commands) != 1 || st.State.Commands[0] != (owned{CommandID: "c2", Owner: c.conn}) {
		t.Errorf("active commands %+v", st.State.Commands)
	}
	if len(st.State.Watches) != 1 || st.State.Watches[0] != (owned{WatchID: "w1", Owner: c.conn}) {
		t.Errorf("active watches %+v", st.State.Watches)
	}

	// Another controller takes over; it may not stop what c owns.
	other := p.attach(all)
	code, raw := p.post(p.sessionPath("/messages"), map[string]any{"type": "utility_command_terminate", "command_id": "c2"}, as(other.sub))
	edgetest.WantError(t, "terminate by another connection", code, raw, 403, "access_denied", "Headless command c2 is owned by another connection")
	code, raw = p.post(p.sessionPath("/messages"), map[string]any{"type": "utility_file_watch_stop", "watch_id": "w1"}, as(other.sub))
	edgetest.WantError(t, "watch stop by another connection", code, raw, 403, "access_denied", "Headless file watch w1 is owned by another connection")

	// The owner leaves: its command and watch end.
	if code, raw := p.post(p.sessionPath("/disconnect"), map[string]any{"connectionId": c.conn}, nil); code != 200 {
		t.Fatalf("disconnect: %d %s", code, raw)
	}
	var cmdEnd, watchEnd map[string]any
	for cmdEnd == nil || watchEnd == nil {
		_, m := other.until(func(m map[string]any) bool {
			return m["type"] == "utility_command_exited" || m["type"] == "utility_file_watch_stopped"
		})
		if m["type"] == "utility_command_exited" {
			cmdEnd = m
		} else {
			watchEnd = m
		}
	}
	if cmdEnd["command_id"] != "c2" || cmdEnd["reason"] != "Owning connection closed while utility command was still running" {
		t.Errorf("command end: %v", cmdEnd)
	}
	if watchEnd["watch_id"] != "w1" || watchEnd["reason"] != "Owning connection closed while file watch was still running" {
		t.Errorf("watch end: %v", watchEnd)
	}
}

// scenarioDrainEscape: a drain whose export_paths reach outside the
// workspace through a symbolic link is refused with 400 and the contract's
// text before anything changes; the runner stays ready and a corrected
// drain then succeeds.
func scenarioDrainEscape(t *testing.T, p *runnerProc, ws string) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"outdir": outside, "leak": filepath.Join(outside, "secret"), "dangling": filepath.Join(outside, "nothing-yet")} {
		if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := p.attach(nil)
	c.send(map[string]any{"type": "prompt", "content": "before the drain"})
	c.until(isStatusMsg("Prompt: before the drain"))

	for _, bad := range []string{"outdir/secret", "outdir", "leak", "dangling"} {
		code, raw := p.post(hostedrunner.DrainPath, map[string]any{"reason": "ttl_expired", "export_paths": []string{"notes.txt", bad}}, nil)
		edgetest.WantError(t, "drain exporting "+bad, code, raw, 400, "bad_request", "Export path escapes hosted runner workspace root: "+bad)
	}
	// Nothing changed: ready, no manifest, attach and prompts still work.
	var id hostedrunner.Identity
	if code := p.call("GET", hostedrunner.IdentityPath, nil, nil, &id); code != 200 || !id.Ready || id.Draining || id.DrainManifestPath != "" {
		t.Errorf("identity after refused drains: %d %+v", code, id)
	}
	if code := p.call("GET", "/readyz", nil, nil, nil); code != 200 {
		t.Errorf("/readyz after refused drains: %d", code)
	}
	if files, _ := filepath.Glob(filepath.Join(ws, ".maestro", "runner-snapshots", "*")); len(files) != 0 {
		t.Errorf("a refused drain wrote %v", files)
	}
	c.send(map[string]any{"type": "prompt", "content": "after the refusals"})
	c.until(isStatusMsg("Prompt: after the refusals"))

	var d hostedrunner.DrainResponse
	if code := p.call("POST", hostedrunner.DrainPath, map[string]any{"reason": "ttl_expired", "export_paths": []string{"notes.txt"}}, nil, &d); code != 200 || d.Status != "drained" {
		t.Fatalf("corrected drain: %d %+v", code, d)
	}
	got := d.Manifest.WorkspaceExport.Paths
	if len(got) != 1 || got[0].Input != "notes.txt" || got[0].RelativePath != "notes.txt" || got[0].Type != "file" {
		t.Errorf("exported paths %+v", got)
	}
	var e edgetest.ErrorBody
	if code := p.call("POST", "/api/headless/connections", map[string]any{"role": "controller"}, nil, &e); code != 503 || e.ErrorType != "runtime_not_ready" {
		t.Errorf("attach after the drain: %d %+v", code, e)
	}
}
