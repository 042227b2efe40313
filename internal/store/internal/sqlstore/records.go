package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/store"
)

// ---- tasks and comments

func scanTask(s scanner) (store.Task, error) {
	var (
		t          store.Task
		scheduleID sql.NullInt64
		jobID      sql.NullInt64
		jobState   sql.NullString
		jobPiece   sql.NullString
		executor   sql.NullString
		model      sql.NullString
		agent      sql.NullString
		cost       sql.NullFloat64
	)
	err := s.Scan(&t.ID, &t.Owner, &t.Title, &t.Body, &t.Piece, &scheduleID, tsScan{&t.CreatedAt}, tsScan{&t.UpdatedAt}, &jobID, &jobState, &jobPiece,
		&executor, &model, &agent, &cost, tsScan{&t.JobAttemptedAt}, tsScan{&t.JobFinishedAt})
	t.ScheduleID, t.JobID, t.JobState, t.JobPiece = scheduleID.Int64, jobID.Int64, store.State(jobState.String), jobPiece.String
	t.JobExecutor, t.JobModel, t.JobAgent, t.JobCostUSD = executor.String, model.String, agent.String, cost.Float64
	return t, err
}

func (db *DB) createTask(ctx context.Context, t *txn, nt store.NewTask, now time.Time) (store.Task, store.Job, error) {
	var id int64
	if err := t.QueryRowContext(ctx, db.q.TaskInsert, nt.Owner, nt.Title, nt.Body, nt.Piece, nid(nt.ScheduleID), db.ts(now)).Scan(&id); err != nil {
		err = db.classify(err)
		if errors.Is(err, store.ErrNotFound) {
			return store.Task{}, store.Job{}, fmt.Errorf("create task: schedule %d: %w", nt.ScheduleID, err)
		}
		return store.Task{}, store.Job{}, fmt.Errorf("create task: %w", err)
	}
	j, err := db.enqueue(ctx, t, nt.Job(id), now)
	if err != nil {
		return store.Task{}, store.Job{}, err
	}
	task := store.Task{ID: id, Owner: nt.Owner, Title: nt.Title, Body: nt.Body, Piece: nt.Piece, ScheduleID: nt.ScheduleID,
		CreatedAt: now, UpdatedAt: now, JobID: j.ID, JobState: j.State, JobPiece: j.Piece}
	return task, j, nil
}

// CreateTask stores a task and its first job (see store.Tasks).
func (db *DB) CreateTask(ctx context.Context, nt store.NewTask) (store.Task, store.Job, error) {
	nt, err := nt.Validate()
	if err != nil {
		return store.Task{}, store.Job{}, fmt.Errorf("create task: %w", err)
	}
	var task store.Task
	var job store.Job
	err = db.inTx(ctx, func(t *txn) error {
		task, job, err = db.createTask(ctx, t, nt, db.Now())
		return err
	})
	return task, job, err
}

// GetTask returns a task (see store.Tasks).
func (db *DB) GetTask(ctx context.Context, id int64) (store.Task, error) {
	t, err := scanTask(db.r.QueryRowContext(ctx, db.q.TaskGet, id))
	return t, getErr(err, "get task %d", id)
}

// ListTasks lists tasks newest first (see store.Tasks).
func (db *DB) ListTasks(ctx context.Context, f store.TaskFilter) ([]store.Task, error) {
	states, err := stateList(f.States)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	before := f.BeforeID
	if before <= 0 {
		before = math.MaxInt64
	}
	search := strings.ToLower(f.Search)
	searchID, _ := strconv.ParseInt(strings.TrimSpace(f.Search), 10, 64) // 0 (no id) unless a number
	limit := store.ListLimit(f.Limit)
	args := []any{f.Owner, before, int64(limit), search, searchID}
	if len(states) == 0 {
		rows, err := db.r.QueryContext(ctx, db.q.TaskList, args...)
		out, err := scanRows(rows, err, scanTask)
		if err != nil {
			return nil, fmt.Errorf("list tasks: %w", err)
		}
		return out, nil
	}
	// One query a state, each reading its page in the order of the index
	// tasks_job_state (several states in one query would read every row
	// of them to sort), merged newest first.
	slices.Sort(states)
	var out []store.Task
	for _, st := range slices.Compact(states) {
		rows, err := db.r.QueryContext(ctx, db.q.TaskListByState, append(args, st)...)
		page, err := scanRows(rows, err, scanTask)
		if err != nil {
			return nil, fmt.Errorf("list tasks in state %s: %w", st, err)
		}
		out = append(out, page...)
	}
	slices.SortFunc(out, func(a, b store.Task) int { return cmp.Compare(b.ID, a.ID) })
	return out[:min(len(out), limit)], nil
}

func scanComment(s scanner) (store.Comment, error) {
	var c store.Comment
	err := s.Scan(&c.ID, &c.TaskID, &c.AuthorKind, &c.Author, &c.Body, tsScan{&c.CreatedAt})
	return c, err
}

func (db *DB) addComment(ctx context.Context, t *txn, c store.NewComment, now time.Time) (store.Comment, error) {
	out, err := scanComment(t.QueryRowContext(ctx, db.q.CommentInsert, c.TaskID, c.AuthorKind, c.Author, c.Body, db.ts(now)))
	if err != nil {
		err = db.classify(err)
		if errors.Is(err, store.ErrNotFound) {
			return out, fmt.Errorf("add comment: task %d: %w", c.TaskID, err)
		}
		return out, fmt.Errorf("add comment to task %d: %w", c.TaskID, err)
	}
	return out, nil
}

// AddComment appends a comment and optionally resumes waiting jobs (see
// store.Tasks).
func (db *DB) AddComment(ctx context.Context, c store.NewComment) (store.Comment, []store.Job, error) {
	if err := c.Validate(); err != nil {
		return store.Comment{}, nil, fmt.Errorf("add comment: %w", err)
	}
	var out store.Comment
	var resumed []store.Job
	err := db.inTx(ctx, func(t *txn) error {
		now := db.Now()
		var err error
		if out, err = db.addComment(ctx, t, c, now); err != nil {
			return err
		}
		if !c.ResumeWaiting {
			return nil
		}
		if resumed, err = scanJobs(t.QueryContext(ctx, db.q.JobResumeWaitingHuman, c.TaskID, db.ts(now))); err != nil {
			return fmt.Errorf("resume jobs of task %d: %w", c.TaskID, err)
		}
		for _, j := range resumed {
			if err := db.status(ctx, t, j, store.StatusEvent{Reason: "comment"}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return store.Comment{}, nil, err
	}
	return out, resumed, nil
}

// ListComments lists a task's comments (see store.Tasks).
func (db *DB) ListComments(ctx context.Context, taskID int64, after int64, limit int) ([]store.Comment, error) {
	rows, err := db.r.QueryContext(ctx, db.q.CommentList, taskID, after, int64(store.ListLimit(limit)))
	out, err := scanRows(rows, err, scanComment)
	if err != nil {
		return nil, fmt.Errorf("list comments of task %d: %w", taskID, err)
	}
	if len(out) == 0 {
		var one int64
		if err := db.r.QueryRowContext(ctx, db.q.TaskExists, taskID).Scan(&one); noRow(err) {
			return nil, fmt.Errorf("list comments: task %d: %w", taskID, store.ErrNotFound)
		} else if err != nil {
			return nil, fmt.Errorf("list comments of task %d: %w", taskID, err)
		}
	}
	return out, nil
}

// ---- pieces

func scanPiece(s scanner) (store.Piece, error) {
	var p store.Piece
	err := s.Scan(&p.Name, &p.YAML, &p.Version, tsScan{&p.CreatedAt}, tsScan{&p.UpdatedAt})
	return p, err
}

// CreatePiece stores a new piece (see store.Pieces).
func (db *DB) CreatePiece(ctx context.Context, name, yaml string) (store.Piece, error) {
	if err := store.ValidatePiece(name, yaml); err != nil {
		return store.Piece{}, fmt.Errorf("create piece: %w", err)
	}
	var p store.Piece
	err := db.inTx(ctx, func(t *txn) error {
		var err error
		p, err = scanPiece(t.QueryRowContext(ctx, db.q.PieceInsert, name, yaml, db.ts(db.Now())))
		if err != nil {
			err = db.classify(err)
			if errors.Is(err, store.ErrConflict) {
				return fmt.Errorf("create piece %q: the name is taken: %w", name, err)
			}
			return fmt.Errorf("create piece %q: %w", name, err)
		}
		return db.keepPieceVersion(ctx, t, "create", p)
	})
	return p, err
}

// UpdatePiece replaces a piece's YAML (see store.Pieces).
func (db *DB) UpdatePiece(ctx context.Context, name, yaml string, ifVersion int64) (store.Piece, error) {
	if err := store.ValidatePiece(name, yaml); err != nil {
		return store.Piece{}, fmt.Errorf("update piece: %w", err)
	}
	var p store.Piece
	err := db.inTx(ctx, func(t *txn) error {
		var err error
		p, err = scanPiece(t.QueryRowContext(ctx, db.q.PieceUpdate, name, yaml, db.ts(db.Now()), ifVersion))
		if noRow(err) {
			return db.pieceMiss(ctx, t, "update", name, ifVersion)
		}
		if err != nil {
			return fmt.Errorf("update piece %q: %w", name, err)
		}
		return db.keepPieceVersion(ctx, t, "update", p)
	})
	return p, err
}

// keepPieceVersion records p, just written, in the piece's history.
func (db *DB) keepPieceVersion(ctx context.Context, t *txn, what string, p store.Piece) error {
	if _, err := t.ExecContext(ctx, db.q.PieceVersionInsert, p.Name, p.Version, p.YAML, db.ts(p.UpdatedAt)); err != nil {
		return fmt.Errorf("%s piece %q: keep version %d: %w", what, p.Name, p.Version, err)
	}
	return nil
}

func (db *DB) pieceMiss(ctx context.Context, t *txn, what, name string, ifVersion int64) error {
	cur, err := scanPiece(t.QueryRowContext(ctx, db.q.PieceGet, name))
	if noRow(err) {
		return fmt.Errorf("%s piece %q: %w", what, name, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s piece %q: %w", what, name, err)
	}
	return fmt.Errorf("%s piece %q: expected version %d, found %d: %w", what, name, ifVersion, cur.Version, store.ErrConflict)
}

// GetPiece returns a piece (see store.Pieces).
func (db *DB) GetPiece(ctx context.Context, name string) (store.Piece, error) {
	p, err := scanPiece(db.r.QueryRowContext(ctx, db.q.PieceGet, name))
	return p, getErr(err, "get piece %q", name)
}

// ListPieces lists pieces by name (see store.Pieces).
func (db *DB) ListPieces(ctx context.Context) ([]store.Piece, error) {
	rows, err := db.r.QueryContext(ctx, db.q.PieceList)
	out, err := scanRows(rows, err, scanPiece)
	if err != nil {
		return nil, fmt.Errorf("list pieces: %w", err)
	}
	return out, nil
}

// DeletePiece removes a piece (see store.Pieces).
func (db *DB) DeletePiece(ctx context.Context, name string, ifVersion int64) error {
	return db.inTx(ctx, func(t *txn) error {
		var got string
		err := t.QueryRowContext(ctx, db.q.PieceDelete, name, ifVersion).Scan(&got)
		if noRow(err) {
			return db.pieceMiss(ctx, t, "delete", name, ifVersion)
		}
		if err != nil {
			return fmt.Errorf("delete piece %q: %w", name, err)
		}
		if _, err := t.ExecContext(ctx, db.q.PieceVersionDelete, name); err != nil {
			return fmt.Errorf("delete piece %q: its versions: %w", name, err)
		}
		return nil
	})
}

// PieceVersions lists a piece's versions, newest first (see store.Pieces).
func (db *DB) PieceVersions(ctx context.Context, name string) ([]store.PieceVersion, error) {
	rows, err := db.r.QueryContext(ctx, db.q.PieceVersionList, name)
	out, err := scanRows(rows, err, func(s scanner) (store.PieceVersion, error) {
		var v store.PieceVersion
		err := s.Scan(&v.Name, &v.Version, tsScan{&v.CreatedAt})
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("list the versions of piece %q: %w", name, err)
	}
	if len(out) == 0 {
		// Every stored piece has at least its current version.
		return nil, fmt.Errorf("list the versions of piece %q: %w", name, store.ErrNotFound)
	}
	return out, nil
}

// GetPieceVersion returns one version of a piece (see store.Pieces).
func (db *DB) GetPieceVersion(ctx context.Context, name string, version int64) (store.PieceVersion, error) {
	var v store.PieceVersion
	err := db.r.QueryRowContext(ctx, db.q.PieceVersionGet, name, version).Scan(&v.Name, &v.Version, &v.YAML, tsScan{&v.CreatedAt})
	return v, getErr(err, "get version %d of piece %q", version, name)
}

// ---- schedules

func scanSchedule(s scanner) (store.Schedule, error) {
	var sc store.Schedule
	err := s.Scan(&sc.ID, &sc.Name, &sc.CronExpr, &sc.Enabled, &sc.Owner, &sc.Title, &sc.Body, &sc.Piece, &sc.Profile,
		&sc.TaskClass, tsScan{&sc.NextRunAt}, tsScan{&sc.LastFiredAt}, tsScan{&sc.CreatedAt}, tsScan{&sc.UpdatedAt})
	return sc, err
}

func scanSchedules(rows *sql.Rows, err error) ([]store.Schedule, error) {
	return scanRows(rows, err, scanSchedule)
}

func (db *DB) scheduleArgs(s store.NewSchedule) []any {
	return []any{s.Name, s.CronExpr, !s.Disabled, s.Owner, s.Title, s.Body, s.Piece, s.Profile, s.TaskClass, db.ts(s.NextRunAt)}
}

// CreateSchedule stores a schedule (see store.Schedules).
func (db *DB) CreateSchedule(ctx context.Context, s store.NewSchedule) (store.Schedule, error) {
	if err := s.Validate(); err != nil {
		return store.Schedule{}, fmt.Errorf("create schedule: %w", err)
	}
	var out store.Schedule
	err := db.inTx(ctx, func(t *txn) error {
		var err error
		out, err = scanSchedule(t.QueryRowContext(ctx, db.q.ScheduleInsert, append(db.scheduleArgs(s), db.ts(db.Now()))...))
		if err != nil {
			err = db.classify(err)
			if errors.Is(err, store.ErrConflict) {
				return fmt.Errorf("create schedule %q: the name is taken: %w", s.Name, err)
			}
			return fmt.Errorf("create schedule %q: %w", s.Name, err)
		}
		return nil
	})
	return out, err
}

// UpdateSchedule replaces a schedule's definition (see store.Schedules).
func (db *DB) UpdateSchedule(ctx context.Context, id int64, s store.NewSchedule) (store.Schedule, error) {
	if err := s.Validate(); err != nil {
		return store.Schedule{}, fmt.Errorf("update schedule: %w", err)
	}
	var out store.Schedule
	err := db.inTx(ctx, func(t *txn) error {
		var err error
		out, err = scanSchedule(t.QueryRowContext(ctx, db.q.ScheduleUpdate, append(append([]any{id}, db.scheduleArgs(s)...), db.ts(db.Now()))...))
		if noRow(err) {
			return fmt.Errorf("update schedule %d: %w", id, store.ErrNotFound)
		}
		if err != nil {
			err = db.classify(err)
			if errors.Is(err, store.ErrConflict) {
				return fmt.Errorf("update schedule %d: the name %q is taken: %w", id, s.Name, err)
			}
			return fmt.Errorf("update schedule %d: %w", id, err)
		}
		return nil
	})
	return out, err
}

// GetSchedule returns a schedule (see store.Schedules).
func (db *DB) GetSchedule(ctx context.Context, id int64) (store.Schedule, error) {
	s, err := scanSchedule(db.r.QueryRowContext(ctx, db.q.ScheduleGet, id))
	return s, getErr(err, "get schedule %d", id)
}

// ListSchedules lists schedules by id (see store.Schedules).
func (db *DB) ListSchedules(ctx context.Context) ([]store.Schedule, error) {
	out, err := scanSchedules(db.r.QueryContext(ctx, db.q.ScheduleList))
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}

// DeleteSchedule removes a schedule (see store.Schedules).
func (db *DB) DeleteSchedule(ctx context.Context, id int64) error {
	return db.inTx(ctx, func(t *txn) error {
		var got int64
		err := t.QueryRowContext(ctx, db.q.ScheduleDelete, id).Scan(&got)
		if noRow(err) {
			return fmt.Errorf("delete schedule %d: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("delete schedule %d: %w", id, err)
		}
		return nil
	})
}

// DueSchedules lists schedules whose tick has come (see store.Schedules).
func (db *DB) DueSchedules(ctx context.Context, limit int) ([]store.Schedule, error) {
	out, err := scanSchedules(db.r.QueryContext(ctx, db.q.ScheduleDue, db.ts(db.Now()), int64(store.ListLimit(limit))))
	if err != nil {
		return nil, fmt.Errorf("list due schedules: %w", err)
	}
	return out, nil
}

// FireSchedule fires one tick exactly once (see store.Schedules).
func (db *DB) FireSchedule(ctx context.Context, p store.FireParams) (store.Task, store.Job, bool, error) {
	if err := p.Validate(); err != nil {
		return store.Task{}, store.Job{}, false, fmt.Errorf("fire schedule: %w", err)
	}
	var (
		task  store.Task
		job   store.Job
		fired bool
	)
	err := db.inTx(ctx, func(t *txn) error {
		now := db.Now()
		s, err := scanSchedule(t.QueryRowContext(ctx, db.q.ScheduleFire, p.ScheduleID, db.ts(p.Tick), db.ts(p.Next), db.ts(now)))
		if noRow(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("fire schedule %d: %w", p.ScheduleID, err)
		}
		nt, err := s.Task().Validate()
		if err != nil {
			return fmt.Errorf("fire schedule %d: %w", p.ScheduleID, err)
		}
		if task, job, err = db.createTask(ctx, t, nt, now); err != nil {
			return fmt.Errorf("fire schedule %d: %w", p.ScheduleID, err)
		}
		fired = true
		return nil
	})
	if err != nil {
		return store.Task{}, store.Job{}, false, err
	}
	return task, job, fired, nil
}

// ---- audit

func scanAudit(s scanner) (store.AuditEntry, error) {
	var (
		e       store.AuditEntry
		details []byte
	)
	err := s.Scan(&e.ID, &e.Actor, &e.Action, &e.Target, &details, tsScan{&e.CreatedAt})
	e.Details = json.RawMessage(details)
	return e, err
}

// AppendAudit records an audit entry (see store.Audit).
func (db *DB) AppendAudit(ctx context.Context, e store.NewAuditEntry) (store.AuditEntry, error) {
	e, err := e.Validate()
	if err != nil {
		return store.AuditEntry{}, fmt.Errorf("append audit entry: %w", err)
	}
	var out store.AuditEntry
	err = db.inTx(ctx, func(t *txn) error {
		var err error
		out, err = scanAudit(t.QueryRowContext(ctx, db.q.AuditInsert, e.Actor, e.Action, e.Target, string(e.Details), db.ts(db.Now())))
		if err != nil {
			return fmt.Errorf("append audit entry: %w", err)
		}
		return nil
	})
	return out, err
}

// ListAudit lists audit entries newest first (see store.Audit).
func (db *DB) ListAudit(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	rows, err := db.r.QueryContext(ctx, db.q.AuditList, f.Target, f.BeforeID, int64(store.ListLimit(f.Limit)))
	out, err := scanRows(rows, err, scanAudit)
	if err != nil {
		return nil, fmt.Errorf("list audit log: %w", err)
	}
	return out, nil
}

// ---- sessions

func scanSession(s scanner) (store.Session, error) {
	var (
		out   store.Session
		jobID sql.NullInt64
	)
	err := s.Scan(&out.ID, &jobID, &out.ExecutorType, &out.Provider, &out.Model, &out.Workspace, &out.Title,
		tsScan{&out.CreatedAt}, tsScan{&out.UpdatedAt})
	out.JobID = jobID.Int64
	return out, err
}

// PutSession creates or updates a session record (see store.Sessions).
func (db *DB) PutSession(ctx context.Context, s store.Session) (store.Session, error) {
	if err := s.Validate(); err != nil {
		return store.Session{}, fmt.Errorf("put session: %w", err)
	}
	var out store.Session
	err := db.inTx(ctx, func(t *txn) error {
		var err error
		out, err = scanSession(t.QueryRowContext(ctx, db.q.SessionUpsert, s.ID, nid(s.JobID), s.ExecutorType, s.Provider,
			s.Model, s.Workspace, s.Title, db.ts(db.Now())))
		if err != nil {
			err = db.classify(err)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("put session %q: job %d: %w", s.ID, s.JobID, err)
			}
			return fmt.Errorf("put session %q: %w", s.ID, err)
		}
		return nil
	})
	return out, err
}

// GetSession returns a session record (see store.Sessions).
func (db *DB) GetSession(ctx context.Context, id string) (store.Session, error) {
	s, err := scanSession(db.r.QueryRowContext(ctx, db.q.SessionGet, id))
	return s, getErr(err, "get session %q", id)
}

// ListSessions lists session records newest first (see store.Sessions).
func (db *DB) ListSessions(ctx context.Context, f store.SessionFilter) ([]store.Session, error) {
	rows, err := db.r.QueryContext(ctx, db.q.SessionList, f.JobID, int64(store.ListLimit(f.Limit)))
	out, err := scanRows(rows, err, scanSession)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// ---- leaders

// ElectLeader takes or extends leadership (see store.Leaders).
func (db *DB) ElectLeader(ctx context.Context, name, owner string, ttl time.Duration) (bool, error) {
	if err := store.ValidateLeader(name, owner, ttl); err != nil {
		return false, fmt.Errorf("elect leader: %w", err)
	}
	var leads bool
	err := db.inTx(ctx, func(t *txn) error {
		now := db.Now()
		var got string
		err := t.QueryRowContext(ctx, db.q.LeaderElect, name, owner, db.ts(now), db.ts(now.Add(ttl))).Scan(&got)
		if noRow(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("elect leader of %q: %w", name, err)
		}
		leads = got == owner
		return nil
	})
	return leads, err
}

// ResignLeader ends owner's term early (see store.Leaders).
func (db *DB) ResignLeader(ctx context.Context, name, owner string) error {
	return db.inTx(ctx, func(t *txn) error {
		if _, err := t.ExecContext(ctx, db.q.LeaderResign, name, owner); err != nil {
			return fmt.Errorf("resign leadership of %q: %w", name, err)
		}
		return nil
	})
}
