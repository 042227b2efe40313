-- What the serve and worker processes sharing this database must agree on
-- (docs/scale-out.md, "One artifact location"): one row per setting, the
-- first process to start records its value, a process that disagrees
-- refuses to start. Values are credential-free (s3://bucket/prefix).
CREATE TABLE settings (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    updated_by TEXT NOT NULL DEFAULT '',
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- The serve and worker processes running on this database, one row per
-- --name (docs/scale-out.md, "Process names"): a process records itself
-- at start under a fresh instance id (with its host name and pid, which
-- tell a crashed predecessor on the same machine), heartbeats, and marks
-- its row stopped when it stops. A name is taken while its row is running and
-- heartbeated; a second process under it refuses to start.
CREATE TABLE processes (
    name         TEXT PRIMARY KEY,
    kind         TEXT NOT NULL,
    instance     TEXT NOT NULL,
    address      TEXT NOT NULL DEFAULT '',
    host         TEXT NOT NULL DEFAULT '',
    pid          INTEGER NOT NULL DEFAULT 0,
    artifacts    TEXT NOT NULL DEFAULT '',
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    stopped_at   INTEGER
) WITHOUT ROWID;
