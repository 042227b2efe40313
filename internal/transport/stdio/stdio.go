// Package stdio attaches a headless runtime (internal/runtime) to standard
// input and output: the client writes one JSON message per line to stdin,
// the runtime writes one per line to stdout (wire contract §2.1). It is what
// `maestro headless` runs.
//
// One goroutine reads stdin with a bounded line length; each line is
// decoded strictly (protocol.DecodeClient) and handed to the runtime.
// Handling is not serialised behind long work: a prompt runs in the
// background, so an interrupt is handled while it runs. One goroutine owns
// stdout and writes the frames of a lossless subscription, so nothing is
// dropped and a slow reader slows the agent down instead of growing
// memory. Lines that fail to decode, and messages the runtime refuses, are
// answered with non-fatal error messages; the connection lives on.
//
// End of input (stdin EOF) and the shutdown message both stop the runtime
// cleanly (pending requests cancelled, utilities stopped, the run
// aborted), flush what was published, and make Serve return nil.
//
// Once ctx ends (SIGINT or SIGTERM in maestro headless), a client that
// has stopped reading stdout no longer holds the process: when a write to
// Out has not returned for StopGrace, Serve stops waiting for it (the
// runtime is shut down and closed, its log saved) and returns
// ErrStdoutStalled.
//
// Package stdiotest drives Serve in-process from transcript scripts for
// golden tests (client lines in, normalised server lines out).
package stdio

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
)

// DefaultMaxLineBytes is the longest input line accepted (16 MiB); a longer
// line is answered with a protocol error and skipped.
const DefaultMaxLineBytes = 16 << 20

// DefaultStopGrace is how long a write to stdout may stay blocked after
// ctx ends before Serve gives up on the client.
const DefaultStopGrace = 5 * time.Second

// ErrStdoutStalled is returned by Serve when ctx ended while the client
// was not reading stdout: the messages it did not read are lost (the
// session log has them).
var ErrStdoutStalled = errors.New("the client stopped reading stdout: its last messages were not delivered (the session log has them)")

// Config configures Serve.
type Config struct {
	// Runtime is the runtime to attach; Serve starts it (ready and
	// session_info are its first frames) and closes it.
	Runtime *runtime.Runtime
	In      io.Reader
	Out     io.Writer
	// MaxLineBytes bounds an input line (default DefaultMaxLineBytes).
	MaxLineBytes int
	// Logger receives diagnostics (stderr); nil discards them.
	Logger *slog.Logger
	// Started, when set, is called once ready and session_info have been
	// written to Out (the CLI defers slow set-up, such as probing the
	// sandbox, until then).
	Started func()
	// Handled, when set, is called after each input line has been handled
	// (decoded and given to the runtime); tests use it to synchronise.
	Handled func()
	// StopGrace bounds, once ctx has ended, how long one write to Out may
	// block before Serve stops waiting for the client (default
	// DefaultStopGrace).
	StopGrace time.Duration
}

// Serve runs the protocol over In and Out until end of input, a shutdown
// message, or ctx ends (handled as a shutdown). It returns nil after a
// clean shutdown, or the error that broke stdout.
func Serve(ctx context.Context, cfg Config) error {
	if cfg.MaxLineBytes <= 0 {
		cfg.MaxLineBytes = DefaultMaxLineBytes
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rt := cfg.Runtime
	conn, err := rt.Connect(runtime.ConnectOptions{ID: runtime.LocalConnectionID, Local: true})
	if err != nil {
		return fmt.Errorf("attach stdio connection: %w", err)
	}
	sub, err := conn.Subscribe(runtime.SubscribeOptions{From: runtime.FromOldest, Lossless: true})
	if err != nil {
		return fmt.Errorf("subscribe stdio connection: %w", err)
	}
	wrote := make(chan error, 1)
	started := cfg.Started
	if started == nil {
		started = func() {}
	}
	out := &watchedWriter{w: cfg.Out}
	go func() { wrote <- writeFrames(sub, out, started) }()
	finished := make(chan struct{})
	defer close(finished)
	stalled := make(chan struct{})
	grace := cfg.StopGrace
	if grace <= 0 {
		grace = DefaultStopGrace
	}
	go watchStall(ctx, out, grace, finished, func() {
		// Publishers stop waiting for stdout, so the runtime can shut down.
		sub.Close()
		close(stalled)
	})
	rt.Start()

	lines := make(chan line)
	stop := make(chan struct{})
	defer close(stop)
	go readLines(cfg.In, cfg.MaxLineBytes, lines, stop)

	var writeErr error
loop:
	for ctx.Err() == nil {
		select {
		case l, ok := <-lines:
			if !ok {
				break loop // end of input
			}
			handle(ctx, conn, l, cfg.MaxLineBytes)
			if cfg.Handled != nil {
				cfg.Handled()
			}
			select {
			case <-rt.Done():
				break loop // shutdown
			default:
			}
		case <-rt.Done():
			break loop
		case <-ctx.Done():
			break loop
		case writeErr = <-wrote:
			log.Error("headless stdout failed; shutting down", "err", writeErr)
			sub.Close()
			break loop
		}
	}
	rt.Shutdown()
	closeErr := rt.Close()
	if closeErr != nil {
		log.Warn("closing the headless runtime", "err", closeErr)
	}
	if writeErr == nil {
		select {
		case writeErr = <-wrote:
		case <-stalled:
			writeErr = ErrStdoutStalled
		}
	}
	return writeErr
}

// watchedWriter records when the write in progress began.
type watchedWriter struct {
	w io.Writer
	// since is the UnixNano time the write in progress began, 0 between
	// writes.
	since atomic.Int64
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	w.since.Store(time.Now().UnixNano())
	defer w.since.Store(0)
	return w.w.Write(p)
}

// watchStall calls stall once ctx has ended and a write to out has been
// blocked for grace, unless finished closes first.
func watchStall(ctx context.Context, out *watchedWriter, grace time.Duration, finished <-chan struct{}, stall func()) {
	select {
	case <-ctx.Done():
	case <-finished:
		return
	}
	wait := grace
	for {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-finished:
			t.Stop()
			return
		}
		wait = grace
		if since := out.since.Load(); since != 0 {
			blocked := time.Since(time.Unix(0, since))
			if blocked >= grace {
				stall()
				return
			}
			wait = grace - blocked
		}
	}
}

// handle decodes one line and hands it to the runtime.
func handle(ctx context.Context, conn *runtime.Conn, l line, max int) {
	if l.tooLong {
		conn.Publish(protocol.Error{
			Message:   fmt.Sprintf("Failed to parse command: headless command line exceeds the maximum of %d bytes", max),
			ErrorType: protocol.ErrorProtocol,
		})
		return
	}
	m, err := protocol.DecodeClient(l.data)
	if err != nil {
		conn.Publish(protocol.ProtocolError(err))
		return
	}
	if err := conn.Handle(ctx, m); err != nil {
		conn.Publish(runtime.ErrorMessage(err))
	}
}

// writeFrames owns the output: it writes every frame as one line and
// flushes whenever no frame is waiting. It calls started after the first
// two frames (ready, session_info) are flushed, and returns nil once the
// runtime is closed and everything was written.
func writeFrames(sub *runtime.Subscription, out io.Writer, started func()) error {
	bw := bufio.NewWriterSize(out, 64<<10)
	written := 0
	for {
		f, ok, err := sub.TryNext()
		if err == nil && (!ok || written == 2) {
			if err := bw.Flush(); err != nil {
				sub.Close()
				return fmt.Errorf("write stdout: %w", err)
			}
			if written == 2 {
				started()
			}
			if !ok {
				f, err = sub.Next(context.Background())
			}
		}
		if errors.Is(err, io.EOF) {
			if err := bw.Flush(); err != nil {
				return fmt.Errorf("write stdout: %w", err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read frames: %w", err)
		}
		written++
		bw.Write(f.Data)
		if err := bw.WriteByte('\n'); err != nil {
			sub.Close()
			return fmt.Errorf("write stdout: %w", err)
		}
	}
}

// line is one input line (without its newline), or the fact that it was
// too long.
type line struct {
	data    []byte
	tooLong bool
}

// readLines sends each line of in, then closes lines at end of input or
// on a read error. A line longer than max bytes is skipped and reported
// as tooLong, without holding it in memory.
func readLines(in io.Reader, max int, lines chan<- line, stop <-chan struct{}) {
	defer close(lines)
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		var buf []byte
		tooLong := false
		var err error
		for {
			var chunk []byte
			chunk, err = br.ReadSlice('\n')
			if !tooLong {
				if len(buf)+len(chunk) > max+1 {
					tooLong, buf = true, nil
				} else {
					buf = append(buf, chunk...)
				}
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if len(buf) > 0 && buf[len(buf)-1] == '\n' {
			buf = buf[:len(buf)-1]
		} else if !tooLong && len(buf) == 0 && err != nil {
			return // end of input, nothing pending
		} else if len(buf) > max {
			tooLong, buf = true, nil // a last line without its newline
		}
		select {
		case lines <- line{data: buf, tooLong: tooLong}:
		case <-stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// WriteStartupFailure writes the fatal error a client sees when the
// runtime could not start (wire contract §2.1): the caller also prints
// diagnostics on stderr and exits non-zero.
func WriteStartupFailure(w io.Writer, err error) error {
	return protocol.Encode(w, protocol.Error{Message: "Headless startup failed: " + err.Error(), Fatal: true, ErrorType: protocol.ErrorFatal})
}
