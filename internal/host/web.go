package host

import (
	"cmp"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/netguard"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

// WebTools is the web tools' configuration from the configuration file
// (web:, docs/web-tools.md): the network guard with its exceptions and
// caps, and the search backend when one is configured (its API key from
// the file, else BRAVE_API_KEY or TAVILY_API_KEY). getenv reads the
// environment.
func WebTools(cfg config.Config, getenv func(string) string) (*tool.WebOptions, error) {
	w := cfg.Web
	guard, err := netguard.New(netguard.Policy{
		Allow:        w.AllowHosts,
		Timeout:      time.Duration(w.TimeoutSeconds) * time.Second,
		MaxRedirects: w.MaxRedirects,
		MaxBytes:     w.MaxBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("configuration web.allow_hosts: %w", err)
	}
	o := &tool.WebOptions{Guard: guard, MaxDownloadBytes: w.MaxDownloadBytes}
	if w.Search.Backend == "" {
		return o, nil
	}
	key := w.Search.APIKey
	switch w.Search.Backend {
	case tool.SearchBrave:
		key = cmp.Or(key, getenv("BRAVE_API_KEY"))
	case tool.SearchTavily:
		key = cmp.Or(key, getenv("TAVILY_API_KEY"))
	}
	o.Search, err = tool.NewSearcher(tool.SearchConfig{Backend: w.Search.Backend, URL: w.Search.URL, APIKey: key})
	if err != nil {
		return nil, fmt.Errorf("configuration web.search: %w", err)
	}
	return o, nil
}

// sessionWebTools are the web tools of a session without a piece when
// config.yaml says web.sessions (docs/web-tools.md), behind the same
// network guard as pieces'; a refused destination is broadcast as a
// status line (the call fails with firewall_block). None otherwise.
func (h *Host) sessionWebTools(root *workspace.Root, rt *atomic.Pointer[runtime.Runtime]) ([]tool.Tool, error) {
	if !h.cfg.Web.Sessions {
		return nil, nil
	}
	o, err := WebTools(h.cfg, h.getenv)
	if err != nil {
		return nil, err
	}
	o.OnBlock = func(b *netguard.BlockedError) {
		if r := rt.Load(); r != nil {
			r.Broadcast(protocol.Status{Message: tool.BlockedLine(b)})
		}
	}
	return tool.WebSet(root, *o), nil
}
