-- The task list shows each task's executor, model or agent CLI, and cost
-- (GET /api/v1/tasks). They are in the job's event log (the protocol's
-- ready and response_end, the engine's movement_started), and reading the
-- log for every row of a page would cost a scan per task. jobs keeps a
-- copy, maintained by the triggers below as the events are appended, so a
-- page reads them with the latest job it already joins:
--   executor  the latest ready's executor_type ("live" or "replay");
--   model     the latest ready's provider/model;
--   agent     the agent CLI of the latest movement that ran on one;
--   cost_usd  the sum of every response_end's usage.total_cost_usd (all
--             attempts: what the job spent).
ALTER TABLE jobs ADD COLUMN executor TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN model TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN agent TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;

UPDATE jobs SET
    cost_usd = COALESCE((SELECT sum(json_extract(e.data, '$.usage.total_cost_usd')) FROM job_events e
        WHERE e.job_id = jobs.id AND e.type = 'protocol' AND json_extract(e.data, '$.type') = 'response_end'
            AND json_type(e.data, '$.usage.total_cost_usd') IN ('integer', 'real')), 0),
    executor = COALESCE((SELECT json_extract(e.data, '$.executor_type') FROM job_events e
        WHERE e.job_id = jobs.id AND e.type = 'protocol' AND json_extract(e.data, '$.type') = 'ready'
        ORDER BY e.seq DESC LIMIT 1), ''),
    model = COALESCE((SELECT trim(COALESCE(json_extract(e.data, '$.provider'), '') || '/' || COALESCE(json_extract(e.data, '$.model'), ''), '/')
        FROM job_events e WHERE e.job_id = jobs.id AND e.type = 'protocol' AND json_extract(e.data, '$.type') = 'ready'
        ORDER BY e.seq DESC LIMIT 1), ''),
    agent = COALESCE((SELECT json_extract(e.data, '$.data.agent') FROM job_events e
        WHERE e.job_id = jobs.id AND e.type = 'run_event' AND json_extract(e.data, '$.kind') = 'movement_started'
            AND COALESCE(json_extract(e.data, '$.data.agent'), '') <> ''
        ORDER BY e.seq DESC LIMIT 1), '');

CREATE TRIGGER job_events_ready AFTER INSERT ON job_events
WHEN NEW.type = 'protocol' AND json_extract(NEW.data, '$.type') = 'ready'
BEGIN
    UPDATE jobs SET executor = COALESCE(json_extract(NEW.data, '$.executor_type'), ''),
        model = trim(COALESCE(json_extract(NEW.data, '$.provider'), '') || '/' || COALESCE(json_extract(NEW.data, '$.model'), ''), '/')
    WHERE id = NEW.job_id;
END;

CREATE TRIGGER job_events_cost AFTER INSERT ON job_events
WHEN NEW.type = 'protocol' AND json_extract(NEW.data, '$.type') = 'response_end'
    AND json_type(NEW.data, '$.usage.total_cost_usd') IN ('integer', 'real')
BEGIN
    UPDATE jobs SET cost_usd = cost_usd + json_extract(NEW.data, '$.usage.total_cost_usd') WHERE id = NEW.job_id;
END;

CREATE TRIGGER job_events_agent AFTER INSERT ON job_events
WHEN NEW.type = 'run_event' AND json_extract(NEW.data, '$.kind') = 'movement_started'
    AND COALESCE(json_extract(NEW.data, '$.data.agent'), '') <> ''
BEGIN
    UPDATE jobs SET agent = json_extract(NEW.data, '$.data.agent') WHERE id = NEW.job_id;
END;
