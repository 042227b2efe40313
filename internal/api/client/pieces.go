package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/store"
)

// Pieces lists the pieces: built-in, from piece files and stored.
func (c *Client) Pieces(ctx context.Context) (api.PieceList, error) {
	var out api.PieceList
	err := c.get(ctx, api.PiecesPath, nil, &out)
	return out, err
}

func piecePath(name string) string { return api.PiecesPath + "/" + url.PathEscape(name) }

// Piece returns a piece with its YAML.
func (c *Client) Piece(ctx context.Context, name string) (api.PieceDetail, error) {
	var out api.PieceDetail
	err := c.get(ctx, piecePath(name), nil, &out)
	return out, err
}

// CreatePiece stores a new piece given as YAML.
func (c *Client) CreatePiece(ctx context.Context, yaml string) (api.PieceDetail, error) {
	var out api.PieceDetail
	err := c.call(ctx, http.MethodPost, api.PiecesPath, api.PieceRequest{YAML: yaml}, &out)
	return out, err
}

// PutPiece creates or replaces the stored piece name (a stored piece named
// like a built-in overrides it); ifVersion, when not 0, replaces it only
// at that version.
func (c *Client) PutPiece(ctx context.Context, name, yaml string, ifVersion int64) (api.PieceDetail, error) {
	var out api.PieceDetail
	err := c.call(ctx, http.MethodPut, piecePath(name), api.PieceRequest{YAML: yaml, IfVersion: ifVersion}, &out)
	return out, err
}

// ValidatePiece checks a piece given as YAML without storing it; an
// invalid piece is an *Error listing the validator's faults.
func (c *Client) ValidatePiece(ctx context.Context, yaml string) (api.PieceValidation, error) {
	var out api.PieceValidation
	err := c.call(ctx, http.MethodPost, api.PiecesPath+"/validate", api.PieceRequest{YAML: yaml}, &out)
	return out, err
}

// DeletePiece deletes a stored piece; version, when not 0, deletes it only
// at that version.
func (c *Client) DeletePiece(ctx context.Context, name string, version int64) (api.PieceDeleted, error) {
	var out api.PieceDeleted
	path := piecePath(name)
	if q := url.Values(newQuery().num("version", version)).Encode(); q != "" {
		path += "?" + q
	}
	err := c.call(ctx, http.MethodDelete, path, nil, &out)
	return out, err
}

// Schedules lists the cron schedules.
func (c *Client) Schedules(ctx context.Context) (api.ScheduleList, error) {
	var out api.ScheduleList
	err := c.get(ctx, api.SchedulesPath, nil, &out)
	return out, err
}

// Schedule returns a schedule.
func (c *Client) Schedule(ctx context.Context, id int64) (store.Schedule, error) {
	var out api.ScheduleResponse
	err := c.get(ctx, idPath(api.SchedulesPath, id), nil, &out)
	return out.Schedule, err
}

// CreateSchedule creates a schedule.
func (c *Client) CreateSchedule(ctx context.Context, req api.ScheduleRequest) (store.Schedule, error) {
	var out api.ScheduleResponse
	err := c.call(ctx, http.MethodPost, api.SchedulesPath, req, &out)
	return out.Schedule, err
}

// PutSchedule replaces a schedule.
func (c *Client) PutSchedule(ctx context.Context, id int64, req api.ScheduleRequest) (store.Schedule, error) {
	var out api.ScheduleResponse
	err := c.call(ctx, http.MethodPut, idPath(api.SchedulesPath, id), req, &out)
	return out.Schedule, err
}

// DeleteSchedule deletes a schedule; the tasks it created stay.
func (c *Client) DeleteSchedule(ctx context.Context, id int64) error {
	return c.call(ctx, http.MethodDelete, idPath(api.SchedulesPath, id), nil, nil)
}

// Audit lists the audit log, newest first; target, when not empty, keeps
// the entries of one target ("task:12", "job:3", "piece:review",
// "schedule:2").
func (c *Client) Audit(ctx context.Context, target string, p Page) (api.AuditList, error) {
	var out api.AuditList
	err := c.get(ctx, api.AuditPath, p.query().str("target", target), &out)
	return out, err
}

// Health asks /healthz (liveness) or, with ready, /readyz (the store
// answers); a server that is not ready is an *Error with status 503.
func (c *Client) Health(ctx context.Context, ready bool) (api.Health, error) {
	var out api.Health
	path := "/healthz"
	if ready {
		path = "/readyz"
	}
	err := c.get(ctx, path, nil, &out)
	return out, err
}
