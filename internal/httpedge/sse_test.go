package httpedge_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/httpedge"
)

// TestSSEFraming: events, comments and the retry hint are framed as the
// event-stream format wants: id only when positive, event only when
// named, one data line per line of data (CR, LF and CRLF all end a line),
// and nothing reaches the client before Flush; a name with a line break
// is refused.
func TestSSEFraming(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		write func(*httpedge.SSE) error
		want  string
		err   bool
	}{
		{"data only", func(s *httpedge.SSE) error { return s.Data([]byte(`{"a":1}`)) }, "data: {\"a\":1}\n\n", false},
		{"id, event and data", func(s *httpedge.SSE) error { return s.Event(42, "status", []byte("x")) }, "id: 42\nevent: status\ndata: x\n\n", false},
		{"no id at 0", func(s *httpedge.SSE) error { return s.Event(0, "end", []byte("{}")) }, "event: end\ndata: {}\n\n", false},
		{"multi-line data", func(s *httpedge.SSE) error { return s.Data([]byte("a\nb\r\nc\rd")) }, "data: a\ndata: b\ndata: c\ndata: d\n\n", false},
		{"trailing line break", func(s *httpedge.SSE) error { return s.Data([]byte("a\n")) }, "data: a\ndata: \n\n", false},
		{"empty data", func(s *httpedge.SSE) error { return s.Data(nil) }, "data: \n\n", false},
		{"comment", func(s *httpedge.SSE) error { return s.Comment("keepalive") }, ": keepalive\n\n", false},
		{"retry", func(s *httpedge.SSE) error { return s.Retry(2 * time.Second) }, "retry: 2000\n\n", false},
		{"event name with a line break", func(s *httpedge.SSE) error { return s.Event(1, "a\ndata: x", []byte("y")) }, "", true},
		{"comment with a line break", func(s *httpedge.SSE) error { return s.Comment("a\r\nb") }, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			s := httpedge.StartSSE(rec, 0)
			err := tt.write(s)
			if (err != nil) != tt.err {
				t.Fatalf("write: %v, want error %v", err, tt.err)
			}
			if rec.Body.Len() != 0 {
				t.Errorf("%q written before Flush", rec.Body.String())
			}
			if err := s.Flush(); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			if got := rec.Body.String(); got != tt.want {
				t.Errorf("body %q, want %q", got, tt.want)
			}
			if !rec.Flushed {
				t.Error("Flush did not flush the response")
			}
			h := rec.Result().Header
			if rec.Code != http.StatusOK || h.Get("Content-Type") != "text/event-stream" || h.Get("Cache-Control") != "no-cache" || h.Get("X-Accel-Buffering") != "no" {
				t.Errorf("status %d, headers %v", rec.Code, h)
			}
		})
	}
}

// TestSSESpill: once the buffer fills, events are written to the client
// without waiting for Flush, whole and in order.
func TestSSESpill(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	s := httpedge.StartSSE(rec, 0)
	data := []byte(strings.Repeat("x", 1000))
	n := 0
	for rec.Body.Len() == 0 {
		if n++; n > 100 {
			t.Fatal("100 KB of events buffered without a write")
		}
		if err := s.Data(data); err != nil {
			t.Fatal(err)
		}
	}
	if rec.Flushed {
		t.Error("a spill flushed the response")
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.Body.String(), strings.Repeat("data: "+string(data)+"\n\n", n); got != want {
		t.Errorf("%d bytes written for %d events, want %d", len(got), n, len(want))
	}
}

// TestSSEClientGone: over a real connection, a write to a client that went
// away fails, and the error sticks: every later call returns it.
func TestSSEClientGone(t *testing.T) {
	t.Parallel()
	result := make(chan error, 1)
	gone := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := httpedge.StartSSE(w, 5*time.Second)
		defer s.Close()
		if err := s.Data([]byte("hello")); err != nil {
			result <- err
			return
		}
		if err := s.Flush(); err != nil {
			result <- err
			return
		}
		select {
		case <-gone:
		case <-time.After(10 * time.Second):
			result <- errors.New("the client did not go away")
			return
		}
		big := []byte(strings.Repeat("y", 64<<10))
		var err error
		for i := 0; i < 1000 && err == nil; i++ {
			if err = s.Data(big); err == nil {
				err = s.Flush()
			}
		}
		if err == nil {
			result <- errors.New("64 MB written to a closed connection without an error")
			return
		}
		if again := s.Comment("keepalive"); !errors.Is(again, err) {
			result <- errors.New("the error did not stick: " + again.Error())
			return
		}
		result <- nil
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: hello\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	resp.Body.Close()
	cancel()
	close(gone)
	select {
	case err := <-result:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handler did not finish")
	}
}
