-- The task list filters by the state of each task's latest job (GET
-- /api/v1/tasks?state=…). Finding that state through the jobs table costs a
-- lookup per task, so a page of a rare state walked every task. tasks keeps
-- a copy, job_state, maintained by the triggers below, and tasks_job_state
-- lets a filtered page read only its own rows, newest first.
ALTER TABLE tasks ADD COLUMN job_state TEXT NOT NULL DEFAULT '';

UPDATE tasks SET job_state = COALESCE(
    (SELECT state FROM jobs WHERE task_id = tasks.id ORDER BY id DESC LIMIT 1), '');

CREATE INDEX tasks_job_state ON tasks (job_state, id);

-- A new job is its task's latest (ids only grow).
CREATE TRIGGER jobs_task_state_insert AFTER INSERT ON jobs
WHEN NEW.task_id IS NOT NULL
BEGIN
    UPDATE tasks SET job_state = NEW.state WHERE id = NEW.task_id;
END;

-- A state change counts only for the task's latest job.
CREATE TRIGGER jobs_task_state_update AFTER UPDATE OF state ON jobs
WHEN NEW.task_id IS NOT NULL AND NEW.state <> OLD.state
BEGIN
    UPDATE tasks SET job_state = NEW.state
    WHERE id = NEW.task_id AND NOT EXISTS (SELECT 1 FROM jobs WHERE task_id = NEW.task_id AND id > NEW.id);
END;
