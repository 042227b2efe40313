package api

import (
	"time"

	"github.com/maestro-run/maestro/internal/store"
)

// Paths of the registry routes (docs/api.md, "MCP servers, SSH
// connections, skills").
const (
	// MCPServersPath lists and creates MCP servers; one is
	// MCPServersPath + "/{slug}".
	MCPServersPath = Prefix + "/mcp-servers"
	// SSHConnectionsPath lists and creates SSH connections; one is
	// SSHConnectionsPath + "/{id}", its grants SSHConnectionsPath +
	// "/{id}/grants".
	SSHConnectionsPath = Prefix + "/ssh-connections"
	// SkillsPath lists and creates skills; one is SkillsPath + "/{name}".
	SkillsPath = Prefix + "/skills"
)

// Redacted stands for a secret in answers: secrets are write-only. Sent
// back in an update (an MCP env or header value), it keeps the stored
// value.
const Redacted = "***"

// Audit actions of the registry routes (no details).
const (
	ActionMCPServerCreate     = "mcp_server.create"
	ActionMCPServerUpdate     = "mcp_server.update"
	ActionMCPServerDelete     = "mcp_server.delete"
	ActionSSHConnectionCreate = "ssh_connection.create"
	ActionSSHConnectionUpdate = "ssh_connection.update"
	ActionSSHConnectionDelete = "ssh_connection.delete"
	ActionSSHConnectionGrant  = "ssh_connection.grant"
	ActionSSHConnectionRevoke = "ssh_connection.revoke"
	ActionSkillCreate         = "skill.create"
	ActionSkillDelete         = "skill.delete"
)

// MCPServerRequest creates (POST, with Slug) or replaces (PUT, the slug
// in the path) an MCP server: transport "stdio" with command, args and
// env, or "http" with url and headers. Env and header values are secrets:
// sealed at rest, answered as "***".
type MCPServerRequest struct {
	Slug      string            `json:"slug,omitempty"`
	Transport string            `json:"transport"`
	Command   string            `json:"command,omitempty"`
	Args      []string          `json:"args,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	URL       string            `json:"url,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	Timeout   int               `json:"timeout,omitempty"`
}

// MCPServer answers the MCP server routes: the stored record with its env
// and header values answered as "***" (secrets are write-only).
type MCPServer store.MCPServerRecord

// MCPServerList answers GET /api/v1/mcp-servers, by slug.
type MCPServerList struct {
	Servers []MCPServer `json:"servers"`
}

// SSHConnectionRequest creates (POST, with ID) or replaces (PUT, the id in
// the path) an SSH connection. HostKey is the server's public key as in
// known_hosts/authorized_keys ("ssh-ed25519 AAAA…"), pinned: no trust on
// first use. One of PrivateKey (OpenSSH or PEM, unencrypted) and Password
// is required on creation; on a PUT, neither keeps the stored one.
type SSHConnectionRequest struct {
	ID         string `json:"id,omitempty"`
	Host       string `json:"host"`
	Port       int    `json:"port,omitempty"`
	User       string `json:"user"`
	HostKey    string `json:"host_key"`
	PrivateKey string `json:"private_key,omitempty"`
	Password   string `json:"password,omitempty"`
}

// SSHConnection answers the SSH connection routes: the stored record
// whose secret is never returned (Secret is "***"; Auth says which kind is
// stored), whether it has one, and its grants.
type SSHConnection struct {
	store.SSHConnectionRecord
	HasSecret bool             `json:"has_secret"`
	Grants    []store.SSHGrant `json:"grants"`
}

// SSHConnectionList answers GET /api/v1/ssh-connections: the connections
// the caller owns or was granted, by id.
type SSHConnectionList struct {
	Connections []SSHConnection `json:"connections"`
}

// SSHGrantRequest grants a connection to a user or a team
// (POST /api/v1/ssh-connections/{id}/grants).
type SSHGrantRequest struct {
	GranteeKind string `json:"grantee_kind"`
	Grantee     string `json:"grantee"`
}

// SSHGrantList answers GET /api/v1/ssh-connections/{id}/grants.
type SSHGrantList struct {
	Grants []store.SSHGrant `json:"grants"`
}

// SkillRequest creates a skill from its files by relative slash path; its
// SKILL.md's front matter gives the name and the description.
type SkillRequest struct {
	Files map[string]string `json:"files"`
}

// SkillSummary is one entry of GET /api/v1/skills.
type SkillSummary struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Owner       string    `json:"owner"`
	Files       []string  `json:"files"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// SkillList answers GET /api/v1/skills, by name.
type SkillList struct {
	Skills []SkillSummary `json:"skills"`
}

// SkillResponse answers GET and POST on one skill: its files in full.
type SkillResponse struct {
	Skill store.Skill `json:"skill"`
}
