package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/httpedge"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/store"
)

// storeError answers with the status a store error deserves: 404 for a
// missing row, 409 for a conflict or a transition the state does not
// allow, 422 naming the field for rejected input, 500 otherwise (logged,
// with a generic message).
func (s *Server) storeError(w http.ResponseWriter, r *http.Request, err error) {
	if fe, ok := errors.AsType[*store.FieldError](err); ok {
		writeFieldError(w, http.StatusUnprocessableEntity, fe.Field, fe.Message)
		return
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, store.ErrInvalidTransition):
		// The store's message says why; its sentinel's words ("invalid
		// state transition") are the state machine's, not the user's.
		writeError(w, http.StatusConflict, strings.TrimSuffix(err.Error(), ": "+store.ErrInvalidTransition.Error()))
	case errors.Is(err, store.ErrConflict):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, store.ErrInvalid):
		writeError(w, http.StatusUnprocessableEntity, err.Error())
	case r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
		writeError(w, http.StatusServiceUnavailable, "request cancelled")
	default:
		s.log.Error("store call failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error: the store call failed; see the server log")
	}
}

// nameTaken answers 409 naming field when err says that a create (or a
// rename) hit a name another record holds, and reports whether it did.
// The store's error quotes the database's constraint ("UNIQUE constraint
// failed: schedules.name (2067)"), which tells a client nothing it can
// act on.
func nameTaken(w http.ResponseWriter, err error, field, msg string) bool {
	if !errors.Is(err, store.ErrConflict) {
		return false
	}
	writeFieldError(w, http.StatusConflict, field, msg)
	return true
}

// pieceErrors answers 422 with the validator's faults.
func pieceErrors(w http.ResponseWriter, err error) bool {
	pe, ok := errors.AsType[*piece.Errors](err)
	if !ok {
		return false
	}
	body := api.Error{Error: "the piece is not valid: " + strconv.Itoa(len(pe.List)) + " error(s)"}
	for _, e := range pe.List {
		body.Errors = append(body.Errors, api.PieceFault{Line: e.Line, Col: e.Col, Field: e.Field, Message: e.Message})
	}
	if len(pe.List) > 0 {
		first := pe.List[0]
		body.Error = fmt.Sprintf("the piece is not valid (%d error(s)); first: %d:%d: %s", len(pe.List), first.Line, first.Col, strings.TrimPrefix(first.Field+": "+first.Message, ": "))
	}
	writeJSON(w, http.StatusUnprocessableEntity, body)
	return true
}

// decodeJSON reads a JSON object into v: a body must be declared as
// application/json (415 otherwise, so that a browser's text/plain request
// never acts), a field name must match exactly (an unknown field, or one
// whose case differs, is refused), the body is bounded, and errors name
// the field. It answers the request and returns false when the body is
// unusable.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, optional bool) bool {
	if e := httpedge.RequireJSON(r); e != nil {
		httpedge.WriteError(w, httpedge.REST, e)
		return false
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err == nil {
		err = httpedge.DecodeJSON(data, v)
	}
	if err == io.EOF && optional {
		return true
	}
	if err == nil {
		return true
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body: expected at most %d bytes", maxJSONBody))
		return false
	}
	if writeFieldDecodeError(w, err, "") {
		return false
	}
	switch {
	case err == io.EOF:
		writeError(w, http.StatusBadRequest, "request body: expected a JSON object, found nothing")
	case err == httpedge.ErrJSONTrailing:
		writeError(w, http.StatusBadRequest, "request body: expected one JSON object, found more data after it")
	default:
		writeError(w, http.StatusBadRequest, "request body: expected a JSON object: "+strings.TrimPrefix(err.Error(), "json: "))
	}
	return false
}

// writeFieldDecodeError answers the errors of httpedge.DecodeJSON that
// concern one field (a value of the wrong type, an unknown field) with a
// 400 naming that field, and reports whether err was one of them. A value
// of the wrong type for the whole document (an array where the route takes
// an object) is the field whole, or the request body when whole is empty.
// Types are said in JSON's words ("an integer", "a JSON object"), never
// Go's.
func writeFieldDecodeError(w http.ResponseWriter, err error, whole string) bool {
	if ue, ok := errors.AsType[*httpedge.UnknownFieldError](err); ok {
		writeFieldError(w, http.StatusBadRequest, ue.Field, ue.Message())
		return true
	}
	if field, msg, ok := httpedge.JSONTypeError(err); ok {
		switch {
		case field != "":
			writeFieldError(w, http.StatusBadRequest, field, msg)
		case whole != "":
			writeFieldError(w, http.StatusBadRequest, whole, msg)
		default:
			writeError(w, http.StatusBadRequest, "request body: "+msg)
		}
		return true
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		writeFieldError(w, http.StatusBadRequest, strings.Trim(f, `"`), "unknown field; see docs/api.md for the fields this route takes")
		return true
	}
	return false
}

// pathID parses the {name} path value as a positive id.
func pathID(w http.ResponseWriter, r *http.Request, name string) (int64, bool) {
	v := r.PathValue(name)
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		writeFieldError(w, http.StatusBadRequest, name, fmt.Sprintf("expected a positive integer id, found %q", v))
		return 0, false
	}
	return id, true
}

// queryInt parses an optional non-negative integer query parameter.
func queryInt(w http.ResponseWriter, r *http.Request, name string) (int64, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		writeFieldError(w, http.StatusBadRequest, name, fmt.Sprintf("expected a non-negative integer, found %q", v))
		return 0, false
	}
	return n, true
}

// queryLimit parses ?limit= (1..store.MaxListLimit, default def).
func queryLimit(w http.ResponseWriter, r *http.Request, def int) (int, bool) {
	n, ok := queryInt(w, r, "limit")
	if !ok {
		return 0, false
	}
	if n == 0 {
		return def, true
	}
	if n > store.MaxListLimit {
		writeFieldError(w, http.StatusBadRequest, "limit", fmt.Sprintf("expected at most %d, found %d", store.MaxListLimit, n))
		return 0, false
	}
	return int(n), true
}

// queryPage parses the paging parameters of a list route: the cursor
// parameter named cursor ("after" or "before", absent: 0) and ?limit=
// (default def), in that order.
func queryPage(w http.ResponseWriter, r *http.Request, cursor string, def int) (int64, int, bool) {
	c, ok := queryInt(w, r, cursor)
	if !ok {
		return 0, 0, false
	}
	limit, ok := queryLimit(w, r, def)
	return c, limit, ok
}

// servePage answers a paged list route: it parses the cursor parameter
// named cursor and ?limit= (default def), list reads the page, and the
// answer is 200 with answer(page, limit).
func servePage[T, A any](s *Server, w http.ResponseWriter, r *http.Request, cursor string, def int, list func(ctx context.Context, cursor int64, limit int) ([]T, error), answer func(page []T, limit int) A) {
	c, limit, ok := queryPage(w, r, cursor, def)
	if !ok {
		return
	}
	page, err := list(r.Context(), c, limit)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, answer(page, limit))
}

// queryStates reads the query parameter state, job states separated by
// commas (none: nil); an unknown one is answered with 400 naming the valid
// ones, and ok is false.
func queryStates(w http.ResponseWriter, r *http.Request) (states []store.State, ok bool) {
	v := r.URL.Query().Get("state")
	if v == "" {
		return nil, true
	}
	for st := range strings.SplitSeq(v, ",") {
		if !store.State(st).Valid() {
			writeFieldError(w, http.StatusBadRequest, "state", fmt.Sprintf("expected job states (comma-separated) among %v, found %q", store.States(), st))
			return nil, false
		}
		states = append(states, store.State(st))
	}
	return states, true
}

// nextCursor is the cursor of the page after items, a page listed with
// limit: the key of its last item when the page is full (there may be
// more), 0 (no next page) otherwise.
func nextCursor[T any](items []T, limit int, key func(T) int64) int64 {
	if len(items) == 0 || len(items) != limit {
		return 0
	}
	return key(items[len(items)-1])
}

// serveByID answers a GET of one record by its {id}: get reads it, and
// the answer is 200 with answer(record).
func serveByID[T, A any](s *Server, w http.ResponseWriter, r *http.Request, get func(context.Context, int64) (T, error), answer func(T) A) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	v, err := get(r.Context(), id)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, answer(v))
}

// audit records a mutation. A failure is logged, not returned: the
// mutation already happened.
func (s *Server) audit(r *http.Request, action, target string, details any) {
	var raw json.RawMessage
	if details != nil {
		b, err := json.Marshal(details)
		if err == nil {
			raw = b
		}
	}
	if _, err := s.st.AppendAudit(context.WithoutCancel(r.Context()), store.NewAuditEntry{Actor: actor(r), Action: action, Target: target, Details: raw}); err != nil {
		s.log.Error("audit entry not written", "action", action, "target", target, "err", err)
	}
}

func taskTarget(id int64) string     { return "task:" + strconv.FormatInt(id, 10) }
func jobTarget(id int64) string      { return "job:" + strconv.FormatInt(id, 10) }
func scheduleTarget(id int64) string { return "schedule:" + strconv.FormatInt(id, 10) }
func pieceTarget(name string) string { return "piece:" + name }
