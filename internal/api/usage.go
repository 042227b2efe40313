package api

import "time"

// UsagePath answers the usage report (GET; docs/api.md, "Usage").
const UsagePath = Prefix + "/usage"

// Usage groupings (GET /api/v1/usage?group_by=).
const (
	UsageByDay      = "day"
	UsageByModel    = "model"
	UsageByProvider = "provider"
	UsageByPiece    = "piece"
	UsageByExecutor = "executor"
)

// UsageReport answers GET /api/v1/usage: what the jobs created in
// [From, To) spent, in total, by GroupBy, and the tasks that cost most.
type UsageReport struct {
	From          time.Time `json:"from"`
	To            time.Time `json:"to"`
	GroupBy       string    `json:"group_by"`
	IncludeReplay bool      `json:"include_replay"`
	Totals        UsageSum  `json:"totals"`
	// Groups are sorted by key (days ascending, "" last otherwise: a job
	// whose log named no model, piece…).
	Groups []UsageGroup `json:"groups"`
	// TopTasks are the costliest tasks of the window, at most 10,
	// costliest first.
	TopTasks []UsageTask `json:"top_tasks"`
	// BudgetUSDMonth is the configured monthly budget (0: none) and
	// MonthCostUSD what the jobs of the current calendar month (UTC) have
	// cost so far, with the same replay choice.
	BudgetUSDMonth float64 `json:"budget_usd_month"`
	MonthCostUSD   float64 `json:"month_cost_usd"`
}

// UsageSum adds up jobs' usage.
type UsageSum struct {
	Jobs         int64   `json:"jobs"`
	CostUSD      float64 `json:"cost_usd"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
}

// UsageGroup is the usage of one key of the grouping: a day
// (YYYY-MM-DD, UTC), a model (provider/model, or the agent CLI), a
// provider (or agent CLI), a piece, an executor (native, agent-cli,
// replay); "" when the job's log did not say.
type UsageGroup struct {
	Key string `json:"key"`
	UsageSum
}

// UsageTask is one task's usage over its jobs of the window.
type UsageTask struct {
	TaskID int64  `json:"task_id"`
	Title  string `json:"title"`
	Piece  string `json:"piece,omitempty"`
	Model  string `json:"model,omitempty"`
	UsageSum
}
