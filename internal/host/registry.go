package host

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"golang.org/x/crypto/ssh"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/mcp"
	"github.com/maestro-run/maestro/internal/secrets"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/tool"
)

// RegistryStore is the part of the store the runtime reads the records
// registered through serve's API from (docs/api.md).
type RegistryStore interface {
	ListMCPServers(ctx context.Context) ([]store.MCPServerRecord, error)
	ListSSHConnections(ctx context.Context) ([]store.SSHConnectionRecord, error)
	ListSSHGrants(ctx context.Context, connectionID string) ([]store.SSHGrant, error)
}

// StoredMCPServers returns the MCP servers registered through the API as
// configured servers, their env and header values opened with box, by
// slug. Sessions and jobs find them through MCPLookup.
func StoredMCPServers(ctx context.Context, st RegistryStore, box *secrets.Box) (map[string]config.MCPServer, error) {
	recs, err := st.ListMCPServers(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the registered MCP servers: %w", err)
	}
	out := make(map[string]config.MCPServer, len(recs))
	for _, r := range recs {
		if out[r.Slug], err = openMCPServer(box, r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// MCPLookup finds a server in config.yaml's mcp_servers (configured)
// first, the operator's word winning a slug both declare, then among those
// registered through the API; only the server asked for is opened, so one
// record sealed under a lost key does not hide the others.
func MCPLookup(configured map[string]config.MCPServer, st RegistryStore, box *secrets.Box) mcp.Lookup {
	return func(ctx context.Context, slug string) (config.MCPServer, bool, error) {
		if s, ok := configured[slug]; ok {
			return s, true, nil
		}
		recs, err := st.ListMCPServers(ctx)
		if err != nil {
			return config.MCPServer{}, false, fmt.Errorf("read the registered MCP servers: %w", err)
		}
		for _, r := range recs {
			if r.Slug == slug {
				s, err := openMCPServer(box, r)
				return s, err == nil, err
			}
		}
		return config.MCPServer{}, false, nil
	}
}

func openMCPServer(box *secrets.Box, r store.MCPServerRecord) (config.MCPServer, error) {
	env, err := openValues(box, r.Slug, "env", r.Env)
	if err != nil {
		return config.MCPServer{}, err
	}
	headers, err := openValues(box, r.Slug, "headers", r.Headers)
	if err != nil {
		return config.MCPServer{}, err
	}
	return config.MCPServer{Command: r.Command, Args: r.Args, Env: env, URL: r.URL, Headers: headers, Timeout: r.Timeout}, nil
}

func openValues(box *secrets.Box, slug, field string, sealed map[string]string) (map[string]string, error) {
	if len(sealed) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(sealed))
	for _, k := range slices.Sorted(maps.Keys(sealed)) {
		v, err := box.OpenString(sealed[k], store.MCPSecretPurpose(slug, field, k))
		if err != nil {
			return nil, fmt.Errorf("registered MCP server %s, %s.%s: %w", slug, field, k, err)
		}
		out[k] = v
	}
	return out, nil
}

// SSHConnectionsFor returns the SSH connections a task submitted by user
// may use: config.yaml's (configured, for every task), then those
// registered through the API that user owns or was granted (an id both
// have keeps the configuration's). A registered connection that cannot be
// opened (no key, another key, a malformed host key) is left out and
// reported through skipped.
func SSHConnectionsFor(ctx context.Context, st RegistryStore, box *secrets.Box, configured map[string]tool.SSHConnection, user string) (conns map[string]tool.SSHConnection, skipped []error, err error) {
	conns = maps.Clone(configured)
	if conns == nil {
		conns = map[string]tool.SSHConnection{}
	}
	recs, err := st.ListSSHConnections(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read the registered SSH connections: %w", err)
	}
	grants, err := st.ListSSHGrants(ctx, "")
	if err != nil {
		return nil, nil, fmt.Errorf("read the SSH connection grants: %w", err)
	}
	for _, r := range recs {
		if _, ok := conns[r.ID]; ok || !store.MayUseSSH(r, grants, user) {
			continue
		}
		c, err := storedSSH(r, box)
		if err != nil {
			skipped = append(skipped, err)
			continue
		}
		conns[r.ID] = c
	}
	return conns, skipped, nil
}

// storedSSH opens a registered connection.
func storedSSH(r store.SSHConnectionRecord, box *secrets.Box) (tool.SSHConnection, error) {
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(r.HostKey))
	if err != nil {
		return tool.SSHConnection{}, fmt.Errorf("registered SSH connection %s: host_key: %w", r.ID, err)
	}
	secret, err := box.OpenString(r.Secret, store.SSHSecretPurpose(r.ID, r.Auth))
	if err != nil {
		return tool.SSHConnection{}, fmt.Errorf("registered SSH connection %s: %w", r.ID, err)
	}
	c := tool.SSHConnection{ID: r.ID, Host: r.Host, Port: r.Port, User: r.User, HostKey: hostKey}
	if r.Auth == store.SSHAuthPassword {
		c.Password = secret
		return c, nil
	}
	if c.Signer, err = ssh.ParsePrivateKey([]byte(secret)); err != nil {
		return tool.SSHConnection{}, fmt.Errorf("registered SSH connection %s: private key: %w", r.ID, err)
	}
	return c, nil
}
