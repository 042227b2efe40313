-- A job's run state (docs/queue.md, "Run state in the store"): the engine's
-- state document of the job's run (piece position, movement history,
-- lessons, question and answers, subtask tree) and the conversation of the
-- movement in progress, so that any worker claiming the job resumes it,
-- whatever is on its own disk. data is opaque to the store (the queue keeps
-- it gzip-compressed); attempt is the attempt that wrote it. Every write is
-- fenced by the job's lease.
CREATE TABLE job_run_state (
    job_id     INTEGER PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    attempt    INTEGER NOT NULL,
    movement   TEXT    NOT NULL DEFAULT '',
    data       BLOB    NOT NULL,
    updated_at INTEGER NOT NULL
);
