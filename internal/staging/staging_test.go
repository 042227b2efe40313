package staging

import (
	"path/filepath"
	"testing"
)

func TestLayout(t *testing.T) {
	t.Parallel()
	key := "0123456789abcdef0123456789abcdef"
	if got, want := Dir("/d", key), filepath.Join("/d", "uploads", key); got != want {
		t.Errorf("Dir = %s, want %s", got, want)
	}
	if got, want := JobFile("/d", key), filepath.Join("/d", "uploads", key+".job"); got != want {
		t.Errorf("JobFile = %s, want %s", got, want)
	}
	for k, want := range map[string]bool{key: true, "0123456789ABCDEF0123456789abcdef": false, "abc": false, "../../../../etc/passwd0123456789a": false} {
		if ValidKey(k) != want {
			t.Errorf("ValidKey(%q) = %v", k, !want)
		}
	}
}
