package protocol

import (
	"regexp"
	"testing"
	"time"
)

// NewID has the reference server's shape: prefix, the epoch milliseconds,
// then exactly digits base-36 digits (zero padded).
func TestNewID(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1764000000123)
	for _, tt := range []struct {
		prefix string
		digits int
		re     string
	}{
		{"resp", 6, `^resp_1764000000123_[0-9a-z]{6}$`},
		{"conn", 8, `^conn_1764000000123_[0-9a-z]{8}$`},
		{"sub", 8, `^sub_1764000000123_[0-9a-z]{8}$`},
		{"x", 1, `^x_1764000000123_[0-9a-z]$`},
	} {
		re := regexp.MustCompile(tt.re)
		seen := map[string]bool{}
		for range 200 {
			id := NewID(tt.prefix, tt.digits, now)
			if !re.MatchString(id) {
				t.Fatalf("NewID(%q, %d) = %q, want %s", tt.prefix, tt.digits, id, tt.re)
			}
			seen[id] = true
		}
		if tt.digits >= 6 && len(seen) < 190 {
			t.Errorf("NewID(%q, %d): %d distinct ids in 200", tt.prefix, tt.digits, len(seen))
		}
	}
}
