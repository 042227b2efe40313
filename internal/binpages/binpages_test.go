package binpages

import (
	"os"
	"testing"
)

func TestParseSmaps(t *testing.T) {
	const exe = "/usr/local/bin/maestro"
	smaps := `00400000-02543000 r-xp 00000000 fe:00 10166978                           /usr/local/bin/maestro
Size:              34060 kB
Rss:               21964 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
02543000-0524c000 r--p 02143000 fe:00 10166978                           /usr/local/bin/maestro
Rss:               18980 kB
Anonymous:             0 kB
0524c000-05319000 rw-p 04e4c000 fe:00 10166978                           /usr/local/bin/maestro
Rss:                 628 kB
Anonymous:           212 kB
05319000-05500000 rw-p 00000000 00:00 0
Rss:                 100 kB
7f0000000000-7f0000001000 r--p 00000000 fe:00 42                          /usr/local/bin/maestro-old
Rss:                   4 kB
7f0000001000-7f0000003000 r--p 00000000 fe:00 43                          /usr/local/bin/maestro (deleted)
Rss:                   8 kB
Anonymous:             8 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
Rss:                  12 kB
zz-02 r-xp 00000000 fe:00 1 /usr/local/bin/maestro
Rss:                   4 kB
`
	got := parseSmaps([]byte(smaps), exe)
	want := []Mapping{
		{0x400000, 0x2543000, "r-xp", 21964 << 10, 0},
		{0x2543000, 0x524c000, "r--p", 18980 << 10, 0},
		{0x524c000, 0x5319000, "rw-p", 628 << 10, 212 << 10},
		// Relocated, then write-protected data (RELRO): Release leaves it.
		{0x7f0000001000, 0x7f0000003000, "r--p", 8 << 10, 8 << 10},
	}
	if len(got) != len(want) {
		t.Fatalf("parseSmaps = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mapping %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestReleaseDropsResidentPages releases the test binary's own pages and
// checks that fewer of them stay mapped, and that the process still runs
// the released code (every later call faults it back in).
func TestReleaseDropsResidentPages(t *testing.T) {
	// Map every page of the executable first, as start-up does for a
	// large binary, so that the release has something to drop: reading
	// /proc/self/mem faults the pages in.
	ms, err := Executable()
	if err != nil {
		t.Fatal(err)
	}
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	buf := make([]byte, 1<<20)
	for _, m := range ms {
		for a := m.Start; a < m.End; a += uintptr(len(buf)) {
			if _, err := mem.ReadAt(buf[:min(uintptr(len(buf)), m.End-a)], int64(a)); err != nil {
				t.Fatalf("read %+v at %#x: %v", m, a, err)
			}
		}
	}
	before, err := ProcessUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if before.Text == 0 || before.ReadOnly == 0 || before.VmRSS == 0 {
		t.Fatalf("usage before = %+v: want the executable's text and rodata resident", before)
	}
	released, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	if len(released) < 2 {
		t.Fatalf("released %v: want the text and the read-only mapping", released)
	}
	for _, m := range released {
		if m.Perms[1] == 'w' || m.Anonymous > 0 {
			t.Errorf("released mapping %+v: it is writable or holds private copies", m)
		}
	}
	after, err := ProcessUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("executable pages resident: %d KiB before the release, %d KiB after", (before.Text+before.ReadOnly)>>10, (after.Text+after.ReadOnly)>>10)
	if b, a := before.Text+before.ReadOnly, after.Text+after.ReadOnly; a > b*3/4 {
		t.Errorf("executable pages resident: %d KiB before the release, %d KiB after; want at most three quarters", b>>10, a>>10)
	}
}
