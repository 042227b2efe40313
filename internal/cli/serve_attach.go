package cli

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/maestro-run/maestro/internal/sessionowner"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
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

// advertiseEnv is the default of serve --advertise.
const advertiseEnv = "MAESTRO_ADVERTISE_URL"

// serveCluster makes serve's live sessions visible to the other serve
// processes sharing the store (docs/scale-out.md, "Live sessions"): each
// session is recorded with this process as its owner, requests for
// sessions another serve owns are proxied to it (or refused with 409 when
// o.SessionProxy is off), and the sessions of serve processes that died
// are ended.
func serveCluster(ctx context.Context, st store.LiveSessions, sessions *httpattach.SessionMap, o serveOptions, ln net.Addr, log *slog.Logger) (*sessionowner.Cluster, error) {
	// SQLite is held by one process (its lock file): the open sessions
	// of another serve found in it are a killed serve's.
	_, exclusive := st.(*sqlite.Store)
	c, err := sessionowner.New(sessionowner.Config{
		Store: st, Local: sessions, Instance: o.Name, Address: advertised(o, ln),
		Proxy: o.SessionProxy, StaleAfter: o.SessionStaleAfter, Exclusive: exclusive, Logger: log,
	})
	if err != nil {
		return nil, usageErr("--advertise: %v", err)
	}
	if err := c.EndPrevious(ctx); err != nil {
		return nil, failErr(err)
	}
	return c, nil
}

// advertised is the address other serve processes reach this one at:
// --advertise, else defaultAdvertise.
func advertised(o serveOptions, ln net.Addr) string {
	if o.Advertise != "" {
		return o.Advertise
	}
	return defaultAdvertise(ln)
}

// defaultAdvertise is the address other serve processes reach this one
// at: the listen address, with a wildcard host replaced by this machine's
// first non-loopback address (its host name when it has none).
func defaultAdvertise(ln net.Addr) string {
	ap, err := netip.ParseAddrPort(ln.String())
	if err != nil {
		return "http://" + ln.String()
	}
	host := ap.Addr().Unmap()
	if !host.IsUnspecified() {
		return "http://" + netip.AddrPortFrom(host, ap.Port()).String()
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && !p.Addr().IsLoopback() && !p.Addr().IsLinkLocalUnicast() {
				return "http://" + netip.AddrPortFrom(p.Addr().Unmap(), ap.Port()).String()
			}
		}
	}
	name, _ := os.Hostname()
	if name == "" {
		name = "localhost"
	}
	return "http://" + net.JoinHostPort(name, strconv.Itoa(int(ap.Port())))
}

// advertiseHost is the host of an --advertise URL that the Host check
// must accept (a name; addresses are accepted already), or "".
func advertiseHost(advertise string) string {
	u, err := url.Parse(advertise)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	if _, err := netip.ParseAddr(u.Hostname()); err == nil {
		return ""
	}
	return u.Hostname()
}
