package httpattach_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// cursor is the envelope's cursor: a message's or heartbeat's own, a
// snapshot's or reset's snapshot.cursor.
func (e envelope) cursor() int64 {
	if e.Type == "snapshot" || e.Type == "reset" {
		return e.snapCursor()
	}
	return e.Cursor
}

// strictClient applies envelopes by the rule of the Rust remote
// transport (wire contract §12): a message, snapshot or reset envelope only
// when its cursor is greater than the last one applied; a heartbeat may
// equal it, and one below it is an error.
type strictClient struct {
	t    *testing.T
	name string
	last int64
}

// apply reports whether the client applies e.
func (c *strictClient) apply(e envelope) bool {
	c.t.Helper()
	cur := e.cursor()
	if e.Type == "heartbeat" {
		if cur < c.last {
			c.t.Errorf("%s: heartbeat %s below the last applied cursor %d", c.name, e.raw, c.last)
		}
		return false
	}
	if cur <= c.last {
		return false
	}
	c.last = cur
	return true
}

// mustApply reads the next envelope and requires the client to apply it
// and it to be of type typ (and reason, for a reset).
func (c *strictClient) mustApply(st *sse, typ, reason string) envelope {
	c.t.Helper()
	e := st.next()
	if e.Type != typ || e.Reason != reason {
		c.t.Fatalf("%s: %s, want %s %s", c.name, e.raw, typ, reason)
	}
	c.mustAccept(e)
	return e
}

func (c *strictClient) mustAccept(e envelope) {
	c.t.Helper()
	last := c.last
	if !c.apply(e) {
		c.t.Fatalf("%s: a strict client drops %s (last applied cursor %d)", c.name, e.raw, last)
	}
}

// until reads envelopes up to the first of type typ (a message type for
// message envelopes, else the envelope type) and returns it; the client
// must apply every one of them.
func (c *strictClient) until(st *sse, typ string) envelope {
	c.t.Helper()
	for {
		e := st.next()
		if e.Type == "heartbeat" {
			c.apply(e)
			continue
		}
		c.mustAccept(e)
		if e.Type == typ || (e.Type == "message" && e.msgType() == typ) {
			return e
		}
	}
}

// messageAck is the /messages answer's cursor.
type messageAck struct {
	Cursor int64 `json:"cursor"`
}

// TestStrictClientKeepsSnapshots: snapshot envelopes published into the
// stream take a cursor of their own (as upstream TS), so a client that
// drops every envelope whose cursor is not greater than the last one it
// applied still applies the snapshot after an interrupt and the
// reset{restored_from_snapshot} of a restore — live, and when resuming
// with ?cursor= — and a heartbeat never goes below what it applied.
func TestStrictClientKeepsSnapshots(t *testing.T) {
	t.Parallel()
	tickers := make(chan chan time.Time, 8)
	s := newServer(t, options{cfg: httpattach.Config{NewTicker: func(time.Duration) (<-chan time.Time, func()) {
		c := make(chan time.Time)
		tickers <- c
		return c, func() {}
	}}})
	id := s.createSession(nil)
	ctl := s.subscribe(id, map[string]any{"role": "controller"})

	view := s.open(id, "", hdr{"x-maestro-headless-role": "viewer"})
	vc := &strictClient{t: t, name: "viewer"}
	vc.mustApply(view, "snapshot", "")
	viewTicks := <-tickers
	ctlStream := s.open(id, "subscriptionId="+ctl.SubscriptionID, nil)
	<-tickers
	cc := &strictClient{t: t, name: "controller"}
	var snap struct {
		Cursor int64 `json:"cursor"`
	}
	json.Unmarshal(ctl.Snapshot, &snap)
	cc.last = snap.Cursor // the /subscribe answer's snapshot is applied

	s.mustSend(id, ctl.SubscriptionID, `{"type":"init","thinking_level":"low"}`)
	beforeInterrupt := cc.until(ctlStream, "status").Cursor
	vc.until(view, "status")

	// The interrupt's snapshot: cursor status+1, greater than every
	// frame before it, and the /messages answer's cursor.
	var ack messageAck
	if code, body := s.call("POST", "/api/headless/sessions/"+id+"/messages", `{"type":"interrupt"}`, hdr{"x-maestro-headless-subscriber-id": ctl.SubscriptionID}, &ack); code != 200 {
		t.Fatalf("interrupt: %d %s", code, body)
	}
	for _, c := range []struct {
		cl *strictClient
		st *sse
	}{{cc, ctlStream}, {vc, view}} {
		e := c.cl.until(c.st, "snapshot")
		if e.snapCursor() != ack.Cursor {
			t.Errorf("%s: snapshot at cursor %d, want the ack's %d", c.cl.name, e.snapCursor(), ack.Cursor)
		}
	}
	s.mustSend(id, ctl.SubscriptionID, `{"type":"init","thinking_level":"high"}`)
	after := cc.until(ctlStream, "status")
	vc.until(view, "status")

	// A heartbeat carries the current cursor: what the client applied.
	viewTicks <- time.Now()
	if e := view.next(); e.Type != "heartbeat" || e.Cursor != vc.last {
		t.Errorf("heartbeat %s, want cursor %d", e.raw, vc.last)
	} else {
		vc.apply(e)
	}

	// Resuming from before the interrupt replays the snapshot in order.
	resumed := s.open(id, "cursor="+strconv.FormatInt(beforeInterrupt, 10), nil)
	<-tickers
	rc := &strictClient{t: t, name: "resumed", last: beforeInterrupt}
	if e := rc.until(resumed, "snapshot"); e.snapCursor() != ack.Cursor {
		t.Errorf("replayed snapshot at cursor %d, want %d", e.snapCursor(), ack.Cursor)
	}
	if e := rc.until(resumed, "status"); e.raw != after.raw {
		t.Errorf("replay after the snapshot: %s, want %s", e.raw, after.raw)
	}

	// A restore: reset{restored_from_snapshot} reaches the open streams
	// with the next cursor.
	beforeRestore := cc.last
	s.h.MarkRestored(id)
	for _, c := range []struct {
		cl *strictClient
		st *sse
	}{{cc, ctlStream}, {vc, view}, {rc, resumed}} {
		if e := c.cl.mustApply(c.st, "reset", "restored_from_snapshot"); e.snapCursor() != beforeRestore+1 {
			t.Errorf("%s: reset at cursor %d, want %d", c.cl.name, e.snapCursor(), beforeRestore+1)
		}
	}
	// A client that applied everything before the restore (a client of
	// the drained runner) resumes and gets the reset first.
	again := s.open(id, "cursor="+strconv.FormatInt(beforeRestore, 10), nil)
	<-tickers
	ac := &strictClient{t: t, name: "resumed at the restore", last: beforeRestore}
	ac.mustApply(again, "reset", "restored_from_snapshot")
	s.mustSend(id, ctl.SubscriptionID, `{"type":"init"}`)
	if e := ac.until(again, "status"); e.Cursor <= beforeRestore+1 {
		t.Errorf("frame after the reset at cursor %d, want > %d", e.Cursor, beforeRestore+1)
	}
}

// TestStrictClientResets: the resets a stream makes for itself take no
// cursor (as upstream TS) yet are greater than anything the client
// applied: reset{replay_gap} for an evicted cursor and reset{lagged}.
func TestStrictClientResets(t *testing.T) {
	t.Parallel()
	s, id, c := evictedSession(t)
	for _, from := range []int64{-1, 0, 1, 5} {
		st := s.open(id, "cursor="+strconv.FormatInt(from, 10), nil)
		sc := &strictClient{t: t, name: "cursor=" + strconv.FormatInt(from, 10), last: from}
		sc.mustApply(st, "reset", "replay_gap")
		s.mustSend(id, c.SubscriptionID, `{"type":"init"}`)
		sc.until(st, "status")
	}
}
