-- Which `maestro serve` owns each live session of the HTTP attach API
-- (docs/scale-out.md, "Live sessions"): the owner's instance id and the
-- address other serve processes proxy to, its heartbeat (refreshed for all
-- its sessions at once), and when and why the session ended. A session
-- whose owner stopped heartbeating is ended by any other serve.
CREATE TABLE live_sessions (
    id           text PRIMARY KEY,
    instance     text NOT NULL,
    address      text NOT NULL,
    created_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    ended_at     timestamptz,
    end_reason   text NOT NULL DEFAULT ''
);

-- The heartbeat of an instance and the sweep of stale owners read the
-- sessions that have not ended.
CREATE INDEX live_sessions_open ON live_sessions (instance, heartbeat_at) WHERE ended_at IS NULL;
