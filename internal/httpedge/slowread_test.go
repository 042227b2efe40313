package httpedge

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestConnLimitSlowReader: a client that keeps reading a large answer,
// slowly, is not cut by the write idle time, however long the answer
// takes. The kernel lets a blocked write go on only once a third of the
// socket's send buffer (megabytes) has gone, so a client that read
// steadily but less than that per write idle time was disconnected in
// the middle of a download.
func TestConnLimitSlowReader(t *testing.T) {
	t.Parallel()
	const size = 6 << 20
	wrote := make(chan error, 1)
	_, c := writeIdleConn(t, 300*time.Millisecond, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(size))
		buf := make([]byte, 32<<10)
		var err error
		for n := 0; n < size && err == nil; n += len(buf) {
			_, err = w.Write(buf)
		}
		wrote <- err
	}), nil)
	c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	// About 2 MB a second: some 600 KB every write idle time.
	got := int64(0)
	tick := time.NewTicker(8 * time.Millisecond)
	defer tick.Stop()
	for {
		<-tick.C
		n, err := io.CopyN(io.Discard, resp.Body, 16<<10)
		got += n
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d of %d bytes, read steadily: %v", got, size, err)
		}
	}
	if got != size {
		t.Fatalf("read %d of %d bytes", got, size)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("the handler's write to a client that kept reading: %v", err)
	}
}

// TestConnLimitUnreadAnswerKeptAlive: on a kept-alive connection, after
// an event stream (its own write deadline, cleared when it ends) and an
// answer (after which net/http clears the write deadline), a large
// answer the client does not read is still cut at the write idle time.
func TestConnLimitUnreadAnswerKeptAlive(t *testing.T) {
	t.Parallel()
	wrote := make(chan error, 1)
	chunk := make([]byte, 1<<20)
	mux := http.NewServeMux()
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		s := StartSSE(w, 10*time.Second)
		defer s.Close()
		s.Event(1, "end", []byte("{}"))
		s.Flush()
	})
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		var err error
		for i := 0; i < 256 && err == nil; i++ { // 256 MB: more than any socket buffers
			_, err = w.Write(chunk)
		}
		wrote <- err
	})
	_, c := writeIdleConn(t, 100*time.Millisecond, mux, nil)
	c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	for _, path := range []string{"/events", "/small"} {
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", path)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	fmt.Fprintf(c, "GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n")
	select {
	case err := <-wrote:
		if err == nil {
			t.Fatal("256 MB written to a client that reads nothing")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler still writes to a client that has read nothing for 10 s")
	}
}

// writeIdleConn serves h behind a limit of 4 connections whose write idle
// time is idle (setup, if any, adjusts the limit before it serves), and
// returns the limit and a raw connection to it, closed with the test.
func writeIdleConn(t *testing.T, idle time.Duration, h http.Handler, setup func(*ConnLimit)) (*ConnLimit, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := LimitConns(ln, 4, "--max-connections", nil)
	lim.writeIdle = idle
	if setup != nil {
		setup(lim)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: h}
	lim.Configure(srv, nil)
	go srv.Serve(lim)
	t.Cleanup(func() { srv.Close() })
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return lim, c
}
