package cli

import (
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/eventbus/bustest"
)

// TestRunSaysWhenTheEventBusCannotPublish: `maestro run` with a bus URL
// whose JetStream has no stream for the events tells the user on stderr
// (what is wrong, how to fix it, that the events wait for a later
// process) and still runs the task; once the stream exists, a run
// publishes its events and says nothing of the bus.
func TestRunSaysWhenTheEventBusCannotPublish(t *testing.T) {
	t.Parallel()
	srv := bustest.Start(t)
	home := t.TempDir()
	env := map[string]string{"MAESTRO_HOME": home, "MAESTRO_EVENT_BUS_URL": srv.URL()}
	run := func() result {
		r := runCLI(t, env, "run", "--workspace", t.TempDir(), "--sandbox", "off", "-o", "jsonl", "show me what you can do")
		if r.code != 0 {
			t.Fatalf("exit %d, want 0 (the bus never fails a run)\nstderr: %s", r.code, r.stderr)
		}
		return r
	}
	r := run()
	for _, want := range []string{
		"no JetStream stream takes the subject (create it, or pass --event-bus-create-stream)",
		"the next Maestro process publishes them",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	srv.CreateStream()
	r = run()
	if strings.Contains(r.stderr, "event bus") {
		t.Errorf("with the stream in place, stderr still speaks of the bus:\n%s", r.stderr)
	}
	// The second run's own events are published before it exits (the
	// first run's backlog follows in the background, maybe later).
	started := 0
	for _, m := range srv.Wait(2) {
		if m.Subject == "maestro.sessions.session.started" {
			started++
		}
	}
	if started == 0 {
		t.Errorf("no session started on the bus after the second run")
	}
}
