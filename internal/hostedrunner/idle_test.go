package hostedrunner

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// pipeListener hands out the server ends of net.Pipe connections, so that
// a server runs inside a synctest bubble (fake time, no sockets).
type pipeListener struct {
	conns     chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080} }

func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

// TestIdleKeepAliveClosed: a client that asks one question on an open
// route (/healthz, no token) and then keeps the connection idle does not
// hold it for ever: the runner's server closes it after IdleTimeout, as
// maestro serve does. (Before, the runner had no idle timeout: such
// connections stayed until the descriptor limit was reached.)
func TestIdleKeepAliveClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, `{"ok":true}`)
		}), slog.New(slog.DiscardHandler))
		ln := newPipeListener()
		go srv.Serve(ln)
		defer func() { srv.Close(); ln.Close() }()

		c := ln.dial()
		defer c.Close()
		go io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("status %d, close %v: want a kept-alive 200", resp.StatusCode, resp.Close)
		}

		closed := make(chan error, 1)
		go func() {
			_, err := br.ReadByte()
			closed <- err
		}()
		time.Sleep(IdleTimeout - time.Second)
		synctest.Wait()
		select {
		case err := <-closed:
			t.Fatalf("closed before IdleTimeout: %v", err)
		default:
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		select {
		case err := <-closed:
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
				t.Errorf("read after the idle timeout: %v, want the connection closed", err)
			}
		default:
			t.Fatalf("an idle keep-alive connection is still open %s after its last request", IdleTimeout+time.Second)
		}
	})
}
