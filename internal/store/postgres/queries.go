package postgres

import (
	"strconv"

	"github.com/maestro-run/maestro/internal/store/internal/sqlstore"
)

// SQL for PostgreSQL. Every parameter carries an explicit type (pgx refuses
// to guess, e.g. a Go int into a text column). Claims and the reaper lock the
// rows they pick with FOR UPDATE SKIP LOCKED, so concurrent claimers on many
// machines never wait on, nor take, each other's jobs.

const (
	jobCols  = sqlstore.JobColumns
	fenced   = ` WHERE id = $1::bigint AND attempt = $2::integer AND lease_owner = $3::text AND state IN ('dispatching', 'running') `
	terminal = `('succeeded', 'failed', 'aborted', 'cancelled')`
	taskFrom = ` FROM tasks t LEFT JOIN jobs j ON j.id = (SELECT max(id) FROM jobs WHERE task_id = t.id) `
	final    = `($6::boolean OR (NOT $9::boolean AND attempt >= max_attempts))`
	now4     = `$4::timestamptz`
	// taskSearch matches $4 (lower case) in the title or body, or $5 as the id.
	taskSearch = ` AND ($4::text = '' OR strpos(lower(t.title), $4::text) > 0 OR strpos(lower(t.body), $4::text) > 0
			OR t.id = $5::bigint)`
)

// taskPage lists the tasks matching where (over tasks t), newest first, at
// most $3: the page is chosen from tasks alone, then joined to the latest
// jobs, so the planner never looks up the latest job of a row it drops (a
// page of a common state read every task's job to sort them: 65 ms over
// 10,000 tasks).
func taskPage(where string) string {
	return `SELECT ` + sqlstore.TaskColumns + ` FROM (SELECT * FROM tasks t WHERE ` + where + `
		ORDER BY t.id DESC LIMIT $3::bigint) t
		LEFT JOIN jobs j ON j.id = (SELECT max(id) FROM jobs WHERE task_id = t.id) ORDER BY t.id DESC`
}

// claimCTE picks up to cardinality($1) due jobs in claim order, skipping
// rows other claimers hold (claim_candidates, migration 002: the ordered
// scan of jobs_claim, FOR UPDATE SKIP LOCKED), and leases the n-th to owner
// $1[n], moving it to state (dispatching; running for ClaimParams.Start)
// and reserving the sequence number of its one status event. The result
// is the CTE "claimed": the jobs' new rows plus their slot n.
func claimCTE(state string) string {
	return `WITH picked AS (
		SELECT * FROM claim_candidates(cardinality($1::text[]), $3::timestamptz, $4::text[], $5::text[])),
	slots AS (SELECT id, row_number() OVER (ORDER BY priority DESC, scheduled_at, id) AS slot FROM picked),
	claimed AS (
		UPDATE jobs j SET state = '` + state + `', attempt = j.attempt + 1, lease_owner = ($1::text[])[s.slot],
			lease_expires_at = $2::timestamptz, heartbeat_at = $3::timestamptz, attempted_at = $3::timestamptz,
			updated_at = $3::timestamptz, event_seq = j.event_seq + 1
		FROM slots s WHERE j.id = s.id
		RETURNING j.*, s.slot)`
}

// claimStatus is the status event data of a claimed job in state st: what
// store.StatusEvent{State, Attempt, Worker} encodes to, the worker taken
// from $6 (each owner as a JSON string).
func claimStatus(st string) string {
	return `('{"state":"` + st + `","attempt":' || attempt || ',"worker":' || ($6::text[])[slot] || '}')::json`
}

// statusCTE appends the status event (data given as parameter p) of the
// job the CTE "u" just moved; the UPDATE reserved its sequence number.
func statusCTE(p string) string {
	return `,
			ev AS (INSERT INTO job_events (job_id, seq, attempt, type, data, created_at)
				SELECT id, event_seq, attempt, 'status', ` + p + `::text::json, updated_at FROM u)`
}

// notifyJob sends, for every row of the CTE cte, the notification of the
// job's topic on channel parameter p (delivered on commit; the store's
// listener splits "topic\npayload").
func notifyJob(cte, p string) string {
	return `, LATERAL (SELECT pg_notify(` + p + `::text, 'job:' || ` + cte + `.id || E'\n')) AS notified`
}

// jobsPerNotify bounds the job topics one batched notification carries:
// "job:" and a bigint id and a newline are at most 24 bytes, so 300 of them
// stay within maxNotifyBytes.
const jobsPerNotify = 300

// notifyJobs is notifyJob for a statement that moves many jobs: it sends
// one notification per jobsPerNotify rows of the CTE cte instead of one per
// row, each listing the rows' job topics (batchedTopics; the listener
// publishes each topic alone, as notifyJob's). It returns a CTE to append
// to the WITH list and the FROM item that makes the statement run it once
// (joined to no row when cte is empty: nothing to notify).
func notifyJobs(cte, p string) (with, from string) {
	return `,
			notified AS (SELECT count(*) AS notified_n FROM (
				SELECT pg_notify(` + p + `::text, E'\n' || string_agg('job:' || id, E'\n' ORDER BY id)) AS sent
				FROM (SELECT id, (row_number() OVER () - 1) / ` + strconv.Itoa(jobsPerNotify) + ` AS chunk FROM ` + cte + `) c
				GROUP BY chunk) batches)`, `, notified`
}

// newQueries returns the PostgreSQL dialect's SQL.
func newQueries() sqlstore.Queries {
	claimedWith, claimedFrom := notifyJobs("claimed", "$7")
	startedWith, startedFrom := notifyJobs("u", "$6")
	completedWith, completedFrom := notifyJobs("u", "$7")
	// StartMany's and CompleteMany's items are found by id in the arrays
	// (item(a) is a's element for the job's id), not joined to an unnest
	// of them: the planner, sure
	// that few jobs are running, joined them in a nested loop that ran the
	// unnest again for every running job (200 items: 40,000 rows, about
	// 400 µs of server time per job). A job listed twice is matched with
	// its first item only; StartMany and CompleteMany take the others one
	// by one.
	item := func(a string) string { return `(` + a + `)[array_position($1::bigint[], j.id)]` }
	completeMany := `WITH u AS (UPDATE jobs j SET state = 'succeeded', result = ` + item("$4::text[]") + `, error = '',
					finished_at = $6::timestamptz, lease_expires_at = NULL, event_seq = j.event_seq + 1, updated_at = $6::timestamptz
				WHERE j.id = ANY($1::bigint[]) AND j.attempt = ` + item("$2::bigint[]") + ` AND j.lease_owner = ` + item("$3::text[]") + `
					AND j.state IN ('dispatching', 'running') AND j.parent_job_id IS NULL
				RETURNING j.*, ` + item("$5::text[]") + ` AS data)` + statusCTE("data") + completedWith
	return sqlstore.WithJobEventCursors(sqlstore.WithProcesses(sqlstore.WithLiveSessions(sqlstore.WithRegistry(sqlstore.Queries{
		JobInsert: `INSERT INTO jobs (task_id, parent_job_id, piece, state, profile, task_class, priority, payload,
				attempt, max_attempts, scheduled_at, event_seq, created_at, updated_at)
			VALUES ($1::bigint, $2::bigint, $3::text, 'queued', $4::text, $5::text, $6::integer, $7::text::json,
				0, $8::integer, $9::timestamptz, 1, $10::timestamptz, $10::timestamptz)
			RETURNING ` + jobCols,
		JobInsertAtomic: `WITH u AS (INSERT INTO jobs (task_id, parent_job_id, piece, state, profile, task_class, priority, payload,
				attempt, max_attempts, scheduled_at, event_seq, created_at, updated_at)
			VALUES ($1::bigint, $2::bigint, $3::text, 'queued', $4::text, $5::text, $6::integer, $7::text::json,
				0, $8::integer, $9::timestamptz, 1, $10::timestamptz, $10::timestamptz)
			RETURNING *)` + statusCTE("$11") + `
			SELECT ` + jobCols + ` FROM u` + notifyJob("u", "$12") + `,
				LATERAL (SELECT pg_notify($12::text, 'jobs' || E'\n')) AS woken`,
		JobClaim:      claimCTE("dispatching") + ` SELECT ` + jobCols + ` FROM claimed`,
		JobClaimStart: claimCTE("running") + ` SELECT ` + jobCols + ` FROM claimed`,
		JobClaimAtomic: claimCTE("dispatching") + `,
			ev AS (INSERT INTO job_events (job_id, seq, attempt, type, data, created_at)
				SELECT id, event_seq, attempt, 'status',
					` + claimStatus("dispatching") + `, updated_at
				FROM claimed)` + claimedWith + `
			SELECT ` + jobCols + ` FROM claimed` + claimedFrom,
		JobClaimStartAtomic: claimCTE("running") + `,
			ev AS (INSERT INTO job_events (job_id, seq, attempt, type, data, created_at)
				SELECT id, event_seq, attempt, 'status', ` + claimStatus("running") + `, updated_at FROM claimed)` + claimedWith + `
			SELECT ` + jobCols + ` FROM claimed` + claimedFrom,
		JobStartAtomic: `WITH u AS (UPDATE jobs SET state = 'running', event_seq = event_seq + 1, updated_at = ` + now4 + `
				WHERE id = $1::bigint AND attempt = $2::integer AND lease_owner = $3::text AND state = 'dispatching'
				RETURNING *)` + statusCTE("$5") + `
			SELECT ` + jobCols + ` FROM u` + notifyJob("u", "$6"),
		JobCompleteAtomic: `WITH u AS (UPDATE jobs SET state = 'succeeded', result = $5::text, error = '', finished_at = ` + now4 + `,
				lease_expires_at = NULL, event_seq = event_seq + 1, updated_at = ` + now4 + fenced + ` AND parent_job_id IS NULL
				RETURNING *)` + statusCTE("$6") + `
			SELECT ` + jobCols + ` FROM u` + notifyJob("u", "$7"),
		JobStartManyAtomic: `WITH u AS (UPDATE jobs j SET state = 'running', event_seq = j.event_seq + 1, updated_at = $5::timestamptz
				WHERE j.id = ANY($1::bigint[]) AND j.attempt = ` + item("$2::bigint[]") + ` AND j.lease_owner = ` + item("$3::text[]") + `
					AND j.state = 'dispatching'
				RETURNING j.*, ` + item("$4::text[]") + ` AS data)` + statusCTE("data") + startedWith + `
			SELECT ` + jobCols + ` FROM u` + startedFrom,
		JobCompleteManyAtomic: completeMany + `
			SELECT ` + jobCols + ` FROM u` + completedFrom,
		JobCompleteManyLeases: completeMany + `
			SELECT id, attempt, lease_owner FROM u` + completedFrom,
		EventAppendAtomic: `WITH r AS (UPDATE jobs SET event_seq = event_seq + cardinality($5::text[]), updated_at = ` + now4 + fenced + `
				RETURNING id, event_seq, attempt),
			ins AS (INSERT INTO job_events (job_id, seq, attempt, type, data, created_at)
				SELECT r.id, r.event_seq - cardinality($5::text[]) + e.n, r.attempt, e.type, e.data::json, ` + now4 + `
				FROM r, unnest($5::text[], $6::text[]) WITH ORDINALITY AS e(type, data, n))
			SELECT event_seq, attempt FROM r` + notifyJob("r", "$7"),
		JobStart: `UPDATE jobs SET state = 'running', event_seq = event_seq + 1, updated_at = ` + now4 + `
			WHERE id = $1::bigint AND attempt = $2::integer AND lease_owner = $3::text AND state = 'dispatching'
			RETURNING ` + jobCols,
		JobHeartbeat: `UPDATE jobs SET lease_expires_at = $5::timestamptz, heartbeat_at = ` + now4 + fenced +
			`RETURNING lease_expires_at`,
		JobCheckpoint: `UPDATE jobs SET movement = $5::text, checkpoint = $6::text::json, updated_at = ` + now4 + fenced +
			`RETURNING id`,
		JobSetPiece: `UPDATE jobs SET piece = $5::text, updated_at = ` + now4 + fenced + `RETURNING id`,
		JobComplete: `UPDATE jobs SET state = 'succeeded', result = $5::text, error = '', finished_at = ` + now4 + `,
				lease_expires_at = NULL, event_seq = event_seq + 1, updated_at = ` + now4 + fenced + `RETURNING ` + jobCols,
		JobFail: `UPDATE jobs SET
				state = CASE WHEN ` + final + ` THEN $7::text ELSE 'queued' END,
				scheduled_at = CASE WHEN ` + final + ` THEN scheduled_at ELSE $8::timestamptz END,
				finished_at = CASE WHEN ` + final + ` THEN ` + now4 + ` ELSE NULL END,
				max_attempts = max_attempts + CASE WHEN $9::boolean THEN 1 ELSE 0 END,
				error = $5::text, lease_expires_at = NULL, event_seq = event_seq + 1, updated_at = ` + now4 +
			fenced + `RETURNING ` + jobCols,
		JobWait: `UPDATE jobs SET state = $5::text, wait_reason = $6::text, lease_expires_at = NULL,
				event_seq = event_seq + 1, updated_at = ` + now4 + fenced + `RETURNING ` + jobCols,
		JobRelease: `UPDATE jobs SET state = 'queued', scheduled_at = ` + now4 + `, max_attempts = max_attempts + 1,
				lease_expires_at = NULL, event_seq = event_seq + 1, updated_at = ` + now4 + fenced + `RETURNING ` + jobCols,
		JobReap: `WITH expired AS (
				SELECT id FROM jobs
				WHERE state IN ('dispatching', 'running') AND lease_expires_at < $1::timestamptz
				ORDER BY lease_expires_at, id
				LIMIT $2::bigint
				FOR UPDATE SKIP LOCKED)
			UPDATE jobs SET
				state = CASE WHEN attempt >= max_attempts THEN 'failed' ELSE 'queued' END,
				scheduled_at = CASE WHEN attempt >= max_attempts THEN scheduled_at ELSE $1::timestamptz END,
				finished_at = CASE WHEN attempt >= max_attempts THEN $1::timestamptz ELSE NULL END,
				error = $3::text, lease_expires_at = NULL, event_seq = event_seq + 1, updated_at = $1::timestamptz
			WHERE id IN (SELECT id FROM expired)
			RETURNING ` + jobCols,
		JobCancel: `UPDATE jobs SET state = 'cancelled', error = $3::text, finished_at = $2::timestamptz,
				lease_expires_at = NULL, event_seq = event_seq + 1, updated_at = $2::timestamptz
			WHERE id = $1::bigint AND state NOT IN ` + terminal + ` RETURNING ` + jobCols,
		JobResume: `UPDATE jobs SET state = 'queued', max_attempts = max_attempts + 1, scheduled_at = $2::timestamptz, wait_reason = '',
				event_seq = event_seq + 1, updated_at = $2::timestamptz
			WHERE id = $1::bigint AND state IN ('waiting_human', 'waiting_subtasks') RETURNING ` + jobCols,
		JobRetry: `UPDATE jobs SET state = 'queued', max_attempts = GREATEST(max_attempts, attempt) + $3::integer, scheduled_at = $2::timestamptz,
				error = '', result = '', finished_at = NULL, event_seq = event_seq + 1, updated_at = $2::timestamptz
			WHERE id = $1::bigint AND state IN ('failed', 'aborted', 'cancelled') RETURNING ` + jobCols,
		JobResumeParent: `UPDATE jobs SET state = 'queued', max_attempts = max_attempts + 1, scheduled_at = $2::timestamptz, wait_reason = '',
				event_seq = event_seq + 1, updated_at = $2::timestamptz
			WHERE id = $1::bigint AND state = 'waiting_subtasks'
				AND NOT EXISTS (SELECT 1 FROM jobs c WHERE c.parent_job_id = $1::bigint AND c.state NOT IN ` + terminal + `)
			RETURNING ` + jobCols,
		JobResumeWaitingHuman: `UPDATE jobs SET state = 'queued', max_attempts = max_attempts + 1, scheduled_at = $2::timestamptz, wait_reason = '',
				event_seq = event_seq + 1, updated_at = $2::timestamptz
			WHERE task_id = $1::bigint AND state = 'waiting_human' RETURNING ` + jobCols,
		JobLock: `SELECT id FROM jobs WHERE id = $1::bigint FOR UPDATE`,
		JobGet:  `SELECT ` + jobCols + ` FROM jobs WHERE id = $1::bigint`,
		JobList: `SELECT ` + jobCols + ` FROM jobs
			WHERE ($1::bigint = 0 OR task_id = $1::bigint) AND ($2::bigint = 0 OR parent_job_id = $2::bigint)
				AND (cardinality($3::text[]) = 0 OR state = ANY($3::text[]))
				AND id > $4::bigint
			ORDER BY id LIMIT $5::bigint`,
		JobCounts: `SELECT state, count(*) FROM jobs GROUP BY state`,

		EventReserve: `UPDATE jobs SET event_seq = event_seq + $4::bigint, updated_at = $5::timestamptz` + fenced +
			`RETURNING event_seq, attempt`,
		EventReserveSystem: `UPDATE jobs SET event_seq = event_seq + $2::bigint, updated_at = $3::timestamptz
			WHERE id = $1::bigint RETURNING event_seq, attempt`,
		EventInsert: `INSERT INTO job_events (job_id, seq, attempt, type, data, created_at)
			VALUES ($1::bigint, $2::bigint, $3::integer, $4::text, $5::text::json, $6::timestamptz)`,
		EventRead: `SELECT ` + sqlstore.EventColumns + ` FROM job_events WHERE job_id = $1::bigint AND seq > $2::bigint
			ORDER BY seq LIMIT $3::bigint`,

		TaskInsert: `INSERT INTO tasks (owner, title, body, piece, schedule_id, created_at, updated_at)
			VALUES ($1::text, $2::text, $3::text, $4::text, $5::bigint, $6::timestamptz, $6::timestamptz) RETURNING id`,
		TaskGet:  `SELECT ` + sqlstore.TaskColumns + taskFrom + ` WHERE t.id = $1::bigint`,
		TaskList: taskPage(`($1::text = '' OR t.owner = $1::text) AND t.id < $2::bigint` + taskSearch),
		TaskListByState: taskPage(`t.job_state = $6::text AND ($1::text = '' OR t.owner = $1::text) AND t.id < $2::bigint` +
			taskSearch),
		TaskExists: `SELECT 1 FROM tasks WHERE id = $1::bigint`,
		CommentInsert: `INSERT INTO task_comments (task_id, author_kind, author, body, created_at)
			VALUES ($1::bigint, $2::text, $3::text, $4::text, $5::timestamptz) RETURNING ` + sqlstore.CommentColumns,
		CommentList: `SELECT ` + sqlstore.CommentColumns + ` FROM task_comments
			WHERE task_id = $1::bigint AND id > $2::bigint ORDER BY id LIMIT $3::bigint`,

		PieceInsert: `INSERT INTO pieces (name, yaml, version, created_at, updated_at)
			VALUES ($1::text, $2::text, 1, $3::timestamptz, $3::timestamptz) RETURNING ` + sqlstore.PieceColumns,
		PieceUpdate: `UPDATE pieces SET yaml = $2::text, version = version + 1, updated_at = $3::timestamptz
			WHERE name = $1::text AND ($4::bigint = 0 OR version = $4::bigint) RETURNING ` + sqlstore.PieceColumns,
		PieceGet:    `SELECT ` + sqlstore.PieceColumns + ` FROM pieces WHERE name = $1::text`,
		PieceList:   `SELECT ` + sqlstore.PieceColumns + ` FROM pieces ORDER BY name`,
		PieceDelete: `DELETE FROM pieces WHERE name = $1::text AND ($2::bigint = 0 OR version = $2::bigint) RETURNING name`,
		PieceVersionInsert: `INSERT INTO piece_versions (name, version, yaml, created_at)
			VALUES ($1::text, $2::bigint, $3::text, $4::timestamptz)`,
		PieceVersionList: `SELECT name, version, created_at FROM piece_versions WHERE name = $1::text ORDER BY version DESC`,
		PieceVersionGet: `SELECT name, version, yaml, created_at FROM piece_versions
			WHERE name = $1::text AND version = $2::bigint`,
		PieceVersionDelete: `DELETE FROM piece_versions WHERE name = $1::text`,

		ScheduleInsert: `INSERT INTO schedules (name, cron_expr, enabled, owner, title, body, piece, profile, task_class,
				next_run_at, created_at, updated_at)
			VALUES ($1::text, $2::text, $3::boolean, $4::text, $5::text, $6::text, $7::text, $8::text, $9::text,
				$10::timestamptz, $11::timestamptz, $11::timestamptz)
			RETURNING ` + sqlstore.ScheduleColumns,
		ScheduleUpdate: `UPDATE schedules SET name = $2::text, cron_expr = $3::text, enabled = $4::boolean, owner = $5::text,
				title = $6::text, body = $7::text, piece = $8::text, profile = $9::text, task_class = $10::text,
				next_run_at = $11::timestamptz, updated_at = $12::timestamptz
			WHERE id = $1::bigint RETURNING ` + sqlstore.ScheduleColumns,
		ScheduleGet:    `SELECT ` + sqlstore.ScheduleColumns + ` FROM schedules WHERE id = $1::bigint`,
		ScheduleList:   `SELECT ` + sqlstore.ScheduleColumns + ` FROM schedules ORDER BY id`,
		ScheduleDelete: `DELETE FROM schedules WHERE id = $1::bigint RETURNING id`,
		ScheduleDue: `SELECT ` + sqlstore.ScheduleColumns + ` FROM schedules
			WHERE enabled AND next_run_at <= $1::timestamptz ORDER BY next_run_at, id LIMIT $2::bigint`,
		ScheduleFire: `UPDATE schedules SET next_run_at = $3::timestamptz, last_fired_at = $2::timestamptz,
				updated_at = $4::timestamptz
			WHERE id = $1::bigint AND enabled AND next_run_at = $2::timestamptz RETURNING ` + sqlstore.ScheduleColumns,

		AuditInsert: `INSERT INTO audit_log (actor, action, target, details, created_at)
			VALUES ($1::text, $2::text, $3::text, $4::text::json, $5::timestamptz) RETURNING ` + sqlstore.AuditColumns,
		AuditList: `SELECT ` + sqlstore.AuditColumns + ` FROM audit_log
			WHERE ($1::text = '' OR target = $1::text) AND ($2::bigint = 0 OR id < $2::bigint)
			ORDER BY id DESC LIMIT $3::bigint`,

		SessionUpsert: `INSERT INTO sessions (id, job_id, executor_type, provider, model, workspace, title, created_at, updated_at)
			VALUES ($1::text, $2::bigint, $3::text, $4::text, $5::text, $6::text, $7::text, $8::timestamptz, $8::timestamptz)
			ON CONFLICT (id) DO UPDATE SET job_id = excluded.job_id, executor_type = excluded.executor_type,
				provider = excluded.provider, model = excluded.model, workspace = excluded.workspace,
				title = excluded.title, updated_at = excluded.updated_at
			RETURNING ` + sqlstore.SessionColumns,
		SessionGet: `SELECT ` + sqlstore.SessionColumns + ` FROM sessions WHERE id = $1::text`,
		SessionList: `SELECT ` + sqlstore.SessionColumns + ` FROM sessions WHERE ($1::bigint = 0 OR job_id = $1::bigint)
			ORDER BY created_at DESC, id DESC LIMIT $2::bigint`,

		LeaderElect: `INSERT INTO leaders (name, owner, elected_at, expires_at)
			VALUES ($1::text, $2::text, $3::timestamptz, $4::timestamptz)
			ON CONFLICT (name) DO UPDATE SET
				elected_at = CASE WHEN leaders.owner = excluded.owner THEN leaders.elected_at ELSE excluded.elected_at END,
				owner = excluded.owner, expires_at = excluded.expires_at
			WHERE leaders.owner = excluded.owner OR leaders.expires_at <= $3::timestamptz
			RETURNING owner`,
		LeaderResign: `DELETE FROM leaders WHERE name = $1::text AND owner = $2::text`,
		RunStateSave: `INSERT INTO job_run_state (job_id, attempt, movement, data, updated_at)
			SELECT id, attempt, $5::text, $6::bytea, ` + now4 + ` FROM jobs` + fenced + `
			ON CONFLICT (job_id) DO UPDATE SET attempt = excluded.attempt, movement = excluded.movement,
				data = excluded.data, updated_at = excluded.updated_at
			RETURNING job_id`,
		RunStateGet: `SELECT job_id, attempt, movement, data, updated_at FROM job_run_state WHERE job_id = $1::bigint`,
		UsageJobs: `SELECT j.id, COALESCE(j.task_id, 0), COALESCE(t.title, ''), j.piece, j.executor, j.model, j.agent, j.cost_usd,
			` + usageTokens("input_tokens") + `, ` + usageTokens("output_tokens") + `, j.created_at
		FROM jobs j LEFT JOIN tasks t ON t.id = j.task_id
		WHERE j.created_at >= $1::timestamptz AND j.created_at < $2::timestamptz AND ($3::boolean OR j.executor <> 'replay')
		ORDER BY j.id`,
	}, true), true), true), true)
}

// usageTokens sums one numeric field of the job's response_end usage
// (protocol.Usage) over its log; events without it count nothing.
func usageTokens(field string) string {
	return `COALESCE((SELECT sum((e.data -> 'usage' ->> '` + field + `')::double precision) FROM job_events e
		WHERE e.job_id = j.id AND e.type = 'protocol' AND json_typeof(e.data) = 'object' AND e.data ->> 'type' = 'response_end'
			AND json_typeof(e.data -> 'usage') = 'object'
			AND json_typeof(e.data -> 'usage' -> '` + field + `') = 'number'), 0)::bigint`
}
