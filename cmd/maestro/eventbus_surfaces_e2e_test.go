package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/hostedrunner"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// A job run by `maestro worker` (no serve in the process) publishes its
// lifecycle with the correlation of its payload (the job was queued
// before the worker started: its first pass publishes that, its
// subscriptions the rest).
func TestEventBusWorkerJob(t *testing.T) {
	t.Parallel()
	ctx, srv, _, home := busSetup(t, 180*time.Second)
	data := filepath.Join(t.TempDir(), "data")
	st, err := sqlite.Open(ctx, filepath.Join(data, "maestro.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]any{"metadata": map[string]any{"organization_id": "org_w", "agent_run_id": "run_w"}})
	_, job, err := st.CreateTask(ctx, store.NewTask{Owner: "wanda", Title: "nothing", Piece: "noop", Payload: payload})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, binary, "worker", "--data-dir", data, "--name", "w-bus", "--event-bus-create-stream")
	cmd.Env = append(proctest.NoModelEnv(home), "MAESTRO_DB=", "MAESTRO_EVENT_BUS_URL="+srv.URL(), "MAESTRO_EVALOPS_ORG_ID=process_org")
	w := launch(t, cmd)
	msgs := srv.Wait(3)
	got := busTypes(msgs)
	if want := "maestro.jobs.job.queued maestro.jobs.job.started maestro.jobs.job.succeeded"; got != want {
		t.Fatalf("published:\n got %s\nwant %s\nworker (%s):\n%s", got, want, w.status(), w.stderr.String())
	}
	for _, m := range msgs {
		ext := m.Event.Extensions()
		if ext["organizationid"] != "org_w" || ext["agentrunid"] != "run_w" || ext["userid"] != "wanda" {
			t.Errorf("%s: extensions %v", m.Event.Type(), ext)
		}
	}
	if id := msgs[0].Event.ID(); id != "job-"+strconv.FormatInt(job.ID, 10)+"-"+strconv.FormatInt(job.CreatedAt.UnixMicro(), 10)+".1.0" {
		t.Errorf("first event id %s", id)
	}
}

// A hosted runner's session publishes the session subjects (started,
// the approval it asked for, closed when it shuts down) with the
// harness's correlation.
func TestEventBusHostedRunnerSession(t *testing.T) {
	t.Parallel()
	_, srv, _, _ := busSetup(t, 120*time.Second)
	p := startRunner(t, fixtureEnv(t, t.TempDir(), "mrs_bus", "MAESTRO_EVENT_BUS_URL="+srv.URL(),
		"MAESTRO_EVENT_BUS_CREATE_STREAM=1", "MAESTRO_EVALOPS_ORG_ID=org_hr"))
	c := p.attach(map[string]any{"serverRequests": []string{"approval"}})
	c.send(map[string]any{"type": "prompt", "content": hostedrunner.ApprovalPrefix + `{"request_id":"req_bus","tool":"bash","args":{"command":"ls"},"reason":"look"}`})
	c.until(func(m map[string]any) bool { return m["type"] == "server_request" })
	c.send(map[string]any{"type": "server_request_response", "request_id": "req_bus", "request_type": "approval", "approved": false, "reason": "no"})
	c.until(func(m map[string]any) bool { return m["type"] == "server_request_resolved" })
	p.stop()
	msgs := srv.Wait(3)
	if got, want := busTypes(msgs), "started approval_hit closed"; got != want {
		t.Fatalf("published:\n got %s\nwant %s\nrunner:\n%s", got, want, p.stderr)
	}
	for _, m := range msgs {
		ext := m.Event.Extensions()
		if ext["maestrosessionid"] != "session_123" || ext["organizationid"] != "org_hr" || ext["agentrunid"] != "run_123" {
			t.Errorf("%s: extensions %v", m.Event.Type(), ext)
		}
	}
}

// A hosted runner's drain suspends its session
// (maestro.sessions.session.suspended, not closed), and the runner
// restored from the drain's manifest resumes it
// (maestro.sessions.session.resumed), closing it when it shuts down,
// all four under the runner's session id.
func TestEventBusHostedRunnerDrainAndRestore(t *testing.T) {
	t.Parallel()
	_, srv, _, _ := busSetup(t, 180*time.Second)
	ws := t.TempDir()
	bus := []string{"MAESTRO_EVENT_BUS_URL=" + srv.URL(), "MAESTRO_EVENT_BUS_CREATE_STREAM=1"}
	p := startRunner(t, fixtureEnv(t, ws, "mrs_drain", bus...))
	c := p.attach(nil)
	c.send(map[string]any{"type": "prompt", "content": "before the drain"})
	c.until(isStatusMsg("Prompt: before the drain"))
	var d hostedrunner.DrainResponse
	if code := p.call("POST", hostedrunner.DrainPath, map[string]any{"reason": "ttl_expired"}, nil, &d); code != 200 || d.Status != "drained" {
		t.Fatalf("drain: %d %+v", code, d)
	}
	if got, want := busTypes(srv.Wait(2)), "started suspended"; got != want {
		t.Fatalf("published by the drain:\n got %s\nwant %s\nrunner:\n%s", got, want, p.stderr)
	}
	p.stop()

	r := startRunner(t, fixtureEnv(t, ws, "mrs_restored", append(bus, "MAESTRO_REMOTE_RUNNER_RESTORE_MANIFEST="+d.ManifestPath)...))
	c2 := r.attach(nil)
	c2.send(map[string]any{"type": "prompt", "content": "after the restore"})
	c2.until(isStatusMsg("Prompt: after the restore"))
	r.stop()
	msgs := srv.Wait(4)
	if got, want := busTypes(msgs), "started suspended resumed closed"; got != want {
		t.Fatalf("published:\n got %s\nwant %s\nrestored runner:\n%s", got, want, r.stderr)
	}
	for _, m := range msgs {
		if ext := m.Event.Extensions(); ext["maestrosessionid"] != "session_123" || ext["agentrunid"] != "run_123" {
			t.Errorf("%s: extensions %v", m.Event.Type(), ext)
		}
		// One session on the bus across the drain: the restored runner's
		// log has an id of its own, its events do not.
		var data struct {
			SessionID string `json:"session_id"`
		}
		json.Unmarshal(m.Event.Data(), &data)
		if id, _, _ := strings.Cut(m.Event.ID(), "."); data.SessionID != "session_123" || id != "session_123" {
			t.Errorf("%s %s: data.session_id %q, want session_123 (the runner's session id) in both", m.Event.Type(), m.Event.ID(), data.SessionID)
		}
	}
}
