package session

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestShortestUniquePrefix(t *testing.T) {
	t.Parallel()
	const (
		a = "01a2179e-a191-7348-a57a-07ea3b44cf6f"
		b = "01a2179e-a1c0-7000-8000-000000000000"
		c = "01a2179f-0000-7000-8000-000000000000"
	)
	later := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC) // every window below has ended
	// 01a2179e-a191 is 2026-11-26T11:30:01.745Z: its 8-digit window
	// (65.5 s) ends at 11:30:25.92, its 10-digit one (256 ms) at 11:30:01.856.
	created := time.UnixMilli(0x01a2179ea191)
	for _, tc := range []struct {
		name, id string
		ids      []string
		now      time.Time
		want     string
	}{
		{"alone", a, []string{a}, later, "01a2179e"},
		{"other minute", a, []string{a, c}, later, "01a2179e"},
		{"same minute: past the dash", a, []string{a, b, c}, later, "01a2179e-a19"},
		{"the other one", b, []string{a, b, c}, later, "01a2179e-a1c"},
		{"never ends at the dash", "01a2179e-b000-7000-8000-000000000000", []string{a, "01a2179e-b000-7000-8000-000000000000"}, later, "01a2179e-b"},
		{"an id that is a prefix of nothing else but shares all", a, []string{a, a + "x"}, later, a},
		// A session started later in the same window would share a
		// shorter prefix: it is not printed until the window ended.
		{"just created", a, []string{a}, created.Add(10 * time.Millisecond), "01a2179e-a191"},
		{"a second later", a, []string{a}, created.Add(time.Second), "01a2179e-a1"},
		{"ten seconds later", a, []string{a}, created.Add(10 * time.Second), "01a2179e-a"},
		{"a minute later", a, []string{a}, created.Add(time.Minute), "01a2179e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ShortestUniquePrefix(tc.id, tc.ids, tc.now); got != tc.want {
				t.Errorf("ShortestUniquePrefix(%s) = %q, want %q", tc.id, got, tc.want)
			}
		})
	}
}

// Sessions of the same minute share their first 8 characters: the short
// id the store gives opens the session, and an ambiguous prefix lists the
// candidates with their start time and first prompt.
func TestShortIDAndAmbiguousPrefix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := NewStore(dir)
	start := time.Date(2026, 11, 26, 11, 30, 0, 0, time.UTC)
	ids := map[string]string{
		"01a2179e-a191-7348-a57a-07ea3b44cf6f": "fix the parser\nand its test",
		"01a2179e-a1c0-7000-8000-000000000000": "",
		"01a2179e-b000-7000-8000-000000000000": "say hello",
	}
	i := 0
	for id, title := range ids {
		s, err := store.Create(Meta{Workspace: "/w"})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		// Rename to a fixed id of the same minute, with its metadata.
		if err := os.Rename(filepath.Join(dir, s.ID()), filepath.Join(dir, id)); err != nil {
			t.Fatal(err)
		}
		if err := writeMeta(filepath.Join(dir, id), Meta{ID: id, Title: title, CreatedAt: start.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
		i++
	}
	for id := range ids {
		short := store.ShortID(id)
		if len(short) >= len(id) || len(short) < MinPrefix {
			t.Errorf("ShortID(%s) = %q", id, short)
		}
		m, err := store.Meta(short)
		if err != nil || m.ID != id {
			t.Errorf("Meta(%q) = %s, %v; want %s", short, m.ID, err, id)
		}
	}
	_, err := store.Open("01a2179e")
	amb, ok := errors.AsType[*AmbiguousError](err)
	if !ok || len(amb.Matches) != 3 {
		t.Fatalf("open an ambiguous prefix: err = %v, want an *AmbiguousError of 3", err)
	}
	msg := err.Error()
	for _, want := range []string{`"01a2179e" is ambiguous: 3 sessions match`, "01a2179e-a191-7348-a57a-07ea3b44cf6f", "fix the parser", "(no prompt yet)", "say hello",
		start.Local().Format("2006-01-02 15:04:05")} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "and its test") {
		t.Errorf("error shows more than a prompt's first line:\n%s", msg)
	}
}
