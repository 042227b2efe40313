package server_test

import (
	"net/http"
	"testing"
)

// A comment on a task that does not exist answered 404 with the
// database's words: "add comment: task 999: not found: constraint failed:
// FOREIGN KEY constraint failed (787)", which `maestro tasks comment`
// printed as is.
func TestCommentNoTaskSaysSo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), nil)
	ae := e.wantError(http.StatusNotFound, "POST", "/api/v1/tasks/999/comments", map[string]string{"body": "x"}, "Content-Type", "application/json")
	if ae.Error != "task 999: not found" {
		t.Fatalf("error %q, want %q", ae.Error, "task 999: not found")
	}
}
