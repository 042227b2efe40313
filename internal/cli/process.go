package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/maestro-run/maestro/internal/agentcli"
)

// logger is the text logger of a long-running command on stderr, writing
// level and above.
func (io *IOStreams) logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.ErrOut, &slog.HandlerOptions{Level: level}))
}

// untilSignalled is ctx, also cancelled on SIGINT or SIGTERM, and on
// SIGHUP (the terminal closed) unless it is ignored (nohup): the signals
// that end a command as a shutdown would. Left to its default, SIGHUP
// killed Maestro outright, and an agent CLI, in a process group of its
// own that the hangup does not reach, went on working unattended.
func untilSignalled(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, stopSignals()...)
}

// stopSignals are the signals untilSignalled takes.
func stopSignals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

// secondSignalKills ends the process at once (exit 130) on a second
// signal once runCtx, of untilSignalled, has ended on the first (stop is
// its stop), unless done closes first. It SIGKILLs the process groups of
// the agent CLIs running then: each runs in a group of its own, which the
// terminal's Ctrl-C does not reach, and a second Ctrl-C within the
// executor's kill grace used to kill Maestro by the signal's default
// action and leave the CLI running, unattended.
func secondSignalKills(runCtx context.Context, stop context.CancelFunc, done <-chan struct{}) {
	select {
	case <-runCtx.Done():
	case <-done:
		return
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, stopSignals()...)
	defer signal.Stop(c)
	stop()
	select {
	case <-c:
		agentcli.KillRunning()
		os.Exit(ExitInterrupted)
	case <-done:
	}
}

// catchSIGPIPE keeps a reader of stdout that goes away (maestro run … |
// head -1, a client closing its end) from killing Maestro with SIGPIPE,
// Go's default for a write to fd 1 or 2, which left the run unfinished in
// the session log: the write fails with EPIPE instead. It returns what
// restores the default.
func catchSIGPIPE() func() {
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	return func() { signal.Stop(pipe) }
}

// pipeWatch is stdout that notes a write failing with EPIPE (its reader
// went away, under catchSIGPIPE) and calls the function onBreak set, once.
type pipeWatch struct {
	w      io.Writer
	mu     sync.Mutex
	broken bool
	cancel func()
}

func (p *pipeWatch) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		p.mu.Lock()
		first, cancel := !p.broken, p.cancel
		p.broken = true
		p.mu.Unlock()
		if first && cancel != nil {
			cancel()
		}
	}
	return n, err
}

// onBreak sets what a broken pipe calls (at once if it already broke).
func (p *pipeWatch) onBreak(f func()) {
	p.mu.Lock()
	p.cancel = f
	broken := p.broken
	p.mu.Unlock()
	if broken {
		f()
	}
}

// Broken reports whether a write failed with EPIPE.
func (p *pipeWatch) Broken() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.broken
}
