package eventbus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ackTimeout is how long a window waits for the acknowledgements of the
// events it sent (one deadline for the whole window, as
// jetstream.WithPublishAsyncTimeout gave each event its own timer); the
// events not acknowledged by then are published again, one at a time.
const ackTimeout = 5 * time.Second

// acks receives the acknowledgements of the events windows send without
// waiting (publishAsync) on one subscription of the connection, as
// jetstream's PublishMsgAsync does, without its future, timer and
// reflective JSON decoding of the acknowledgement per event: an event's
// reply subject is the subscription's prefix and a token, and the
// acknowledgement sets the outcome of the event in its window's ackSet.
type acks struct {
	mu     sync.Mutex
	sub    *nats.Subscription
	prefix string
	next   uint64
	wait   map[uint64]ackWait
	// msg and reply are reused for every message sent (PublishMsg copies
	// them into the connection's buffer); under mu.
	msg   nats.Msg
	msgID []string
	reply []byte
}

// ackWait is where an event's acknowledgement goes: its index in a
// window's set.
type ackWait struct {
	set *ackSet
	i   int
}

// ackSet is the outcomes of a window's events (index as in
// window.pending): 0 awaited, 1 acknowledged, -1 failed or not sent.
// Its fields are guarded by the Publisher's acks.mu.
type ackSet struct {
	result  []int8
	tokens  []uint64
	waiting int
	done    chan struct{} // closed when waiting reaches 0, when asked for
}

// publishAsync sends one encoded event on subject with id as Nats-Msg-Id
// (and the Content-Type of CloudEvents) as set's event i; its outcome is
// in set.result[i] once its acknowledgement comes (waitAcks), i being
// the number of events of set before it. It returns false when the event
// could not be sent (set.result[i] is -1).
func (p *Publisher) publishAsync(ctx context.Context, set *ackSet, subject, id string, data []byte) bool {
	err := p.ensureStream(ctx)
	a := &p.acks
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		set.skip()
		return false
	}
	if a.sub == nil {
		a.prefix = p.nc.NewRespInbox() + "."
		sub, err := p.nc.Subscribe(a.prefix+"*", p.acked)
		if err != nil {
			set.skip()
			return false
		}
		a.sub, a.wait = sub, map[uint64]ackWait{}
		go p.failOnDisconnect(p.nc.StatusChanged(nats.RECONNECTING, nats.CLOSED))
		a.msgID = []string{""}
		a.msg.Header = nats.Header{"Content-Type": contentType, jetstream.MsgIDHeader: a.msgID}
	}
	a.next++
	tok := a.next
	a.reply = strconv.AppendUint(append(a.reply[:0], a.prefix...), tok, 10)
	a.msg.Subject, a.msg.Reply, a.msg.Data = subject, string(a.reply), data
	a.msgID[0] = id
	i := len(set.result)
	err = p.nc.PublishMsg(&a.msg)
	a.msg.Data = nil
	if err != nil {
		set.skip()
		return false
	}
	a.wait[tok] = ackWait{set: set, i: i}
	set.result, set.tokens = append(set.result, 0), append(set.tokens, tok)
	set.waiting++
	return true
}

// skip records an event of set that was not sent (failed); under the
// acks' lock (an acknowledgement may be writing into set.result).
func (set *ackSet) skip() {
	set.result, set.tokens = append(set.result, -1), append(set.tokens, 0)
}

// acked is the subscription's handler: the acknowledgement (or refusal)
// of the event whose token ends the subject.
func (p *Publisher) acked(m *nats.Msg) {
	a := &p.acks
	i := strings.LastIndexByte(m.Subject, '.')
	tok, err := strconv.ParseUint(m.Subject[i+1:], 10, 64)
	if err != nil {
		return
	}
	ok := pubAcked(m)
	a.mu.Lock()
	defer a.mu.Unlock()
	w, known := a.wait[tok]
	if !known {
		return // timed out (the event is published again) or unknown
	}
	delete(a.wait, tok)
	w.set.result[w.i] = -1
	if ok {
		w.set.result[w.i] = 1
	}
	if w.set.waiting--; w.set.waiting == 0 && w.set.done != nil {
		close(w.set.done)
	}
}

// pubAcked reports whether m is a stream's acknowledgement (a duplicate
// included) rather than an error or a status such as "no responders".
// The server writes the acknowledgement's "stream" first and an error
// before it; anything else is decoded in full.
func pubAcked(m *nats.Msg) bool {
	if len(m.Data) == 0 || m.Header.Get("Status") != "" {
		return false
	}
	if bytes.HasPrefix(m.Data, []byte(`{"stream":"`)) {
		return true
	}
	var r struct {
		Error  *json.RawMessage `json:"error"`
		Stream string           `json:"stream"`
	}
	return json.Unmarshal(m.Data, &r) == nil && r.Error == nil && r.Stream != ""
}

// failOnDisconnect fails every event awaiting its acknowledgement when
// the connection is lost (as jetstream's async publishing does): the
// acknowledgements of what the server had not answered will not come,
// and flush publishes those events again, once NATS is back, rather
// than after the window's deadline. It ends when the connection closes.
func (p *Publisher) failOnDisconnect(status chan nats.Status) {
	a := &p.acks
	for st := range status {
		if st == nats.CLOSED {
			return
		}
		a.mu.Lock()
		for tok, w := range a.wait {
			delete(a.wait, tok)
			w.set.result[w.i] = -1
			if w.set.waiting--; w.set.waiting == 0 && w.set.done != nil {
				close(w.set.done)
			}
		}
		a.mu.Unlock()
	}
}

// waitAcks waits until every event of set sent has its outcome, or
// ackTimeout passed (the events then still awaited are failed), or ctx
// ends (an error).
func (p *Publisher) waitAcks(ctx context.Context, set *ackSet, subject string) error {
	a := &p.acks
	a.mu.Lock()
	if set.waiting == 0 {
		a.mu.Unlock()
		return nil
	}
	done := make(chan struct{})
	set.done = done
	a.mu.Unlock()
	t := time.NewTimer(ackTimeout)
	defer t.Stop()
	var err error
	select {
	case <-done:
		return nil
	case <-t.C:
	case <-ctx.Done():
		err = fmt.Errorf("publish %s: %w", subject, ctx.Err())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, tok := range set.tokens {
		if set.result[i] == 0 {
			delete(a.wait, tok)
			set.result[i] = -1
		}
	}
	set.waiting, set.done = 0, nil
	return err
}

// reset empties set for the next window of events.
func (set *ackSet) reset() {
	set.result, set.tokens, set.waiting, set.done = set.result[:0], set.tokens[:0], 0, nil
}

// skipAsync records an event of set that is not sent now (an earlier
// one failed: flush publishes it, in order).
func (p *Publisher) skipAsync(set *ackSet) {
	p.acks.mu.Lock()
	defer p.acks.mu.Unlock()
	set.skip()
}

// contentType is the Content-Type header of every event (read only).
var contentType = []string{ContentTypeCloudEvents}
