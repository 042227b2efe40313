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
	return getAs[api.PieceList](ctx, c, api.PiecesPath, nil)
}

func piecePath(name string) string { return api.PiecesPath + "/" + url.PathEscape(name) }

// Piece returns a piece with its YAML.
func (c *Client) Piece(ctx context.Context, name string) (api.PieceDetail, error) {
	return getAs[api.PieceDetail](ctx, c, piecePath(name), nil)
}

// CreatePiece stores a new piece given as YAML.
func (c *Client) CreatePiece(ctx context.Context, yaml string) (api.PieceDetail, error) {
	return callAs[api.PieceDetail](ctx, c, http.MethodPost, api.PiecesPath, api.PieceRequest{YAML: yaml})
}

// PutPiece creates or replaces the stored piece name (a stored piece named
// like a built-in overrides it); ifVersion, when not 0, replaces it only
// at that version.
func (c *Client) PutPiece(ctx context.Context, name, yaml string, ifVersion int64) (api.PieceDetail, error) {
	return callAs[api.PieceDetail](ctx, c, http.MethodPut, piecePath(name), api.PieceRequest{YAML: yaml, IfVersion: ifVersion})
}

// ValidatePiece checks a piece given as YAML without storing it; an
// invalid piece is an *Error listing the validator's faults.
func (c *Client) ValidatePiece(ctx context.Context, yaml string) (api.PieceValidation, error) {
	return callAs[api.PieceValidation](ctx, c, http.MethodPost, api.PiecesPath+"/validate", api.PieceRequest{YAML: yaml})
}

// DeletePiece deletes a stored piece; version, when not 0, deletes it only
// at that version.
func (c *Client) DeletePiece(ctx context.Context, name string, version int64) (api.PieceDeleted, error) {
	path := piecePath(name)
	if q := url.Values(newQuery().num("version", version)).Encode(); q != "" {
		path += "?" + q
	}
	return callAs[api.PieceDeleted](ctx, c, http.MethodDelete, path, nil)
}

// Schedules lists the cron schedules.
func (c *Client) Schedules(ctx context.Context) (api.ScheduleList, error) {
	return getAs[api.ScheduleList](ctx, c, api.SchedulesPath, nil)
}

// Schedule returns a schedule.
func (c *Client) Schedule(ctx context.Context, id int64) (store.Schedule, error) {
	out, err := getAs[api.ScheduleResponse](ctx, c, idPath(api.SchedulesPath, id), nil)
	return out.Schedule, err
}

// CreateSchedule creates a schedule.
func (c *Client) CreateSchedule(ctx context.Context, req api.ScheduleRequest) (store.Schedule, error) {
	out, err := callAs[api.ScheduleResponse](ctx, c, http.MethodPost, api.SchedulesPath, req)
	return out.Schedule, err
}

// PutSchedule replaces a schedule.
func (c *Client) PutSchedule(ctx context.Context, id int64, req api.ScheduleRequest) (store.Schedule, error) {
	out, err := callAs[api.ScheduleResponse](ctx, c, http.MethodPut, idPath(api.SchedulesPath, id), req)
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
	return getAs[api.AuditList](ctx, c, api.AuditPath, p.query().str("target", target))
}

// Health asks /healthz (liveness) or, with ready, /readyz (the store
// answers); a server that is not ready is an *Error with status 503.
func (c *Client) Health(ctx context.Context, ready bool) (api.Health, error) {
	path := "/healthz"
	if ready {
		path = "/readyz"
	}
	return getAs[api.Health](ctx, c, path, nil)
}
