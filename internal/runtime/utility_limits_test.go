package runtime

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/utility"
	"github.com/maestro-run/maestro/internal/workspace"
)

// TestUtilityFileReadFIFOThenShutdown: utility_file_read of a FIFO planted
// in the workspace answers with an error within 2 s, and the runtime then
// shuts down within 2 s (the read used to block for good, and shutdown
// with it).
func TestUtilityFileReadFIFOThenShutdown(t *testing.T) {
	t.Parallel()
	root, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	fifo := filepath.Join(root.Dir(), "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseFIFO(fifo) })
	h := newHarness(t, Config{Provider: &capture{}, Utilities: func(emit func(protocol.Message)) Utilities {
		return utility.New(utility.Config{Root: root, Emit: emit})
	}}, ConnectOptions{})
	h.handle(protocol.Hello{Capabilities: &protocol.Capabilities{UtilityOperations: []protocol.UtilityOperation{protocol.OpFileRead}}})

	start := time.Now()
	if err := h.handle(protocol.UtilityFileRead{ReadID: "r1", Path: "pipe"}); err != nil {
		t.Fatal(err)
	}
	answered := make(chan protocol.Error, 1)
	go func() {
		h.waitFor("the read's error", func(fs []protocol.Message) bool {
			for _, f := range fs {
				if e, ok := f.(protocol.Error); ok && e.RequestID == "r1" {
					answered <- e
					return true
				}
			}
			return false
		})
	}()
	select {
	case e := <-answered:
		if e.Message != "Not a regular file: pipe (a FIFO)" {
			t.Errorf("error = %q", e.Message)
		}
	case <-time.After(2 * time.Second):
		t.Fatalf("no answer to utility_file_read of a FIFO within 2 s")
	}
	t.Logf("answered in %v", time.Since(start))
	closed := make(chan struct{})
	start = time.Now()
	go func() { h.rt.Close(); close(closed) }()
	select {
	case <-closed:
		t.Logf("closed in %v", time.Since(start))
	case <-time.After(2 * time.Second):
		t.Fatalf("runtime did not close within 2 s after the read")
	}
}

// stuckUtilities is a utility implementation whose file read ignores
// cancellation until released, as a read blocked in a system call does.
type stuckUtilities struct {
	fakeUtilities
	release chan struct{}
	started chan struct{}
}

func (s *stuckUtilities) FileRead(context.Context, protocol.UtilityFileRead) (protocol.UtilityFileReadResult, error) {
	close(s.started)
	<-s.release
	return protocol.UtilityFileReadResult{}, nil
}

// TestShutdownBoundedWithStuckUtility: a utility operation that does not
// end when cancelled holds shutdown for at most asyncGrace, not for ever.
func TestShutdownBoundedWithStuckUtility(t *testing.T) {
	t.Parallel()
	s := &stuckUtilities{release: make(chan struct{}), started: make(chan struct{})}
	h := newHarness(t, Config{Provider: &capture{}, Utilities: func(emit func(protocol.Message)) Utilities {
		s.emit = emit
		return s
	}}, ConnectOptions{})
	// Registered after the harness's cleanup, so it runs first: the
	// harness's Close does not wait on the stuck read if the test fails.
	t.Cleanup(func() { close(s.release) })
	h.handle(protocol.Hello{Capabilities: &protocol.Capabilities{UtilityOperations: []protocol.UtilityOperation{protocol.OpFileRead}}})
	if err := h.handle(protocol.UtilityFileRead{ReadID: "r1", Path: "x"}); err != nil {
		t.Fatal(err)
	}
	<-s.started
	done := make(chan struct{})
	start := time.Now()
	go func() { h.rt.Shutdown(); close(done) }()
	select {
	case <-done:
		if d := time.Since(start); d < asyncGrace {
			t.Errorf("shutdown returned after %v, before the grace of %v", d, asyncGrace)
		}
	case <-time.After(asyncGrace + 2*time.Second):
		t.Fatalf("shutdown still waiting for the stuck read after %v", asyncGrace+2*time.Second)
	}
}

// releaseFIFO opens fifo for writing without blocking, which releases a
// reader blocked opening it (after a failed test).
func releaseFIFO(fifo string) {
	if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		w.Close()
	}
}
