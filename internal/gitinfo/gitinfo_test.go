package gitinfo

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

// TestBranch: the branch of an ordinary repository, of a worktree (.git
// file), from a subdirectory, detached and outside git.
func TestBranch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, ws string) string // returns the dir asked about
		want  string                               // "" for nil
	}{
		{"repository", func(t *testing.T, ws string) string {
			write(t, filepath.Join(ws, ".git", "HEAD"), "ref: refs/heads/main\n")
			return ws
		}, "main"},
		{"subdirectory", func(t *testing.T, ws string) string {
			write(t, filepath.Join(ws, ".git", "HEAD"), "ref: refs/heads/feature/x\n")
			write(t, filepath.Join(ws, "a", "b", "f"), "")
			return filepath.Join(ws, "a", "b")
		}, "feature/x"},
		{"worktree", func(t *testing.T, ws string) string {
			write(t, filepath.Join(ws, "main-repo", ".git", "worktrees", "wt", "HEAD"), "ref: refs/heads/wt\n")
			write(t, filepath.Join(ws, "wt", ".git"), "gitdir: ../main-repo/.git/worktrees/wt\n")
			return filepath.Join(ws, "wt")
		}, "wt"},
		{"detached", func(t *testing.T, ws string) string {
			write(t, filepath.Join(ws, ".git", "HEAD"), "0123456789abcdef0123456789abcdef01234567\n")
			return ws
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := tt.setup(t, t.TempDir())
			got := Branch(dir, nil)
			if (got == nil) != (tt.want == "") || (got != nil && *got != tt.want) {
				t.Errorf("Branch = %v, want %q", deref(got), tt.want)
			}
		})
	}
}

// TestPlantedGitMetadata: a .git or HEAD planted by an agent — a FIFO, a
// link to /dev/zero, a huge file — gives "no branch" within 2 s and
// without growing memory (HEAD → /dev/zero used to grow the next run to
// 3.3 GB; a FIFO .git hung it).
func TestPlantedGitMetadata(t *testing.T) {
	tests := []struct {
		name  string
		plant func(t *testing.T, ws string)
	}{
		{".git FIFO", func(t *testing.T, ws string) { wstest.MakeFIFO(t, filepath.Join(ws, ".git")) }},
		{".git link to a FIFO", func(t *testing.T, ws string) {
			wstest.MakeFIFO(t, filepath.Join(ws, "pipe"))
			wstest.Symlink(t, "pipe", filepath.Join(ws, ".git"))
		}},
		{".git link to /dev/zero", func(t *testing.T, ws string) { wstest.Symlink(t, "/dev/zero", filepath.Join(ws, ".git")) }},
		{"HEAD FIFO", func(t *testing.T, ws string) { wstest.MakeFIFO(t, filepath.Join(ws, ".git", "HEAD")) }},
		{"HEAD link to /dev/zero", func(t *testing.T, ws string) {
			mkdir(t, filepath.Join(ws, ".git"))
			wstest.Symlink(t, "/dev/zero", filepath.Join(ws, ".git", "HEAD"))
		}},
		{"HEAD huge", func(t *testing.T, ws string) {
			write(t, filepath.Join(ws, ".git", "HEAD"), "ref: refs/heads/"+strings.Repeat("x", 16<<20)+"\n")
		}},
		{"gitdir to a FIFO HEAD", func(t *testing.T, ws string) {
			wstest.MakeFIFO(t, filepath.Join(ws, "fake", "HEAD"))
			write(t, filepath.Join(ws, ".git"), "gitdir: fake\n")
		}},
		{"gitdir file link to /dev/zero", func(t *testing.T, ws string) {
			mkdir(t, filepath.Join(ws, "sub"))
			wstest.Symlink(t, "/dev/zero", filepath.Join(ws, "sub", ".git"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			tt.plant(t, ws)
			dir := ws
			if strings.HasPrefix(tt.name, "gitdir file") {
				dir = filepath.Join(ws, "sub")
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			done := make(chan *string, 1)
			go func() { done <- Branch(dir, nil) }()
			select {
			case got := <-done:
				if got != nil {
					t.Errorf("Branch = %.80q…, want nil", *got)
				}
			case <-time.After(2 * time.Second):
				releaseFIFOs(ws)
				t.Fatalf("Branch still running after 2 s")
			}
			runtime.ReadMemStats(&after)
			grew := after.TotalAlloc - before.TotalAlloc
			t.Logf("allocated %d bytes", grew)
			if grew > 1<<20 {
				t.Errorf("Branch allocated %d bytes; want < 1 MiB", grew)
			}
		})
	}
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func write(t *testing.T, path, content string) {
	t.Helper()
	mkdir(t, filepath.Dir(path))
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// releaseFIFOs opens every FIFO under dir for writing without blocking,
// which releases a reader blocked opening it (after a failed test).
func releaseFIFOs(dir string) {
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type()&os.ModeNamedPipe != 0 {
			if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
		return nil
	})
}
