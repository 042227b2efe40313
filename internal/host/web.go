package host

import (
	"cmp"
	"fmt"
	"time"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/netguard"
	"github.com/maestro-run/maestro/internal/tool"
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
