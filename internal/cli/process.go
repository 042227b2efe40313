package cli

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
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
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return signal.NotifyContext(ctx, sigs...)
}
