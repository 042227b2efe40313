package cli

import (
	"log/slog"
	"time"

	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// serveSessionIdle is how long a live session of `maestro serve` may go
// unused (no request, no subscription, not responding) before the session
// API shuts it down.
const serveSessionIdle = 30 * time.Minute

// newServeAttach builds serve's session API for /api/headless/: the
// sessions of the registry host.AttachSessions returns, behind serve's
// token.
func newServeAttach(sessions httpattach.Sessions, token string, log *slog.Logger) *httpattach.Handler {
	return httpattach.NewHandler(httpattach.Config{
		Sessions:    sessions,
		Token:       token,
		RequireAuth: token != "",
		SessionIdle: serveSessionIdle,
		Logger:      log,
	})
}
