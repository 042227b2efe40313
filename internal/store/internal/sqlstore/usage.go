package sqlstore

import (
	"context"
	"fmt"

	"github.com/maestro-run/maestro/internal/store"
)

// ListJobUsage lists what each job created in the window spent (see
// store.Usage). The query (Queries.UsageJobs) answers job_id, task_id (0
// for none), title, piece, executor, model, agent, cost_usd, input_tokens,
// output_tokens, created_at.
func (db *DB) ListJobUsage(ctx context.Context, f store.UsageFilter) ([]store.JobUsage, error) {
	if f.To.Before(f.From) {
		return nil, fmt.Errorf("list job usage: the window ends (%s) before it starts (%s): %w", f.To, f.From, store.ErrInvalid)
	}
	rows, err := db.r.QueryContext(ctx, db.q.UsageJobs, db.ts(f.From), db.ts(f.To), f.IncludeReplay)
	out, err := scanRows(rows, err, func(s scanner) (store.JobUsage, error) {
		var u store.JobUsage
		err := s.Scan(&u.JobID, &u.TaskID, &u.Title, &u.Piece, &u.Executor, &u.Model, &u.Agent, &u.CostUSD,
			&u.InputTokens, &u.OutputTokens, tsScan{&u.CreatedAt})
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("list job usage: %w", err)
	}
	return out, nil
}
