-- What serve's users register through the API for their tasks
-- (docs/api.md, "MCP servers, SSH connections, skills"). Each record is its
-- key, its owner and its definition as a JSON document (spec) the store
-- validates before writing; credentials inside it are sealed values
-- (AES-256-GCM under MAESTRO_ENCRYPTION_KEY), never clear text.
CREATE TABLE mcp_servers (
    name       text PRIMARY KEY,
    owner      text NOT NULL,
    spec       text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE ssh_connections (
    name       text PRIMARY KEY,
    owner      text NOT NULL,
    spec       text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- Who besides its owner may use a connection.
CREATE TABLE ssh_connection_grants (
    connection_id text NOT NULL REFERENCES ssh_connections (name) ON DELETE CASCADE,
    grantee_kind  text NOT NULL CHECK (grantee_kind IN ('user', 'team')),
    grantee       text NOT NULL,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (connection_id, grantee_kind, grantee)
);

CREATE TABLE skills (
    name       text PRIMARY KEY,
    owner      text NOT NULL,
    spec       text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
