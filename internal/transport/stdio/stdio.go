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

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
)

// DefaultMaxLineBytes is the longest input line accepted (16 MiB); a longer
// line is answered with a protocol error and skipped.
const DefaultMaxLineBytes = 16 << 20

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
	go func() { wrote <- writeFrames(sub, cfg.Out, started) }()
	rt.Start()

	lines := make(chan line)
	stop := make(chan struct{})
	defer close(stop)
	go readLines(cfg.In, cfg.MaxLineBytes, lines, stop)

	var writeErr error
loop:
	for {
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
		writeErr = <-wrote
	}
	return writeErr
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
