package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/crypto/ssh"

	"github.com/maestro-run/maestro/internal/mcp/mcptest"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/tool/sshtest"
)

// sshPiece runs one movement allowed SshExec on one registered connection.
const sshPiece = `name: ssh-check
description: Run one command on the build host.
max_movements: 2
initial_movement: run
movements:
  - name: run
    edit: false
    persona: You operate the build host.
    instruction: Run the check and report its output.
    allowed_tools: [SshExec]
    allowed_ssh_connections: ["b0000000-0001"]
    rules: []
    default_next: COMPLETE
`

// sshScenario calls SshExec on the registered connection, then completes.
const sshScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"ssh-check","description":"ssh from the registry",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["SshExec","complete"]},
"frames":[
{"index":0,"statements":[{"kind":"tool_call","tool":"SshExec","input":{"connection":"b0000000-0001","command":"echo registry-$((40+2)) > proof.txt"},"expectedResult":"success"}]},
{"index":1,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"success","result":"ran the check"}}]}
]}`

// mcpPiece lets one movement call the registered MCP server's echo tool.
const mcpPiece = `name: mcp-check
description: Echo through the registered MCP server.
max_movements: 2
initial_movement: run
movements:
  - name: run
    edit: false
    persona: You check the MCP server.
    instruction: Echo a word through it.
    allowed_tools: [mcp__reg__echo]
    rules: []
    default_next: COMPLETE
`

// mcpScenario calls the registered server's echo tool, then completes.
const mcpScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"mcp-check","description":"mcp from the registry",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["mcp__reg__echo","complete"]},
"frames":[
{"index":0,"statements":[{"kind":"tool_call","tool":"mcp__reg__echo","input":{"text":"from-registry"},"expectedResult":"success"}]},
{"index":1,"statements":[{"kind":"tool_call","tool":"complete","input":{"status":"success","result":"echoed"}}]}
]}`

// TestServeSSHConnectionFromAPI: `maestro serve` with MAESTRO_ENCRYPTION_KEY
// registers an SSH connection over the API (the key sealed, answered as
// "***"), and a queued job whose piece allows that connection runs SshExec
// on the in-process SSH server through it. An MCP server registered over
// the API with a sealed header serves a job whose task names it, the
// header opened on the way out. A malformed key stops serve with an error
// naming the variable.
func TestServeSSHConnectionFromAPI(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	key, pemKey := sshtest.NewKeyFile(t)
	srv := sshtest.Start(t, key.PublicKey())

	home := t.TempDir()
	env := append(proctest.NoModelEnv(home), "MAESTRO_ENCRYPTION_KEY="+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)))
	url, stderr, stop := startServe(ctx, t, env, "--workers", "1", "--data-dir", home)

	call := func(method, path string, body any, want int) []byte {
		t.Helper()
		data, _ := json.Marshal(body)
		rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
		defer rcancel()
		req, _ := http.NewRequestWithContext(rctx, method, url+path, bytes.NewReader(data))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: status %d, want %d: %s\nserve:\n%s", method, path, resp.StatusCode, want, out, stderr.String())
		}
		return out
	}
	created := call("POST", "/api/v1/ssh-connections", map[string]any{"id": "b0000000-0001", "host": "127.0.0.1", "port": srv.Addr.Port,
		"user": "ops", "host_key": string(ssh.MarshalAuthorizedKey(srv.HostKey)), "private_key": string(pemKey)}, http.StatusCreated)
	if strings.Contains(string(created), "PRIVATE KEY") || !strings.Contains(string(created), `"secret":"***"`) {
		t.Fatalf("the answer shows the key: %s", created)
	}
	call("POST", "/api/v1/pieces", map[string]any{"yaml": sshPiece}, http.StatusCreated)
	call("POST", "/api/v1/tasks", map[string]any{"title": "check the build host", "piece": "ssh-check",
		"payload": map[string]any{"replay": json.RawMessage(sshScenario)}}, http.StatusCreated)

	out, errOut, err := tasksCLI(ctx, env, url, "logs", "-f", "1")
	if err != nil {
		t.Fatalf("logs -f: %v\nstdout:\n%s\nstderr:\n%s\nserve:\n%s", err, out, errOut, stderr.String())
	}
	// The command ran on the SSH server: its file is in the server's
	// directory.
	proof, err := os.ReadFile(filepath.Join(srv.Dir, "proof.txt"))
	if err != nil || string(proof) != "registry-42\n" || !strings.Contains(out, "✓ SshExec") {
		t.Fatalf("proof.txt = %q, %v; logs:\n%s", proof, err, out)
	}

	// An MCP server registered over the API: only a request carrying the
	// sealed header's value is served.
	var authorized atomic.Int32
	mcpHandler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return mcptest.NewServer() }, nil)
	mcpSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer reg-t0ken" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		authorized.Add(1)
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(mcpSrv.Close)
	reg := call("POST", "/api/v1/mcp-servers", map[string]any{"slug": "reg", "transport": "http", "url": mcpSrv.URL + "/mcp",
		"headers": map[string]string{"Authorization": "Bearer reg-t0ken"}}, http.StatusCreated)
	if strings.Contains(string(reg), "reg-t0ken") {
		t.Fatalf("the answer shows the header: %s", reg)
	}
	call("POST", "/api/v1/pieces", map[string]any{"yaml": mcpPiece}, http.StatusCreated)
	call("POST", "/api/v1/tasks", map[string]any{"title": "echo through the registry", "piece": "mcp-check",
		"payload": map[string]any{"mcp_servers": []string{"reg"}, "replay": json.RawMessage(mcpScenario)}}, http.StatusCreated)
	out, errOut, err = tasksCLI(ctx, env, url, "logs", "-f", "2")
	if err != nil || !strings.Contains(out, "✓ mcp__reg__echo") || authorized.Load() == 0 {
		t.Fatalf("logs -f 2: %v (authorized MCP requests: %d)\nstdout:\n%s\nstderr:\n%s\nserve:\n%s", err, authorized.Load(), out, errOut, stderr.String())
	}
	stop()

	// A malformed key: serve refuses to start, naming the variable.
	bad := append(proctest.NoModelEnv(t.TempDir()), "MAESTRO_ENCRYPTION_KEY=short")
	_, errOut = runMaestroEnv(t, bad, false, "serve", "--listen", "127.0.0.1:0", "--workers", "0", "--data-dir", t.TempDir())
	if !strings.Contains(errOut, "MAESTRO_ENCRYPTION_KEY") {
		t.Fatalf("serve with a malformed key says:\n%s", errOut)
	}
}
