package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/maestro-run/maestro/internal/fanout"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
)

// The publish path. Every server → client message goes through publish:
// it is encoded once, applied to the runtime state (the reducer of
// wire contract §7), appended to the session log (which assigns its cursor),
// and buffered in a ring from which every subscription reads in cursor
// order. One mutex (logMu) covers all four steps, so a snapshot is always
// consistent with its cursor.
//
// The ring is a fanout.Ring (docs/remote-attach.md, "Fan-out").
// Memory is bounded: the ring holds at most Config.BufferFrames frames and
// Config.BufferBytes bytes. When it is full the oldest frame is evicted,
// unless a lossless subscription (the stdio writer) has not read it yet:
// then the publisher waits, which is how a slow stdout reader applies
// backpressure to the agent without anything being dropped. A lossy
// subscription (an SSE stream) that falls behind the ring, or more than its
// MaxBacklog frames behind the newest, gets ErrLagged instead.

// Frame is one published server → client message.
type Frame struct {
	// Cursor is the message's position in the session log.
	Cursor int64
	// Message is the message.
	Message protocol.Message
	// Data is its JSON encoding: one line, without the newline.
	Data []byte
	// Envelope marks a snapshot published into the stream
	// (PublishSnapshot): Message is a protocol.SnapshotEnvelope or
	// protocol.ResetEnvelope and Data is the whole SSE envelope. Only
	// subscriptions made with SubscribeOptions.Envelopes receive it.
	Envelope bool
	// to, when set, is the only connection that receives the frame
	// (hello_ok and replies to one connection).
	to string
}

// hub is the ring of recent frames (internal/fanout) that every
// subscription reads. It is guarded by Runtime.logMu, so that the state,
// the log and the frames move together.
type hub struct {
	*fanout.Ring[Frame]
}

// newHub returns the ring of a runtime configured by cfg. The cursors of
// a log resumed or restored before the runtime are not buffered: resuming
// before them is a replay gap. A restored runtime's ring starts one
// earlier, because its reset{restored_from_snapshot} is buffered at the
// restored cursor itself (PublishSnapshot).
func newHub(logMu *sync.Mutex, cfg Config) hub {
	var start int64
	if cfg.Log != nil {
		start = cfg.Log.Cursor()
	}
	if cfg.Restored && start > 0 {
		start--
	}
	return hub{fanout.New[Frame](logMu, fanout.Limits{Frames: cfg.BufferFrames, Bytes: cfg.BufferBytes}, start)}
}

// push buffers a frame under its cursor.
func (h hub) push(f Frame) { h.Push(f.Cursor, len(f.Data), f) }

// publish sends m to every subscription (or only to connection to) through
// the one publish path. It may block while a lossless subscription is a
// full buffer behind. Callers must not hold logMu.
func (r *Runtime) publish(m protocol.Message, to string) {
	data, err := protocol.Marshal(m)
	if err == nil && r.cfg.Validate != nil {
		err = r.cfg.Validate(data)
	}
	if err != nil {
		// The wire contract's fallback for a message that fails validation.
		m = protocol.Error{Message: "Failed to emit headless message: " + err.Error(), ErrorType: protocol.ErrorProtocol}
		data, _ = protocol.Marshal(m)
	}
	r.logMu.Lock()
	defer r.logMu.Unlock()
	h := r.hub
	if !h.Reserve(len(data)) {
		return
	}
	r.state.apply(m)
	if r.cfg.Log != nil {
		r.cfg.Log.Event(m)
	} else {
		r.cursor++
	}
	h.push(Frame{Cursor: r.cursorLocked(), Message: m, Data: data, to: to})
}

// cursorLocked is the cursor of the last frame or log record: the log's
// (which numbers the records) plus the cursors taken by snapshot
// envelopes, which the log does not record; without a log, the count of
// both. The caller holds logMu.
func (r *Runtime) cursorLocked() int64 {
	if r.cfg.Log != nil {
		return r.cfg.Log.Cursor() + r.unlogged
	}
	return r.cursor
}

// logMessage appends a conversation message to the session log, under the
// publish lock so that cursors stay in step with the frames.
func (r *Runtime) logMessage(m llm.Message) {
	if r.cfg.Log == nil {
		return
	}
	r.logMu.Lock()
	defer r.logMu.Unlock()
	r.cfg.Log.Message(m)
}

// applyClient applies a client message's effect on the state (prompt,
// interrupt, cancel, shutdown) in order with the published frames.
func (r *Runtime) applyClient(m protocol.Message) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	r.state.applyClient(m)
}

// closeHub ends every subscription once it has read what is buffered.
func (r *Runtime) closeHub() {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	r.hub.Close()
}

// Where a subscription starts reading.
type From int

const (
	// FromOldest starts at the oldest buffered frame (the stdio transport
	// subscribes this way before startup, so it sees ready first).
	FromOldest From = iota
	// FromCursor replays the buffered frames after SubscribeOptions.Cursor.
	FromCursor
	// FromNow delivers only frames published after Subscribe; call Resync
	// to get a snapshot consistent with that point.
	FromNow
)

// SubscribeOptions configure a subscription.
type SubscribeOptions struct {
	From   From
	Cursor int64
	// Lossless makes publishers wait for this subscription instead of
	// dropping frames it has not read (stdio). Otherwise the subscription
	// gets ErrLagged when it falls behind.
	Lossless bool
	// MaxBacklog, for a lossy subscription, is how many unread frames it
	// may have before ErrLagged (0: only eviction from the ring lags).
	MaxBacklog int
	// OptOut, when not nil, replaces the connection's
	// opt_out_notifications for this subscription.
	OptOut []protocol.Notification
	// Detached marks a subscription nobody is reading yet (HTTP
	// subscribe before the SSE stream attaches).
	Detached bool
	// Envelopes makes the subscription receive the snapshot envelopes of
	// PublishSnapshot (an SSE stream); without it they are skipped
	// (stdio has no envelopes), though their cursors still count.
	Envelopes bool
}

// Subscription reads a connection's frames in cursor order. Its methods
// are safe for concurrent use, but frames are meant for one reader.
type Subscription struct {
	r         *Runtime
	conn      *Conn
	rd        fanout.Reader
	optOut    []protocol.Notification
	hasOptOut bool
	envelopes bool
	attached  bool
	closed    bool
}

// Subscribe starts reading the runtime's frames as this connection.
func (c *Conn) Subscribe(o SubscribeOptions) (*Subscription, error) {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	r.logMu.Lock()
	defer r.logMu.Unlock()
	start := fanout.Oldest
	switch o.From {
	case FromNow:
		start = fanout.Newest
	case FromCursor:
		start = fanout.After
	}
	s := &Subscription{r: r, conn: c, envelopes: o.Envelopes, attached: !o.Detached}
	if err := r.hub.Open(&s.rd, fanout.ReaderOptions{Start: start, Cursor: o.Cursor, Lossless: o.Lossless, MaxBacklog: o.MaxBacklog}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReplayGap, err)
	}
	if o.OptOut != nil {
		s.optOut, s.hasOptOut = slices.Clone(o.OptOut), true
	}
	c.subs = append(c.subs, s)
	return s, nil
}

// Next returns the next frame for this subscription, waiting for one. It
// returns io.EOF once the runtime is closed and every buffered frame has
// been read, ErrClosed after Close, ErrLagged for a lossy subscription
// that fell behind, or ctx's error.
func (s *Subscription) Next(ctx context.Context) (Frame, error) {
	for {
		f, ok, wait, err := s.poll()
		if err != nil || ok {
			return f, err
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return Frame{}, ctx.Err()
		}
	}
}

// TryNext returns the next frame if one is ready, without waiting.
func (s *Subscription) TryNext() (Frame, bool, error) {
	f, ok, _, err := s.poll()
	return f, ok, err
}

func (s *Subscription) poll() (f Frame, ok bool, wait <-chan struct{}, err error) {
	r := s.r
	r.logMu.Lock()
	defer r.logMu.Unlock()
	for {
		fr, _, ok, err := r.hub.Next(&s.rd)
		switch {
		case err != nil:
			return Frame{}, false, nil, readError(err)
		case !ok:
			return Frame{}, false, r.hub.Wait(), nil
		case s.wants(fr):
			return *fr, true, nil, nil
		}
	}
}

// readError is the subscription's error for a fanout read error:
// ErrClosed, ErrLagged, or io.EOF once the runtime is closed and read.
func readError(err error) error {
	switch {
	case errors.Is(err, fanout.ErrReaderClosed):
		return ErrClosed
	case errors.Is(err, fanout.ErrLagged):
		return ErrLagged
	}
	return err
}

// wants applies the connection's filters: snapshot envelopes only for
// subscriptions that asked for them, private frames, opt-outs (status,
// connection_info, compaction; hello_ok is never filtered) and
// raw_agent_event only for connections that negotiated it.
func (s *Subscription) wants(f *Frame) bool {
	if f.Envelope {
		return s.envelopes
	}
	if f.to != "" && f.to != s.conn.id {
		return false
	}
	var n protocol.Notification
	switch f.Message.MessageType() {
	case protocol.TypeStatus:
		n = protocol.NotifyStatus
	case protocol.TypeConnectionInfo:
		n = protocol.NotifyConnectionInfo
	case protocol.TypeCompaction:
		n = protocol.NotifyCompaction
	case protocol.TypeRawAgentEvent:
		return s.conn.prefs.Load().rawEvents
	default:
		return true
	}
	optOut := s.optOut
	if !s.hasOptOut {
		optOut = s.conn.prefs.Load().optOut
	}
	return !slices.Contains(optOut, n)
}

// Resync moves the subscription to the newest frame and returns a snapshot
// consistent with that point: after ErrLagged (reset{lagged}), or after
// subscribing FromNow (the initial snapshot envelope).
func (s *Subscription) Resync() protocol.Snapshot {
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logMu.Lock()
	defer r.logMu.Unlock()
	r.hub.SkipToEnd(&s.rd)
	return r.snapshotLocked()
}

// SetAttached records whether someone is reading the subscription (an SSE
// stream is attached); it feeds attached_subscription_count and lease
// expiry.
func (s *Subscription) SetAttached(attached bool) {
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	s.attached = attached
	s.conn.lastSeen = r.now()
}

// Close ends the subscription; publishers no longer wait for it.
func (s *Subscription) Close() {
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logMu.Lock()
	defer r.logMu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.conn.subs = slices.DeleteFunc(s.conn.subs, func(x *Subscription) bool { return x == s })
	r.hub.CloseReader(&s.rd)
}
