-- Maestro durable store, SQLite dialect. Times are INTEGER microseconds
-- since the Unix epoch (UTC); JSON columns hold JSON text.

CREATE TABLE schedules (
    id            INTEGER PRIMARY KEY,
    name          TEXT    NOT NULL UNIQUE,
    cron_expr     TEXT    NOT NULL,
    enabled       INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    owner         TEXT    NOT NULL DEFAULT '',
    title         TEXT    NOT NULL,
    body          TEXT    NOT NULL DEFAULT '',
    piece         TEXT    NOT NULL DEFAULT '',
    profile       TEXT    NOT NULL DEFAULT '',
    task_class    TEXT    NOT NULL DEFAULT '',
    next_run_at   INTEGER NOT NULL,
    last_fired_at INTEGER,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE enabled = 1;

CREATE TABLE tasks (
    id          INTEGER PRIMARY KEY,
    owner       TEXT    NOT NULL DEFAULT '',
    title       TEXT    NOT NULL,
    body        TEXT    NOT NULL DEFAULT '',
    piece       TEXT    NOT NULL DEFAULT '',
    schedule_id INTEGER REFERENCES schedules (id) ON DELETE SET NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX tasks_owner ON tasks (owner, id);
CREATE INDEX tasks_schedule ON tasks (schedule_id) WHERE schedule_id IS NOT NULL;

CREATE TABLE task_comments (
    id          INTEGER PRIMARY KEY,
    task_id     INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    author_kind TEXT    NOT NULL CHECK (author_kind IN ('user', 'agent', 'system')),
    author      TEXT    NOT NULL DEFAULT '',
    body        TEXT    NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX task_comments_task ON task_comments (task_id, id);

CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY,
    task_id          INTEGER REFERENCES tasks (id) ON DELETE CASCADE,
    parent_job_id    INTEGER REFERENCES jobs (id) ON DELETE CASCADE,
    piece            TEXT    NOT NULL DEFAULT '',
    state            TEXT    NOT NULL CHECK (state IN ('queued', 'dispatching', 'running', 'succeeded',
                         'failed', 'aborted', 'waiting_human', 'waiting_subtasks', 'cancelled')),
    profile          TEXT    NOT NULL DEFAULT '',
    task_class       TEXT    NOT NULL DEFAULT '',
    priority         INTEGER NOT NULL DEFAULT 0,
    payload          TEXT    NOT NULL DEFAULT '{}',
    attempt          INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),
    scheduled_at     INTEGER NOT NULL,
    attempted_at     INTEGER,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    heartbeat_at     INTEGER,
    movement         TEXT    NOT NULL DEFAULT '',
    checkpoint       TEXT,
    wait_reason      TEXT    NOT NULL DEFAULT '',
    result           TEXT    NOT NULL DEFAULT '',
    error            TEXT    NOT NULL DEFAULT '',
    event_seq        INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    finished_at      INTEGER,
    CHECK ((state IN ('dispatching', 'running')) = (lease_expires_at IS NOT NULL))
);
CREATE INDEX jobs_claim ON jobs (priority DESC, scheduled_at, id) WHERE state = 'queued';
CREATE INDEX jobs_lease ON jobs (lease_expires_at) WHERE state IN ('dispatching', 'running');
CREATE INDEX jobs_task ON jobs (task_id, id) WHERE task_id IS NOT NULL;
CREATE INDEX jobs_parent ON jobs (parent_job_id) WHERE parent_job_id IS NOT NULL;
CREATE INDEX jobs_state ON jobs (state);

CREATE TABLE job_events (
    job_id     INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL CHECK (seq >= 1),
    attempt    INTEGER NOT NULL,
    type       TEXT    NOT NULL,
    data       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;

CREATE TABLE audit_log (
    id         INTEGER PRIMARY KEY,
    actor      TEXT    NOT NULL,
    action     TEXT    NOT NULL,
    target     TEXT    NOT NULL DEFAULT '',
    details    TEXT    NOT NULL DEFAULT '{}',
    created_at INTEGER NOT NULL
);
CREATE INDEX audit_log_target ON audit_log (target, id);

CREATE TABLE pieces (
    name       TEXT    PRIMARY KEY,
    yaml       TEXT    NOT NULL,
    version    INTEGER NOT NULL CHECK (version >= 1),
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE sessions (
    id            TEXT    PRIMARY KEY,
    job_id        INTEGER REFERENCES jobs (id) ON DELETE SET NULL,
    executor_type TEXT    NOT NULL DEFAULT '',
    provider      TEXT    NOT NULL DEFAULT '',
    model         TEXT    NOT NULL DEFAULT '',
    workspace     TEXT    NOT NULL DEFAULT '',
    title         TEXT    NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX sessions_job ON sessions (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX sessions_created ON sessions (created_at);

CREATE TABLE leaders (
    name       TEXT    PRIMARY KEY,
    owner      TEXT    NOT NULL,
    elected_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
