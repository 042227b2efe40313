package benchproc

import "testing"

// TestKiB reads this process's resident memory and its peak, and 0 for a
// field /proc/self/status does not have.
func TestKiB(t *testing.T) {
	for _, tt := range []struct {
		field    string
		positive bool
	}{
		{"VmRSS", true},
		{"VmHWM", true},
		{"NoSuchField", false},
	} {
		if got := KiB(tt.field); (got > 0) != tt.positive {
			t.Errorf("KiB(%q) = %d, want positive %v", tt.field, got, tt.positive)
		}
	}
	if rss, peak := KiB("VmRSS"), KiB("VmHWM"); rss > peak {
		t.Errorf("VmRSS %d KiB above its peak VmHWM %d KiB", rss, peak)
	}
}
