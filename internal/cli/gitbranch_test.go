package cli

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestRunWithPlantedGitMetadata: `maestro run` in a workspace whose .git
// was planted by an agent — a FIFO, or HEAD linked to /dev/zero — starts
// and finishes as usual with git_branch null, promptly and without reading
// the device (HEAD → /dev/zero used to grow the run to 3.3 GB; a FIFO .git
// hung it). A real .git still gives the branch.
func TestRunWithPlantedGitMetadata(t *testing.T) {
	tests := []struct {
		name   string
		plant  func(t *testing.T, ws string)
		branch any
	}{
		{"fifo .git", func(t *testing.T, ws string) {
			if err := syscall.Mkfifo(filepath.Join(ws, ".git"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"HEAD to /dev/zero", func(t *testing.T, ws string) {
			if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/dev/zero", filepath.Join(ws, ".git", "HEAD")); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"real HEAD", func(t *testing.T, ws string) {
			if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "main"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			tt.plant(t, ws)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			r := runCLI(t, nil, "run", "--no-piece", "--workspace", ws, "-o", "jsonl", "show me")
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if r.code != 0 {
				t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
			}
			info := r.ofType(t, "session_info")
			if len(info) != 1 || info[0]["git_branch"] != tt.branch {
				t.Errorf("session_info = %v, want git_branch %v", info, tt.branch)
			}
			grew := after.TotalAlloc - before.TotalAlloc
			t.Logf("run took %v, allocated %d MiB", took, grew>>20)
			if grew > 256<<20 {
				t.Errorf("the run allocated %d MiB", grew>>20)
			}
		})
	}
}
