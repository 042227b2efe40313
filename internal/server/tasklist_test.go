package server_test

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/store"
)

// TestTaskListFilter: GET /api/v1/tasks filters by the latest job's state
// (comma-separated) and searches title, body or id with q, with paging;
// an unknown state is a 400 naming the valid ones.
func TestTaskListFilter(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, e *env) {
		fix := e.createTask("Fix login bug", nil)
		docs := e.createTask("Write docs", map[string]any{"body": "The LOGIN page"})
		deploy := e.createTask("Deploy", nil)
		e.must(http.StatusOK, "POST", "/api/v1/jobs/"+strconv.FormatInt(fix.Job.ID, 10)+"/cancel", nil, nil)

		tests := []struct {
			query      string
			want       []int64
			nextBefore int64
		}{
			{"state=cancelled", []int64{fix.Task.ID}, 0},
			{"state=queued", []int64{deploy.Task.ID, docs.Task.ID}, 0},
			{"state=queued,cancelled&limit=2", []int64{deploy.Task.ID, docs.Task.ID}, docs.Task.ID},
			{"state=queued,cancelled&limit=2&before=" + strconv.FormatInt(docs.Task.ID, 10), []int64{fix.Task.ID}, 0},
			{"q=login", []int64{docs.Task.ID, fix.Task.ID}, 0},
			{"q=Login&state=queued", []int64{docs.Task.ID}, 0},
			{"q=" + strconv.FormatInt(deploy.Task.ID, 10), []int64{deploy.Task.ID}, 0},
			{"q=" + url.QueryEscape("no such text"), nil, 0},
		}
		for _, tc := range tests {
			var list struct {
				Tasks      []store.Task `json:"tasks"`
				NextBefore int64        `json:"next_before"`
			}
			e.must(http.StatusOK, "GET", "/api/v1/tasks?"+tc.query, nil, &list)
			var got []int64
			for _, task := range list.Tasks {
				got = append(got, task.ID)
			}
			if !slices.Equal(got, tc.want) || list.NextBefore != tc.nextBefore {
				t.Errorf("?%s = %v next %d, want %v next %d", tc.query, got, list.NextBefore, tc.want, tc.nextBefore)
			}
		}

		ae := e.wantError(http.StatusBadRequest, "GET", "/api/v1/tasks?state=queued,sleeping", nil)
		if ae.Field != "state" || !strings.Contains(ae.Error, "waiting_human") || !strings.Contains(ae.Error, `"sleeping"`) {
			t.Errorf("unknown state: %+v, want field state naming the valid states and the bad one", ae)
		}
	})
}
