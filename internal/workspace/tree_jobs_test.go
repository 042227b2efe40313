package workspace

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDirSync: a directory opened trusted or below it can be synced after
// a write into it.
func TestDirSync(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	d, err := OpenTrusted(base)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	sub, err := d.MkdirPath("logs", 0o700)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.WriteFileAtomic("state.json", []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Dir{d, sub} {
		if err := x.Sync(); err != nil {
			t.Errorf("Sync %s: %v", x.Rel(), err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(base, "logs", "state.json")); err != nil || string(b) != "{}" {
		t.Errorf("written file: %q, %v", b, err)
	}
}
