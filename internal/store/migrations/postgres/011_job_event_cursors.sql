-- The event bus's publish cursor of each job's log (docs/events.md,
-- "Platform events"): the seq of the job's last event JetStream
-- acknowledged, shared by every serve and worker process of the store, so
-- that a process started without its data directory (a new worker machine,
-- a container) does not publish again what another one published. It only
-- moves forward, and goes with its job.
CREATE TABLE job_event_cursors (
    job_id bigint PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    seq    bigint NOT NULL
);
