package main

import (
	"encoding/json"
	"testing"

	"github.com/maestro-run/maestro/internal/hostedrunner"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/protocol/prototest"
)

// TestHostedRunnerDrainPublishesSnapshot: a client attached when the
// runner drains sees, after the statuses "Hosted runner is draining: …"
// and "Drained", a snapshot envelope (wire contract §14.2 step 4) with
// last_status Drained and is_ready false, taking the cursor after the
// manifest's; identity then says draining and not ready. Every envelope
// the client reads is checked against the protocol's schemas.
func TestHostedRunnerDrainPublishesSnapshot(t *testing.T) {
	t.Parallel()
	v := prototest.Validator(t)
	p := startRunner(t, fixtureEnv(t, t.TempDir(), "mrs_drain"))
	c := p.attach(nil)
	c.send(map[string]any{"type": "prompt", "content": "hello"})
	c.until(isStatusMsg("Prompt: hello"))

	var d hostedrunner.DrainResponse
	if code := p.call("POST", hostedrunner.DrainPath, map[string]any{"reason": "ttl_expired"}, nil, &d); code != 200 || d.Status != hostedrunner.DrainDrained {
		t.Fatalf("drain: %d %+v", code, d)
	}
	manifestCursor := *d.Manifest.Runtime.Cursor
	var statuses []string
	for {
		e := c.next()
		if err := v.ValidateEnvelope([]byte(e.raw)); err != nil {
			t.Errorf("envelope %s: %v", e.raw, err)
		}
		if e.Type == "message" {
			var m struct{ Type, Message string }
			if json.Unmarshal(e.Message, &m) == nil && m.Type == "status" {
				statuses = append(statuses, m.Message)
			}
			continue
		}
		if e.Type != "snapshot" {
			t.Fatalf("envelope %s, want the drain's snapshot", e.raw)
		}
		var snap protocol.Snapshot
		if err := json.Unmarshal(e.Snapshot, &snap); err != nil {
			t.Fatal(err)
		}
		if snap.State.LastStatus != hostedrunner.StatusDrained || snap.State.IsReady || snap.Cursor != manifestCursor+1 {
			t.Errorf("drain snapshot: last_status %q is_ready %v cursor %d, want Drained, false, %d", snap.State.LastStatus, snap.State.IsReady, snap.Cursor, manifestCursor+1)
		}
		break
	}
	if n := len(statuses); n < 2 || statuses[n-2] != "Hosted runner is draining: ttl_expired" || statuses[n-1] != hostedrunner.StatusDrained {
		t.Errorf("statuses before the drain snapshot: %q", statuses)
	}
	var id hostedrunner.Identity
	if p.call("GET", hostedrunner.IdentityPath, nil, nil, &id); id.Ready || !id.Draining || id.DrainStatus != hostedrunner.DrainDrained {
		t.Errorf("identity after drain: %+v", id)
	}
}
