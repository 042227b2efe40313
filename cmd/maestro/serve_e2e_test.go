package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
)

// readInputScenario reads the file sent with the task in the run's very
// first model turn; a missing file fails the job (expectedResult).
const readInputScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"read-brief","description":"read the brief",
"metadata":{"recordedAt":"2026-11-25T00:00:00Z","toolsExpected":["Read","complete"]},
"frames":[
{"index":0,"statements":[{"kind":"tool_call","tool":"Read","input":{"path":"input/brief.txt"},"expectedResult":"success"}]},
{"index":1,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"success","result":"read the brief"}}]}
]}`

// TestServeRunsWithoutModel: `maestro serve` on a machine with no model
// configured says it runs on replay, and a task submitted with `maestro
// tasks submit` runs the general piece end to end on the bundled piece
// demo: it succeeds, its deliverable is in output/, and its events are
// badged replay. A task submitted with --file finds the file in input/ in
// its first model turn.
func TestServeRunsWithoutModel(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	env := proctest.NoModelEnv(home)

	url, stderr, stop := startServe(ctx, t, env, "--workers", "1", "--data-dir", home)

	tasks := func(args ...string) (string, string, error) {
		t.Helper()
		return tasksCLI(ctx, env, url, args...)
	}

	// The main job: no model, follow it to the end (exit 0 = succeeded).
	out, errOut, err := tasks("submit", "Say hello in five languages", "-f")
	if err != nil {
		t.Fatalf("submit -f: %v\nstdout:\n%s\nstderr:\n%s\nserve:\n%s", err, out, errOut, stderr.String())
	}
	for _, want := range []string{"task 1 created", "▶ REPLAY scripted model turns (replay/maestro-replay-v1)", "replay demo", "ANTHROPIC_API_KEY"} {
		if !strings.Contains(out, want) {
			t.Errorf("submit -f output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "job 1 succeeded") {
		t.Errorf("submit -f stderr:\n%s", errOut)
	}
	// Its progress comment is on the task as soon as it has ended: the
	// result, the deliverables and the cost (issue 15 item 9).
	out, errOut, err = tasks("show", "1")
	if err != nil {
		t.Fatalf("show: %v\n%s", err, errOut)
	}
	_, comments, _ := strings.Cut(out, "\ncomments:\n")
	for _, want := range []string{
		"] agent:\n    The general run succeeded.\n",
		"    Deliverables (2): output/hello-maestro/README.md, output/hello-maestro/greet.txt.\n",
		"    Cost: $0 (replay: no model was called) · 5 model call(s)",
	} {
		if !strings.Contains(comments, want) {
			t.Errorf("tasks show lacks %q in its comments:\n%s", want, out)
		}
	}
	for name, want := range map[string]string{"README.md": "replay demo", "greet.txt": "bonjour, le monde"} {
		data, err := os.ReadFile(filepath.Join(queue.WorkDir(home, 1), "output", "hello-maestro", name))
		if err != nil || !strings.Contains(string(data), want) {
			t.Errorf("deliverable %s = %q, %v; want it to mention %q", name, data, err, want)
		}
	}

	// The job's events: the first protocol event badges it replay, and
	// it ran execute then verify.
	out, errOut, err = tasks("logs", "1", "--json")
	if err != nil {
		t.Fatalf("logs --json: %v\n%s", err, errOut)
	}
	var badged bool
	var movements []string
	for line := range strings.Lines(out) {
		var ev struct {
			Type store.JobEventKind `json:"type"`
			Data json.RawMessage
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("logs --json line %q: %v", line, err)
		}
		var inner struct {
			Type         string `json:"type"`
			ExecutorType string `json:"executor_type"`
			Kind         string `json:"kind"`
			Data         struct {
				Movement string `json:"movement"`
			} `json:"data"`
		}
		json.Unmarshal(ev.Data, &inner)
		switch {
		case ev.Type == store.JobEventProtocol && inner.Type == "ready":
			badged = inner.ExecutorType == "replay"
		case ev.Type == store.JobEventRunEvent && inner.Kind == "movement_started":
			movements = append(movements, inner.Data.Movement)
		}
	}
	if !badged {
		t.Errorf("the job's events are not badged replay:\n%s", out)
	}
	if strings.Join(movements, " ") != "execute verify" {
		t.Errorf("movements %v, want execute verify", movements)
	}

	// A file sent with the task is in input/ for the run's first turn.
	brief := filepath.Join(t.TempDir(), "brief.txt")
	if err := os.WriteFile(brief, []byte("two paragraphs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]string{"replay": readInputScenario})
	out, errOut, err = tasks("submit", "Summarise the brief", "--file", brief, "--payload", string(payload), "-f")
	if err != nil || !strings.Contains(out, "input/brief.txt (15 bytes)") || !strings.Contains(out, "read the brief") {
		t.Fatalf("submit --file -f: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if data, err := os.ReadFile(filepath.Join(queue.WorkDir(home, 2), "input", "brief.txt")); err != nil || string(data) != "two paragraphs\n" {
		t.Errorf("input/brief.txt = %q, %v", data, err)
	}

	stop()
	if s := stderr.String(); !strings.Contains(s, "▶ REPLAY: no model configured") || !strings.Contains(s, "MAESTRO_MODEL") {
		t.Errorf("serve did not say it runs on replay:\n%s", s)
	}
}

// startServe starts `maestro serve` on a free loopback port with args and
// returns its URL, its stderr and stop, which sends SIGTERM and expects
// exit 0 within 30 s (also run at cleanup).
func startServe(ctx context.Context, t *testing.T, env []string, args ...string) (url string, stderr *proctest.Buffer, stop func()) {
	t.Helper()
	return proctest.StartServe(ctx, t, binary, env, args...)
}

// tasksCLI runs `maestro tasks --server url args…` (at most 90 s) and
// returns its stdout and stderr.
func tasksCLI(ctx context.Context, env []string, url string, args ...string) (string, string, error) {
	cctx, ccancel := context.WithTimeout(ctx, 90*time.Second)
	defer ccancel()
	cmd := exec.CommandContext(cctx, binary, append([]string{"tasks", "--server", url}, args...)...)
	cmd.Env = env
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	return string(out), errOut.String(), err
}
