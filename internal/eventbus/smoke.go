package eventbus

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Smoke publishes one maestro.sessions.session.started event and waits
// for its acknowledgement (maestro events smoke): an error says why the
// bus cannot be used (connection, missing stream, publish). It returns
// the event's id.
func Smoke(ctx context.Context, s Settings, corr Correlation, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p, err := Dial(s, timeout)
	if err != nil {
		return "", err
	}
	defer p.Close()
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("smoke event id: %w", err)
	}
	corr.SessionID = cmp.Or(corr.SessionID, "smoke-"+id.String())
	ev := Event{ID: "smoke-" + id.String(), Type: TypeSessionStarted, Time: time.Now().UTC(),
		Data: map[string]any{"session_id": corr.SessionID, "state": "started", "smoke": true}}
	data, err := Encode(ev, s.Source, corr)
	if err != nil {
		return "", err
	}
	if err := p.Publish(ctx, ev.Type, ev.ID, data); err != nil {
		return "", err
	}
	return ev.ID, nil
}
