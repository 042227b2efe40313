package queue

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/store"
)

// Run state in the store (docs/queue.md, "Run state in the store"): every
// time the engine saves a job's run state (logs/run-state.json in the
// job's state/ directory: piece position, movement history, lessons,
// question and answers, subtasks, and the conversation of the movement in
// progress) the runner saves the same document, gzip-compressed, in the
// store under the job's lease. At claim, the store's copy replaces the
// local file, so a worker whose disk never saw the job resumes it where
// the last attempt stopped.

// maxRunState bounds a decompressed run state read back from the store.
const maxRunState = 256 << 20

// runStateSaver is the engine's Config.StateSaved of a job's run: it
// keeps each saved state in the store, fenced by the lease of the attempt
// em writes to (a run parked on an MCP server's question is followed by a
// later attempt, park.go). While the run is parked nothing is saved there;
// its next save after an attempt follows it catches up.
func runStateSaver(ctx context.Context, em *emitter) func(movement string, data []byte) error {
	return func(movement string, data []byte) error {
		j := em.job()
		if j == nil || j.SaveRunState == nil {
			return nil
		}
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write(data); err != nil {
			return fmt.Errorf("compress the run state: %w", err)
		}
		if err := zw.Close(); err != nil {
			return fmt.Errorf("compress the run state: %w", err)
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeCallTimeout)
		defer cancel()
		if err := j.SaveRunState(sctx, movement, b.Bytes()); err != nil {
			return fmt.Errorf("save the run state in the store: %w", err)
		}
		return nil
	}
}

// restoreRunState writes the run state the store holds for j (if any)
// into runDir, replacing the local one: the store is the truth at claim.
func restoreRunState(ctx context.Context, j *Job, runDir string) error {
	if j.store == nil {
		return nil
	}
	rs, err := j.store.RunState(ctx, j.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the job's run state from the store: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(rs.Data))
	if err != nil {
		return fmt.Errorf("the job's run state in the store: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(zr, maxRunState+1))
	if err == nil && len(data) > maxRunState {
		err = fmt.Errorf("more than %d bytes decompressed", maxRunState)
	}
	if err != nil {
		return fmt.Errorf("the job's run state in the store (attempt %d): %w", rs.Attempt, err)
	}
	return engine.RestoreState(runDir, data)
}
