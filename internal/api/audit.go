package api

// Actions of the audit log (AuditList's entries, GET /api/v1/audit): one a
// mutation of the API. An entry's details are the action's *Audit type.
const (
	ActionTaskCreate     = "task.create"
	ActionTaskComment    = "task.comment"
	ActionTaskUpload     = "task.upload"
	ActionJobCancel      = "job.cancel"
	ActionJobRetry       = "job.retry"
	ActionPieceCreate    = "piece.create"
	ActionPieceUpdate    = "piece.update"
	ActionPieceDelete    = "piece.delete"
	ActionScheduleCreate = "schedule.create"
	ActionScheduleUpdate = "schedule.update"
	ActionScheduleDelete = "schedule.delete"
)

// TaskCreateAudit details ActionTaskCreate.
type TaskCreateAudit struct {
	JobID int64     `json:"job_id"`
	Title string    `json:"title"`
	Piece string    `json:"piece"`
	Files []FileRef `json:"files,omitempty"`
}

// TaskCommentAudit details ActionTaskComment: the comment and the jobs it
// resumed.
type TaskCommentAudit struct {
	CommentID   int64   `json:"comment_id"`
	ResumedJobs []int64 `json:"resumed_jobs"`
}

// ActionTaskUpload is detailed by the FileRef of the upload.

// JobCancelAudit details ActionJobCancel.
type JobCancelAudit struct {
	Reason string `json:"reason"`
}

// JobRetryAudit details ActionJobRetry: the attempts added.
type JobRetryAudit struct {
	Extra int `json:"extra"`
}

// PieceAudit details ActionPieceCreate and ActionPieceUpdate: the stored
// version.
type PieceAudit struct {
	Version int64 `json:"version"`
}

// PieceDeleteAudit details ActionPieceDelete.
type PieceDeleteAudit struct {
	BuiltinRestored bool `json:"builtin_restored"`
}

// ScheduleAudit details ActionScheduleCreate and ActionScheduleUpdate
// (Enabled only on updates); ActionScheduleDelete has no details.
type ScheduleAudit struct {
	Name     string `json:"name"`
	CronExpr string `json:"cron_expr"`
	Enabled  *bool  `json:"enabled,omitempty"`
}
