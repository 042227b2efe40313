package eventbus_test

import (
	"slices"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/eventbus/bustest"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/netguard"
	"github.com/maestro-run/maestro/internal/tool"
)

// fetchScenario: the model fetches a loopback URL, which the network
// guard refuses.
const fetchScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"firewall","description":"guard refuses",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["WebFetch"]},
"frames":[
 {"index":0,"statements":[{"kind":"tool_call","tool":"WebFetch","input":{"url":"http://127.0.0.1:9/secret"}}]},
 {"index":1,"statements":[{"kind":"text","text":"Blocked."}]}]}`

// A web tool's destination refused by the network guard is published as
// maestro.events.firewall_block after the call's completed event.
func TestFirewallBlockIsPublished(t *testing.T) {
	srv := bustest.Start(t)
	b := newBus(t, srv, eventbus.Correlation{}, true)
	s, f := followNewSession(t, b)
	guard, err := netguard.New(netguard.Policy{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	blocked := 0
	fetch := tool.NewWebFetch(tool.WebOptions{Guard: guard, OnBlock: func(*netguard.BlockedError) { blocked++ }})
	sc, err := replay.Parse([]byte(fetchScenario), "firewall.json")
	if err != nil {
		t.Fatal(err)
	}
	a := agent.New(agent.Config{Provider: replay.New(sc), Tools: tool.NewSet(fetch)})
	if _, err := a.Run(t.Context(), nil, llm.UserText("fetch"), s); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close(s.Cursor(), "completed")
	if blocked != 1 {
		t.Fatalf("the guard refused %d requests, want 1", blocked)
	}
	msgs := srv.Wait(4)
	want := []string{eventbus.TypeToolCallAttempted, eventbus.TypeToolCallCompleted, eventbus.TypeFirewallBlock, eventbus.TypeSessionClosed}
	if got := types(msgs); !slices.Equal(got, want) {
		t.Fatalf("published types:\n got %q\nwant %q", got, want)
	}
	var data map[string]any
	if err := msgs[2].Event.DataAs(&data); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"tool_name": "WebFetch", "error_code": tool.CodeFirewallBlock,
		"@type": "type.googleapis.com/maestro.v1.FirewallBlock"} {
		if data[k] != v {
			t.Errorf("firewall_block data %s = %v, want %v", k, data[k], v)
		}
	}
	if data["tool_call_id"] == "" || data["tool_call_id"] == nil {
		t.Errorf("firewall_block has no tool_call_id: %v", data)
	}
}
