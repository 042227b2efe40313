package stdio_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	hrt "github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/transport/stdio"
)

// stuckWriter is a client that never reads stdout: every write blocks
// until the test ends.
type stuckWriter struct {
	once            sync.Once
	blocked, closed chan struct{}
}

func (w *stuckWriter) Write([]byte) (int, error) {
	w.once.Do(func() { close(w.blocked) })
	<-w.closed
	return 0, io.ErrClosedPipe
}

// serveStalled serves 200 malformed lines (200 error frames, more than
// the ring of 16 holds) to out, and cancels ctx once wait closes.
func serveStalled(t *testing.T, out io.Writer, wait <-chan struct{}) error {
	t.Helper()
	rt, err := hrt.New(hrt.Config{Provider: chunker{}, Cwd: t.TempDir(), BufferFrames: 16,
		Tools: func(context.Context) (*tool.Set, error) { return tool.NewSet(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	in := strings.NewReader(strings.Repeat(`{"type":"nope"}`+"\n", 200))
	served := make(chan error, 1)
	go func() {
		served <- stdio.Serve(ctx, stdio.Config{Runtime: rt, In: in, Out: out, StopGrace: 20 * time.Millisecond})
	}()
	select {
	case <-wait:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve wrote nothing")
	}
	cancel() // SIGTERM
	select {
	case err := <-served:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Serve still waits for its client 10 s after ctx ended")
		return nil
	}
}

// TestStopWithStalledClient: SIGINT or SIGTERM ends a session whose
// client stopped reading stdout (it waited for the client for ever,
// whether the runtime was publishing or only the last frames were left
// to write); a client that reads gets every frame.
func TestStopWithStalledClient(t *testing.T) {
	t.Parallel()
	t.Run("stalled", func(t *testing.T) {
		t.Parallel()
		out := &stuckWriter{blocked: make(chan struct{}), closed: make(chan struct{})}
		defer close(out.closed)
		if err := serveStalled(t, out, out.blocked); !errors.Is(err, stdio.ErrStdoutStalled) {
			t.Errorf("Serve = %v, want ErrStdoutStalled", err)
		}
	})
	t.Run("reading", func(t *testing.T) {
		t.Parallel()
		r, w := io.Pipe()
		read := make(chan int, 1)
		first := make(chan struct{})
		go func() {
			buf := make([]byte, 1)
			n, _ := r.Read(buf)
			close(first)
			m, _ := io.Copy(io.Discard, r)
			read <- n + int(m)
		}()
		err := serveStalled(t, w, first)
		w.Close()
		if err != nil {
			t.Errorf("Serve = %v, want nil for a client that reads", err)
		}
		if n := <-read; n == 0 {
			t.Error("nothing read")
		}
	})
}
