-- What the serve and worker processes sharing this database must agree on
-- (docs/scale-out.md, "One artifact location"): one row per setting, the
-- first process to start records its value, a process that disagrees
-- refuses to start. Values are credential-free (s3://bucket/prefix).
CREATE TABLE settings (
    key        text PRIMARY KEY,
    value      text NOT NULL,
    updated_by text NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL
);

-- The serve and worker processes running on this database, one row per
-- --name (docs/scale-out.md, "Process names"): a process records itself
-- at start under a fresh instance id (with its host name and pid, which
-- tell a crashed predecessor on the same machine), heartbeats, and marks
-- its row stopped when it stops. A name is taken while its row is running and
-- heartbeated; a second process under it refuses to start.
CREATE TABLE processes (
    name         text PRIMARY KEY,
    kind         text NOT NULL,
    instance     text NOT NULL,
    address      text NOT NULL DEFAULT '',
    host         text NOT NULL DEFAULT '',
    pid          bigint NOT NULL DEFAULT 0,
    artifacts    text NOT NULL DEFAULT '',
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    stopped_at   timestamptz
);
