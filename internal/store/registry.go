package store

import (
	"context"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/secrets"
)

// Registry holds what `maestro serve` users register through the API for
// their tasks: MCP servers, SSH connections with their grants, and skills.
// Credentials arrive sealed (package secrets): the store refuses an MCP
// env or header value, or an SSH key or password, that is not a sealed
// value, so none is ever written in clear.
type Registry interface {
	// CreateMCPServer stores a server; ErrConflict if the slug is taken.
	CreateMCPServer(ctx context.Context, s MCPServerRecord) (MCPServerRecord, error)
	// UpdateMCPServer replaces a server's definition (its owner and
	// creation time are kept); ErrNotFound if there is none.
	UpdateMCPServer(ctx context.Context, s MCPServerRecord) (MCPServerRecord, error)
	GetMCPServer(ctx context.Context, slug string) (MCPServerRecord, error)
	// ListMCPServers returns every server by slug.
	ListMCPServers(ctx context.Context) ([]MCPServerRecord, error)
	DeleteMCPServer(ctx context.Context, slug string) error

	// CreateSSHConnection stores a connection; ErrConflict if the id is
	// taken.
	CreateSSHConnection(ctx context.Context, c SSHConnectionRecord) (SSHConnectionRecord, error)
	// UpdateSSHConnection replaces a connection (owner and creation time
	// kept); ErrNotFound if there is none.
	UpdateSSHConnection(ctx context.Context, c SSHConnectionRecord) (SSHConnectionRecord, error)
	GetSSHConnection(ctx context.Context, id string) (SSHConnectionRecord, error)
	// ListSSHConnections returns every connection by id.
	ListSSHConnections(ctx context.Context) ([]SSHConnectionRecord, error)
	// DeleteSSHConnection removes a connection and its grants.
	DeleteSSHConnection(ctx context.Context, id string) error
	// GrantSSHConnection lets a user or team use a connection (granting
	// twice is harmless); ErrNotFound if the connection does not exist.
	GrantSSHConnection(ctx context.Context, g SSHGrant) (SSHGrant, error)
	// RevokeSSHConnection removes a grant; ErrNotFound if there is none.
	RevokeSSHConnection(ctx context.Context, g SSHGrant) error
	// ListSSHGrants returns the grants of one connection, or of every
	// connection when connectionID is "", by connection then grantee.
	ListSSHGrants(ctx context.Context, connectionID string) ([]SSHGrant, error)

	// CreateSkill stores a skill; ErrConflict if the name is taken.
	CreateSkill(ctx context.Context, s Skill) (Skill, error)
	GetSkill(ctx context.Context, name string) (Skill, error)
	// ListSkills returns every skill by name.
	ListSkills(ctx context.Context) ([]Skill, error)
	DeleteSkill(ctx context.Context, name string) error
}

// MCP server transports.
const (
	MCPStdio = "stdio"
	MCPHTTP  = "http"
)

// MCPServerRecord is an MCP server registered through the API: a command
// speaking MCP over stdio, or a streamable HTTP endpoint. The values of
// Env and Headers are sealed (secrets.Box.Seal); their names are not.
type MCPServerRecord struct {
	// Slug is the <server> of mcp__<server>__<tool>.
	Slug      string            `json:"slug"`
	Owner     string            `json:"owner"`
	Transport string            `json:"transport"`
	Command   string            `json:"command,omitempty"`
	Args      []string          `json:"args,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	URL       string            `json:"url,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	// Timeout bounds each tool call, in seconds (0: the default).
	Timeout   int       `json:"timeout,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SSH connection authentication kinds.
const (
	SSHAuthKey      = "key"
	SSHAuthPassword = "password"
)

// SSHConnectionRecord is an SSH connection registered through the API, for
// SshExec, SshUpload and SshDownload. Secret is the sealed private key
// (Auth "key") or password (Auth "password").
type SSHConnectionRecord struct {
	// ID is what a movement's allowed_ssh_connections names.
	ID    string `json:"id"`
	Owner string `json:"owner"`
	Host  string `json:"host"`
	Port  int    `json:"port"`
	User  string `json:"user"`
	// HostKey is the server's pinned public key in authorized_keys form
	// ("ssh-ed25519 AAAA…"): any other key is refused.
	HostKey   string    `json:"host_key"`
	Auth      string    `json:"auth"`
	Secret    string    `json:"secret"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Grantee kinds of an SSHGrant.
const (
	GranteeUser = "user"
	GranteeTeam = "team"
)

// SSHGrant lets a user or a team use a connection they do not own.
type SSHGrant struct {
	ConnectionID string    `json:"connection_id"`
	GranteeKind  string    `json:"grantee_kind"`
	Grantee      string    `json:"grantee"`
	CreatedAt    time.Time `json:"created_at"`
}

// Skill is a skill stored by the server: a SKILL.md and the files beside
// it, by relative slash path.
type Skill struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Owner       string            `json:"owner"`
	Files       map[string]string `json:"files"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
}

// Limits of registry records.
const (
	// MaxSkillBytes bounds a skill's files together.
	MaxSkillBytes = 4 << 20
	// MaxSkillFiles bounds a skill's file count.
	MaxSkillFiles = 200
	// MaxSecretBytes bounds one sealed value.
	MaxSecretBytes = 64 << 10
	// SkillFile is the file that names and describes a skill.
	SkillFile = "SKILL.md"
)

// mcpSlugRE is an MCP server slug (as in config.yaml's mcp_servers).
var mcpSlugRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// connIDRE is an SSH connection id as a piece's allowed_ssh_connections
// names it (docs/spec/seed-piece-schema.md): a UUID, or at least 8
// lowercase hex digits and hyphens.
var connIDRE = regexp.MustCompile(`^[0-9a-f-]{8,128}$`)

// sealed checks that every value is a sealed secret.
func sealed(field string, values map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(values)) {
		f := field + "." + k
		if err := label(f, k, true); err != nil {
			return err
		}
		if !secrets.IsSealed(values[k]) {
			return invalid(f, "expected a sealed value (the server seals secrets with MAESTRO_ENCRYPTION_KEY); a clear value is never stored")
		}
		if len(values[k]) > MaxSecretBytes {
			return invalid(f, "expected at most %d bytes, found %d", MaxSecretBytes, len(values[k]))
		}
	}
	return nil
}

// Validate checks a server definition.
func (s MCPServerRecord) Validate() error {
	switch {
	case !mcpSlugRE.MatchString(s.Slug):
		return invalid("slug", "expected 1-64 of a-z, 0-9, _ and -, found %q", clip(s.Slug))
	case strings.Contains(s.Slug, "__"):
		return invalid("slug", "must not contain __ (it separates server and tool in mcp__<server>__<tool>)")
	case strings.HasSuffix(s.Slug, "_"):
		return invalid("slug", "must not end in _ (mcp__%s__<tool> would read as server %s)", s.Slug, strings.TrimRight(s.Slug, "_"))
	case s.Timeout < 0:
		return invalid("timeout", "expected seconds ≥ 0, found %d", s.Timeout)
	}
	if err := label("owner", s.Owner, false); err != nil {
		return err
	}
	switch s.Transport {
	case MCPStdio:
		if err := text("command", s.Command, 4096, true); err != nil {
			return err
		}
		if s.URL != "" || len(s.Headers) > 0 {
			return invalid("url", "url and headers go with transport http, not stdio")
		}
		for i, a := range s.Args {
			if err := text(fmt.Sprintf("args[%d]", i), a, 4096, false); err != nil {
				return err
			}
		}
		return sealed("env", s.Env)
	case MCPHTTP:
		if err := label("url", s.URL, true); err != nil {
			return err
		}
		if !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
			return invalid("url", "expected an http:// or https:// URL, found %q", clip(s.URL))
		}
		if s.Command != "" || len(s.Args) > 0 || len(s.Env) > 0 {
			return invalid("command", "command, args and env go with transport stdio, not http")
		}
		return sealed("headers", s.Headers)
	}
	return invalid("transport", "expected %q or %q, found %q", MCPStdio, MCPHTTP, clip(s.Transport))
}

// ValidateSSHConnectionID checks a connection id.
func ValidateSSHConnectionID(id string) error {
	if !connIDRE.MatchString(id) {
		return invalid("id", "expected a connection id as allowed_ssh_connections names it: 8-128 lowercase hex digits and hyphens (a UUID), found %q", clip(id))
	}
	return nil
}

// Validate checks a connection.
func (c SSHConnectionRecord) Validate() error {
	if err := ValidateSSHConnectionID(c.ID); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"owner", c.Owner}, {"host", c.Host}, {"user", c.User}} {
		if err := label(f.name, f.v, f.name != "owner"); err != nil {
			return err
		}
	}
	if c.Port < 0 || c.Port > 65535 {
		return invalid("port", "expected 1-65535 (0: 22), found %d", c.Port)
	}
	if err := text("host_key", c.HostKey, 16<<10, true); err != nil {
		return err
	}
	if c.Auth != SSHAuthKey && c.Auth != SSHAuthPassword {
		return invalid("auth", "expected %q or %q, found %q", SSHAuthKey, SSHAuthPassword, clip(c.Auth))
	}
	return sealed("secret", map[string]string{c.Auth: c.Secret})
}

// Validate checks a grant.
func (g SSHGrant) Validate() error {
	if err := ValidateSSHConnectionID(g.ConnectionID); err != nil {
		return &FieldError{Field: "connection_id", Message: err.(*FieldError).Message}
	}
	if g.GranteeKind != GranteeUser && g.GranteeKind != GranteeTeam {
		return invalid("grantee_kind", "expected %q or %q, found %q", GranteeUser, GranteeTeam, clip(g.GranteeKind))
	}
	return label("grantee", g.Grantee, true)
}

// Validate checks a skill: its name, and files with relative slash paths
// (no "..", no absolute path) including SKILL.md.
func (s Skill) Validate() error {
	if err := ValidateName("name", s.Name); err != nil {
		return err
	}
	if err := text("description", s.Description, MaxTitleBytes, true); err != nil {
		return err
	}
	if err := label("owner", s.Owner, false); err != nil {
		return err
	}
	if _, ok := s.Files[SkillFile]; !ok {
		return invalid("files", "expected a %s (its front matter names and describes the skill)", SkillFile)
	}
	if len(s.Files) > MaxSkillFiles {
		return invalid("files", "expected at most %d files, found %d", MaxSkillFiles, len(s.Files))
	}
	total := 0
	for _, p := range slices.Sorted(maps.Keys(s.Files)) {
		f := "files." + p
		if p == "" || len(p) > 1024 || path.IsAbs(p) || path.Clean(p) != p || p == "." || strings.HasPrefix(p, "../") || p == ".." || strings.ContainsAny(p, "\\\x00") {
			return invalid(f, "expected a relative slash path without . or .. components")
		}
		total += len(s.Files[p])
		if err := text(f, s.Files[p], MaxSkillBytes, false); err != nil {
			return err
		}
	}
	if total > MaxSkillBytes {
		return invalid("files", "expected at most %d bytes in all, found %d", MaxSkillBytes, total)
	}
	return nil
}

// MCPSecretPurpose is what an MCP server's env or header value (field
// "env" or "headers", key its name) is sealed for: a value moved to
// another server or key does not open.
func MCPSecretPurpose(slug, field, key string) string {
	return "mcp_server/" + slug + "/" + field + "/" + key
}

// SSHSecretPurpose is what an SSH connection's key or password (auth) is
// sealed for.
func SSHSecretPurpose(id, auth string) string { return "ssh_connection/" + id + "/" + auth }

// MayUseSSH reports whether user owns c or was granted it by a user
// grant among grants. (Team grants are recorded; Maestro has no team
// membership yet, so they grant nobody.)
func MayUseSSH(c SSHConnectionRecord, grants []SSHGrant, user string) bool {
	if user == "" {
		return false
	}
	return c.Owner == user || slices.ContainsFunc(grants, func(g SSHGrant) bool {
		return g.ConnectionID == c.ID && g.GranteeKind == GranteeUser && g.Grantee == user
	})
}
