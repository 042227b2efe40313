package eventbus_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// BenchmarkJobFollower measures the job follower's CPU per event
// published (the serve and worker path, docs/events.md "Figures"): a
// running job's log grows by 50 tool calls (100 events) per iteration,
// and the clock stops when the stream (a standalone NATS server, whose
// CPU is not counted) holds them all.
func BenchmarkJobFollower(b *testing.B) {
	url := benchNATS(b)
	bus, err := eventbus.Open(eventbus.Options{Settings: eventbus.Settings{URL: url, CreateStream: true, Source: "bench"}})
	if err != nil {
		b.Fatal(err)
	}
	defer bus.Close()
	ctx := b.Context()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "maestro.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, _, err := st.CreateTask(ctx, store.NewTask{Owner: "alice", Title: "t", Piece: "noop"}); err != nil {
		b.Fatal(err)
	}
	claimed, err := st.Claim(ctx, store.ClaimParams{Worker: "w1", Limit: 1, LeaseFor: time.Hour, Start: true})
	if err != nil || len(claimed) != 1 {
		b.Fatalf("claim: %v %v", claimed, err)
	}
	l := claimed[0].Lease()
	go bus.FollowJobs(ctx, st, filepath.Join(b.TempDir(), "jobs.json"), time.Hour)
	streamHolds(b, url, 2) // queued, started
	const calls = 50
	call, n := 0, 2
	cpu0, start := cpuTime(), time.Now()
	for b.Loop() {
		evs := make([]store.NewJobEvent, 0, 2*calls)
		for range calls {
			call++
			evs = append(evs,
				store.NewJobEvent{Type: store.JobEventProtocol, Data: json.RawMessage(fmt.Sprintf(`{"type":"tool_call","call_id":"c%d","tool":"Read","args":{},"requires_approval":false}`, call))},
				store.NewJobEvent{Type: store.JobEventProtocol, Data: json.RawMessage(fmt.Sprintf(`{"type":"tool_end","call_id":"c%d","success":true}`, call))})
		}
		if _, err := st.AppendJobEvents(ctx, l, evs); err != nil {
			b.Fatal(err)
		}
		n += 2 * calls
		streamHolds(b, url, n)
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(n-2), "cpu-ns/event")
	b.ReportMetric(float64(n-2)/time.Since(start).Seconds(), "events/s")
}
