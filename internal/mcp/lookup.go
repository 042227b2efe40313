package mcp

import (
	"context"
	"fmt"

	"github.com/maestro-run/maestro/internal/config"
)

// Lookup resolves an MCP server's slug to its configuration: found is
// false for a slug no one declared. The configuration file's servers are
// ConfigLookup; a caller with other sources of servers (servers
// registered through serve's API) chains its own in front of it.
type Lookup func(ctx context.Context, slug string) (srv config.MCPServer, found bool, err error)

// ConfigLookup looks servers up in config.yaml's mcp_servers.
func ConfigLookup(servers map[string]config.MCPServer) Lookup {
	return func(_ context.Context, slug string) (config.MCPServer, bool, error) {
		s, ok := servers[slug]
		return s, ok, nil
	}
}

// Resolve returns the configurations of the servers slugs names, failing
// with a *MissingError naming the first that lookup does not know.
func Resolve(ctx context.Context, lookup Lookup, slugs []string) (map[string]config.MCPServer, error) {
	out := make(map[string]config.MCPServer, len(slugs))
	for _, slug := range slugs {
		if lookup == nil {
			return nil, &MissingError{Server: slug}
		}
		s, ok, err := lookup(ctx, slug)
		if err != nil {
			return nil, fmt.Errorf("look up the MCP server %q: %w", slug, err)
		}
		if !ok {
			return nil, &MissingError{Server: slug}
		}
		out[slug] = s
	}
	return out, nil
}
