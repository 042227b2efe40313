package store

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits enforced on input before anything is written. Text must be valid
// UTF-8 without NUL bytes (PostgreSQL cannot store them).
const (
	// MaxNameBytes bounds piece and schedule names.
	MaxNameBytes = 64
	// MaxLabelBytes bounds short labels: owner, author, actor, worker,
	// profile, task class, piece reference, movement, event type, action.
	MaxLabelBytes = 128
	// MaxTitleBytes bounds task and schedule titles.
	MaxTitleBytes = 1024
	// MaxBodyBytes bounds task bodies and job results.
	MaxBodyBytes = 1 << 20
	// MaxCommentBytes bounds comment bodies.
	MaxCommentBytes = 256 << 10
	// MaxJSONBytes bounds job payloads, event data and audit details.
	MaxJSONBytes = 1 << 20
	// MaxCheckpointBytes bounds engine checkpoints.
	MaxCheckpointBytes = 4 << 20
	// MaxPieceBytes bounds a stored piece's YAML.
	MaxPieceBytes = 256 << 10
	// MaxCronBytes bounds cron expressions.
	MaxCronBytes = 256
	// MaxErrorBytes bounds stored error and reason texts; longer ones are
	// truncated (they come from the system, not from users).
	MaxErrorBytes = 16 << 10
	// MaxEventsPerAppend bounds one AppendJobEvents batch.
	MaxEventsPerAppend = 1000
	// MaxListLimit is the default and maximum page size of List calls.
	MaxListLimit = 1000
	// MaxClaim bounds ClaimParams.Limit.
	MaxClaim = 1000
	// MaxAttemptsLimit bounds NewJob.MaxAttempts.
	MaxAttemptsLimit = 100
	// DefaultMaxAttempts is used when NewJob.MaxAttempts is 0.
	DefaultMaxAttempts = 3
	// MaxLease bounds lease durations.
	MaxLease = 24 * time.Hour
	// MaxPriority bounds |priority|.
	MaxPriority = 1 << 30
)

// FieldError is a rejected input field. It matches ErrInvalid with
// errors.Is.
type FieldError struct {
	// Field names the input field, e.g. "title" or "events[3].data".
	Field string
	// Message says what was expected and what was found.
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// ValidateName checks a piece or schedule name: 1-64 lowercase letters,
// digits and hyphens, not starting with a hyphen.
func ValidateName(field, name string) error {
	if name == "" {
		return invalid(field, "required")
	}
	if len(name) > MaxNameBytes || !nameRE.MatchString(name) {
		return invalid(field, "expected 1-%d lowercase letters, digits and hyphens ([a-z0-9-], not starting with -), found %q", MaxNameBytes, clip(name))
	}
	return nil
}

// text checks a free-text field: valid UTF-8, no NUL, at most max bytes,
// and non-blank when required.
func text(field, s string, max int, required bool) error {
	if required && strings.TrimSpace(s) == "" {
		return invalid(field, "required, found an empty value")
	}
	if len(s) > max {
		return invalid(field, "expected at most %d bytes, found %d", max, len(s))
	}
	if !utf8.ValidString(s) {
		return invalid(field, "expected valid UTF-8 text")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return invalid(field, "expected text without NUL bytes")
	}
	return nil
}

// label checks a short single-line label.
func label(field, s string, required bool) error {
	if err := text(field, s, MaxLabelBytes, required); err != nil {
		return err
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return invalid(field, "expected a single-line label without control characters, found %q", clip(s))
		}
	}
	return nil
}

// jsonDoc checks a JSON field and returns it, or "{}" when empty.
func jsonDoc(field string, doc json.RawMessage, max int) (json.RawMessage, error) {
	if len(doc) == 0 {
		return json.RawMessage("{}"), nil
	}
	if len(doc) > max {
		return nil, invalid(field, "expected at most %d bytes of JSON, found %d", max, len(doc))
	}
	if !json.Valid(doc) {
		return nil, invalid(field, "expected valid JSON")
	}
	if !utf8.Valid(doc) {
		return nil, invalid(field, "expected UTF-8 JSON")
	}
	return doc, nil
}

func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	cut := 80
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// TruncateError makes an error or reason text storable: valid UTF-8,
// without NUL, at most MaxErrorBytes.
func TruncateError(s string) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if len(s) <= MaxErrorBytes {
		return s
	}
	cut := MaxErrorBytes - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Validate checks an Enqueue input and returns it with defaults applied.
func (j NewJob) Validate() (NewJob, error) {
	if j.TaskID < 0 {
		return j, invalid("task_id", "expected a positive id or 0, found %d", j.TaskID)
	}
	if j.ParentJobID < 0 {
		return j, invalid("parent_job_id", "expected a positive id or 0, found %d", j.ParentJobID)
	}
	for _, f := range []struct{ name, v string }{{"piece", j.Piece}, {"profile", j.Profile}, {"task_class", j.TaskClass}} {
		if err := label(f.name, f.v, false); err != nil {
			return j, err
		}
	}
	if j.Priority > MaxPriority || j.Priority < -MaxPriority {
		return j, invalid("priority", "expected a value between %d and %d, found %d", -MaxPriority, MaxPriority, j.Priority)
	}
	if j.MaxAttempts == 0 {
		j.MaxAttempts = DefaultMaxAttempts
	}
	if j.MaxAttempts < 1 || j.MaxAttempts > MaxAttemptsLimit {
		return j, invalid("max_attempts", "expected 1-%d, found %d", MaxAttemptsLimit, j.MaxAttempts)
	}
	p, err := jsonDoc("payload", j.Payload, MaxJSONBytes)
	if err != nil {
		return j, err
	}
	j.Payload = p
	return j, nil
}

// Validate checks a Claim input and returns it with defaults applied.
func (p ClaimParams) Validate() (ClaimParams, error) {
	if len(p.Workers) > 0 {
		if p.Worker != "" {
			return p, invalid("worker", "expected either worker or workers, found both (%q and %d names)", clip(p.Worker), len(p.Workers))
		}
		if p.Limit != 0 && p.Limit != len(p.Workers) {
			return p, invalid("limit", "expected 0 or the number of workers (%d) when workers is set, found %d", len(p.Workers), p.Limit)
		}
		if len(p.Workers) > MaxClaim {
			return p, invalid("workers", "expected at most %d names, found %d", MaxClaim, len(p.Workers))
		}
		for i, w := range p.Workers {
			if err := label(fmt.Sprintf("workers[%d]", i), w, true); err != nil {
				return p, err
			}
		}
		p.Limit = len(p.Workers)
	} else if err := label("worker", p.Worker, true); err != nil {
		return p, err
	}
	for i, v := range p.Profiles {
		if err := label(fmt.Sprintf("profiles[%d]", i), v, true); err != nil {
			return p, err
		}
	}
	for i, v := range p.TaskClasses {
		if err := label(fmt.Sprintf("task_classes[%d]", i), v, true); err != nil {
			return p, err
		}
	}
	if p.Limit == 0 {
		p.Limit = 1
	}
	if p.Limit < 1 || p.Limit > MaxClaim {
		return p, invalid("limit", "expected 1-%d, found %d", MaxClaim, p.Limit)
	}
	if err := LeaseDuration("lease_for", p.LeaseFor); err != nil {
		return p, err
	}
	return p, nil
}

// LeaseDuration checks a lease length: positive, at most MaxLease.
func LeaseDuration(field string, d time.Duration) error {
	if d <= 0 || d > MaxLease {
		return invalid(field, "expected a duration in (0, %s], found %s", MaxLease, d)
	}
	return nil
}

// Validate checks a lease's shape (not whether it still holds).
func (l Lease) Validate() error {
	if l.JobID <= 0 {
		return invalid("lease.job_id", "expected a positive id, found %d", l.JobID)
	}
	if l.Attempt < 1 {
		return invalid("lease.attempt", "expected a positive attempt, found %d", l.Attempt)
	}
	return label("lease.owner", l.Owner, true)
}

// Validate checks a Fail input and returns it made storable.
func (p FailParams) Validate() (FailParams, error) {
	if p.RetryAfter < 0 || p.RetryAfter > 7*24*time.Hour {
		return p, invalid("retry_after", "expected a duration in [0, 168h], found %s", p.RetryAfter)
	}
	if p.NotCounted && (p.NoRetry || p.Abort) {
		return p, invalid("not_counted", "an attempt that is not counted is retried: not with no_retry or abort")
	}
	p.Error = TruncateError(p.Error)
	return p, nil
}

// Validate checks a Wait input and returns it made storable.
func (p WaitParams) Validate() (WaitParams, error) {
	if p.State != StateWaitingHuman && p.State != StateWaitingSubtasks {
		return p, invalid("state", "expected %s or %s, found %q", StateWaitingHuman, StateWaitingSubtasks, p.State)
	}
	if p.Question != "" && p.State != StateWaitingHuman {
		return p, invalid("question", "only a waiting_human job asks a question")
	}
	if err := text("question", p.Question, MaxCommentBytes, false); err != nil {
		return p, err
	}
	p.Reason = TruncateError(p.Reason)
	return p, nil
}

// ValidateEvents checks an append batch and returns it with defaults.
func ValidateEvents(events []NewJobEvent) ([]NewJobEvent, error) {
	if len(events) == 0 {
		return nil, invalid("events", "expected at least one event")
	}
	if len(events) > MaxEventsPerAppend {
		return nil, invalid("events", "expected at most %d events per append, found %d", MaxEventsPerAppend, len(events))
	}
	out := make([]NewJobEvent, len(events))
	for i, e := range events {
		if err := label(fmt.Sprintf("events[%d].type", i), string(e.Type), true); err != nil {
			return nil, err
		}
		d, err := jsonDoc(fmt.Sprintf("events[%d].data", i), e.Data, MaxJSONBytes)
		if err != nil {
			return nil, err
		}
		out[i] = NewJobEvent{Type: e.Type, Data: d}
	}
	return out, nil
}

// ValidateResult checks a Complete result.
func ValidateResult(result string) error { return text("result", result, MaxBodyBytes, false) }

// ValidateCheckpoint checks a Checkpoint input.
func ValidateCheckpoint(movement string, data []byte) error {
	if err := label("movement", movement, false); err != nil {
		return err
	}
	if len(data) == 0 {
		return nil
	}
	_, err := jsonDoc("checkpoint", data, MaxCheckpointBytes)
	return err
}

// Validate checks a CreateTask input and returns it with defaults applied.
func (t NewTask) Validate() (NewTask, error) {
	if err := label("owner", t.Owner, false); err != nil {
		return t, err
	}
	if err := text("title", t.Title, MaxTitleBytes, true); err != nil {
		return t, err
	}
	if err := text("body", t.Body, MaxBodyBytes, false); err != nil {
		return t, err
	}
	if t.ScheduleID < 0 {
		return t, invalid("schedule_id", "expected a positive id or 0, found %d", t.ScheduleID)
	}
	j, err := t.Job(0).Validate()
	if err != nil {
		return t, err
	}
	t.MaxAttempts, t.Payload = j.MaxAttempts, j.Payload
	return t, nil
}

// Job returns the first job of the task with the given id.
func (t NewTask) Job(taskID int64) NewJob {
	return NewJob{TaskID: taskID, Piece: t.Piece, Profile: t.Profile, TaskClass: t.TaskClass,
		Priority: t.Priority, MaxAttempts: t.MaxAttempts, Payload: t.Payload}
}

// Validate checks an AddComment input.
func (c NewComment) Validate() error {
	if c.TaskID <= 0 {
		return invalid("task_id", "expected a positive id, found %d", c.TaskID)
	}
	switch c.AuthorKind {
	case AuthorUser, AuthorAgent, AuthorSystem:
	default:
		return invalid("author_kind", "expected %s, %s or %s, found %q", AuthorUser, AuthorAgent, AuthorSystem, clip(c.AuthorKind))
	}
	if err := label("author", c.Author, false); err != nil {
		return err
	}
	return text("body", c.Body, MaxCommentBytes, true)
}

// ValidateJobPiece checks the piece a job records it runs (Jobs.SetPiece):
// a non-empty label, as a new job's piece.
func ValidateJobPiece(piece string) error { return label("piece", piece, true) }

// ValidatePiece checks a piece's name and YAML size (not its content).
func ValidatePiece(name, yaml string) error {
	if err := ValidateName("name", name); err != nil {
		return err
	}
	return text("yaml", yaml, MaxPieceBytes, true)
}

// Validate checks a schedule definition.
func (s NewSchedule) Validate() error {
	if err := ValidateName("name", s.Name); err != nil {
		return err
	}
	if err := label("cron_expr", s.CronExpr, true); err != nil {
		return err
	}
	if len(s.CronExpr) > MaxCronBytes {
		return invalid("cron_expr", "expected at most %d bytes", MaxCronBytes)
	}
	if err := text("title", s.Title, MaxTitleBytes, true); err != nil {
		return err
	}
	if err := text("body", s.Body, MaxBodyBytes, false); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"owner", s.Owner}, {"piece", s.Piece}, {"profile", s.Profile}, {"task_class", s.TaskClass}} {
		if err := label(f.name, f.v, false); err != nil {
			return err
		}
	}
	if s.NextRunAt.IsZero() {
		return invalid("next_run_at", "required")
	}
	return nil
}

// Task returns the task a firing of the schedule creates.
func (s Schedule) Task() NewTask {
	return NewTask{Owner: s.Owner, Title: s.Title, Body: s.Body, Piece: s.Piece,
		Profile: s.Profile, TaskClass: s.TaskClass, ScheduleID: s.ID}
}

// Validate checks a FireSchedule input.
func (p FireParams) Validate() error {
	if p.ScheduleID <= 0 {
		return invalid("schedule_id", "expected a positive id, found %d", p.ScheduleID)
	}
	if p.Tick.IsZero() {
		return invalid("tick", "required")
	}
	if !p.Next.After(p.Tick) {
		return invalid("next", "expected a time after the tick %s, found %s", p.Tick.Format(time.RFC3339), p.Next.Format(time.RFC3339))
	}
	return nil
}

// Validate checks an AppendAudit input and returns it with defaults.
func (e NewAuditEntry) Validate() (NewAuditEntry, error) {
	if err := label("actor", e.Actor, true); err != nil {
		return e, err
	}
	if err := label("action", e.Action, true); err != nil {
		return e, err
	}
	if err := text("target", e.Target, MaxTitleBytes, false); err != nil {
		return e, err
	}
	d, err := jsonDoc("details", e.Details, MaxJSONBytes)
	if err != nil {
		return e, err
	}
	e.Details = d
	return e, nil
}

// Validate checks a PutSession input.
func (s Session) Validate() error {
	if err := label("id", s.ID, true); err != nil {
		return err
	}
	if s.JobID < 0 {
		return invalid("job_id", "expected a positive id or 0, found %d", s.JobID)
	}
	for _, f := range []struct{ name, v string }{{"executor_type", s.ExecutorType}, {"provider", s.Provider}, {"model", s.Model}} {
		if err := label(f.name, f.v, false); err != nil {
			return err
		}
	}
	if err := text("workspace", s.Workspace, 4096, false); err != nil {
		return err
	}
	return text("title", s.Title, MaxTitleBytes, false)
}

// ValidateLeader checks an ElectLeader input.
func ValidateLeader(name, owner string, ttl time.Duration) error {
	if err := label("name", name, true); err != nil {
		return err
	}
	if err := label("owner", owner, true); err != nil {
		return err
	}
	return LeaseDuration("ttl", ttl)
}

// ListLimit applies the default and maximum page size.
func ListLimit(limit int) int {
	if limit <= 0 || limit > MaxListLimit {
		return MaxListLimit
	}
	return limit
}

// ValidateTopic checks a notification topic: a label without newlines.
func ValidateTopic(topic string) error { return label("topic", topic, true) }
