package server

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/store"
)

// scheduleInput validates a schedule request and computes its first tick.
// It answers 422 naming the field and returns false on failure.
func (s *Server) scheduleInput(w http.ResponseWriter, r *http.Request) (store.NewSchedule, bool) {
	var req api.ScheduleRequest
	if !decodeJSON(w, r, &req, false) {
		return store.NewSchedule{}, false
	}
	if s.cfg.NextRun == nil {
		writeError(w, http.StatusNotImplemented, "this server cannot parse cron expressions (no scheduler configured)")
		return store.NewSchedule{}, false
	}
	if strings.TrimSpace(req.CronExpr) == "" {
		writeFieldError(w, http.StatusUnprocessableEntity, "cron_expr", `required: a cron expression such as "0 9 * * 1-5" (minute hour day-of-month month day-of-week)`)
		return store.NewSchedule{}, false
	}
	next, err := s.cfg.NextRun(req.CronExpr, s.now())
	if err != nil {
		writeFieldError(w, http.StatusUnprocessableEntity, "cron_expr", err.Error())
		return store.NewSchedule{}, false
	}
	if strings.TrimSpace(req.Title) == "" {
		writeFieldError(w, http.StatusUnprocessableEntity, "title", "required: the title of the task each tick creates")
		return store.NewSchedule{}, false
	}
	if req.Piece != "" && req.Piece != NoopPiece {
		ok, err := s.pieceExists(r.Context(), req.Piece)
		if err != nil {
			s.storeError(w, r, err)
			return store.NewSchedule{}, false
		}
		if !ok {
			writeFieldError(w, http.StatusUnprocessableEntity, "piece", fmt.Sprintf("no piece %q; GET /api/v1/pieces lists them", req.Piece))
			return store.NewSchedule{}, false
		}
	}
	return store.NewSchedule{
		Name: req.Name, CronExpr: req.CronExpr, Disabled: req.Enabled != nil && !*req.Enabled,
		Owner: actor(r), Title: req.Title, Body: req.Body, Piece: req.Piece, Profile: req.Profile,
		TaskClass: req.TaskClass, NextRunAt: next,
	}, true
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) {
	list, err := s.st.ListSchedules(r.Context())
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.ScheduleList{Schedules: nonNil(list)})
}

func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request) {
	in, ok := s.scheduleInput(w, r)
	if !ok {
		return
	}
	sc, err := s.st.CreateSchedule(r.Context(), in)
	if nameTaken(w, err, "name", fmt.Sprintf("a schedule named %q exists already; GET /api/v1/schedules lists them, PUT /api/v1/schedules/{id} changes one", in.Name)) {
		return
	}
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, api.ActionScheduleCreate, scheduleTarget(sc.ID), api.ScheduleAudit{Name: sc.Name, CronExpr: sc.CronExpr})
	w.Header().Set("Location", api.SchedulesPath+"/"+strconv.FormatInt(sc.ID, 10))
	writeJSON(w, http.StatusCreated, api.ScheduleResponse{Schedule: sc})
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) {
	serveByID(s, w, r, s.st.GetSchedule, func(sc store.Schedule) api.ScheduleResponse { return api.ScheduleResponse{Schedule: sc} })
}

func (s *Server) putSchedule(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	if _, err := s.st.GetSchedule(r.Context(), id); err != nil {
		s.storeError(w, r, err)
		return
	}
	in, ok := s.scheduleInput(w, r)
	if !ok {
		return
	}
	sc, err := s.st.UpdateSchedule(r.Context(), id, in)
	if nameTaken(w, err, "name", fmt.Sprintf("another schedule is named %q; choose another name", in.Name)) {
		return
	}
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, api.ActionScheduleUpdate, scheduleTarget(id), api.ScheduleAudit{Name: sc.Name, CronExpr: sc.CronExpr, Enabled: &sc.Enabled})
	writeJSON(w, http.StatusOK, api.ScheduleResponse{Schedule: sc})
}

func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "id")
	if !ok {
		return
	}
	if err := s.st.DeleteSchedule(r.Context(), id); err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, api.ActionScheduleDelete, scheduleTarget(id), nil)
	w.WriteHeader(http.StatusNoContent)
}
