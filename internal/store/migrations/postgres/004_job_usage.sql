-- The task list shows each task's executor, model or agent CLI, and cost
-- (GET /api/v1/tasks). They are in the job's event log (the protocol's
-- ready and response_end, the engine's movement_started), and reading the
-- log for every row of a page would cost a scan per task. jobs keeps a
-- copy, maintained by the trigger below as the events are appended, so a
-- page reads them with the latest job it already joins:
--   executor  the latest ready's executor_type ("live" or "replay");
--   model     the latest ready's provider/model;
--   agent     the agent CLI of the latest movement that ran on one;
--   cost_usd  the sum of every response_end's usage.total_cost_usd (all
--             attempts: what the job spent).
ALTER TABLE jobs ADD COLUMN executor text NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN model text NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN agent text NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN cost_usd double precision NOT NULL DEFAULT 0;

UPDATE jobs j SET
    cost_usd = COALESCE((SELECT sum((e.data -> 'usage' ->> 'total_cost_usd')::double precision) FROM job_events e
        WHERE e.job_id = j.id AND e.type = 'protocol' AND e.data ->> 'type' = 'response_end'
            AND json_typeof(e.data -> 'usage' -> 'total_cost_usd') = 'number'), 0),
    executor = COALESCE((SELECT e.data ->> 'executor_type' FROM job_events e
        WHERE e.job_id = j.id AND e.type = 'protocol' AND e.data ->> 'type' = 'ready'
        ORDER BY e.seq DESC LIMIT 1), ''),
    model = COALESCE((SELECT btrim(COALESCE(e.data ->> 'provider', '') || '/' || COALESCE(e.data ->> 'model', ''), '/')
        FROM job_events e WHERE e.job_id = j.id AND e.type = 'protocol' AND e.data ->> 'type' = 'ready'
        ORDER BY e.seq DESC LIMIT 1), ''),
    agent = COALESCE((SELECT e.data -> 'data' ->> 'agent' FROM job_events e
        WHERE e.job_id = j.id AND e.type = 'run_event' AND e.data ->> 'kind' = 'movement_started'
            AND COALESCE(e.data -> 'data' ->> 'agent', '') <> ''
        ORDER BY e.seq DESC LIMIT 1), '');

CREATE FUNCTION job_events_usage() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF json_typeof(NEW.data) <> 'object' THEN
        RETURN NULL;
    END IF;
    IF NEW.type = 'protocol' AND NEW.data ->> 'type' = 'ready' THEN
        UPDATE jobs SET executor = COALESCE(NEW.data ->> 'executor_type', ''),
            model = btrim(COALESCE(NEW.data ->> 'provider', '') || '/' || COALESCE(NEW.data ->> 'model', ''), '/')
        WHERE id = NEW.job_id;
    ELSIF NEW.type = 'protocol' AND NEW.data ->> 'type' = 'response_end'
        AND json_typeof(NEW.data -> 'usage' -> 'total_cost_usd') = 'number' THEN
        UPDATE jobs SET cost_usd = cost_usd + (NEW.data -> 'usage' ->> 'total_cost_usd')::double precision
        WHERE id = NEW.job_id;
    ELSIF NEW.type = 'run_event' AND NEW.data ->> 'kind' = 'movement_started'
        AND json_typeof(NEW.data -> 'data') = 'object' AND COALESCE(NEW.data -> 'data' ->> 'agent', '') <> '' THEN
        UPDATE jobs SET agent = NEW.data -> 'data' ->> 'agent' WHERE id = NEW.job_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER job_events_usage AFTER INSERT ON job_events
FOR EACH ROW WHEN (NEW.type IN ('protocol', 'run_event')) EXECUTE FUNCTION job_events_usage();
