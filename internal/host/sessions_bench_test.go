package host

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	goruntime "runtime"
	"runtime/metrics"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// BenchmarkIdleSessions measures what an idle live session of maestro
// serve costs (issue 22: at least 10,000 idle sessions per GiB, and no CPU
// while idle). Each session is made as a client makes one over HTTP:
// created (POST /api/headless/sessions, the bundled replay demo in a fresh
// workspace), one controller subscribed, and its SSE stream open (its headers
// read); the client side holds a bare TCP connection and no
// goroutine, so what is counted is the server's. Reported per session:
// Go heap (live objects) plus goroutine stacks after a GC, and goroutines;
// for the whole set, the process CPU time over an idle window, per second.
//
//	go test -run '^$' -bench IdleSessions -benchtime 1x ./internal/host/
func BenchmarkIdleSessions(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			for b.Loop() {
				idleSessions(b, n, 2*time.Second)
			}
		})
	}
}

// idleSessions opens n idle sessions on a fresh server, reports their
// cost and closes them.
func idleSessions(b *testing.B, n int, idle time.Duration) {
	h, err := New(Options{Home: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	sessions, err := h.AttachSessions(AttachPolicy{Workspaces: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	handler := httpattach.NewHandler(httpattach.Config{Sessions: sessions})
	srv := httptest.NewServer(handler)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}
	var streams []net.Conn
	defer func() {
		for _, c := range streams {
			c.Close()
		}
		srv.CloseClientConnections()
		sessions.Close()
		srv.Close()
		handler.Close()
	}()

	// One session first, so that what every session shares (the sandbox
	// probe, pools, lazily built tables) is in the baseline.
	streams = append(streams, openIdleSession(b, client, srv.URL))
	before, goroutinesBefore := liveBytes(), goruntime.NumGoroutine()
	for range n {
		streams = append(streams, openIdleSession(b, client, srv.URL))
	}
	after, goroutinesAfter := liveBytes(), goruntime.NumGoroutine()

	cpuBefore := cpuTime(b)
	window := time.NewTimer(idle) // the measurement window: nothing to wait for but time
	<-window.C
	cpu := cpuTime(b) - cpuBefore

	b.ReportMetric(float64(after-before)/float64(n), "bytes/session")
	b.ReportMetric(float64(goroutinesAfter-goroutinesBefore)/float64(n), "goroutines/session")
	b.ReportMetric(float64(1<<30)/(float64(after-before)/float64(n)), "sessions/GiB")
	b.ReportMetric(float64(cpu.Microseconds())/idle.Seconds()/1000, "idle-cpu-ms/s")
}

// openIdleSession creates a session, subscribes a controller and opens
// its SSE stream, returning the stream's connection once its headers
// arrived; nothing reads it afterwards.
func openIdleSession(b *testing.B, client *http.Client, base string) net.Conn {
	var created struct {
		SessionID string `json:"session_id"`
	}
	postJSON(b, client, base+"/api/headless/sessions", `{}`, &created)
	var sub struct {
		SubscriptionID string `json:"subscription_id"`
	}
	postJSON(b, client, base+"/api/headless/sessions/"+created.SessionID+"/subscribe", `{"role":"controller"}`, &sub)

	u, err := url.Parse(base)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	if err := conn.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /api/headless/sessions/%s/events?subscriptionId=%s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n",
		created.SessionID, sub.SubscriptionID, u.Host)
	// The /subscribe answer carried the snapshot: the stream starts with
	// its headers, flushed once the stream is attached.
	r := bufio.NewReader(conn)
	status, err := r.ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		b.Fatalf("SSE stream of session %s: %q %v", created.SessionID, status, err)
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			b.Fatalf("SSE stream of session %s: %v", created.SessionID, err)
		}
		if line == "\r\n" {
			break
		}
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		b.Fatal(err)
	}
	return conn
}

// postJSON posts body to url and decodes the 200 answer into out.
func postJSON(b *testing.B, client *http.Client, url, body string, out any) {
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("POST %s: %d %s", url, resp.StatusCode, data)
	}
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(out); err != nil {
		b.Fatalf("POST %s: %v", url, err)
	}
}

// liveBytes is the Go heap's live objects plus goroutine stacks, after a
// full collection.
func liveBytes() uint64 {
	goruntime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64()
}

// cpuTime is the process's user plus system CPU time so far. It is this
// file's own, not proctest's: bench/sessions/run.sh copies this file into
// an older tree (its baseline) and builds it there.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
