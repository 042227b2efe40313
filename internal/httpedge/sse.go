package httpedge

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SSE writes one Server-Sent Events response (the text/event-stream
// format of the HTML standard, "Server-sent events"): the one SSE writer of
// every listener, used by the job event stream of `maestro serve`
// (docs/api.md) and the session event streams of the attach routes (wire
// wire contract §12, docs/remote-attach.md). It frames events (id, event, data
// split into lines), comments (keepalives) and the retry hint, buffers
// them, and writes them to the client under a write deadline when the
// buffer fills or on Flush, which also flushes the response.
//
// An SSE is used by the handler's goroutine only. The first error (the
// client went away, the deadline passed) is kept: every later call
// returns it.
type SSE struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     []byte
	err     error
}

// sseBuffer is how many bytes an SSE buffers before writing them to the
// client, and the largest buffer it keeps between writes: a large frame
// (a snapshot) is written at once, and a thousand idle streams must not
// each hold one.
const sseBuffer = 16 << 10

// DefaultSSEWriteTimeout bounds one write of an event stream: a client
// that keeps its stream open but reads nothing for that long is
// disconnected, so it does not hold its connection (one of the listener's
// limited places) and the stream's goroutine for ever.
const DefaultSSEWriteTimeout = 30 * time.Second

// StartSSE answers 200 with the headers of an event stream (no caching,
// no proxy buffering) and returns the writer of its body. writeTimeout,
// when positive, bounds every write to the client; Close clears it.
func StartSSE(w http.ResponseWriter, writeTimeout time.Duration) *SSE {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &SSE{w: w, rc: http.NewResponseController(w), timeout: writeTimeout}
}

// Event writes one event: an "id:" line when id is positive (a cursor,
// which EventSource sends back as Last-Event-ID), an "event:" line when
// event is not empty, and data as "data:" lines, one per line of data.
func (s *SSE) Event(id int64, event string, data []byte) error {
	if s.err != nil {
		return s.err
	}
	if strings.ContainsAny(event, "\r\n") {
		return fmt.Errorf("write SSE event: the event name %q has a line break", Echo(event))
	}
	b := s.buf
	if id > 0 {
		b = append(b, "id: "...)
		b = strconv.AppendInt(b, id, 10)
		b = append(b, '\n')
	}
	if event != "" {
		b = append(append(append(b, "event: "...), event...), '\n')
	}
	b = appendData(b, data)
	s.buf = append(b, '\n')
	return s.spill()
}

// Data writes an event with data only (the default "message" event).
func (s *SSE) Data(data []byte) error { return s.Event(0, "", data) }

// Comment writes a comment line, which clients ignore: a keepalive that
// keeps proxies from closing an idle stream.
func (s *SSE) Comment(text string) error {
	if s.err != nil {
		return s.err
	}
	if strings.ContainsAny(text, "\r\n") {
		return fmt.Errorf("write SSE comment: %q has a line break", Echo(text))
	}
	s.buf = append(append(append(s.buf, ": "...), text...), '\n', '\n')
	return s.spill()
}

// Retry writes the reconnection delay hint for EventSource clients.
func (s *SSE) Retry(d time.Duration) error {
	if s.err != nil {
		return s.err
	}
	s.buf = append(strconv.AppendInt(append(s.buf, "retry: "...), d.Milliseconds(), 10), '\n', '\n')
	return s.spill()
}

// appendData appends data as "data:" lines: each line of data (ended by
// CR, LF or CRLF) on its own, so that a line break in data cannot end the
// event or start a field.
func appendData(b, data []byte) []byte {
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			return append(append(append(b, "data: "...), data...), '\n')
		}
		b = append(append(append(b, "data: "...), data[:i]...), '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
}

// spill writes the buffer to the client once it holds sseBuffer bytes.
func (s *SSE) spill() error {
	if len(s.buf) < sseBuffer {
		return nil
	}
	s.deadline()
	return s.write()
}

// deadline sets the write deadline for what is written next.
func (s *SSE) deadline() {
	if s.timeout > 0 {
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	}
}

func (s *SSE) write() error {
	if s.err != nil || len(s.buf) == 0 {
		return s.err
	}
	_, err := s.w.Write(s.buf)
	if cap(s.buf) > sseBuffer {
		s.buf = nil
	} else {
		s.buf = s.buf[:0]
	}
	if err != nil {
		s.err = fmt.Errorf("write SSE stream: %w", err)
	}
	return s.err
}

// Flush writes what is buffered and flushes the response to the client.
func (s *SSE) Flush() error {
	if s.err != nil {
		return s.err
	}
	s.deadline()
	if err := s.write(); err != nil {
		return err
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.err = fmt.Errorf("flush SSE stream: %w", err)
	}
	return s.err
}

// Close clears the write deadline, which would otherwise outlive the
// stream on a kept-alive connection. It does not flush.
func (s *SSE) Close() {
	if s.timeout > 0 {
		_ = s.rc.SetWriteDeadline(time.Time{})
	}
}
