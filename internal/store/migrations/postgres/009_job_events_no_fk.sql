-- A job's log rows (job_events) referenced jobs with a foreign key, so
-- every event insert ran the key check (SELECT ... FOR KEY SHARE on the
-- job's row, through a trigger): a fifth of the server's time per no-op
-- job in the queue bench (one check per status event: queued, running,
-- succeeded), for a row the inserting statement has just updated.
--
-- The key is replaced by what it guaranteed, at no cost on insert:
--   * an event is only ever written for a job that exists: the store
--     writes events in the statement or transaction that updates (or
--     inserts) the job's row and reserves its sequence number there, and
--     that row lock makes a concurrent delete of the job wait for the
--     commit (and a delete that commits first leaves the update, hence
--     the insert, with no row);
--   * a job's events are deleted with it (the ON DELETE CASCADE it had):
--     the trigger below, also when the delete cascades from the job's
--     task or parent job.
ALTER TABLE job_events DROP CONSTRAINT job_events_job_id_fkey;

CREATE FUNCTION jobs_delete_events() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_events WHERE job_id = OLD.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_delete_events AFTER DELETE ON jobs
    FOR EACH ROW EXECUTE FUNCTION jobs_delete_events();
