package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxLineLength is the longest message `maestro mcp` reads from
// stdin: the go-sdk's own bound on a stdio message.
const DefaultMaxLineLength = sdk.DefaultMaxLineLength

// StdioTransport is the transport of `maestro mcp`: the go-sdk's
// newline-delimited JSON over In and Out, behind a line filter that
// answers a line which is not a JSON-RPC message itself, as JSON-RPC 2.0
// says (a Parse error -32700 for a line that is not JSON, an Invalid
// Request -32600 for JSON that is no message, or a batch the session's
// protocol version does not allow), and goes on reading. The SDK took
// such a line for a broken stream and ended the session, and with it
// the process, replies to the requests before it unsent.
//
// A line longer than MaxLineLength is not kept: the filter reads past
// it and answers an Invalid Request (with the request's id when its
// first MaxLineLength bytes name one). Valid lines go to the SDK
// unchanged but for surrounding white space.
//
// When In ends, the requests read are still answered, for at most
// EOFGrace, before the session ends (the SDK ended it at once, the
// replies unsent: `printf '<initialize>\n' | maestro mcp` printed
// nothing).
type StdioTransport struct {
	In  io.Reader
	Out io.Writer
	// MaxLineLength bounds a line; 0 is DefaultMaxLineLength.
	MaxLineLength int
	// Logger, when set, logs each line answered by the filter.
	Logger *slog.Logger
	// EOFGrace bounds the wait for replies once In ends; 0 is
	// DefaultEOFGrace.
	EOFGrace time.Duration
}

// DefaultEOFGrace is how long `maestro mcp` waits, once stdin ends,
// for the replies to the requests it read: the quick ones are sent;
// a task still running is then stopped, as when the client goes.
const DefaultEOFGrace = 5 * time.Second

// Connect implements sdk.Transport.
func (t *StdioTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	limit := t.MaxLineLength
	if limit <= 0 {
		limit = DefaultMaxLineLength
	}
	grace := t.EOFGrace
	if grace <= 0 {
		grace = DefaultEOFGrace
	}
	pr, pw := io.Pipe()
	out := &lockedWriter{w: t.Out, pending: newPending()}
	f := &lineFilter{pass: pw, out: out, limit: limit, log: t.Logger, grace: grace}
	go f.run(t.In)
	// The filter bounds every line passed on, so the SDK's own bound
	// (which counts bytes read ahead of the next message too) is off.
	return (&sdk.IOTransport{Reader: pr, Writer: out, MaxLineLength: -1}).Connect(ctx)
}

// lockedWriter serializes the writes of the SDK and of the filter: each
// is one whole message. It notes the requests the SDK answers.
type lockedWriter struct {
	mu      sync.Mutex
	w       io.Writer
	pending *pending
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	n, err := w.w.Write(p)
	w.mu.Unlock()
	w.pending.answered(p)
	return n, err
}

// pending are the requests passed to the SDK and not yet answered.
type pending struct {
	mu      sync.Mutex
	ids     map[jsonrpc.ID]bool
	changed chan struct{} // closed when a request is answered
}

func newPending() *pending {
	return &pending{ids: map[jsonrpc.ID]bool{}, changed: make(chan struct{})}
}

func (p *pending) add(id jsonrpc.ID) {
	p.mu.Lock()
	p.ids[id] = true
	p.mu.Unlock()
}

// answered notes the responses of msg, a message or a batch the SDK
// writes.
func (p *pending) answered(msg []byte) {
	p.mu.Lock()
	none := len(p.ids) == 0
	p.mu.Unlock()
	if none {
		return
	}
	msg = bytes.TrimSpace(msg)
	raws := []json.RawMessage{msg}
	if len(msg) > 0 && msg[0] == '[' && json.Unmarshal(msg, &raws) != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, raw := range raws {
		if id, ok := responseID(raw); ok && p.ids[id] {
			delete(p.ids, id)
			close(p.changed)
			p.changed = make(chan struct{})
		}
	}
}

// responseID is the id of msg when it is a response, read from its start
// (the SDK writes "jsonrpc", "id", then "result" or "error"), not
// decoding the result.
func responseID(msg []byte) (jsonrpc.ID, bool) {
	dec := json.NewDecoder(bytes.NewReader(msg))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return jsonrpc.ID{}, false
	}
	var id any
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return jsonrpc.ID{}, false
		}
		switch t {
		case "method":
			return jsonrpc.ID{}, false
		case "id":
			if dec.Decode(&id) != nil {
				return jsonrpc.ID{}, false
			}
			continue
		case "result", "error":
			if id != nil {
				jid, err := jsonrpc.MakeID(id)
				return jid, err == nil
			}
		}
		if dec.Decode(new(json.RawMessage)) != nil {
			return jsonrpc.ID{}, false
		}
	}
	if m, err := jsonrpc.DecodeMessage(msg); err == nil {
		if r, ok := m.(*jsonrpc.Response); ok {
			return r.ID, true
		}
	}
	return jsonrpc.ID{}, false
}

// wait returns when every request is answered, or after d.
func (p *pending) wait(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		p.mu.Lock()
		n, changed := len(p.ids), p.changed
		p.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			return
		}
	}
}

func (*lockedWriter) Close() error { return nil }

type lineFilter struct {
	pass  *io.PipeWriter // to the SDK
	out   *lockedWriter  // to the client
	limit int
	log   *slog.Logger
	grace time.Duration
	// version is the protocol version the client's initialize asked for.
	version string
	n       int // lines read
}

func (f *lineFilter) run(in io.Reader) {
	br := bufio.NewReaderSize(in, 64<<10)
	var buf []byte
	for {
		line, tooLong, err := readLine(br, f.limit, buf[:0])
		buf = line
		if len(line) > 0 {
			f.n++
		}
		if msg := bytes.TrimSpace(line); len(msg) > 0 || tooLong {
			if !f.filter(msg, tooLong) {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				f.out.pending.wait(f.grace)
				err = nil
			}
			f.pass.CloseWithError(err)
			return
		}
	}
}

// readLine reads a line into buf, keeping at most limit bytes of it: a
// longer one is read to its end and reported tooLong.
func readLine(br *bufio.Reader, limit int, buf []byte) (_ []byte, tooLong bool, _ error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if room := limit - len(buf); len(chunk) > room {
			tooLong = true
			chunk = chunk[:max(room, 0)]
		}
		buf = append(buf, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return buf, tooLong, err
		}
	}
}

// filter passes msg on to the SDK or answers it; false when the SDK is
// gone.
func (f *lineFilter) filter(msg []byte, tooLong bool) bool {
	var code int
	var problem string
	switch {
	case tooLong:
		code, problem = jsonrpc.CodeInvalidRequest, fmt.Sprintf("message longer than %d bytes, the most maestro mcp reads: not read", f.limit)
	case !json.Valid(msg):
		code, problem = jsonrpc.CodeParseError, "Parse error: not JSON: "+json.Unmarshal(msg, new(json.RawMessage)).Error()
	default:
		if err := f.check(msg); err != nil {
			code, problem = jsonrpc.CodeInvalidRequest, "Invalid Request: "+err.Error()
		}
	}
	if code == 0 {
		if _, err := f.pass.Write(append(msg, '\n')); err != nil {
			return false
		}
		return true
	}
	id := requestID(msg)
	if f.log != nil {
		f.log.Warn("maestro mcp: answered a malformed message with an error", "line", f.n, "code", code, "id", idText(id), "error", problem)
	}
	reply, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, problem}})
	_, _ = f.out.Write(append(reply, '\n'))
	return true
}

// check reports why msg, valid JSON (the SDK's decoder takes two
// messages on a line for one), is no message the SDK reads
// without ending the session; it notes the protocol version an
// initialize request asks for.
func (f *lineFilter) check(msg []byte) error {
	if msg[0] != '[' {
		m, err := jsonrpc.DecodeMessage(msg)
		if err != nil {
			return err
		}
		if r, ok := m.(*jsonrpc.Request); ok && r.ID.IsValid() {
			f.out.pending.add(r.ID)
		}
		if r, ok := m.(*jsonrpc.Request); ok && r.Method == "initialize" && r.ID.IsValid() {
			var p struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if json.Unmarshal(r.Params, &p) == nil {
				f.version = p.ProtocolVersion
			}
		}
		return nil
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(msg, &batch); err != nil {
		return err
	}
	if len(batch) == 0 {
		return errors.New("empty batch")
	}
	// The SDK reads batches only in sessions of the versions before
	// 2025-06-18 (and before initialize); it negotiates an unknown
	// version to a later one.
	if f.version != "" && f.version != "2024-11-05" && f.version != "2025-03-26" {
		return errors.New("JSON-RPC batches are not part of MCP since protocol version 2025-06-18: send each message on a line of its own")
	}
	ids := map[jsonrpc.ID]bool{}
	for _, raw := range batch {
		m, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			return fmt.Errorf("in batch: %w", err)
		}
		if r, ok := m.(*jsonrpc.Request); ok && r.ID.IsValid() {
			if ids[r.ID] {
				return fmt.Errorf("in batch: id %v used twice", r.ID.Raw())
			}
			ids[r.ID] = true
		}
	}
	for id := range ids {
		f.out.pending.add(id)
	}
	return nil
}

// requestID is the id of the request msg begins, a string or a number,
// when it can be read before msg goes wrong; nil (null) otherwise.
func requestID(msg []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(msg))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if key == "id" {
			if len(v) > 0 && (v[0] == '"' || v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
				return v
			}
			return nil
		}
	}
	return nil
}

func idText(id json.RawMessage) string {
	if id == nil {
		return "null"
	}
	return string(id)
}
