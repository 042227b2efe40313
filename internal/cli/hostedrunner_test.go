package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHostedRunnerCmdErrors(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no runner id", map[string]string{"MAESTRO_WORKSPACE_ROOT": ws}, nil, "--runner-session-id or MAESTRO_RUNNER_SESSION_ID / REMOTE_RUNNER_SESSION_ID"},
		{"no workspace", map[string]string{"REMOTE_RUNNER_SESSION_ID": "mrs"}, nil, "--workspace-root or MAESTRO_WORKSPACE_ROOT / WORKSPACE_ROOT"},
		{"workspace missing", nil, []string{"--runner-session-id", "mrs", "--workspace-root", filepath.Join(ws, "nope")}, "must be an existing directory"},
		{"open port without token", nil, []string{"--runner-session-id", "mrs", "--workspace-root", ws, "--port", "0"}, "MAESTRO_HOSTED_RUNNER_AUTH_TOKEN"},
		{"bad stdin mode", nil, []string{"--stdin-eof", "sometimes"}, "--stdin-eof"},
		{"bad restore manifest", map[string]string{"MAESTRO_REMOTE_RUNNER_RESTORE_MANIFEST": "nope.json"}, []string{"--runner-session-id", "mrs", "--workspace-root", ws, "--listen", "127.0.0.1:0", "--fixture"}, "restore manifest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, tt.env, append([]string{"hosted-runner"}, tt.args...)...)
			if r.code == 0 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want a failure naming %q", r.code, r.stderr, tt.want)
			}
		})
	}
}

// With stdin at end of file, the runner writes its ready line and exits 0,
// leaving the session log in its state dir under MAESTRO_HOME and nothing
// in the workspace.
func TestHostedRunnerCmdReadyLine(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	r := runCLI(t, map[string]string{"MAESTRO_RUNNER_SESSION_ID": "mrs_1", "MAESTRO_SESSION_ID": "sess_1", "WORKSPACE_ROOT": ws, "PORT": "0", "MAESTRO_HOSTED_RUNNER_HOST": "127.0.0.1"}, "hosted-runner")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var ready map[string]string
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &ready); err != nil || !strings.HasPrefix(ready["baseUrl"], "http://127.0.0.1:") || ready["sessionId"] != "sess_1" || len(ready) != 2 {
		t.Errorf("ready line %q: %v", r.stdout, err)
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 0 {
		t.Errorf("the runner wrote into the workspace: %v", entries)
	}
	logs, _ := filepath.Glob(filepath.Join(r.home, "hosted-runner", "sessions", "*", "events.jsonl"))
	if len(logs) != 1 {
		t.Fatalf("session logs: %v", logs)
	}
	if data, err := os.ReadFile(logs[0]); err != nil || !strings.Contains(string(data), `"type":"ready"`) {
		t.Errorf("session log: %v %.200s", err, data)
	}
}

func TestHostedRunnerHelp(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, "hosted-runner", "--help")
	for _, want := range []string{"MAESTRO_REMOTE_RUNNER_RESTORE_MANIFEST", "REMOTE_RUNNER_SNAPSHOT_ROOT", "__maestro_conformance_approval__", "baseUrl", "SIGTERM"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}
