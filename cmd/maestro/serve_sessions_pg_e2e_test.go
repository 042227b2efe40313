package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/pgtest"
	"github.com/maestro-run/maestro/internal/proctest"
)

// Issue 21, live sessions across serve processes (docs/scale-out.md, "Live
// sessions"): three `maestro serve` on one PostgreSQL. A session created
// through A streams the same cursors through B (proxied, token and
// ?cursor= forwarded) as through A; C, with --session-proxy=false,
// answers 409 with A's address; once A is SIGKILLed, B reports the
// session ended with the reason.
func TestServeSessionsAcrossProcesses(t *testing.T) {
	t.Parallel()
	dsn := ownPostgres(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	const token = "xsess-e2e-token"
	start := func(name string, extra ...string) (*worker, string) {
		dir := t.TempDir()
		args := append([]string{"serve", "--listen", "127.0.0.1:0", "--db", dsn, "--workers", "0",
			"--data-dir", filepath.Join(dir, "data"), "--name", name, "--token", token, "--session-stale-after", "3s"}, extra...)
		cmd := exec.CommandContext(ctx, binary, args...)
		cmd.Env = proctest.NoModelEnv(filepath.Join(dir, "home"))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		w := launch(t, cmd)
		urls := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if u := regexp.MustCompile(`http://127\.0\.0\.1:\d+`).FindString(sc.Text()); u != "" {
					select {
					case urls <- u:
					default:
					}
				}
			}
		}()
		select {
		case u := <-urls:
			return w, u
		case <-w.done:
			t.Fatalf("serve %s exited: %v\n%s", name, w.waitErr, w.stderr)
		case <-ctx.Done():
			t.Fatalf("serve %s did not print its URL\n%s", name, w.stderr)
		}
		return nil, ""
	}
	procA, urlA := start("serve-a")
	procB, urlB := start("serve-b")
	_, urlC := start("serve-c", "--session-proxy=false")
	dump := func() string {
		return fmt.Sprintf("--- serve-a:\n%s\n--- serve-b:\n%s", tail(procA.stderr.String(), 3000), tail(procB.stderr.String(), 3000))
	}

	a := &runnerProc{t: t, base: urlA, token: token, named: true}
	var snap struct {
		SessionID string `json:"session_id"`
	}
	if code := a.call("POST", "/api/headless/sessions", map[string]any{"approvalMode": "auto", "clientInfo": map[string]any{"name": "xsess"}}, nil, &snap); code != 200 || snap.SessionID == "" {
		t.Fatalf("create a session through A: %d %+v\n%s", code, snap, dump())
	}
	a.session = snap.SessionID
	b := &runnerProc{t: t, base: urlB, token: token, named: true, session: snap.SessionID}
	c := &runnerProc{t: t, base: urlC, token: token, named: true, session: snap.SessionID}

	// Viewers through A and through B, both from cursor 0; a controller
	// through B (proxied too) drives a prompt.
	viewer := map[string]string{"x-maestro-headless-role": "viewer"}
	viaA := a.open(http.DefaultClient, "cursor=0", viewer, nil)
	viaB := b.open(http.DefaultClient, "cursor=0", viewer, nil)
	ctl := b.attach(nil)
	ctl.send(map[string]any{"type": "prompt", "content": "hello from B"})
	gotA, gotB := untilResponseEnd(viaA), untilResponseEnd(viaB)
	if len(gotA) < 3 || !slices.EqualFunc(gotA, gotB, func(x, y envelope) bool { return x.Cursor == y.Cursor && x.raw == y.raw }) {
		t.Fatalf("the streams differ: through A %d envelopes, through B %d\nA: %v\nB: %v\n%s", len(gotA), len(gotB), cursors(gotA), cursors(gotB), dump())
	}
	// Proxy overhead, one run: how much later each envelope arrived
	// through B than through A.
	var lag time.Duration
	for i := range gotA {
		lag += gotB[i].at.Sub(gotA[i].at)
	}
	t.Logf("%d envelopes, cursors %d..%d, identical through A and B; mean extra latency through B: %s",
		len(gotA), gotA[0].Cursor, gotA[len(gotA)-1].Cursor, lag/time.Duration(len(gotA)))

	// Resuming through B from a cursor in the middle replays from there.
	mid := gotA[len(gotA)/2].Cursor
	resumed := b.open(http.DefaultClient, fmt.Sprintf("cursor=%d", mid), viewer, nil)
	if e := resumed.next(); e.Cursor != mid+1 {
		t.Errorf("a stream through B resumed at cursor %d starts at %d, want %d (%s)", mid, e.Cursor, mid+1, e.raw)
	}
	var st struct {
		SessionID string `json:"session_id"`
	}
	if code := b.call("GET", "/api/headless/sessions/"+a.session+"/state", nil, nil, &st); code != 200 || st.SessionID != a.session {
		t.Errorf("state through B: %d %+v", code, st)
	}
	if code := b.call("GET", "/api/headless/sessions/"+a.session+"/state", nil, map[string]string{"Authorization": "Bearer wrong"}, nil); code != 401 {
		t.Errorf("state through B with a wrong token: %d, want 401", code)
	}
	listed := listSessions(t, b)
	if s, ok := listed[a.session]; !ok || s.Instance != "serve-a" || s.Address != urlA || s.Local || !s.EndedAt.IsZero() {
		t.Errorf("B lists the session as %+v (found %v), want owned by serve-a at %s, live", s, ok, urlA)
	}
	if s := listSessions(t, a)[a.session]; !s.Local {
		t.Errorf("A lists its own session as %+v, want local", s)
	}

	// Without proxying, C names the owner.
	var conflict map[string]any
	if code := c.call("GET", "/api/headless/sessions/"+a.session+"/state", nil, nil, &conflict); code != 409 ||
		conflict["error_type"] != "runtime_owned_elsewhere" || !strings.Contains(fmt.Sprint(conflict["error"]), urlA) {
		t.Errorf("state through C (no proxy): %d %v, want 409 runtime_owned_elsewhere naming %s", code, conflict, urlA)
	}

	// A dies: once its heartbeat is stale, B says the session ended.
	procA.cmd.Process.Kill()
	<-procA.done
	killed := time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	// One bound for the whole wait (a time.After made in each pass of the
	// loop never fires while the loop ticks).
	giveUp := time.NewTimer(30 * time.Second)
	defer giveUp.Stop()
	var gone map[string]any
	for {
		code := b.call("GET", "/api/headless/sessions/"+a.session+"/state", nil, nil, &gone)
		if code == 410 {
			break
		}
		if code != 502 && code != 200 {
			t.Fatalf("state through B after A was killed: %d %v, want 502 (A unreachable) until 410\n%s", code, gone, dump())
		}
		select {
		case <-tick.C:
		case <-giveUp.C:
			t.Fatalf("B did not report the session ended within 30 s of A's death (last %d %v)\n%s", code, gone, dump())
		}
	}
	t.Logf("B reported the session ended %s after A was killed (stale after 3 s)", time.Since(killed).Round(100*time.Millisecond))
	if gone["error_type"] != "stale_session" || !strings.Contains(fmt.Sprint(gone["error"]), "stopped heartbeating") {
		t.Errorf("410 body %v, want stale_session saying the owner stopped heartbeating", gone)
	}
	if s := listSessions(t, b)[a.session]; s.EndedAt.IsZero() || !strings.Contains(s.EndReason, "stopped heartbeating") {
		t.Errorf("B lists the dead owner's session as %+v, want ended with the reason", s)
	}
}

type listedSession struct {
	Instance  string    `json:"instance"`
	Address   string    `json:"address"`
	Local     bool      `json:"local"`
	EndedAt   time.Time `json:"ended_at"`
	EndReason string    `json:"end_reason"`
}

// listSessions is GET /api/headless/sessions by id.
func listSessions(t *testing.T, p *runnerProc) map[string]listedSession {
	t.Helper()
	var out struct {
		Sessions []struct {
			ID string `json:"id"`
			listedSession
		} `json:"sessions"`
	}
	if code := p.call("GET", "/api/headless/sessions", nil, nil, &out); code != 200 {
		t.Fatalf("list sessions on %s: %d", p.base, code)
	}
	m := map[string]listedSession{}
	for _, s := range out.Sessions {
		m[s.ID] = s.listedSession
	}
	return m
}

// untilResponseEnd returns the message envelopes of c up to and including
// the first response_end.
func untilResponseEnd(c *client) []envelope {
	c.p.t.Helper()
	var out []envelope
	for {
		e := c.next()
		if e.Type != "message" {
			continue
		}
		out = append(out, e)
		if strings.Contains(e.raw, `"type":"response_end"`) {
			return out
		}
	}
}

func cursors(es []envelope) []int64 {
	var out []int64
	for _, e := range es {
		out = append(out, e.Cursor)
	}
	return out
}

// pg is the throwaway PostgreSQL cluster of this package's tests, started
// on first use and stopped by TestMain (one initdb per test binary, not
// per test; none under make test, whose one cluster every test binary
// attaches to: pgtest.ClusterEnv).
var pg pgtest.Shared

// ownPostgres returns the DSN of a fresh schema (its own notification
// channels too, internal/store/postgres) in the package's throwaway
// PostgreSQL cluster (skipped or failed per pgtest.SkipOrFail without the
// binaries).
func ownPostgres(t *testing.T) string {
	t.Helper()
	return pg.Cluster(t).NewSchema(t)
}
