package agentcli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProbeCache: a listing again asks no unchanged CLI for its version
// (serve's GET /api/v1/agents ran every probe on each request, 3 s); a
// binary replaced, or a definition asking another way, is asked again; a
// failed probe is kept for ProbeFailureTTL only.
func TestProbeCache(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	write := func(version string, exit int) {
		t.Helper()
		script := "#!/bin/sh\necho x >> " + calls + "\necho 'fake " + version + "'\nexit " + string(rune('0'+exit)) + "\n"
		// A new file (new inode), as an upgrade installs one.
		tmp := filepath.Join(dir, "fake.new")
		if err := os.WriteFile(tmp, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "fake")); err != nil {
			t.Fatal(err)
		}
	}
	probes := func() int {
		data, _ := os.ReadFile(calls)
		return strings.Count(string(data), "x")
	}
	def := &Definition{ID: "fake", Binary: "fake", VersionPattern: `fake (\S+)`}
	now := time.Now()
	c := ProbeCache{now: func() time.Time { return now }}
	detect := func(want string, wantProbes int) {
		t.Helper()
		det := c.Detect(t.Context(), def, dir)
		if det.Version != want || probes() != wantProbes {
			t.Fatalf("version %q (err %v) after %d probes; want %q after %d", det.Version, det.Err, probes(), want, wantProbes)
		}
	}
	write("1.0", 1)
	detect("", 1)
	detect("", 1) // failed, kept a while
	now = now.Add(ProbeFailureTTL)
	detect("", 2) // and then asked again
	write("1.0", 0)
	detect("1.0", 3)
	detect("1.0", 3) // unchanged: from the cache
	write("2.0", 0)
	detect("2.0", 4) // replaced
	def.VersionArgs = []string{"-V"}
	detect("2.0", 5) // asked another way
	detect("2.0", 5)
	// Rewritten in place (same inode), with another modification time.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(dir, "fake"), later, later); err != nil {
		t.Fatal(err)
	}
	detect("2.0", 6)
	if infos, _ := c.DescribeAll(t.Context(), []*Definition{def}, dir); infos[0].Version != "2.0" || probes() != 6 {
		t.Errorf("DescribeAll: %+v after %d probes", infos[0], probes())
	}
}
