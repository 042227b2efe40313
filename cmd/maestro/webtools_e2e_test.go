package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/tool/sshtest"
)

// toolCall is a scripted model turn calling one tool.
func toolCall(id, name string, input any) llmtest.Turn {
	raw, err := json.Marshal(input)
	if err != nil {
		panic(err)
	}
	return llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: id, Name: name, Input: string(raw)}}, InputTokens: 100, OutputTokens: 10}
}

// The built-in research piece works end to end through the built binary:
// the fake model searches (a fake SearXNG on loopback), fetches the page
// it found (a loopback server the test configuration allows), is refused
// the cloud metadata address (a firewall_block run event and the
// firewall_block error code), downloads a file into input/, and writes
// its notes and report (issue 20).
func TestResearchPieceEndToEnd(t *testing.T) {
	t.Parallel()
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/gophers":
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, `<html><body><h1>Gopher facts</h1><p>Gophers dig <em>long</em> tunnels.</p></body></html>`)
		case "/data.csv":
			w.Header().Set("Content-Type", "text/csv")
			io.WriteString(w, "species,tunnel_m\npocket,150\n")
		default:
			http.NotFound(w, r)
		}
	}))
	defer pages.Close()
	searx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/search" || r.URL.Query().Get("format") != "json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"results": []map[string]string{
			{"title": "Gopher facts", "url": pages.URL + "/gophers", "content": "All about " + r.URL.Query().Get("q")},
		}})
	}))
	defer searx.Close()

	page := pages.URL + "/gophers"
	srv := llmtest.NewServer(t,
		// plan
		toolCall("s1", "WebSearch", map[string]any{"query": "how long are gopher tunnels"}),
		toolCall("t1", "transition", map[string]any{"next": "dig", "summary": "one sub-question: tunnel length; query: gopher tunnels"}),
		// dig
		toolCall("f1", "WebFetch", map[string]any{"url": page}),
		toolCall("f2", "WebFetch", map[string]any{"url": "http://169.254.169.254/latest/meta-data/"}),
		toolCall("d1", "DownloadFile", map[string]any{"url": pages.URL + "/data.csv", "path": "input/data.csv"}),
		toolCall("w1", "Write", map[string]any{"path": "output/research/notes.md", "content": "- tunnel length: \"Gophers dig long tunnels.\" " + page + "\n"}),
		toolCall("t2", "transition", map[string]any{"next": "synthesize", "summary": "tunnel length: covered by one source"}),
		// synthesize
		toolCall("w2", "Write", map[string]any{"path": "output/research/report.md", "content": "Gophers dig long tunnels [1].\n\n[1] Gopher facts, " + page + "\n"}),
		toolCall("c1", "complete", map[string]any{"status": "success", "result": "Gophers dig long tunnels [1]; see output/research/report.md"}),
	)
	home := t.TempDir()
	writeFile(t, home, "config.yaml", "web:\n  allow_hosts: [127.0.0.1]\n  search: {backend: searxng, url: \""+searx.URL+"\"}\n")
	ws := t.TempDir()
	env := append(proctest.NoModelEnv(home), "ANTHROPIC_API_KEY=sk-test", "ANTHROPIC_BASE_URL="+srv.URL())
	out, stderr := runMaestroEnv(t, env, true, "run", "--piece", "research", "--workspace", ws, "How long are gopher tunnels?")
	if !strings.Contains(out, "Gophers dig long tunnels [1]") {
		t.Errorf("stdout = %q, want the result\nstderr:\n%s", out, stderr)
	}
	if srv.Remaining() != 0 {
		t.Errorf("%d model turns not played\nstderr:\n%s", srv.Remaining(), stderr)
	}

	// What the model saw: the search results, the page as markdown, the
	// refusal and the download.
	var seen strings.Builder
	for _, r := range srv.Requests() {
		seen.Write(r.Body)
	}
	for _, want := range []string{
		`1 results for \"how long are gopher tunnels\" (searxng)`,
		"# Gopher facts", "Gophers dig *long* tunnels.",
		"refused http://169.254.169.254/latest/meta-data/: 169.254.169.254 is a cloud metadata address",
		"saved " + pages.URL + "/data.csv (28 bytes, text/csv) to input/data.csv",
	} {
		if !strings.Contains(seen.String(), want) {
			t.Errorf("the model was not shown %q", want)
		}
	}
	if data, err := os.ReadFile(filepath.Join(ws, "input", "data.csv")); err != nil || !strings.Contains(string(data), "pocket,150") {
		t.Errorf("input/data.csv = %q, %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "output", "research", "report.md")); err != nil {
		t.Errorf("no report: %v", err)
	}

	// The session log: no web tool left out, one firewall_block run event,
	// and the refused call's tool_end carries the firewall_block code.
	var blocks []map[string]any
	for _, ev := range runEvents(t, home) {
		data, _ := ev["data"].(map[string]any)
		switch ev["kind"] {
		case "tools_omitted":
			if b, _ := json.Marshal(data); strings.Contains(string(b), "Web") || strings.Contains(string(b), "DownloadFile") {
				t.Errorf("web tools omitted: %s", b)
			}
		case "firewall_block":
			blocks = append(blocks, data)
		}
	}
	if len(blocks) != 1 || blocks[0]["movement"] != "dig" || blocks[0]["tool"] != "WebFetch" ||
		blocks[0]["class"] != "cloud_metadata" || blocks[0]["address"] != "169.254.169.254" {
		t.Errorf("firewall_block events = %v, want one for the metadata address in dig", blocks)
	}
	logs, _ := filepath.Glob(filepath.Join(home, "sessions", "*", "events.jsonl"))
	var log strings.Builder
	for _, p := range logs {
		b, _ := os.ReadFile(p)
		log.Write(b)
	}
	if !strings.Contains(log.String(), `"error_code":"firewall_block"`) {
		t.Errorf("no tool_end with error_code firewall_block in the session log")
	}
}

// opsPiece runs commands on one SSH connection and may not use another.
const opsPiece = `name: ops
description: |
  Check a host over SSH.
  Choose when: an operations check. Do not choose when: anything else. Preconditions: a connection.
max_movements: 2
initial_movement: check
movements:
  - name: check
    edit: true
    persona: You run health checks.
    instruction: Check the host.
    allowed_tools: [SshExec, SshDownload, Read]
    allowed_ssh_connections: [6f9619ff-8b86-d011-b42d-00c04fc964ff]
    rules: []
`

// A piece's movement runs SshExec and SshDownload through the built
// binary on a connection from the configuration file (an in-process SSH
// server with a pinned host key), and is refused a registered connection
// its allowed_ssh_connections does not list (issue 20).
func TestSSHToolsEndToEnd(t *testing.T) {
	t.Parallel()
	const allowed, other = "6f9619ff-8b86-d011-b42d-00c04fc964ff", "7a8b9cde-1234-4567-89ab-cdef12345678"
	key, keyPEM := sshtest.NewKeyFile(t)
	sshd := sshtest.Start(t, key.PublicKey())
	writeFile(t, sshd.Dir, "health.txt", "all green\n")
	home, ws := t.TempDir(), t.TempDir()
	keyFile := writeFile(t, home, "id_test", string(keyPEM))
	hostKey := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshd.HostKey)))
	conn := func(id string) string {
		return fmt.Sprintf("  %s: {host: 127.0.0.1, port: %d, user: ops, key_file: %q, host_key: %q}\n", id, sshd.Addr.Port, keyFile, hostKey)
	}
	writeFile(t, home, "config.yaml", "ssh_connections:\n"+conn(allowed)+conn(other))
	writeFile(t, ws, ".maestro/pieces/ops.yaml", opsPiece)
	runMaestro(t, home, true, "pieces", "trust", "--workspace", ws, "ops") // it grants SSH tools
	srv := llmtest.NewServer(t,
		toolCall("e1", "SshExec", map[string]any{"connection": allowed, "command": "cat health.txt; uname -s"}),
		toolCall("e2", "SshExec", map[string]any{"connection": other, "command": "id"}),
		toolCall("d1", "SshDownload", map[string]any{"connection": allowed, "remote_path": "health.txt", "path": "reports/health.txt"}),
		toolCall("c1", "complete", map[string]any{"status": "success", "result": "the host is healthy"}),
	)
	env := append(proctest.NoModelEnv(home), "ANTHROPIC_API_KEY=sk-test", "ANTHROPIC_BASE_URL="+srv.URL())
	out, stderr := runMaestroEnv(t, env, true, "run", "--piece", "ops", "--workspace", ws, "check the host")
	if !strings.Contains(out, "the host is healthy") || srv.Remaining() != 0 {
		t.Errorf("stdout = %q, %d turns left\nstderr:\n%s", out, srv.Remaining(), stderr)
	}
	var seen strings.Builder
	for _, r := range srv.Requests() {
		seen.Write(r.Body)
	}
	for _, want := range []string{
		`all green\nLinux`,
		"connection_not_allowed: connection \\\"" + other + "\\\" is not in this movement's allowed_ssh_connections",
		"downloaded " + allowed + ":health.txt (10 bytes) to reports/health.txt",
	} {
		if !strings.Contains(seen.String(), want) {
			t.Errorf("the model was not shown %q", want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "reports", "health.txt")); err != nil || string(b) != "all green\n" {
		t.Errorf("reports/health.txt = %q, %v", b, err)
	}
}
