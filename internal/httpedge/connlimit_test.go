package httpedge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// limitedServer serves a stream route (/events, held until the client
// goes) and /ok behind a ConnLimit of max; its log is returned.
type limitedServer struct {
	url     string
	lim     *ConnLimit
	log     *syncBuf
	started chan struct{}
	changed chan struct{}
	idle    chan struct{}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startLimited(t *testing.T, max int) *limitedServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ls := &limitedServer{log: &syncBuf{}, started: make(chan struct{}, 16), changed: make(chan struct{}, 64), idle: make(chan struct{}, 16)}
	ls.lim = LimitConns(ln, max, "--max-connections", slog.New(slog.NewTextHandler(ls.log, nil)))
	ls.lim.changed = func() {
		select {
		case ls.changed <- struct{}{}:
		default:
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		s := StartSSE(w, time.Second)
		s.Comment("hello")
		s.Flush()
		ls.started <- struct{}{}
		<-r.Context().Done()
	})
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateIdle {
				select {
				case ls.idle <- struct{}{}:
				default:
				}
			}
		}}
	ls.lim.Configure(srv, nil)
	go srv.Serve(ls.lim)
	t.Cleanup(func() { srv.Close() })
	ls.url = "http://" + ln.Addr().String()
	return ls
}

// client is a client with its own connections.
func client() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
}

// openStream opens /events and waits for the server to serve it; cancel
// closes it.
func (ls *limitedServer) openStream(t *testing.T) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ls.url+"/events", nil)
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("stream: %s", resp.Status)
	}
	ls.wait(t, ls.started, "the stream to start")
	return func() { cancel(); resp.Body.Close() }
}

func (ls *limitedServer) wait(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestConnLimitStreams: event streams count against the limit; past it a
// request is answered 503 with Retry-After and a message (not left
// hanging), the limit is logged once, and a stream that ends gives its
// place back.
func TestConnLimitStreams(t *testing.T) {
	t.Parallel()
	ls := startLimited(t, 2)
	stop1 := ls.openStream(t)
	stop2 := ls.openStream(t)
	defer stop2()
	for range 3 {
		resp, err := client().Get(ls.url + "/ok")
		if err != nil {
			t.Fatalf("a request past the limit: %v (want a 503 answer)", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Error string }
		json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" ||
			!strings.Contains(e.Error, "limit of 2 open connections (--max-connections)") {
			t.Fatalf("past the limit: %s Retry-After %q %s", resp.Status, resp.Header.Get("Retry-After"), body)
		}
	}
	if n := strings.Count(ls.log.String(), "connection limit reached"); n != 1 {
		t.Fatalf("want one log line for the refusals, got %d:\n%s", n, ls.log.String())
	}
	if !strings.Contains(ls.log.String(), "max_connections=2") {
		t.Fatalf("log line: %s", ls.log.String())
	}
	stop1()
	for ls.lim.Open() >= 2 {
		ls.wait(t, ls.changed, "the closed stream's place")
	}
	resp, err := client().Get(ls.url + "/ok")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after a stream ended: %s", resp.Status)
	}
}

// TestConnLimitReclaimsIdle: a full listener closes an idle keep-alive
// connection to serve a new client rather than refuse it.
func TestConnLimitReclaimsIdle(t *testing.T) {
	t.Parallel()
	ls := startLimited(t, 1)
	a := client()
	resp, err := a.Get(ls.url + "/ok")
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	ls.wait(t, ls.idle, "the keep-alive connection to go idle")
	resp, err = client().Get(ls.url + "/ok")
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body) // read to the end: the client keeps the connection
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a new client while the only place is idle: %s", resp.Status)
	}
	if ls.lim.Open() != 1 {
		t.Fatalf("open connections: %d, want 1", ls.lim.Open())
	}
}

// TestConnLimitRefusalSlots: past the limit and the refusal slots, a
// connection is closed at once; nothing is held for it.
func TestConnLimitRefusalSlots(t *testing.T) {
	t.Parallel()
	ls := startLimited(t, 1)
	defer ls.openStream(t)()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// Silent connections take the refusal slots (each until the
	// server's header timeout); the next one is closed at once.
	for range refusalSlots {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(ls.url, "http://"), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(ls.url, "http://"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes from a connection past the refusal slots, want it closed", n)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("a connection past the refusal slots was held open")
	}
}

// TestFDHeadroom: a limit that would leave the process too few file
// descriptors for its own files is warned about, naming the setting.
func TestFDHeadroom(t *testing.T) {
	if msg := fdHeadroom(1024, "--max-connections", 1024); !strings.Contains(msg, "--max-connections 1024 leaves fewer than 256 of this process's 1024 file descriptors") {
		t.Errorf("fdHeadroom(1024, 1024) = %q", msg)
	}
	if msg := fdHeadroom(1024, "--max-connections", 1<<20); msg != "" {
		t.Errorf("fdHeadroom(1024, 1M) = %q, want none", msg)
	}
}

// TestConnLimitAnsweredNotYetIdle: a keep-alive connection whose answer
// the client has read, but which the server has not yet marked idle, is
// about to be idle: a new client past the limit waits for it and takes
// its place instead of getting a 503. The server is held between writing
// the answer and marking the connection idle until the new client's
// request is read.
func TestConnLimitAnsweredNotYetIdle(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := LimitConns(ln, 1, "--max-connections", nil)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		ReadHeaderTimeout: 10 * time.Second}
	lim.Configure(srv, nil)
	var first net.Conn
	var mu sync.Mutex
	release := make(chan struct{})
	var once sync.Once
	limState := srv.ConnState
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		if first == nil {
			first = c
		}
		isFirst := first == c
		mu.Unlock()
		switch {
		case isFirst && s == http.StateIdle:
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
		case !isFirst && s == http.StateActive:
			// The second client's request is read: let the first
			// connection go idle.
			once.Do(func() { close(release) })
		}
		limState(c, s)
	}
	go srv.Serve(lim)
	t.Cleanup(func() { srv.Close() })
	url := "http://" + ln.Addr().String() + "/ok"
	a := client()
	resp, err := a.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	// The first connection is answered, not yet idle.
	resp, err = client().Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a new client while the only connection is answered and about to be idle: %s %s", resp.Status, body)
	}
	if lim.Open() != 1 {
		t.Fatalf("open connections: %d, want 1", lim.Open())
	}
}

// TestConnLimitRefusalDoesNotWaitForBody: a request past the limit whose
// declared body never comes is answered 503 at once; it held its refusal
// slot, unanswered, for ever (net/http read the rest of the body first).
func TestConnLimitRefusalDoesNotWaitForBody(t *testing.T) {
	t.Parallel()
	ls := startLimited(t, 1)
	defer ls.openStream(t)()
	addr := strings.TrimPrefix(ls.url, "http://")
	status, body := stalledRequest(t, addr, "")
	if !strings.HasPrefix(status, "503") || !strings.Contains(body, "limit of 1 open connections") {
		t.Fatalf("past the limit, body stalled: %s %s", status, body)
	}
}

// from is a client whose connections come from the loopback address ip
// (127.0.0.2, …: another client address on this machine).
func from(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", "127.0.0.1:1")
	if c != nil {
		c.Close()
	}
	if err != nil && strings.Contains(err.Error(), "assign requested address") {
		t.Skipf("cannot send from %s: %v", ip, err)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// streamFrom opens /events from client c and waits for the server to
// serve it; the answer's body is the stream.
func (ls *limitedServer) streamFrom(t *testing.T, c *http.Client) *http.Response {
	t.Helper()
	c.Timeout = 0 // a stream lasts; the test's deadline bounds it
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ls.url+"/events", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %s", resp.Status)
	}
	ls.wait(t, ls.started, "the stream to start")
	return resp
}

func (ls *limitedServer) status(t *testing.T, c *http.Client) int {
	t.Helper()
	resp, err := c.Get(ls.url + "/ok")
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestConnLimitShare: when one client address holds more than half of
// the places, none idle, a request from another address takes the place
// of that address's longest-running GET (an event stream, which its
// client can resume); a request from the address itself is refused, and
// so is one while no address holds more than half.
func TestConnLimitShare(t *testing.T) {
	t.Parallel()
	ls := startLimited(t, 2)
	hog := from(t, "127.0.0.1")
	s1 := ls.streamFrom(t, hog)
	ls.streamFrom(t, from(t, "127.0.0.1"))
	if got := ls.status(t, from(t, "127.0.0.1")); got != http.StatusServiceUnavailable {
		t.Fatalf("the address holding every place asks for one more: %d, want 503", got)
	}
	if got := ls.status(t, from(t, "127.0.0.2")); got != http.StatusOK {
		t.Fatalf("another address, while one holds every place: %d, want 200", got)
	}
	// The first stream was closed for it.
	if _, err := io.ReadAll(s1.Body); err == nil || strings.Contains(err.Error(), "deadline") {
		t.Fatalf("the hog's first stream: %v, want it cut", err)
	}
	if !strings.Contains(ls.log.String(), "client address 127.0.0.1 holds 2 of the 2 connections") {
		t.Fatalf("log: %s", ls.log.String())
	}

	// Two addresses, a stream each: neither holds more than half.
	even := startLimited(t, 2)
	even.streamFrom(t, from(t, "127.0.0.1"))
	even.streamFrom(t, from(t, "127.0.0.2"))
	if got := even.status(t, from(t, "127.0.0.3")); got != http.StatusServiceUnavailable {
		t.Fatalf("a third address while two hold one place each: %d, want 503", got)
	}
}

// TestConnLimitHeaderBytes: a header over MaxHeaderBytes is refused
// (431) rather than held: with net/http's 1 MB default, 300 connections
// that sent 1 MB of header each and nothing more held 320 MB of serve's
// memory, and --max-connections 1024 of them a gigabyte. A header of a
// few kilobytes passes.
func TestConnLimitHeaderBytes(t *testing.T) {
	t.Parallel()
	ls := startLimited(t, 4)
	get := func(size int) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, ls.url+"/ok", nil)
		req.Header.Set("X-Big", strings.Repeat("a", size))
		resp, err := client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// net/http reads 4 KB more than the bound before it refuses.
	if got := get(MaxHeaderBytes + 8<<10); got != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a header of %d bytes: %d, want 431", MaxHeaderBytes+8<<10, got)
	}
	if got := get(8 << 10); got != http.StatusOK {
		t.Errorf("a header of 8 KB: %d, want 200", got)
	}
}

// TestConnLimitUnreadAnswer: a client that asks for a large answer and
// reads none of it is disconnected once nothing could be written to it
// for the write idle time, giving its place back: a download never read
// held its connection and handler for ever (event streams had their own
// deadline, other answers none).
func TestConnLimitUnreadAnswer(t *testing.T) {
	t.Parallel()
	released := make(chan struct{}, 1)
	wrote := make(chan error, 1)
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	lim, c := writeIdleConn(t, 100*time.Millisecond, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		for i := 0; i < 256 && err == nil; i++ { // 256 MB: more than any socket buffers
			_, err = w.Write(chunk)
		}
		wrote <- err
	}), func(lim *ConnLimit) {
		lim.changed = func() {
			select {
			case released <- struct{}{}:
			default:
			}
		}
	})
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
	select {
	case err := <-wrote:
		if err == nil {
			t.Fatal("256 MB written to a client that reads nothing")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler still writes to a client that has read nothing for 10 s")
	}
	for lim.Open() != 0 {
		select {
		case <-released:
		case <-time.After(10 * time.Second):
			t.Fatalf("open connections: %d, want 0", lim.Open())
		}
	}
}
