-- jobs_state (state) lured the planner into claiming through it: read every
-- queued row, sort, take the first n, a cost that grew with the backlog (an
-- 8,000-job backlog drained at a third of the rate of a 2,000-job one). With
-- it gone the claim walks the partial index jobs_claim in claim order and
-- stops after n. Nothing else needs it: listing by state and counting scan.
DROP INDEX IF EXISTS jobs_state;
