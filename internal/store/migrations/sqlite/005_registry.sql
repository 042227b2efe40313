-- What serve's users register through the API for their tasks
-- (docs/api.md, "MCP servers, SSH connections, skills"). Each record is its
-- key, its owner and its definition as a JSON document (spec) the store
-- validates before writing; credentials inside it are sealed values
-- (AES-256-GCM under MAESTRO_ENCRYPTION_KEY), never clear text.
CREATE TABLE mcp_servers (
    name       TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    spec       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE ssh_connections (
    name       TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    spec       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- Who besides its owner may use a connection.
CREATE TABLE ssh_connection_grants (
    connection_id TEXT NOT NULL REFERENCES ssh_connections (name) ON DELETE CASCADE,
    grantee_kind  TEXT NOT NULL CHECK (grantee_kind IN ('user', 'team')),
    grantee       TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (connection_id, grantee_kind, grantee)
) WITHOUT ROWID;

CREATE TABLE skills (
    name       TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    spec       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
