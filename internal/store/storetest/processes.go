package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/store"
)

// testSettings: the first value recorded under a key stays (InitSetting
// returns it to every later caller) until PutSetting replaces it.
func testSettings(t *testing.T, b *bundle) {
	_, err := b.s.GetSetting(b.ctx, store.SettingArtifacts)
	wantErr(t, "GetSetting of an unrecorded key", err, store.ErrNotFound)
	first := b.clock.Now()
	got, err := b.s.InitSetting(b.ctx, store.SettingArtifacts, "s3://team/maestro", "serve serve-a")
	want := store.Setting{Key: store.SettingArtifacts, Value: "s3://team/maestro", UpdatedBy: "serve serve-a", UpdatedAt: first}
	if err != nil || !cmp.Equal(want, got) {
		t.Fatalf("InitSetting = %+v, %v; want %+v", got, err, want)
	}
	b.clock.Advance(time.Minute)
	// A later process with another value is told the recorded one.
	if got, err := b.s.InitSetting(b.ctx, store.SettingArtifacts, "", "worker w1"); err != nil || !cmp.Equal(want, got) {
		t.Errorf("InitSetting of another value = %+v, %v; want the first %+v", got, err, want)
	}
	if got, err := b.s.GetSetting(b.ctx, store.SettingArtifacts); err != nil || !cmp.Equal(want, got) {
		t.Errorf("GetSetting = %+v, %v; want %+v", got, err, want)
	}
	// An empty value is a value (each process's data directory).
	if got, err := b.s.InitSetting(b.ctx, "other", "", "serve x"); err != nil || got.Value != "" || got.UpdatedBy != "serve x" {
		t.Errorf("InitSetting of an empty value = %+v, %v", got, err)
	}
	moved := store.Setting{Key: store.SettingArtifacts, Value: "s3://new/maestro", UpdatedBy: "serve serve-b", UpdatedAt: b.clock.Now()}
	if got, err := b.s.PutSetting(b.ctx, store.SettingArtifacts, "s3://new/maestro", "serve serve-b"); err != nil || !cmp.Equal(moved, got) {
		t.Errorf("PutSetting = %+v, %v; want %+v", got, err, moved)
	}
	if got, err := b.s.InitSetting(b.ctx, store.SettingArtifacts, "s3://team/maestro", "worker w2"); err != nil || !cmp.Equal(moved, got) {
		t.Errorf("InitSetting after PutSetting = %+v, %v; want %+v", got, err, moved)
	}
	_, err = b.s.InitSetting(b.ctx, "", "v", "x")
	wantErr(t, "InitSetting without a key", err, store.ErrInvalid)
}

// testProcesses: a name is held by one running process at a time; it is
// free again once its holder stops, or once the holder's heartbeat is
// older than the caller's bound (it died). A process whose name was taken
// over learns it from its next heartbeat.
func testProcesses(t *testing.T, b *bundle) {
	stale := func() time.Time { return b.clock.Now().Add(-30 * time.Second) }
	a := store.Process{Name: "serve-a", Kind: store.ProcessServe, Instance: "i1", Address: "http://10.0.0.1:7878",
		Host: "host-a", PID: 4242, Artifacts: "s3://team/m"}
	start := b.clock.Now()
	got, err := b.s.StartProcess(b.ctx, a, stale())
	want := a
	want.StartedAt, want.HeartbeatAt = start, start
	if err != nil || !cmp.Equal(want, got) {
		t.Fatalf("StartProcess = %+v, %v; want %+v", got, err, want)
	}

	// A second process under the name is refused and told the holder.
	b.clock.Advance(10 * time.Second)
	dup := store.Process{Name: "serve-a", Kind: store.ProcessServe, Instance: "i2", Address: "http://10.0.0.2:7878"}
	holder, err := b.s.StartProcess(b.ctx, dup, stale())
	wantErr(t, "StartProcess under a held name", err, store.ErrConflict)
	if !cmp.Equal(want, holder) {
		t.Errorf("the holder returned with ErrConflict = %+v, want %+v", holder, want)
	}
	if err := b.s.HeartbeatProcess(b.ctx, "serve-a", "i2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("HeartbeatProcess of the refused instance = %v, want ErrNotFound", err)
	}
	w := store.Process{Name: "w1", Kind: store.ProcessWorker, Instance: "i3", Address: "host-b (pid 12)"}
	if _, err := b.s.StartProcess(b.ctx, w, stale()); err != nil {
		t.Fatal(err)
	}

	// Heartbeats keep the name held.
	b.clock.Advance(25 * time.Second)
	if err := b.s.HeartbeatProcess(b.ctx, "serve-a", "i1"); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(25 * time.Second)
	if _, err := b.s.StartProcess(b.ctx, dup, stale()); !errors.Is(err, store.ErrConflict) {
		t.Errorf("StartProcess 25 s after the holder's heartbeat = %v, want ErrConflict", err)
	}
	live, err := b.s.ListProcesses(b.ctx, stale())
	if err != nil || len(live) != 1 || live[0].Name != "serve-a" {
		t.Errorf("ListProcesses = %+v, %v; want serve-a only (w1 is 50 s without a heartbeat)", live, err)
	}

	// The worker stopped heartbeating: its name is free for another.
	w2 := w
	w2.Instance = "i4"
	if got, err := b.s.StartProcess(b.ctx, w2, stale()); err != nil || got.Instance != "i4" || !got.StartedAt.Equal(b.clock.Now()) {
		t.Errorf("StartProcess under a stale name = %+v, %v; want the new instance", got, err)
	}
	if err := b.s.HeartbeatProcess(b.ctx, "w1", "i3"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("HeartbeatProcess of the instance whose name was taken = %v, want ErrNotFound", err)
	}
	if err := b.s.StopProcess(b.ctx, "w1", "i3"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("StopProcess of the instance whose name was taken = %v, want ErrNotFound", err)
	}

	// A stopped serve's name is free at once.
	if err := b.s.StopProcess(b.ctx, "serve-a", "i1"); err != nil {
		t.Fatal(err)
	}
	if err := b.s.HeartbeatProcess(b.ctx, "serve-a", "i1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("HeartbeatProcess after StopProcess = %v, want ErrNotFound", err)
	}
	if got, err := b.s.StartProcess(b.ctx, dup, stale()); err != nil || got.Instance != "i2" || !got.StoppedAt.IsZero() || got.Artifacts != "" || got.Host != "" || got.PID != 0 {
		t.Errorf("StartProcess under a stopped name = %+v, %v; want the new instance, running", got, err)
	}
	live, err = b.s.ListProcesses(b.ctx, stale())
	if err != nil || len(live) != 2 || live[0].Name != "serve-a" || live[1].Name != "w1" || live[1].Instance != "i4" {
		t.Errorf("ListProcesses = %+v, %v; want serve-a (i2) and w1 (i4)", live, err)
	}

	_, err = b.s.StartProcess(b.ctx, store.Process{Name: "x", Kind: "cron", Instance: "i"}, stale())
	wantErr(t, "StartProcess of an unknown kind", err, store.ErrInvalid)
	_, err = b.s.StartProcess(b.ctx, store.Process{Kind: store.ProcessWorker, Instance: "i"}, stale())
	wantErr(t, "StartProcess without a name", err, store.ErrInvalid)
}
