package storetest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/store"
)

// testLiveSessions: ownership records of live sessions across serve
// processes — recorded once, heartbeated per owner, ended by the owner or,
// once its heartbeat is stale, by anyone, and listed with their owner.
func testLiveSessions(t *testing.T, b *bundle) {
	const addrA, addrB = "http://10.0.0.1:7878", "http://10.0.0.2:7878"
	created := b.clock.Now()
	a1, err := b.s.OwnLiveSession(b.ctx, "sess-a1", "serve-a", addrA)
	if err != nil {
		t.Fatal(err)
	}
	want := store.LiveSession{ID: "sess-a1", Instance: "serve-a", Address: addrA, CreatedAt: created, HeartbeatAt: created}
	if diff := cmp.Diff(want, a1); diff != "" {
		t.Errorf("OwnLiveSession (-want +got):\n%s", diff)
	}
	_, err = b.s.OwnLiveSession(b.ctx, "sess-a1", "serve-b", addrB)
	wantErr(t, "OwnLiveSession of a recorded id", err, store.ErrConflict)
	b.clock.Advance(time.Second)
	for _, o := range []struct{ id, inst, addr string }{{"sess-a2", "serve-a", addrA}, {"sess-b1", "serve-b", addrB}} {
		if _, err := b.s.OwnLiveSession(b.ctx, o.id, o.inst, o.addr); err != nil {
			t.Fatal(err)
		}
	}

	// A's heartbeat refreshes its two sessions, not B's.
	b.clock.Advance(time.Minute)
	beat := b.clock.Now()
	if n, err := b.s.HeartbeatLiveSessions(b.ctx, "serve-a"); err != nil || n != 2 {
		t.Fatalf("HeartbeatLiveSessions(serve-a) = %d, %v; want 2", n, err)
	}
	got, err := b.s.GetLiveSession(b.ctx, "sess-a1")
	if err != nil || !got.HeartbeatAt.Equal(beat) || got.Ended() {
		t.Errorf("GetLiveSession after the heartbeat = %+v, %v; want heartbeat %v, live", got, err, beat)
	}

	// The owner ends its session; another instance cannot.
	_, err = b.s.EndLiveSession(b.ctx, "sess-a2", "serve-b", "shutdown")
	wantErr(t, "EndLiveSession by another instance", err, store.ErrNotFound)
	ended, err := b.s.EndLiveSession(b.ctx, "sess-a2", "serve-a", "shut down by its controller")
	if err != nil || !ended.EndedAt.Equal(beat) || ended.EndReason != "shut down by its controller" {
		t.Errorf("EndLiveSession = %+v, %v", ended, err)
	}
	_, err = b.s.EndLiveSession(b.ctx, "sess-a2", "serve-a", "again")
	wantErr(t, "EndLiveSession of an ended session", err, store.ErrNotFound)
	if n, err := b.s.HeartbeatLiveSessions(b.ctx, "serve-a"); err != nil || n != 1 {
		t.Errorf("HeartbeatLiveSessions after one ended = %d, %v; want 1", n, err)
	}

	// B stopped heartbeating a minute ago: its session is ended as stale,
	// A's (heartbeated now) is not; a second sweep finds nothing.
	stale, err := b.s.EndStaleLiveSessions(b.ctx, beat.Add(-30*time.Second), "owner serve-b stopped heartbeating")
	if err != nil || len(stale) != 1 || stale[0].ID != "sess-b1" || stale[0].EndReason != "owner serve-b stopped heartbeating" ||
		!stale[0].EndedAt.Equal(beat) {
		t.Fatalf("EndStaleLiveSessions = %+v, %v; want sess-b1 ended", stale, err)
	}
	if again, err := b.s.EndStaleLiveSessions(b.ctx, beat.Add(-30*time.Second), "x"); err != nil || len(again) != 0 {
		t.Errorf("second EndStaleLiveSessions = %+v, %v; want none", again, err)
	}

	ids := func(ss []store.LiveSession) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.ID)
		}
		return out
	}
	for _, tc := range []struct {
		f    store.LiveSessionFilter
		want []string
	}{
		{store.LiveSessionFilter{}, []string{"sess-b1", "sess-a2", "sess-a1"}},
		{store.LiveSessionFilter{Open: true}, []string{"sess-a1"}},
		{store.LiveSessionFilter{Instance: "serve-a"}, []string{"sess-a2", "sess-a1"}},
		{store.LiveSessionFilter{Limit: 1}, []string{"sess-b1"}},
	} {
		got, err := b.s.ListLiveSessions(b.ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, ids(got)); diff != "" {
			t.Errorf("ListLiveSessions(%+v) (-want +got):\n%s", tc.f, diff)
		}
	}
	_, err = b.s.GetLiveSession(b.ctx, "missing")
	wantErr(t, "GetLiveSession(unknown)", err, store.ErrNotFound)
	_, err = b.s.OwnLiveSession(b.ctx, "", "serve-a", addrA)
	wantField(t, "OwnLiveSession without an id", err, "id")
	_, err = b.s.OwnLiveSession(b.ctx, "x", "serve-a", "")
	wantField(t, "OwnLiveSession without an address", err, "address")
}
