package store

import (
	"context"
	"time"
)

// MaxRunStateBytes bounds a job's stored run state (SaveRunState's data).
const MaxRunStateBytes = 32 << 20

// RunState is a job's run state as the store keeps it: what any worker
// claiming the job needs to resume its run (docs/queue.md, "Run state in
// the store"). Data is opaque to the store.
type RunState struct {
	JobID int64
	// Attempt is the attempt that wrote it; Movement the run's current
	// movement then.
	Attempt   int
	Movement  string
	Data      []byte
	UpdatedAt time.Time
}

// RunStates keeps each job's latest run state, so that a job's run does
// not depend on the disk of the worker that ran it.
type RunStates interface {
	// SaveRunState replaces the run state of the job l holds. Fenced: a
	// worker that lost the job gets ErrLeaseLost and changes nothing.
	SaveRunState(ctx context.Context, l Lease, movement string, data []byte) error
	// RunState returns the job's latest run state; ErrNotFound when no
	// attempt saved one.
	RunState(ctx context.Context, jobID int64) (RunState, error)
}

// ValidateRunState checks a SaveRunState input.
func ValidateRunState(movement string, data []byte) error {
	if err := label("movement", movement, false); err != nil {
		return err
	}
	switch {
	case len(data) == 0:
		return invalid("data", "is required")
	case len(data) > MaxRunStateBytes:
		return invalid("data", "is %d bytes, more than the %d allowed", len(data), MaxRunStateBytes)
	}
	return nil
}
