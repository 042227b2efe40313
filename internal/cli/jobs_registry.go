package cli

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/host"
	"github.com/maestro-run/maestro/internal/mcp"
	"github.com/maestro-run/maestro/internal/secrets"
	"github.com/maestro-run/maestro/internal/skills"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/tool"
)

// jobRegistryParts is what jobs read from the records registered through
// serve's API (docs/api.md): SSH connections by the task's submitter,
// skills (the user's <home>/skills, then the store's) and MCP servers.
type jobRegistryParts struct {
	sshFor func(ctx context.Context, owner string) (map[string]tool.SSHConnection, error)
	skills *skills.Library
	// mcp finds a job's MCP servers: config.yaml's, then the registered.
	mcp mcp.Lookup
}

// jobRegistry builds the parts over st with the key of MAESTRO_ENCRYPTION_KEY
// (a malformed key is an error; no key leaves out the registered
// connections, whose secrets cannot be opened, with a note per job).
func jobRegistry(io *IOStreams, st store.Store, home string, configured map[string]tool.SSHConnection, servers map[string]config.MCPServer) (jobRegistryParts, error) {
	box, err := secrets.FromEnv(io.Getenv)
	if err != nil {
		return jobRegistryParts{}, err
	}
	return jobRegistryParts{
		sshFor: func(ctx context.Context, owner string) (map[string]tool.SSHConnection, error) {
			conns, skipped, err := host.SSHConnectionsFor(ctx, st, box, configured, owner)
			for _, e := range skipped {
				fmt.Fprintf(io.ErrOut, "maestro: SSH connection left out of a job of %s: %v\n", owner, e)
			}
			return conns, err
		},
		skills: &skills.Library{Dirs: []string{filepath.Join(home, skills.Dir)}, Store: st},
		mcp:    host.MCPLookup(servers, st, box),
	}, nil
}
