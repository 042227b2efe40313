package eventbus

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/maestro-run/maestro/internal/eventbus/bustest"
)

// An acknowledgement is the stream's PubAck (a duplicate included);
// an error, a status (no responders) or anything else is a failure.
func TestPubAcked(t *testing.T) {
	for _, c := range []struct {
		name   string
		data   string
		status string
		want   bool
	}{
		{"ack", `{"stream":"MAESTRO","seq":7}`, "", true},
		{"duplicate", `{"stream":"MAESTRO","seq":7,"duplicate":true}`, "", true},
		{"ack, other field order", `{"seq":7, "stream":"MAESTRO"}`, "", true},
		{"error", `{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"},"stream":"MAESTRO","seq":0}`, "", false},
		{"no responders", ``, "503", false},
		{"status with a body", `{"stream":"MAESTRO","seq":7}`, "408", false},
		{"not JSON", `nope`, "", false},
		{"no stream", `{"seq":7}`, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &nats.Msg{Data: []byte(c.data), Header: nats.Header{}}
			if c.status != "" {
				m.Header.Set("Status", c.status)
			}
			if got := pubAcked(m); got != c.want {
				t.Errorf("pubAcked = %v, want %v", got, c.want)
			}
		})
	}
}

// Events sent without waiting get their outcomes from the one
// subscription: stored (a duplicate too) or refused (no stream takes
// the subject: the server's "no responders" comes at once, not after
// ackTimeout), at their index in the window's set.
func TestPublishAsyncOutcomes(t *testing.T) {
	srv := bustest.Start(t)
	srv.CreateStream()
	p, err := Dial(Settings{URL: srv.URL(), Source: "maestro-test"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var set ackSet
	for _, e := range []struct{ subject, id string }{
		{TypeToolCallAttempted, "s.1.0"},
		{"elsewhere.nobody", "s.2.0"},
		{TypeToolCallAttempted, "s.1.0"}, // a duplicate
		{TypeToolCallCompleted, "s.3.0"},
	} {
		if !p.publishAsync(ctx, &set, e.subject, e.id, []byte(`{}`)) {
			t.Fatalf("%s not sent", e.id)
		}
	}
	start := time.Now()
	if err := p.waitAcks(ctx, &set, TypeToolCallCompleted); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d >= ackTimeout {
		t.Errorf("outcomes after %v, want them as the acknowledgements come", d)
	}
	if want := []int8{1, -1, 1, 1}; !slices.Equal(set.result, want) {
		t.Errorf("outcomes %v, want %v", set.result, want)
	}
	p.acks.mu.Lock()
	left := len(p.acks.wait)
	p.acks.mu.Unlock()
	if left != 0 {
		t.Errorf("%d acknowledgements still awaited", left)
	}
	st, err := p.js.Stream(ctx, StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().State.Msgs; got != 2 {
		t.Errorf("the stream holds %d messages, want 2", got)
	}
}

// An event whose acknowledgement never comes fails when the window's one
// deadline passes (it is then published again, one at a time), and is
// no longer awaited; a late acknowledgement changes nothing.
func TestWaitAcksDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &Publisher{}
		p.acks.wait = map[uint64]ackWait{}
		set := &ackSet{}
		for tok := uint64(1); tok <= 3; tok++ {
			p.acks.wait[tok] = ackWait{set: set, i: len(set.result)}
			set.result, set.tokens = append(set.result, 0), append(set.tokens, tok)
			set.waiting++
		}
		p.acked(&nats.Msg{Subject: "_INBOX.x.2", Data: []byte(`{"stream":"MAESTRO","seq":1}`)})
		start := time.Now()
		if err := p.waitAcks(t.Context(), set, TypeToolCallAttempted); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != ackTimeout {
			t.Errorf("outcomes after %v, want %v", d, ackTimeout)
		}
		if want := []int8{-1, 1, -1}; !slices.Equal(set.result, want) {
			t.Errorf("outcomes %v, want %v", set.result, want)
		}
		if len(p.acks.wait) != 0 || set.waiting != 0 {
			t.Errorf("still awaited: %d acknowledgements, %d of the window", len(p.acks.wait), set.waiting)
		}
		p.acked(&nats.Msg{Subject: "_INBOX.x.3", Data: []byte(`{"stream":"MAESTRO","seq":2}`)})
		if set.result[2] != -1 {
			t.Errorf("a late acknowledgement changed the outcome to %d", set.result[2])
		}
	})
}

// When the connection is lost the events awaiting their acknowledgement
// fail at once (flush publishes them again when NATS is back), as
// jetstream's async publishing does, not at the window's deadline.
func TestAcksFailOnDisconnect(t *testing.T) {
	srv := bustest.Start(t)
	srv.CreateStream()
	p, err := Connect(Settings{URL: srv.URL(), Source: "maestro-test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var set ackSet
	if !p.publishAsync(ctx, &set, TypeToolCallAttempted, "s.1.0", []byte(`{}`)) {
		t.Fatal("not sent")
	}
	if err := p.waitAcks(ctx, &set, TypeToolCallAttempted); err != nil || set.result[0] != 1 {
		t.Fatalf("outcome %v, err %v", set.result, err)
	}
	set.reset()
	// An event whose acknowledgement the server will never send.
	p.acks.mu.Lock()
	p.acks.wait[1<<40] = ackWait{set: &set, i: 0}
	set.result, set.tokens, set.waiting = append(set.result, 0), append(set.tokens, 1<<40), 1
	p.acks.mu.Unlock()
	srv.Stop()
	start := time.Now()
	if err := p.waitAcks(ctx, &set, TypeToolCallAttempted); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d >= ackTimeout {
		t.Errorf("failed after %v, want at once when the connection is lost", d)
	}
	if set.result[0] != -1 {
		t.Errorf("outcome %d, want -1", set.result[0])
	}
}
