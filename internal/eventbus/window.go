package eventbus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// windowSize is how many events a follower sends at most before it waits
// for their acknowledgements.
const windowSize = 256

// window publishes a follower's events without waiting for each one's
// acknowledgement: they are sent in order on the one connection, and
// flush waits for all of them, publishing again (in order, until
// acknowledged) those that failed. A follower advances its persisted
// cursor only after a flush, so a cursor never passes an event that was
// not acknowledged; an event sent twice is a JetStream duplicate.
//
// Order (docs/events.md, "Order"): sending event n+1 before event n is
// acknowledged is safe only when the stream cannot refuse event n and
// store event n+1. Re-publishing cannot repair that: event n+1 keeps its
// place and its copy is dropped as a duplicate. So events are sent ahead
// only to a stream that refuses a single message for nothing but its
// size (streamLimits), and an event too big for it is sent alone, after
// every earlier one is acknowledged; anywhere else each event waits for
// the previous one's acknowledgement.
type window struct {
	b       *Bus
	pending []sent
	// acks are the outcomes of the events of pending sent without
	// waiting, at the same index (Publisher.publishAsync).
	acks ackSet
	// free are the encoding buffers of events acknowledged, for the
	// next ones (nothing holds an event's bytes once it is
	// acknowledged: the connection copied them when it was sent).
	free [][]byte
}

// maxFreeBuf is the largest encoding buffer a window keeps.
const maxFreeBuf = 4096

// buffer returns an empty encoding buffer.
func (w *window) buffer() []byte {
	if n := len(w.free); n > 0 {
		b := w.free[n-1]
		w.free = w.free[:n-1]
		return b[:0]
	}
	return make([]byte, 0, 768)
}

// sent is one event awaiting its acknowledgement; async when it was
// sent without waiting (its outcome is in the window's acks at its
// index), stored is set once it is acknowledged.
type sent struct {
	subject, id string
	data        []byte
	async       bool
	stored      bool
}

// add encodes ev and sends it, first flushing when windowSize events
// await their acknowledgements. An event that cannot be encoded can never
// be published: it is logged and skipped rather than holding up the ones
// after it.
func (w *window) add(ctx context.Context, ev Event, corr Correlation) error {
	data, err := appendEvent(w.buffer(), ev, w.b.o.Settings.Source, corr)
	if err != nil {
		w.b.log.Error("event bus: event skipped", "err", err)
		return nil
	}
	if lim := w.b.pub.limits(ctx); !lim.pipeline || msgSize(ev.ID, data) > lim.maxSize {
		// One at a time: every earlier event is stored before this one
		// is sent, and this one before any later one.
		if err := w.flush(ctx); err != nil {
			return err
		}
		return w.b.pub.PublishRetry(ctx, ev.Type, ev.ID, data)
	}
	if len(w.pending) >= windowSize {
		if err := w.flush(ctx); err != nil {
			return err
		}
	}
	s := sent{subject: ev.Type, id: ev.ID, data: data}
	if len(w.pending) == 0 || w.pending[len(w.pending)-1].async {
		s.async = w.b.pub.publishAsync(ctx, &w.acks, s.subject, s.id, data)
	} else {
		// After a failure the rest are published by flush, in order.
		w.b.pub.skipAsync(&w.acks)
	}
	w.pending = append(w.pending, s)
	return nil
}

// flush waits for every event sent to be acknowledged or refused, then
// publishes again, in order and each until acknowledged, those from the
// first that failed on which were not stored.
func (w *window) flush(ctx context.Context) error {
	// The acknowledgements come to the Publisher's subscription, which
	// records each one in w.acks: the follower sleeps once for the
	// window (one wake-up when the last one came), not once an event.
	if len(w.pending) > 0 {
		if err := w.b.pub.waitAcks(ctx, &w.acks, w.pending[len(w.pending)-1].subject); err != nil {
			return err
		}
	}
	first, after := -1, 0
	for i := range w.pending {
		s := &w.pending[i]
		if s.stored || s.async && w.acks.result[i] == 1 {
			s.stored = true
			if first >= 0 {
				after++
			}
			continue
		}
		if first < 0 {
			first = i
		}
	}
	if first >= 0 {
		// The stream's limits may have changed: look them up again. A
		// later event stored although an earlier one failed means the
		// stream refuses in ways streamLimits did not foresee (or an
		// acknowledgement timed out): send one at a time from now on.
		w.b.pub.forgetLimits(after > 0)
		if after > 0 {
			w.b.log.Error("event bus: an event failed while later ones were stored; the session's events may be out of order in the stream; publishing one at a time from now on",
				"event", w.pending[first].id, "stored_after", after)
		}
		for i := first; i < len(w.pending); i++ {
			s := &w.pending[i]
			if s.stored {
				continue
			}
			s.async = false
			if err := w.b.pub.PublishRetry(ctx, s.subject, s.id, s.data); err != nil {
				// What is left is published one at a time by the next
				// flush: no outcome of w.acks applies to it any more.
				w.pending = w.pending[i:]
				for j := range w.pending {
					w.pending[j].async = false
				}
				w.acks.reset()
				return err
			}
			s.stored = true
		}
	}
	for _, s := range w.pending {
		if cap(s.data) <= maxFreeBuf && len(w.free) < windowSize {
			w.free = append(w.free, s.data)
		}
	}
	clear(w.pending)
	w.pending = w.pending[:0]
	w.acks.reset()
	return nil
}

// streamLimits is what the publisher knows of the stream that takes its
// events. pipeline: a single message can be refused by it only for its
// size, so events no bigger than maxSize (header and data) may be sent
// before the previous one is acknowledged. That holds for a stream with
// a single replica (no leader change between two messages) that takes
// every subject of the catalogue, is not sealed and does not refuse new
// messages at a limit (discard new with max_msgs, max_bytes or
// max_msgs_per_subject). Unknown limits (the stream could not be looked
// up) pipeline nothing.
type streamLimits struct {
	pipeline bool
	maxSize  int
}

// limitsRetry is how long after a failed look-up the publisher looks the
// stream up again (until then it sends one event at a time).
const limitsRetry = 10 * time.Second

// limitsOf reads the limits off a stream's configuration and the
// server's maximum payload.
func limitsOf(cfg jetstream.StreamConfig, maxPayload int64) streamLimits {
	l := streamLimits{maxSize: int(maxPayload)}
	if cfg.MaxMsgSize > 0 && int(cfg.MaxMsgSize) < l.maxSize {
		l.maxSize = int(cfg.MaxMsgSize)
	}
	refusesAtLimit := cfg.Discard == jetstream.DiscardNew && (cfg.MaxMsgs > 0 || cfg.MaxBytes > 0 || cfg.MaxMsgsPerSubject > 0)
	l.pipeline = cfg.Replicas <= 1 && !cfg.Sealed && !refusesAtLimit && takesCatalogue(cfg.Subjects)
	return l
}

// takesCatalogue reports whether subjects cover maestro.> (every
// subject of the catalogue).
func takesCatalogue(subjects []string) bool {
	for _, s := range subjects {
		if s == ">" || s == StreamSubjects || s == "maestro.*.>" || s == "*.>" {
			return true
		}
	}
	return false
}

// msgSize is an upper bound of the size the stream counts for an event:
// its data and its header (Content-Type and Nats-Msg-Id).
func msgSize(id string, data []byte) int {
	return len(data) + len(id) + len(ContentTypeCloudEvents) + 64
}

// limits returns the stream's limits, looking them up when they are not
// known (at most every limitsRetry after a failed look-up).
func (p *Publisher) limits(ctx context.Context) streamLimits {
	if err := p.ensureStream(ctx); err != nil {
		return streamLimits{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.serial {
		return streamLimits{}
	}
	if !p.limAt.IsZero() && (p.lim.maxSize > 0 || time.Since(p.limAt) < limitsRetry) {
		return p.lim
	}
	p.lim, p.limAt = streamLimits{}, time.Now()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	name, err := p.js.StreamNameBySubject(ctx, StreamSubjects)
	if err != nil {
		p.log.Info("event bus: no stream limits; publishing one event at a time", "err", err)
		return p.lim
	}
	st, err := p.js.Stream(ctx, name)
	if err != nil {
		p.log.Info("event bus: no stream limits; publishing one event at a time", "stream", name, "err", err)
		return p.lim
	}
	p.lim = limitsOf(st.CachedInfo().Config, p.nc.MaxPayload())
	return p.lim
}

// forgetLimits makes the next send look the stream's limits up again;
// with never, the publisher sends one event at a time from now on.
func (p *Publisher) forgetLimits(never bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serial = p.serial || never
	p.lim, p.limAt = streamLimits{}, time.Time{}
}
