//go:build unix

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/httpedge/edgetest"
	"github.com/maestro-run/maestro/internal/protocol/prototest"
)

// TestHostedRunnerHTTPRules: issue 12 defects 1, 2 and 6 against the built
// binary, through the fixture process contract (wire contract §17) and
// nothing but HTTP + SSE, every envelope and snapshot schema-checked:
//   - a viewer listing tool_retry is accepted by create, register and
//     subscribe (only mcp_elicitation and user_input are refused: §8.5);
//   - a utility message naming a path outside the workspace is answered
//     by the POST itself, 403 workspace_violation (§10, hosted rule), and
//     leaves nothing on the stream;
//   - the snapshot answering a prompt already shows its "Prompt: …"
//     status (§11.4).
func TestHostedRunnerHTTPRules(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	p := startRunner(t, fixtureEnv(t, ws, "mrs_http_rules"))
	v := prototest.Validator(t)
	all := map[string]any{"utilityOperations": []string{"command_exec", "file_search", "file_read", "file_watch"}}
	c := p.attach(all)

	// Defect 1: viewers with tool_retry.
	retry := map[string]any{"serverRequests": []string{"approval", "tool_retry"}}
	for _, tc := range []struct{ what, path string }{
		{"subscribe", p.sessionPath("/subscribe")},
		{"register", "/api/headless/connections"},
		{"create", "/api/headless/sessions"},
	} {
		body := map[string]any{"role": "viewer", "capabilities": retry}
		if tc.path != p.sessionPath("/subscribe") {
			body["sessionId"] = p.session
		}
		if code, raw := p.post(tc.path, body, nil); code != 200 {
			t.Errorf("viewer %s with tool_retry: %d %s", tc.what, code, raw)
		}
	}
	code, raw := p.post(p.sessionPath("/subscribe"), map[string]any{"role": "viewer", "capabilities": map[string]any{"serverRequests": []string{"mcp_elicitation"}}}, nil)
	edgetest.WantError(t, "viewer negotiating mcp_elicitation", code, raw, 400, "bad_request", "viewer headless connections cannot negotiate mcp_elicitation requests")

	// Defect 2: utility paths outside the workspace.
	headers := map[string]string{"x-maestro-headless-connection-id": c.conn, "x-maestro-headless-subscriber-id": c.sub}
	for _, m := range []map[string]any{
		{"type": "utility_file_read", "read_id": "r1", "path": filepath.Join(outside, "secret.txt")},
		{"type": "utility_file_read", "read_id": "r2", "path": "out/secret.txt"},
		{"type": "utility_file_read", "read_id": "r3", "path": "out/not/yet.txt"},
		{"type": "utility_file_search", "search_id": "s1", "query": "secret", "cwd": "out"},
		{"type": "utility_command_start", "command_id": "c1", "command": "ls", "cwd": outside},
		{"type": "utility_file_watch_start", "watch_id": "w1", "root_dir": "../elsewhere/new"},
	} {
		code, raw := p.post(p.sessionPath("/messages"), m, headers)
		edgetest.WantError(t, "outside path in "+m["type"].(string), code, raw, 403, "workspace_violation", "Path is outside hosted workspace root")
	}

	// Defect 6: the prompt's answer shows the prompt handled.
	var ack struct {
		PublishedMessages int64           `json:"published_messages"`
		Snapshot          json.RawMessage `json:"snapshot"`
	}
	if code := p.call("POST", p.sessionPath("/messages"), map[string]any{"type": "prompt", "content": "hello"}, headers, &ack); code != 200 {
		t.Fatalf("prompt: %d", code)
	}
	if err := v.ValidateSnapshot(ack.Snapshot); err != nil {
		t.Errorf("reply snapshot does not validate: %v", err)
	}
	var snap struct {
		State struct {
			LastStatus string `json:"last_status"`
		} `json:"state"`
	}
	if err := json.Unmarshal(ack.Snapshot, &snap); err != nil {
		t.Fatal(err)
	}
	if snap.State.LastStatus != "Prompt: hello" || ack.PublishedMessages < 1 {
		t.Errorf("prompt answer: last_status %q, published_messages %d; want \"Prompt: hello\" and ≥ 1", snap.State.LastStatus, ack.PublishedMessages)
	}

	// Every envelope up to the prompt's status validates, and none came
	// from a refused utility request.
	for _, e := range c.collect(isStatusMsg("Prompt: hello")) {
		if err := v.ValidateEnvelope([]byte(e.raw)); err != nil {
			t.Errorf("envelope %s does not validate: %v", e.raw, err)
		}
		if m := e.msg(t); m != nil && (m["type"] == "error" || strings.HasPrefix(m["type"].(string), "utility_")) {
			t.Errorf("a refused utility request reached the stream: %s", e.raw)
		}
	}
}
