-- Maestro durable store, PostgreSQL dialect. JSON columns are json (kept
-- byte for byte, unlike jsonb) so events read back exactly as appended.

CREATE TABLE schedules (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text        NOT NULL UNIQUE,
    cron_expr     text        NOT NULL,
    enabled       boolean     NOT NULL DEFAULT true,
    owner         text        NOT NULL DEFAULT '',
    title         text        NOT NULL,
    body          text        NOT NULL DEFAULT '',
    piece         text        NOT NULL DEFAULT '',
    profile       text        NOT NULL DEFAULT '',
    task_class    text        NOT NULL DEFAULT '',
    next_run_at   timestamptz NOT NULL,
    last_fired_at timestamptz,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE enabled;

CREATE TABLE tasks (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner       text        NOT NULL DEFAULT '',
    title       text        NOT NULL,
    body        text        NOT NULL DEFAULT '',
    piece       text        NOT NULL DEFAULT '',
    schedule_id bigint      REFERENCES schedules (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX tasks_owner ON tasks (owner, id);
CREATE INDEX tasks_schedule ON tasks (schedule_id) WHERE schedule_id IS NOT NULL;

CREATE TABLE task_comments (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id     bigint      NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    author_kind text        NOT NULL CHECK (author_kind IN ('user', 'agent', 'system')),
    author      text        NOT NULL DEFAULT '',
    body        text        NOT NULL,
    created_at  timestamptz NOT NULL
);
CREATE INDEX task_comments_task ON task_comments (task_id, id);

CREATE TABLE jobs (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id          bigint      REFERENCES tasks (id) ON DELETE CASCADE,
    parent_job_id    bigint      REFERENCES jobs (id) ON DELETE CASCADE,
    piece            text        NOT NULL DEFAULT '',
    state            text        NOT NULL CHECK (state IN ('queued', 'dispatching', 'running', 'succeeded',
                                     'failed', 'aborted', 'waiting_human', 'waiting_subtasks', 'cancelled')),
    profile          text        NOT NULL DEFAULT '',
    task_class       text        NOT NULL DEFAULT '',
    priority         integer     NOT NULL DEFAULT 0,
    payload          json        NOT NULL DEFAULT '{}',
    attempt          integer     NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts     integer     NOT NULL CHECK (max_attempts >= 1),
    scheduled_at     timestamptz NOT NULL,
    attempted_at     timestamptz,
    lease_owner      text,
    lease_expires_at timestamptz,
    heartbeat_at     timestamptz,
    movement         text        NOT NULL DEFAULT '',
    checkpoint       json,
    wait_reason      text        NOT NULL DEFAULT '',
    result           text        NOT NULL DEFAULT '',
    error            text        NOT NULL DEFAULT '',
    event_seq        bigint      NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    finished_at      timestamptz,
    CHECK ((state IN ('dispatching', 'running')) = (lease_expires_at IS NOT NULL))
);
CREATE INDEX jobs_claim ON jobs (priority DESC, scheduled_at, id) WHERE state = 'queued';
CREATE INDEX jobs_lease ON jobs (lease_expires_at) WHERE state IN ('dispatching', 'running');
CREATE INDEX jobs_task ON jobs (task_id, id) WHERE task_id IS NOT NULL;
CREATE INDEX jobs_parent ON jobs (parent_job_id) WHERE parent_job_id IS NOT NULL;
CREATE INDEX jobs_state ON jobs (state);

CREATE TABLE job_events (
    job_id     bigint      NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq        bigint      NOT NULL CHECK (seq >= 1),
    attempt    integer     NOT NULL,
    type       text        NOT NULL,
    data       json        NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (job_id, seq)
);

CREATE TABLE audit_log (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    actor      text        NOT NULL,
    action     text        NOT NULL,
    target     text        NOT NULL DEFAULT '',
    details    json        NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL
);
CREATE INDEX audit_log_target ON audit_log (target, id);

CREATE TABLE pieces (
    name       text        PRIMARY KEY,
    yaml       text        NOT NULL,
    version    bigint      NOT NULL CHECK (version >= 1),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE sessions (
    id            text        PRIMARY KEY,
    job_id        bigint      REFERENCES jobs (id) ON DELETE SET NULL,
    executor_type text        NOT NULL DEFAULT '',
    provider      text        NOT NULL DEFAULT '',
    model         text        NOT NULL DEFAULT '',
    workspace     text        NOT NULL DEFAULT '',
    title         text        NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);
CREATE INDEX sessions_job ON sessions (job_id) WHERE job_id IS NOT NULL;
CREATE INDEX sessions_created ON sessions (created_at);

CREATE TABLE leaders (
    name       text        PRIMARY KEY,
    owner      text        NOT NULL,
    elected_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
