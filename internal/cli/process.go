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

// untilSignalled is ctx, also cancelled on SIGINT or SIGTERM: the signals
// that end a command as a shutdown would.
func untilSignalled(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}
