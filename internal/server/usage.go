package server

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/store"
)

const (
	// usageDefaultWindow is the window of GET /api/v1/usage without from.
	usageDefaultWindow = 30 * 24 * time.Hour
	// usageMaxWindow bounds a report's window (a year and a day or so).
	usageMaxWindow = 400 * 24 * time.Hour
	// usageTopTasks is how many of the costliest tasks a report lists.
	usageTopTasks = 10
)

// usage answers GET /api/v1/usage: the jobs' cost and tokens over a window
// (?from=&to=, RFC 3339 or YYYY-MM-DD; default the last 30 days), grouped
// by ?group_by= (day, model, provider, piece, executor; default day),
// replay jobs left out unless ?include_replay=true, jobs that never ran
// always (docs/api.md, "Usage").
func (s *Server) usage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	now := s.now()
	to, ok := queryTime(w, r, "to", now)
	if !ok {
		return
	}
	from, ok := queryTime(w, r, "from", to.Add(-usageDefaultWindow))
	if !ok {
		return
	}
	if !from.Before(to) || to.Sub(from) > usageMaxWindow {
		writeFieldError(w, http.StatusBadRequest, "from", fmt.Sprintf("expected a window of at most %d days ending after it starts, found %s to %s",
			int(usageMaxWindow/(24*time.Hour)), from.Format(time.RFC3339), to.Format(time.RFC3339)))
		return
	}
	groupBy := cmp.Or(q.Get("group_by"), api.UsageByDay)
	key, ok := usageKey(groupBy)
	if !ok {
		writeFieldError(w, http.StatusBadRequest, "group_by", fmt.Sprintf("expected one of day, model, provider, piece, executor, found %q", groupBy))
		return
	}
	replay := false
	if v := q.Get("include_replay"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeFieldError(w, http.StatusBadRequest, "include_replay", fmt.Sprintf("expected true or false, found %q", v))
			return
		}
		replay = b
	}
	rows, err := s.st.ListJobUsage(r.Context(), store.UsageFilter{From: from, To: to, IncludeReplay: replay})
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	rep := api.UsageReport{From: from, To: to, GroupBy: groupBy, IncludeReplay: replay, BudgetUSDMonth: s.cfg.BudgetUSDMonth,
		Groups: []api.UsageGroup{}, TopTasks: []api.UsageTask{}}
	groups := map[string]*api.UsageGroup{}
	tasks := map[int64]*api.UsageTask{}
	for _, u := range rows {
		if neverRan(u) {
			continue
		}
		addUsage(&rep.Totals, u)
		k := key(u)
		g := groups[k]
		if g == nil {
			g = &api.UsageGroup{Key: k}
			groups[k] = g
		}
		addUsage(&g.UsageSum, u)
		if u.TaskID == 0 {
			continue
		}
		t := tasks[u.TaskID]
		if t == nil {
			t = &api.UsageTask{TaskID: u.TaskID, Title: u.Title}
			tasks[u.TaskID] = t
		}
		// The task's latest job (rows come by job id) names its piece and
		// model.
		t.Piece, t.Model = cmp.Or(u.Piece, t.Piece), cmp.Or(usageModel(u), t.Model)
		addUsage(&t.UsageSum, u)
	}
	for _, g := range groups {
		rep.Groups = append(rep.Groups, *g)
	}
	slices.SortFunc(rep.Groups, func(a, b api.UsageGroup) int {
		if (a.Key == "") != (b.Key == "") {
			return cmp.Compare(b.Key, a.Key) // "" last
		}
		return strings.Compare(a.Key, b.Key)
	})
	for _, t := range tasks {
		if t.CostUSD > 0 {
			rep.TopTasks = append(rep.TopTasks, *t)
		}
	}
	slices.SortFunc(rep.TopTasks, func(a, b api.UsageTask) int {
		return cmp.Or(cmp.Compare(b.CostUSD, a.CostUSD), cmp.Compare(a.TaskID, b.TaskID))
	})
	rep.TopTasks = rep.TopTasks[:min(len(rep.TopTasks), usageTopTasks)]
	if rep.BudgetUSDMonth > 0 {
		month := time.Date(now.UTC().Year(), now.UTC().Month(), 1, 0, 0, 0, 0, time.UTC)
		spent, err := s.st.ListJobUsage(r.Context(), store.UsageFilter{From: month, To: now.Add(time.Second), IncludeReplay: replay})
		if err != nil {
			s.storeError(w, r, err)
			return
		}
		for _, u := range spent {
			rep.MonthCostUSD += u.CostUSD
		}
	}
	writeJSON(w, http.StatusOK, rep)
}

// neverRan reports whether a job never ran on an executor (queued, or
// failed before one started: its row names none) and spent nothing. Such
// a job is no usage, with or without replay: its executor being unknown,
// it was counted as a job of a real model while replay was left out, so a
// replay-only server whose job failed at once showed a job in Usage.
func neverRan(u store.JobUsage) bool {
	return u.Executor == "" && u.CostUSD == 0 && u.InputTokens == 0 && u.OutputTokens == 0
}

func addUsage(sum *api.UsageSum, u store.JobUsage) {
	sum.Jobs++
	sum.CostUSD += u.CostUSD
	sum.InputTokens += u.InputTokens
	sum.OutputTokens += u.OutputTokens
}

// usageModel is the model a job ran on: its provider/model, or the agent
// CLI that ran it.
func usageModel(u store.JobUsage) string { return cmp.Or(u.Model, u.Agent) }

// usageKey keys a job by one grouping of GET /api/v1/usage; false for
// an unknown grouping.
func usageKey(groupBy string) (func(store.JobUsage) string, bool) {
	switch groupBy {
	case api.UsageByDay:
		return func(u store.JobUsage) string { return u.CreatedAt.UTC().Format(time.DateOnly) }, true
	case api.UsageByModel:
		return usageModel, true
	case api.UsageByProvider:
		return func(u store.JobUsage) string {
			if u.Agent != "" {
				return u.Agent
			}
			provider, _, _ := strings.Cut(u.Model, "/")
			return provider
		}, true
	case api.UsageByPiece:
		return func(u store.JobUsage) string { return u.Piece }, true
	case api.UsageByExecutor:
		return func(u store.JobUsage) string {
			switch {
			case u.Agent != "":
				return api.ExecutorAgentCLI
			case u.Executor == "live":
				return api.ExecutorNative
			}
			return u.Executor
		}, true
	}
	return nil, false
}

// queryTime parses an optional time query parameter: RFC 3339, or a date
// (YYYY-MM-DD, its midnight UTC); def when absent.
func queryTime(w http.ResponseWriter, r *http.Request, name string, def time.Time) (time.Time, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	for _, layout := range []string{time.RFC3339Nano, time.DateOnly} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true
		}
	}
	writeFieldError(w, http.StatusBadRequest, name, fmt.Sprintf("expected a time (RFC 3339, e.g. 2026-03-01T09:00:00Z) or a date (2026-03-01), found %q", v))
	return time.Time{}, false
}
