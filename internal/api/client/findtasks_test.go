package client_test

import (
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/api/client"
)

// TestFindTasks: FindTasks sends owner, state and q, and an unknown state
// comes back as the server's 400 on the field state.
func TestFindTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "", nil)
	ctx := t.Context()
	var ids []int64
	for _, title := range []string{"Fix login", "Write docs", "Deploy"} {
		c, err := e.c.CreateTask(ctx, api.CreateTaskRequest{Title: title, Piece: api.NoopPiece})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.Task.ID)
		if title == "Fix login" {
			if _, err := e.c.CancelJob(ctx, c.Job.ID, "test"); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		q    client.TaskQuery
		want []int64
	}{
		{client.TaskQuery{State: "cancelled"}, []int64{ids[0]}},
		{client.TaskQuery{State: "queued,cancelled", Search: "O"}, []int64{ids[2], ids[1], ids[0]}},
		{client.TaskQuery{Search: "LOGIN"}, []int64{ids[0]}},
		{client.TaskQuery{Search: strconv.FormatInt(ids[1], 10)}, []int64{ids[1]}},
		{client.TaskQuery{Owner: "nobody", State: "queued"}, nil},
	}
	for _, tc := range tests {
		page, err := e.c.FindTasks(ctx, tc.q, client.Page{})
		if err != nil {
			t.Fatalf("FindTasks(%+v): %v", tc.q, err)
		}
		var got []int64
		for _, task := range page.Tasks {
			got = append(got, task.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("FindTasks(%+v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	_, err := e.c.FindTasks(ctx, client.TaskQuery{State: "sleeping"}, client.Page{})
	if ae := wantStatus(t, "unknown state", err, http.StatusBadRequest); ae.Body.Field != "state" {
		t.Errorf("unknown state: field %q, want state", ae.Body.Field)
	}
}
