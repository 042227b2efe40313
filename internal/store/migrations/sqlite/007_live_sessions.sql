-- Which `maestro serve` owns each live session of the HTTP attach API
-- (docs/scale-out.md, "Live sessions"): the owner's instance id and the
-- address other serve processes proxy to, its heartbeat (refreshed for all
-- its sessions at once), and when and why the session ended. A session
-- whose owner stopped heartbeating is ended by any other serve.
CREATE TABLE live_sessions (
    id           TEXT PRIMARY KEY,
    instance     TEXT NOT NULL,
    address      TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    ended_at     INTEGER,
    end_reason   TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;

-- The heartbeat of an instance and the sweep of stale owners read the
-- sessions that have not ended.
CREATE INDEX live_sessions_open ON live_sessions (instance, heartbeat_at) WHERE ended_at IS NULL;
