package proctest

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// Golden compares got with the file at path, failing t where they differ.
// When the test binary's -update flag is set (the package declares it:
// flag.Bool("update", false, "…")), it writes got to path first, creating
// its directory.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
