-- The task list filters by the state of each task's latest job (GET
-- /api/v1/tasks?state=…). Finding that state through the jobs table costs a
-- lookup per task, so a page of a rare state walked every task. tasks keeps
-- a copy, job_state, maintained by the trigger below, and tasks_job_state
-- lets a filtered page read only its own rows, newest first.
ALTER TABLE tasks ADD COLUMN job_state text NOT NULL DEFAULT '';

UPDATE tasks t SET job_state = COALESCE(
    (SELECT j.state FROM jobs j WHERE j.task_id = t.id ORDER BY j.id DESC LIMIT 1), '');

CREATE INDEX tasks_job_state ON tasks (job_state, id);

-- A new job is its task's latest (ids only grow); a state change counts
-- only for the task's latest job.
CREATE FUNCTION jobs_task_state() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE tasks SET job_state = NEW.state
    WHERE id = NEW.task_id
        AND (TG_OP = 'INSERT' OR NOT EXISTS (SELECT 1 FROM jobs WHERE task_id = NEW.task_id AND id > NEW.id));
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_task_state_insert AFTER INSERT ON jobs
FOR EACH ROW WHEN (NEW.task_id IS NOT NULL) EXECUTE FUNCTION jobs_task_state();

CREATE TRIGGER jobs_task_state_update AFTER UPDATE OF state ON jobs
FOR EACH ROW WHEN (NEW.task_id IS NOT NULL AND NEW.state IS DISTINCT FROM OLD.state) EXECUTE FUNCTION jobs_task_state();
