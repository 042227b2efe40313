package store_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/store"
)

func TestStates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s                       store.State
		valid, terminal, active bool
	}{
		{store.StateQueued, true, false, false},
		{store.StateDispatching, true, false, true},
		{store.StateRunning, true, false, true},
		{store.StateSucceeded, true, true, false},
		{store.StateFailed, true, true, false},
		{store.StateAborted, true, true, false},
		{store.StateWaitingHuman, true, false, false},
		{store.StateWaitingSubtasks, true, false, false},
		{store.StateCancelled, true, true, false},
		{"done", false, false, false},
	}
	for _, tc := range tests {
		if got := [3]bool{tc.s.Valid(), tc.s.Terminal(), tc.s.Active()}; got != [3]bool{tc.valid, tc.terminal, tc.active} {
			t.Errorf("%s: valid/terminal/active = %v, want %v", tc.s, got, [3]bool{tc.valid, tc.terminal, tc.active})
		}
	}
	if len(store.States()) != 9 {
		t.Errorf("States() has %d states, want 9", len(store.States()))
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		attempt int
		want    time.Duration
	}{
		{0, 2 * time.Second}, {1, 2 * time.Second}, {2, 8 * time.Second}, {3, 18 * time.Second},
		{10, 200 * time.Second}, {17, 578 * time.Second}, {18, 10 * time.Minute}, {1 << 40, 10 * time.Minute},
	}
	for _, tc := range tests {
		if got := store.Backoff(tc.attempt); got != tc.want {
			t.Errorf("Backoff(%d) = %s, want %s", tc.attempt, got, tc.want)
		}
	}
}

func TestFieldError(t *testing.T) {
	t.Parallel()
	_, err := store.NewJob{Payload: json.RawMessage("{")}.Validate()
	var fe *store.FieldError
	if !errors.As(err, &fe) || fe.Field != "payload" || !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Validate error = %#v, want a FieldError for payload matching ErrInvalid", err)
	}
	if errors.Is(err, store.ErrNotFound) {
		t.Fatal("a FieldError matches ErrNotFound")
	}
	if got := err.Error(); got != "payload: expected valid JSON" {
		t.Errorf("message = %q", got)
	}
}

func TestNewJobDefaults(t *testing.T) {
	t.Parallel()
	got, err := store.NewJob{}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	want := store.NewJob{MaxAttempts: store.DefaultMaxAttempts, Payload: json.RawMessage("{}")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	p, err := store.ClaimParams{Worker: "w", LeaseFor: time.Second}.Validate()
	if err != nil || p.Limit != 1 {
		t.Errorf("ClaimParams default limit = %d, %v; want 1", p.Limit, err)
	}
}

func TestValidateName(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"general": true, "chat-2": true, "a": true, "9lives": true, strings.Repeat("a", 64): true,
		"": false, "-x": false, "Upper": false, "a_b": false, "a b": false, strings.Repeat("a", 65): false, "é": false,
	} {
		err := store.ValidateName("name", name)
		if (err == nil) != ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestTruncateError(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", store.MaxErrorBytes) // 2 bytes per rune
	got := store.TruncateError(long)
	if len(got) > store.MaxErrorBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("TruncateError(long) has %d bytes, valid=%v", len(got), utf8.ValidString(got))
	}
	if got := store.TruncateError("a\x00b\xffc"); got != "ab\uFFFDc" {
		t.Errorf("TruncateError cleans to %q", got)
	}
	if got := store.TruncateError("short"); got != "short" {
		t.Errorf("TruncateError(short) = %q", got)
	}
}

func FuzzTruncateError(f *testing.F) {
	f.Add("boom")
	f.Add("a\x00\xff\xfe" + strings.Repeat("日本", 5000))
	f.Fuzz(func(t *testing.T, s string) {
		got := store.TruncateError(s)
		if len(got) > store.MaxErrorBytes || !utf8.ValidString(got) || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("TruncateError(%q) = %q: %d bytes, valid UTF-8 %v", s, got, len(got), utf8.ValidString(got))
		}
		if again := store.TruncateError(got); again != got {
			t.Fatalf("TruncateError is not idempotent: %q then %q", got, again)
		}
	})
}

func TestFireParams(t *testing.T) {
	t.Parallel()
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		p     store.FireParams
		field string
	}{
		{store.FireParams{ScheduleID: 1, Tick: tick, Next: tick.Add(time.Minute)}, ""},
		{store.FireParams{Tick: tick, Next: tick.Add(time.Minute)}, "schedule_id"},
		{store.FireParams{ScheduleID: 1, Next: tick}, "tick"},
		{store.FireParams{ScheduleID: 1, Tick: tick, Next: tick.Add(-time.Minute)}, "next"},
	}
	for _, tc := range tests {
		err := tc.p.Validate()
		var fe *store.FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("Validate(%+v) = %v, want nil", tc.p, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("Validate(%+v) = %v, want a FieldError for %s", tc.p, err, tc.field)
		}
	}
}
