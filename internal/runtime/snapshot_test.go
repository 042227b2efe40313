package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
)

// countLog is a runtime Log that numbers records from base, like a log
// resumed or restored at that cursor.
type countLog struct {
	mu     sync.Mutex
	cursor int64
	events []string
}

func (l *countLog) Event(m protocol.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cursor++
	l.events = append(l.events, m.MessageType())
}

func (l *countLog) Message(llm.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cursor++
}

func (l *countLog) Cursor() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cursor
}

// read returns "type@cursor" for every frame ready now.
func read(t *testing.T, s *Subscription) []string {
	t.Helper()
	var out []string
	for _, f := range ready(t, s) {
		typ := f.Message.MessageType()
		switch e := f.Message.(type) {
		case protocol.SnapshotEnvelope:
			if e.Snapshot.Cursor != f.Cursor {
				t.Errorf("snapshot envelope at cursor %d carries snapshot.cursor %d", f.Cursor, e.Snapshot.Cursor)
			}
		case protocol.ResetEnvelope:
			typ += ":" + string(e.Reason)
			if e.Snapshot.Cursor != f.Cursor {
				t.Errorf("reset envelope at cursor %d carries snapshot.cursor %d", f.Cursor, e.Snapshot.Cursor)
			}
		}
		if f.Envelope {
			if _, err := protocol.DecodeEnvelope(f.Data); err != nil {
				t.Errorf("envelope frame %s does not decode: %v", f.Data, err)
			}
		}
		out = append(out, fmt.Sprintf("%s@%d", typ, f.Cursor))
	}
	return out
}

// TestPublishSnapshotTakesCursor: a snapshot envelope published into the
// stream takes the next cursor (the upstream TS numbering), with and
// without a session log; the log does not record it, later frames and
// Cursor count it, only subscriptions asking for envelopes receive it,
// and a replay from before it delivers it in order.
func TestPublishSnapshotTakesCursor(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		log  *countLog
		base int64
	}{
		{"without log", nil, 0},
		{"with log", &countLog{}, 0},
		{"log restored at 40", &countLog{cursor: 40}, 40},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{}
			if tt.log != nil {
				cfg.Log = tt.log
			}
			rt := newBare(t, cfg)
			c, _ := rt.Connect(ConnectOptions{ID: "a"})
			sse, _ := c.Subscribe(SubscribeOptions{From: FromNow, Envelopes: true})
			plain, _ := c.Subscribe(SubscribeOptions{From: FromNow})
			base := rt.Cursor()
			if base < tt.base {
				t.Fatalf("Cursor %d before the log's %d", base, tt.base)
			}
			rt.publish(status(0), "")
			filled := rt.PublishSnapshot("", func(s *protocol.Snapshot) {
				s.State.ControllerSubscriptionID = protocol.Some("sub_x")
			})
			rt.publish(status(1), "")
			b := base
			if filled != b+2 || rt.Cursor() != b+3 || rt.Snapshot().Cursor != b+3 {
				t.Fatalf("snapshot cursor %d, Cursor %d, Snapshot().Cursor %d; want %d, %d, %d", filled, rt.Cursor(), rt.Snapshot().Cursor, b+2, b+3, b+3)
			}
			want := fmt.Sprintf("[status@%d snapshot@%d status@%d]", b+1, b+2, b+3)
			if got := fmt.Sprint(read(t, sse)); got != want {
				t.Errorf("envelope subscription: %s, want %s", got, want)
			}
			want = fmt.Sprintf("[status@%d status@%d]", b+1, b+3)
			if got := fmt.Sprint(read(t, plain)); got != want {
				t.Errorf("subscription without envelopes: %s, want %s", got, want)
			}
			if tt.log != nil && strings.Contains(fmt.Sprint(tt.log.events), "snapshot") {
				t.Errorf("logged %v: a snapshot envelope was logged", tt.log.events)
			}
			replay, err := c.Subscribe(SubscribeOptions{From: FromCursor, Cursor: b + 1, Envelopes: true})
			if err != nil {
				t.Fatal(err)
			}
			rt.PublishSnapshot(protocol.ResetRestoredFromSnapshot, nil)
			want = fmt.Sprintf("[snapshot@%d status@%d reset:restored_from_snapshot@%d]", b+2, b+3, b+4)
			if got := fmt.Sprint(read(t, replay)); got != want {
				t.Errorf("replay after %d: %s, want %s", b+1, got, want)
			}
			var env []byte
			for cursor, f := range rt.hub.All() {
				if cursor == b+2 {
					env = f.Data
				}
			}
			if !strings.Contains(string(env), `"controller_subscription_id":"sub_x"`) {
				t.Errorf("fill not applied: %s", env)
			}
		})
	}
}

// TestResumeBeforeLogIsGap: the cursors of a log the runtime was made on
// are not buffered, so resuming before them is a replay gap; resuming at
// the log's cursor replays everything since.
func TestResumeBeforeLogIsGap(t *testing.T) {
	t.Parallel()
	rt := newBare(t, Config{Log: &countLog{cursor: 40}})
	c, _ := rt.Connect(ConnectOptions{ID: "a"})
	rt.publish(status(0), "")
	for _, cursor := range []int64{0, 39} {
		if _, err := c.Subscribe(SubscribeOptions{From: FromCursor, Cursor: cursor}); !errors.Is(err, ErrReplayGap) {
			t.Errorf("cursor %d: %v, want ErrReplayGap", cursor, err)
		}
	}
	s, err := c.Subscribe(SubscribeOptions{From: FromCursor, Cursor: 40})
	if err != nil {
		t.Fatal(err)
	}
	got := read(t, s)
	if len(got) == 0 || got[len(got)-1] != fmt.Sprintf("status@%d", rt.Cursor()) || !strings.HasSuffix(got[0], "@41") {
		t.Errorf("replay from 40: %v, want every frame from 41 on", got)
	}
}

// TestSubscriptionCursor: the heartbeat cursor of a subscription is the
// current cursor once it read everything, else the cursor of the last
// frame it passed (read or filtered out), never one still to come.
func TestSubscriptionCursor(t *testing.T) {
	t.Parallel()
	rt := newBare(t, Config{BufferFrames: 4})
	a, _ := rt.Connect(ConnectOptions{ID: "a"})
	s, _ := a.Subscribe(SubscribeOptions{From: FromNow})
	b := rt.Cursor()
	if got := s.Cursor(); got != b {
		t.Errorf("nothing published: %d, want %d", got, b)
	}
	rt.publish(status(0), "")
	rt.publish(protocol.HelloOK{ProtocolVersion: protocol.Version}, "other") // not for a
	rt.publish(status(1), "")
	if got := s.Cursor(); got != b {
		t.Errorf("nothing read, frames pending: %d, want %d", got, b)
	}
	read(t, s)
	if got := s.Cursor(); got != b+3 {
		t.Errorf("all read: %d, want %d", got, b+3)
	}
	rt.PublishSnapshot("", nil)
	rt.publish(status(2), "")
	if _, ok, _ := s.TryNext(); !ok {
		t.Fatal("no frame")
	}
	// The snapshot envelope is skipped (no Envelopes), status 2 read.
	if got := s.Cursor(); got != b+5 {
		t.Errorf("after reading status 2: %d, want %d", got, b+5)
	}
	rt.publish(status(3), "")
	if got := s.Cursor(); got != b+5 {
		t.Errorf("status 3 pending: %d, want %d", got, b+5)
	}
}

// TestPublishSnapshotWaitsForLossless: with the ring full of frames a
// lossless reader has not read, PublishSnapshot waits (without holding
// the runtime's connection lock) and goes on once it reads.
func TestPublishSnapshotWaitsForLossless(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rt, stdio := newLossless(t, 2)
		for range read(t, stdio) { // whatever connecting published
		}
		b := rt.Cursor()
		rt.publish(status(0), "")
		rt.publish(status(1), "")
		done := make(chan int64)
		go func() { done <- rt.PublishSnapshot("", nil) }()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("PublishSnapshot evicted a frame the lossless reader had not read")
		default:
		}
		// The connection lock is free meanwhile.
		if _, ok := rt.Conn("local"); !ok {
			t.Fatal("Conn(local) not found")
		}
		ctx := context.Background()
		if f, err := stdio.Next(ctx); err != nil || f.Cursor != b+1 {
			t.Fatalf("Next = %+v, %v", f, err)
		}
		if got := <-done; got != b+3 {
			t.Errorf("snapshot cursor %d, want %d", got, b+3)
		}
		// The lossless (stdio) reader skips the envelope.
		var got []int64
		for i := range 2 {
			f, err := stdio.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, f.Cursor)
			if i == 0 {
				rt.publish(status(2), "")
			}
		}
		if fmt.Sprint(got) != fmt.Sprint([]int64{b + 2, b + 4}) {
			t.Errorf("stdio cursors %v, want [%d %d]", got, b+2, b+4)
		}
	})
}
