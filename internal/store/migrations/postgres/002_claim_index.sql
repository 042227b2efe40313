-- Claims must walk the partial index jobs_claim in claim order and stop
-- after n rows. Without statistics (a new table) or with statistics taken
-- while the queue was empty, the planner believes few jobs are queued and
-- instead reads every queued row (bitmap scan of jobs_claim or jobs_state)
-- and sorts them: a claim cost that grows with the backlog (an 8,000-job
-- backlog drained at a third of the rate of a 2,000-job one).
--
-- jobs_state is dropped (nothing needs it: listing by state and counting
-- scan), and the claim's candidate query lives in a function whose own
-- planner settings leave the ordered index scan as the only sensible plan,
-- whatever the statistics say (PL/pgSQL: the plan is cached per
-- connection). ROWS 10 (a claim takes a pool's idle slots) keeps the
-- claim's UPDATE on the primary key instead of hashing the table.
--
-- The ordered scan steps over the dead index entries of claimed jobs at the
-- front of jobs_claim until VACUUM removes them; autovacuum does on a live
-- table, and that cost is bounded by how often it runs, not by the backlog.
DROP INDEX IF EXISTS jobs_state;

CREATE FUNCTION claim_candidates(n bigint, due timestamptz, profiles text[], classes text[])
RETURNS TABLE (id bigint, priority integer, scheduled_at timestamptz)
LANGUAGE plpgsql VOLATILE ROWS 10
SET enable_bitmapscan = off
SET enable_sort = off
SET enable_seqscan = off
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY SELECT j.id, j.priority, j.scheduled_at FROM jobs j
        WHERE j.state = 'queued' AND j.scheduled_at <= due
            AND (j.profile = '' OR j.profile = ANY(profiles))
            AND (j.task_class = '' OR j.task_class = ANY(classes))
        ORDER BY j.priority DESC, j.scheduled_at, j.id
        LIMIT n
        FOR UPDATE OF j SKIP LOCKED;
END
$$;
