package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/proctest"
)

// A fresh maestro serve with no model: a task submitted with payload
// {"no_piece": true} plays the plain demo (the one maestro run plays) and
// succeeds. Before, it played the piece demo, written for the general
// piece, and failed once its frames were played ("the model was called
// for frame 5 but the scenario has 5 frames").
func TestServeNoPieceTaskPlaysThePlainDemo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	home := t.TempDir()
	env := proctest.NoModelEnv(home)
	url, stderr, stop := startServe(ctx, t, env, "--workers", "1", "--data-dir", home)
	defer stop()
	out, errOut, err := tasksCLI(ctx, env, url, "submit", "Show me what you can do", "--payload", `{"no_piece": true}`, "-f")
	if err != nil || !strings.Contains(errOut, "job 1 succeeded") {
		t.Fatalf("tasks submit -f: %v\nstdout:\n%s\nstderr:\n%s\nserve:\n%s", err, out, errOut, stderr.String())
	}
}
