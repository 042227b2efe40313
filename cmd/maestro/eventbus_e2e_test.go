package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/eventbus/bustest"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
)

// busScenario: each prompt makes one Glob call, then answers.
const busScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"bus","description":"one tool call per prompt",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["Glob"]},
"frames":[
{"index":0,"statements":[{"kind":"tool_call","tool":"Glob","id":"call_1","input":{"pattern":"*"}}]},
{"index":1,"statements":[{"kind":"text","text":"one"}]},
{"index":2,"statements":[{"kind":"tool_call","tool":"Glob","id":"call_2","input":{"pattern":"*"}}]},
{"index":3,"statements":[{"kind":"text","text":"two"}]},
{"index":4,"statements":[{"kind":"tool_call","tool":"Glob","id":"call_3","input":{"pattern":"*"}}]},
{"index":5,"statements":[{"kind":"text","text":"three"}]}]}`

// busEnv is a no-model environment publishing to url, with the
// launcher's correlation variables.
func busEnv(t *testing.T, home, url string) []string {
	return append(proctest.NoModelEnv(home), "MAESTRO_EVENT_BUS_URL="+url,
		"MAESTRO_EVALOPS_ORG_ID=org_e2e", "MAESTRO_EVALOPS_USER_ID=user_e2e", "MAESTRO_EVALOPS_WORKSPACE_ID=ws_e2e",
		"MAESTRO_SESSION_ID=sess_e2e", "MAESTRO_AGENT_RUN_ID=run_e2e")
}

// busHeadless is a maestro headless process on the bus scenario.
type busHeadless struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  interface{ Write([]byte) (int, error) }
	close  func() error
	lines  *bufio.Scanner
	stderr *proctest.Buffer
}

func startBusHeadless(ctx context.Context, t *testing.T, env []string, args ...string) *busHeadless {
	t.Helper()
	cmd := exec.CommandContext(ctx, binary, append([]string{"headless", "--approval-mode", "auto"}, args...)...)
	cmd.Env = env
	h := &busHeadless{t: t, cmd: cmd, stderr: &proctest.Buffer{}}
	cmd.Stderr = h.stderr
	stdin, stdout := proctest.StartPiped(t, cmd)
	h.stdin, h.close = stdin, stdin.Close
	h.lines = bufio.NewScanner(stdout)
	h.lines.Buffer(nil, 8<<20)
	return h
}

// prompt sends a prompt and reads until its answer ended (two model
// calls: the tool call, the text).
func (h *busHeadless) prompt(content string) {
	h.t.Helper()
	data, _ := json.Marshal(map[string]any{"type": "prompt", "content": content})
	if _, err := h.stdin.Write(append(data, '\n')); err != nil {
		h.t.Fatalf("headless stdin: %v", err)
	}
	ends := 0
	for ends < 2 && h.lines.Scan() {
		var head struct{ Type string }
		json.Unmarshal(h.lines.Bytes(), &head)
		switch head.Type {
		case protocol.TypeResponseEnd:
			ends++
		case protocol.TypeError:
			h.t.Fatalf("headless error: %s\n%s", h.lines.Bytes(), h.stderr.String())
		}
	}
	if ends < 2 {
		h.t.Fatalf("headless output ended before the answer\n%s", h.stderr.String())
	}
}

// shutdown ends the session as a client does and waits for the exit.
func (h *busHeadless) shutdown() {
	h.t.Helper()
	h.stdin.Write([]byte(`{"type":"shutdown"}` + "\n"))
	h.close()
	for h.lines.Scan() {
	}
	if err := h.cmd.Wait(); err != nil {
		h.t.Fatalf("headless: %v\n%s", err, h.stderr.String())
	}
}

// busSetup starts a NATS server and writes the bus scenario; it returns
// the test's context (bounded by timeout), the server, the scenario and a
// Maestro home.
func busSetup(t *testing.T, timeout time.Duration) (context.Context, *bustest.Server, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	t.Cleanup(cancel)
	dir := t.TempDir()
	scenario := filepath.Join(dir, "bus.json")
	if err := os.WriteFile(scenario, []byte(busScenario), 0o600); err != nil {
		t.Fatal(err)
	}
	return ctx, bustest.Start(t), scenario, filepath.Join(dir, "home")
}

// sessionDirs lists the session directories under home.
func sessionDirs(t *testing.T, home string) []string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(home, "sessions", "*-*-*-*-*"))
	return dirs
}

func busTypes(msgs []bustest.Message) string {
	var out []string
	for _, m := range msgs {
		out = append(out, strings.TrimPrefix(strings.TrimPrefix(m.Event.Type(), "maestro.events."), "maestro.sessions.session."))
	}
	return strings.Join(out, " ")
}

// A headless session publishes the documented subjects with valid
// CloudEvents (bustest validates each) and the launcher's correlation.
func TestEventBusHeadlessSession(t *testing.T) {
	t.Parallel()
	ctx, srv, scenario, home := busSetup(t, 120*time.Second)
	h := startBusHeadless(ctx, t, busEnv(t, home, srv.URL()), "--event-bus-create-stream", "--replay", scenario, "--workspace", t.TempDir())
	h.prompt("first")
	h.prompt("second")
	h.shutdown()
	msgs := srv.Wait(6)
	if got, want := busTypes(msgs), "started tool_call.attempted tool_call.completed tool_call.attempted tool_call.completed closed"; got != want {
		t.Fatalf("published:\n got %s\nwant %s", got, want)
	}
	bustest.CheckOnceInOrder(t, msgs, "call_%d")
	for _, m := range msgs {
		ext := m.Event.Extensions()
		for k, v := range map[string]string{"organizationid": "org_e2e", "userid": "user_e2e", "workspaceid": "ws_e2e",
			"maestrosessionid": "sess_e2e", "agentrunid": "run_e2e"} {
			if fmt.Sprint(ext[k]) != v {
				t.Errorf("%s: extension %s = %v, want %s", m.Event.Type(), k, ext[k], v)
			}
		}
	}
}

// NATS down while the session runs, Maestro SIGKILLed, both restarted:
// the backlog is published from the persisted cursor, nothing twice, in
// order, and the killed run is closed with close_reason ERROR before the
// resume.
func TestEventBusSurvivesSIGKILLAndNATSRestart(t *testing.T) {
	t.Parallel()
	ctx, srv, scenario, home := busSetup(t, 180*time.Second)
	srv.CreateStream()
	env := busEnv(t, home, srv.URL())
	ws := t.TempDir()
	h := startBusHeadless(ctx, t, env, "--replay", scenario, "--workspace", ws)
	h.prompt("first")
	srv.Wait(3) // started, attempted, completed
	srv.Stop()
	h.prompt("second") // logged while NATS is down
	h.cmd.Process.Signal(syscall.SIGKILL)
	h.cmd.Wait()
	srv.Restart()
	dirs := sessionDirs(t, home)
	if len(dirs) != 1 {
		t.Fatalf("sessions: %v", dirs)
	}
	h = startBusHeadless(ctx, t, env, "--resume", filepath.Base(dirs[0]))
	h.prompt("third")
	h.shutdown()
	// The killed run is closed (ERROR) before the resume.
	want := "started tool_call.attempted tool_call.completed tool_call.attempted tool_call.completed closed resumed tool_call.attempted tool_call.completed closed"
	msgs := srv.Wait(10)
	if got := busTypes(msgs); got != want {
		t.Fatalf("published:\n got %s\nwant %s", got, want)
	}
	bustest.CheckOnceInOrder(t, msgs, "call_%d")
	for i, reason := range map[int]string{5: "MAESTRO_CLOSE_REASON_ERROR", 9: "MAESTRO_CLOSE_REASON_COMPLETED"} {
		var d struct {
			Reason string `json:"close_reason"`
		}
		json.Unmarshal(msgs[i].Event.Data(), &d)
		if d.Reason != reason {
			t.Errorf("closed event %d: close_reason %q, want %s", i, d.Reason, reason)
		}
	}
}

// MAESTRO_EVENT_BUS=0 turns the bus off even with a URL set.
func TestEventBusOff(t *testing.T) {
	t.Parallel()
	ctx, srv, _, home := busSetup(t, 120*time.Second)
	srv.CreateStream()
	cmd := exec.CommandContext(ctx, binary, "run", "--workspace", t.TempDir(), "Show me what you can do in this workspace")
	cmd.Env = append(busEnv(t, home, srv.URL()), "MAESTRO_EVENT_BUS=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if msgs := srv.Messages(); len(msgs) != 0 {
		t.Errorf("published %d events with MAESTRO_EVENT_BUS=0: %s", len(msgs), busTypes(msgs))
	}
	for _, d := range sessionDirs(t, home) {
		if _, err := os.Stat(filepath.Join(d, "eventbus.json")); err == nil {
			t.Errorf("%s has a publish cursor with the bus off", d)
		}
	}
}

// maestro events smoke: exit 0 and one started event against a running
// server; non-zero with a clear message when it is down or has no stream.
func TestEventsSmoke(t *testing.T) {
	t.Parallel()
	ctx, srv, _, home := busSetup(t, 120*time.Second)
	smoke := func(args ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, binary, append([]string{"events", "smoke", "--timeout", "5s"}, args...)...)
		cmd.Env = busEnv(t, home, srv.URL())
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return string(out), stderr.String(), err
	}
	if _, errOut, err := smoke(); err == nil || !strings.Contains(errOut, "no JetStream stream") {
		t.Errorf("smoke without a stream: %v\n%s", err, errOut)
	}
	out, errOut, err := smoke("--event-bus-create-stream")
	if err != nil || !strings.Contains(out, "published maestro.sessions.session.started") {
		t.Fatalf("smoke: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	if msgs := srv.Wait(1); len(msgs) != 1 || msgs[0].Event.Type() != eventbus.TypeSessionStarted {
		t.Errorf("smoke published %s", busTypes(msgs))
	}
	srv.Stop()
	_, errOut, err = smoke()
	if err == nil || !strings.Contains(errOut, "connect to the event bus") {
		t.Errorf("smoke with the server down: %v\n%s", err, errOut)
	}
}

// A queued job of maestro serve publishes its lifecycle and its tool
// calls with the correlation of its payload's metadata.
func TestEventBusQueuedJob(t *testing.T) {
	t.Parallel()
	ctx, srv, _, home := busSetup(t, 180*time.Second)
	env := append(proctest.NoModelEnv(home), "MAESTRO_EVENT_BUS_URL="+srv.URL(), "MAESTRO_EVALOPS_ORG_ID=process_org")
	url, stderr, stop := startServe(ctx, t, env, "--workers", "1", "--data-dir", home, "--event-bus-create-stream")
	defer stop()
	payload, _ := json.Marshal(map[string]any{"replay": busScenario, "no_piece": true,
		"metadata": map[string]any{"organization_id": "org_job", "workspace_id": "ws_job", "agent_run_id": "run_job"}})
	out, errOut, err := tasksCLI(ctx, env, url, "submit", "find files", "--payload", string(payload), "-f")
	if err != nil || !strings.Contains(errOut, "job 1 succeeded") {
		t.Fatalf("tasks submit -f: %v\nstdout:\n%s\nstderr:\n%s\nserve:\n%s", err, out, errOut, stderr.String())
	}
	msgs := srv.Wait(5)
	got := busTypes(msgs)
	if want := "maestro.jobs.job.queued maestro.jobs.job.started tool_call.attempted tool_call.completed maestro.jobs.job.succeeded"; got != want {
		t.Fatalf("published:\n got %s\nwant %s", got, want)
	}
	for _, m := range msgs {
		ext := m.Event.Extensions()
		if ext["organizationid"] != "org_job" || ext["workspaceid"] != "ws_job" || ext["agentrunid"] != "run_job" || ext["taskid"] != "1" {
			t.Errorf("%s: extensions %v", m.Event.Type(), ext)
		}
	}
}
