package sqlite

import "github.com/maestro-run/maestro/internal/store/internal/sqlstore"

// SQL for SQLite. Parameters are $N (bound by position); times are integer
// microseconds; lists are JSON arrays read with json_each. SQLite
// serialises writers, so the claim needs no SKIP LOCKED.

const (
	jobCols       = sqlstore.JobColumns
	fenced        = ` WHERE id = $1 AND attempt = $2 AND lease_owner = $3 AND state IN ('dispatching', 'running') `
	terminal      = `('succeeded', 'failed', 'aborted', 'cancelled')`
	taskFrom      = ` FROM tasks t LEFT JOIN jobs j ON j.id = (SELECT max(id) FROM jobs WHERE task_id = t.id) `
	finalOrNoMore = `($6 OR (NOT $9 AND attempt >= max_attempts))`
	// taskSearch matches $4 (lower case) in the title or body, or $5 as the id.
	taskSearch = ` AND ($4 = '' OR instr(lower(t.title), $4) > 0 OR instr(lower(t.body), $4) > 0 OR t.id = $5)`
)

// claim is the claim statement, leasing the jobs it picks in state
// (dispatching; running for ClaimParams.Start) with the sequence number of
// their one status event reserved.
func claim(state string) string {
	return `UPDATE jobs SET state = '` + state + `', attempt = attempt + 1,
			lease_owner = json_extract($1, '$[' || (s.slot - 1) || ']'), lease_expires_at = $2,
			heartbeat_at = $3, attempted_at = $3, updated_at = $3, event_seq = event_seq + 1
		FROM (
			SELECT id, row_number() OVER (ORDER BY priority DESC, scheduled_at, id) AS slot FROM (
				SELECT id, priority, scheduled_at FROM jobs
				WHERE state = 'queued' AND scheduled_at <= $3
					AND (profile = '' OR profile IN (SELECT value FROM json_each($4)))
					AND (task_class = '' OR task_class IN (SELECT value FROM json_each($5)))
				ORDER BY priority DESC, scheduled_at, id
				LIMIT json_array_length($1))) AS s
		WHERE jobs.id = s.id
		RETURNING ` + jobCols
}

// newQueries returns the SQLite dialect's SQL.
func newQueries() sqlstore.Queries {
	return sqlstore.WithJobEventCursors(sqlstore.WithProcesses(sqlstore.WithLiveSessions(sqlstore.WithRegistry(sqlstore.Queries{
		JobInsert: `INSERT INTO jobs (task_id, parent_job_id, piece, state, profile, task_class, priority, payload,
			attempt, max_attempts, scheduled_at, event_seq, created_at, updated_at)
		VALUES ($1, $2, $3, 'queued', $4, $5, $6, $7, 0, $8, $9, 1, $10, $10)
		RETURNING ` + jobCols,
		JobClaim:      claim("dispatching"),
		JobClaimStart: claim("running"),
		JobStart: `UPDATE jobs SET state = 'running', event_seq = event_seq + 1, updated_at = $4
		WHERE id = $1 AND attempt = $2 AND lease_owner = $3 AND state = 'dispatching'
		RETURNING ` + jobCols,
		JobHeartbeat:  `UPDATE jobs SET lease_expires_at = $5, heartbeat_at = $4` + fenced + `RETURNING lease_expires_at`,
		JobCheckpoint: `UPDATE jobs SET movement = $5, checkpoint = $6, updated_at = $4` + fenced + `RETURNING id`,
		JobSetPiece:   `UPDATE jobs SET piece = $5, updated_at = $4` + fenced + `RETURNING id`,
		JobComplete: `UPDATE jobs SET state = 'succeeded', result = $5, error = '', finished_at = $4, lease_expires_at = NULL,
			event_seq = event_seq + 1, updated_at = $4` + fenced + `RETURNING ` + jobCols,
		JobFail: `UPDATE jobs SET
			state = CASE WHEN ` + finalOrNoMore + ` THEN $7 ELSE 'queued' END,
			scheduled_at = CASE WHEN ` + finalOrNoMore + ` THEN scheduled_at ELSE $8 END,
			finished_at = CASE WHEN ` + finalOrNoMore + ` THEN $4 ELSE NULL END,
			max_attempts = max_attempts + CASE WHEN $9 THEN 1 ELSE 0 END,
			error = $5, lease_expires_at = NULL, event_seq = event_seq + 1, updated_at = $4` + fenced + `RETURNING ` + jobCols,
		JobWait: `UPDATE jobs SET state = $5, wait_reason = $6, lease_expires_at = NULL, event_seq = event_seq + 1, updated_at = $4` +
			fenced + `RETURNING ` + jobCols,
		JobRelease: `UPDATE jobs SET state = 'queued', scheduled_at = $4, max_attempts = max_attempts + 1, lease_expires_at = NULL,
			event_seq = event_seq + 1, updated_at = $4` + fenced + `RETURNING ` + jobCols,
		JobReap: `UPDATE jobs SET
			state = CASE WHEN attempt >= max_attempts THEN 'failed' ELSE 'queued' END,
			scheduled_at = CASE WHEN attempt >= max_attempts THEN scheduled_at ELSE $1 END,
			finished_at = CASE WHEN attempt >= max_attempts THEN $1 ELSE NULL END,
			error = $3, lease_expires_at = NULL, event_seq = event_seq + 1, updated_at = $1
		WHERE id IN (
			SELECT id FROM jobs WHERE state IN ('dispatching', 'running') AND lease_expires_at < $1
			ORDER BY lease_expires_at, id LIMIT $2)
		RETURNING ` + jobCols,
		JobCancel: `UPDATE jobs SET state = 'cancelled', error = $3, finished_at = $2, lease_expires_at = NULL,
			event_seq = event_seq + 1, updated_at = $2
		WHERE id = $1 AND state NOT IN ` + terminal + ` RETURNING ` + jobCols,
		JobResume: `UPDATE jobs SET state = 'queued', max_attempts = max_attempts + 1, scheduled_at = $2, wait_reason = '', event_seq = event_seq + 1, updated_at = $2
		WHERE id = $1 AND state IN ('waiting_human', 'waiting_subtasks') RETURNING ` + jobCols,
		JobRetry: `UPDATE jobs SET state = 'queued', max_attempts = MAX(max_attempts, attempt) + $3, scheduled_at = $2, error = '', result = '',
			finished_at = NULL, event_seq = event_seq + 1, updated_at = $2
		WHERE id = $1 AND state IN ('failed', 'aborted', 'cancelled') RETURNING ` + jobCols,
		JobResumeParent: `UPDATE jobs SET state = 'queued', max_attempts = max_attempts + 1, scheduled_at = $2, wait_reason = '', event_seq = event_seq + 1, updated_at = $2
		WHERE id = $1 AND state = 'waiting_subtasks'
			AND NOT EXISTS (SELECT 1 FROM jobs c WHERE c.parent_job_id = $1 AND c.state NOT IN ` + terminal + `)
		RETURNING ` + jobCols,
		JobResumeWaitingHuman: `UPDATE jobs SET state = 'queued', max_attempts = max_attempts + 1, scheduled_at = $2, wait_reason = '', event_seq = event_seq + 1, updated_at = $2
		WHERE task_id = $1 AND state = 'waiting_human' RETURNING ` + jobCols,
		JobGet: `SELECT ` + jobCols + ` FROM jobs WHERE id = $1`,
		JobList: `SELECT ` + jobCols + ` FROM jobs
		WHERE ($1 = 0 OR task_id = $1) AND ($2 = 0 OR parent_job_id = $2)
			AND (json_array_length($3) = 0 OR state IN (SELECT value FROM json_each($3)))
			AND id > $4
		ORDER BY id LIMIT $5`,
		JobCounts: `SELECT state, count(*) FROM jobs GROUP BY state`,

		EventReserve:       `UPDATE jobs SET event_seq = event_seq + $4, updated_at = $5` + fenced + `RETURNING event_seq, attempt`,
		EventReserveSystem: `UPDATE jobs SET event_seq = event_seq + $2, updated_at = $3 WHERE id = $1 RETURNING event_seq, attempt`,
		EventInsert:        `INSERT INTO job_events (job_id, seq, attempt, type, data, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		EventRead: `SELECT ` + sqlstore.EventColumns + ` FROM job_events WHERE job_id = $1 AND seq > $2
		ORDER BY seq LIMIT $3`,

		TaskInsert: `INSERT INTO tasks (owner, title, body, piece, schedule_id, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING id`,
		TaskGet: `SELECT ` + sqlstore.TaskColumns + taskFrom + ` WHERE t.id = $1`,
		TaskList: `SELECT ` + sqlstore.TaskColumns + taskFrom + `
		WHERE ($1 = '' OR t.owner = $1) AND t.id < $2` + taskSearch + ` ORDER BY t.id DESC LIMIT $3`,
		TaskListByState: `SELECT ` + sqlstore.TaskColumns + taskFrom + `
		WHERE t.job_state = $6 AND ($1 = '' OR t.owner = $1) AND t.id < $2` + taskSearch + `
		ORDER BY t.id DESC LIMIT $3`,
		TaskExists: `SELECT 1 FROM tasks WHERE id = $1`,
		CommentInsert: `INSERT INTO task_comments (task_id, author_kind, author, body, created_at) VALUES ($1, $2, $3, $4, $5)
		RETURNING ` + sqlstore.CommentColumns,
		CommentList: `SELECT ` + sqlstore.CommentColumns + ` FROM task_comments WHERE task_id = $1 AND id > $2 ORDER BY id LIMIT $3`,

		PieceInsert: `INSERT INTO pieces (name, yaml, version, created_at, updated_at) VALUES ($1, $2, 1, $3, $3)
		RETURNING ` + sqlstore.PieceColumns,
		PieceUpdate: `UPDATE pieces SET yaml = $2, version = version + 1, updated_at = $3
		WHERE name = $1 AND ($4 = 0 OR version = $4) RETURNING ` + sqlstore.PieceColumns,
		PieceGet:           `SELECT ` + sqlstore.PieceColumns + ` FROM pieces WHERE name = $1`,
		PieceList:          `SELECT ` + sqlstore.PieceColumns + ` FROM pieces ORDER BY name`,
		PieceDelete:        `DELETE FROM pieces WHERE name = $1 AND ($2 = 0 OR version = $2) RETURNING name`,
		PieceVersionInsert: `INSERT INTO piece_versions (name, version, yaml, created_at) VALUES ($1, $2, $3, $4)`,
		PieceVersionList:   `SELECT name, version, created_at FROM piece_versions WHERE name = $1 ORDER BY version DESC`,
		PieceVersionGet:    `SELECT name, version, yaml, created_at FROM piece_versions WHERE name = $1 AND version = $2`,
		PieceVersionDelete: `DELETE FROM piece_versions WHERE name = $1`,

		ScheduleInsert: `INSERT INTO schedules (name, cron_expr, enabled, owner, title, body, piece, profile, task_class,
			next_run_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11) RETURNING ` + sqlstore.ScheduleColumns,
		ScheduleUpdate: `UPDATE schedules SET name = $2, cron_expr = $3, enabled = $4, owner = $5, title = $6, body = $7,
			piece = $8, profile = $9, task_class = $10, next_run_at = $11, updated_at = $12
		WHERE id = $1 RETURNING ` + sqlstore.ScheduleColumns,
		ScheduleGet:    `SELECT ` + sqlstore.ScheduleColumns + ` FROM schedules WHERE id = $1`,
		ScheduleList:   `SELECT ` + sqlstore.ScheduleColumns + ` FROM schedules ORDER BY id`,
		ScheduleDelete: `DELETE FROM schedules WHERE id = $1 RETURNING id`,
		ScheduleDue: `SELECT ` + sqlstore.ScheduleColumns + ` FROM schedules
		WHERE enabled = 1 AND next_run_at <= $1 ORDER BY next_run_at, id LIMIT $2`,
		ScheduleFire: `UPDATE schedules SET next_run_at = $3, last_fired_at = $2, updated_at = $4
		WHERE id = $1 AND enabled = 1 AND next_run_at = $2 RETURNING ` + sqlstore.ScheduleColumns,

		AuditInsert: `INSERT INTO audit_log (actor, action, target, details, created_at) VALUES ($1, $2, $3, $4, $5)
		RETURNING ` + sqlstore.AuditColumns,
		AuditList: `SELECT ` + sqlstore.AuditColumns + ` FROM audit_log
		WHERE ($1 = '' OR target = $1) AND ($2 = 0 OR id < $2) ORDER BY id DESC LIMIT $3`,

		SessionUpsert: `INSERT INTO sessions (id, job_id, executor_type, provider, model, workspace, title, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
		ON CONFLICT (id) DO UPDATE SET job_id = excluded.job_id, executor_type = excluded.executor_type,
			provider = excluded.provider, model = excluded.model, workspace = excluded.workspace,
			title = excluded.title, updated_at = excluded.updated_at
		RETURNING ` + sqlstore.SessionColumns,
		SessionGet: `SELECT ` + sqlstore.SessionColumns + ` FROM sessions WHERE id = $1`,
		SessionList: `SELECT ` + sqlstore.SessionColumns + ` FROM sessions WHERE ($1 = 0 OR job_id = $1)
		ORDER BY created_at DESC, id DESC LIMIT $2`,

		LeaderElect: `INSERT INTO leaders (name, owner, elected_at, expires_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (name) DO UPDATE SET
			elected_at = CASE WHEN leaders.owner = excluded.owner THEN leaders.elected_at ELSE excluded.elected_at END,
			owner = excluded.owner, expires_at = excluded.expires_at
		WHERE leaders.owner = excluded.owner OR leaders.expires_at <= $3
		RETURNING owner`,
		LeaderResign: `DELETE FROM leaders WHERE name = $1 AND owner = $2`,
		RunStateSave: `INSERT INTO job_run_state (job_id, attempt, movement, data, updated_at)
			SELECT id, attempt, $5, $6, $4 FROM jobs` + fenced + `
			ON CONFLICT (job_id) DO UPDATE SET attempt = excluded.attempt, movement = excluded.movement,
				data = excluded.data, updated_at = excluded.updated_at
			RETURNING job_id`,
		RunStateGet: `SELECT job_id, attempt, movement, data, updated_at FROM job_run_state WHERE job_id = $1`,
		UsageJobs: `SELECT j.id, COALESCE(j.task_id, 0), COALESCE(t.title, ''), j.piece, j.executor, j.model, j.agent, j.cost_usd,
			` + usageTokens("input_tokens") + `, ` + usageTokens("output_tokens") + `, j.created_at
		FROM jobs j LEFT JOIN tasks t ON t.id = j.task_id
		WHERE j.created_at >= $1 AND j.created_at < $2 AND ($3 OR j.executor <> 'replay')
		ORDER BY j.id`,
	}, false), false), false), false)
}

// usageTokens sums one numeric field of the job's response_end usage
// (protocol.Usage) over its log; events without it count nothing.
func usageTokens(field string) string {
	return `CAST((SELECT total(json_extract(e.data, '$.usage.` + field + `')) FROM job_events e
		WHERE e.job_id = j.id AND e.type = 'protocol' AND json_extract(e.data, '$.type') = 'response_end'
			AND json_type(e.data, '$.usage.` + field + `') IN ('integer', 'real')) AS INTEGER)`
}
