package store

import (
	"context"
	"time"
)

// LiveSessions records which `maestro serve` process owns each live session
// of the HTTP attach API, so that every serve sharing the store can find a
// session's owner: proxy a request to it, answer 409 with its address, or
// say the session ended when its owner died (docs/scale-out.md, "Live
// sessions"). The session log itself stays with the owner.
type LiveSessions interface {
	// OwnLiveSession records that instance, reachable at address, owns
	// the live session id from now on (heartbeat now). ErrConflict if the
	// id is recorded already.
	OwnLiveSession(ctx context.Context, id, instance, address string) (LiveSession, error)
	// HeartbeatLiveSessions refreshes the heartbeat of every session of
	// instance that has not ended and returns how many there are.
	HeartbeatLiveSessions(ctx context.Context, instance string) (int64, error)
	// EndLiveSession marks a session of instance ended with reason (the
	// owner shut it down). ErrNotFound if instance does not own an open
	// session id.
	EndLiveSession(ctx context.Context, id, instance, reason string) (LiveSession, error)
	// EndStaleLiveSessions ends every open session whose heartbeat is
	// older than before (its owner died) with reason, and returns them.
	EndStaleLiveSessions(ctx context.Context, before time.Time, reason string) ([]LiveSession, error)
	// GetLiveSession returns one record.
	GetLiveSession(ctx context.Context, id string) (LiveSession, error)
	// ListLiveSessions returns records newest first (then by id).
	ListLiveSessions(ctx context.Context, f LiveSessionFilter) ([]LiveSession, error)
}

// LiveSession is the ownership record of a live session.
type LiveSession struct {
	ID string `json:"id"`
	// Instance identifies the serve process that owns the session.
	Instance string `json:"instance"`
	// Address is the owner's advertised base URL (serve --advertise).
	Address     string    `json:"address"`
	CreatedAt   time.Time `json:"created_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	// EndedAt is zero while the session is live.
	EndedAt   time.Time `json:"ended_at,omitzero"`
	EndReason string    `json:"end_reason,omitempty"`
}

// Ended reports whether the session has ended.
func (s LiveSession) Ended() bool { return !s.EndedAt.IsZero() }

// LiveSessionFilter selects ownership records; zero fields do not filter.
type LiveSessionFilter struct {
	// Open keeps the sessions that have not ended.
	Open bool
	// Instance keeps the sessions of one owner.
	Instance string
	Limit    int
}

// ValidateLiveSession checks an OwnLiveSession input.
func ValidateLiveSession(id, instance, address string) error {
	if err := label("id", id, true); err != nil {
		return err
	}
	if err := label("instance", instance, true); err != nil {
		return err
	}
	return text("address", address, 2048, true)
}
