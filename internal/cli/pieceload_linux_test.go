package cli

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"github.com/maestro-run/maestro/pieces"
)

// A piece run loads the piece library once: the check before the
// session exists, the replay demo's probes and the run read the same
// pieces (each read, parsed and validated every piece file of the
// user's and the project's directories: twice a run, up to four times
// on the replay demo). Counted here as the opens of a user piece file.
func TestPieceRunLoadsThePiecesOnce(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	dir := filepath.Join(home, "pieces")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := fs.ReadFile(pieces.FS(), "chat.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mine.yaml"), bytes.Replace(src, []byte("name: chat"), []byte("name: mine"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	defer syscall.Close(fd)
	if _, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_OPEN); err != nil {
		t.Skipf("inotify: %v", err)
	}
	if r := runCLI(t, map[string]string{"MAESTRO_HOME": home}, "run", "--piece", "general", "--workspace", t.TempDir(), "x"); r.code != 0 {
		t.Fatalf("piece run: exit %d: %s", r.code, r.stderr)
	}
	if n := opens(t, fd, "mine.yaml"); n != 1 {
		t.Errorf("the run read the user's piece file %d times, want once", n)
	}
}

// opens counts the IN_OPEN events of file queued on the inotify fd.
func opens(t *testing.T, fd int, file string) int {
	t.Helper()
	n := 0
	buf := make([]byte, 64<<10)
	for {
		got, err := syscall.Read(fd, buf)
		if errors.Is(err, syscall.EAGAIN) {
			return n
		}
		if err != nil {
			t.Fatalf("read inotify events: %v", err)
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= got; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)]
			if string(bytes.TrimRight(name, "\x00")) == file && ev.Mask&syscall.IN_OPEN != 0 {
				n++
			}
			off += syscall.SizeofInotifyEvent + int(ev.Len)
		}
	}
}
