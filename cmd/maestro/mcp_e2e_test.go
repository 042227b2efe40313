package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/mcp/mcptest"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
)

// lookupPiece requires the MCP server web and offers one of its tools.
const lookupPiece = mcptest.LookupPiece + "    allowed_tools: [mcp__web__echo, mcp__web__nope]\n    rules: []\n"

// trackerPiece requires a server nobody configured.
const trackerPiece = mcptest.TrackerPiece

// runTwoTurns runs maestro with args in env against model, which must get
// two requests, and checks that stdout is want; it returns the requests.
func runTwoTurns(t *testing.T, model *llmtest.Server, env []string, want string, args ...string) []llmtest.Request {
	t.Helper()
	out, stderr := runMaestroEnv(t, env, true, args...)
	if strings.TrimSpace(out) != want {
		t.Errorf("stdout = %q, want %q\nstderr:\n%s", out, want, stderr)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests = %d, want 2\nstderr:\n%s", len(reqs), stderr)
	}
	return reqs
}

// requestTools are the tool names a model request offered.
func requestTools(r llmtest.Request) []string {
	var names []string
	tools, _ := r.JSON()["tools"].([]any)
	for _, t := range tools {
		if m, ok := t.(map[string]any); ok {
			names = append(names, m["name"].(string))
		}
	}
	return names
}

// toolResults are the texts of the tool results a model request sends
// back (Anthropic messages).
func toolResults(r llmtest.Request) string {
	data, _ := json.Marshal(r.JSON()["messages"])
	return string(data)
}

// A piece's movement calls an MCP tool of a configured streamable HTTP
// server through the fake model and gets its result; allowed_tools
// selects only the tool it names (issue 20).
func TestMCPToolInPieceMovement(t *testing.T) {
	t.Parallel()
	url := mcptest.Serve(t)
	model := llmtest.NewServer(t,
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "mcp__web__echo", Input: `{"text":"ping"}`}}, InputTokens: 100, OutputTokens: 10},
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c2", Name: "complete", Input: `{"status":"success","result":"the server said pong"}`}}, InputTokens: 100, OutputTokens: 10},
	)
	home, ws := t.TempDir(), t.TempDir()
	writeFile(t, home, "config.yaml", "mcp_servers:\n  web: {url: \""+url+"\"}\n")
	writeFile(t, ws, ".maestro/pieces/lookup.yaml", lookupPiece)
	runMaestro(t, home, true, "pieces", "trust", "--workspace", ws, "lookup") // it grants MCP tools
	env := append(proctest.NoModelEnv(home), "ANTHROPIC_API_KEY=sk-test", "ANTHROPIC_BASE_URL="+model.URL())
	reqs := runTwoTurns(t, model, env, "the server said pong", "run", "--piece", "lookup", "--workspace", ws, "look it up")
	tools := requestTools(reqs[0])
	if !slices.Contains(tools, "mcp__web__echo") || slices.Contains(tools, "mcp__web__add") {
		t.Errorf("offered tools = %v, want mcp__web__echo and not the server's other tools", tools)
	}
	if got := toolResults(reqs[1]); !strings.Contains(got, "echo: ping") {
		t.Errorf("the second request lacks the MCP tool's result:\n%s", got)
	}
	omitted := false
	for _, ev := range runEvents(t, home) {
		if ev["kind"] == "tools_omitted" && strings.Contains(mustJSON(t, ev), "mcp__web__nope") {
			omitted = true
		}
	}
	if !omitted {
		t.Errorf("no tools_omitted run event for mcp__web__nope: %v", runEvents(t, home))
	}
}

// A piece whose required_mcp server is not configured fails at start
// with an error naming the server; the model is never called.
func TestMCPRequiredServerMissing(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t)
	home, ws := t.TempDir(), t.TempDir()
	writeFile(t, ws, ".maestro/pieces/tickets.yaml", trackerPiece)
	runMaestro(t, home, true, "pieces", "trust", "--workspace", ws, "tickets") // it requires an MCP server
	env := append(proctest.NoModelEnv(home), "ANTHROPIC_API_KEY=sk-test", "ANTHROPIC_BASE_URL="+model.URL())
	_, stderr := runMaestroEnv(t, env, false, "run", "--piece", "tickets", "--workspace", ws, "file a ticket")
	if !strings.Contains(stderr, `MCP server "tracker"`) || len(model.Requests()) != 0 {
		t.Errorf("stderr does not name the server (or the model was called %d times):\n%s", len(model.Requests()), stderr)
	}
}

// A plain run (no piece) offers every configured server's tools.
func TestMCPToolsInPlainRun(t *testing.T) {
	t.Parallel()
	url := mcptest.Serve(t)
	model := llmtest.NewServer(t,
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "mcp__web__add", Input: `{"a":20,"b":22}`}}, InputTokens: 100, OutputTokens: 10},
		llmtest.Turn{Text: []string{"It is 42."}, InputTokens: 100, OutputTokens: 10},
	)
	home := t.TempDir()
	writeFile(t, home, "config.yaml", "mcp_servers:\n  web: {url: \""+url+"\"}\n")
	env := append(proctest.NoModelEnv(home), "ANTHROPIC_API_KEY=sk-test", "ANTHROPIC_BASE_URL="+model.URL())
	reqs := runTwoTurns(t, model, env, "It is 42.", "run", "--no-piece", "--workspace", t.TempDir(), "add them")
	tools := requestTools(reqs[0])
	for _, want := range []string{"Read", "mcp__web__add", "mcp__web__echo", "mcp__web__ask"} {
		if !slices.Contains(tools, want) {
			t.Errorf("offered tools = %v, want %s among them", tools, want)
		}
	}
	if got := toolResults(reqs[1]); !strings.Contains(got, `42`) {
		t.Errorf("the second request lacks the MCP tool's result:\n%s", got)
	}
}

// A server tool named with a dot (files.read), which model APIs refuse
// as a tool name, is offered as mcp__web__files_read; the model's call
// of that name reaches the server's files.read, and the session's events
// say which name stands for which. Before, the request offered
// mcp__web__files.read and a real model API refused every request of
// the session.
func TestMCPToolNameWithADot(t *testing.T) {
	t.Parallel()
	url := mcptest.Serve(t)
	model := llmtest.NewServer(t,
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "mcp__web__files_read", Input: `{"path":"notes.txt"}`}}, InputTokens: 100, OutputTokens: 10},
		llmtest.Turn{Text: []string{"Read it."}, InputTokens: 100, OutputTokens: 10},
	)
	home := t.TempDir()
	writeFile(t, home, "config.yaml", "mcp_servers:\n  web: {url: \""+url+"\"}\n")
	env := append(proctest.NoModelEnv(home), "ANTHROPIC_API_KEY=sk-test", "ANTHROPIC_BASE_URL="+model.URL())
	reqs := runTwoTurns(t, model, env, "Read it.", "run", "--no-piece", "--workspace", t.TempDir(), "read the notes")
	valid := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`) // Anthropic's and OpenAI's tool names
	tools := requestTools(reqs[0])
	for _, name := range tools {
		if !valid.MatchString(name) {
			t.Errorf("offered tool %q: a name model APIs refuse", name)
		}
	}
	if !slices.Contains(tools, "mcp__web__files_read") {
		t.Errorf("offered tools = %v, want mcp__web__files_read among them", tools)
	}
	if got := toolResults(reqs[1]); !strings.Contains(got, "contents of notes.txt") {
		t.Errorf("the second request lacks the MCP tool's result:\n%s", got)
	}
	logs, _ := filepath.Glob(filepath.Join(home, "sessions", "*", "events.jsonl"))
	var all []byte
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, data...)
	}
	if !strings.Contains(string(all), `files.read\" as mcp__web__files_read`) {
		t.Errorf("the session log does not say files.read is offered as mcp__web__files_read:\n%s", all)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// elicitCase is one MCP server whose elicitation a headless client answers.
type elicitCase struct {
	server string // config.yaml's mcp_servers entry of the server "web"
	call   string // the tool that elicits, and its input
	input  string
	ask    string // what the server_request's args must hold
	answer string // the client's reply
	want   string // what the tool result must carry back to the model
}

// An MCP server's elicitation reaches a headless client as the protocol's
// mcp_elicitation server request (advertised in hello_ok when MCP servers
// are configured), and the client's answer flows back into the tool's
// result; a client that did not negotiate it is not asked and the server
// gets a cancel (issue 20, wire contract §9). Both an in-process go-sdk
// server over streamable HTTP and the reference server-everything from npm
// over stdio.
func TestMCPElicitationOverHeadless(t *testing.T) {
	t.Parallel()
	inProcess := elicitCase{call: "mcp__web__ask", input: `{"question":"Which colour?"}`, ask: `"message":"Which colour?"`,
		answer: `{"action":"accept","content":{"answer":"blue"}}`, want: "action=accept answer=blue"}
	for _, tc := range []struct {
		name       string
		negotiated bool
		c          func(t *testing.T) elicitCase
	}{
		{"negotiated", true, func(t *testing.T) elicitCase {
			c := inProcess
			c.server = `{url: "` + mcptest.Serve(t) + `"}`
			return c
		}},
		{"not negotiated", false, func(t *testing.T) elicitCase {
			c := inProcess
			c.server, c.want = `{url: "`+mcptest.Serve(t)+`"}`, "action=cancel"
			return c
		}},
		{"server-everything", true, func(t *testing.T) elicitCase {
			bin := mcptest.Installed(t, "server-everything")
			return elicitCase{server: `{command: node, args: ["` + bin + `", stdio]}`, call: "mcp__web__trigger-elicitation-request", input: `{}`,
				ask: `"requestedSchema"`, answer: `{"action":"accept","content":{"name":"Ada Lovelace","check":true}}`, want: "Ada Lovelace"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			elicitOverHeadless(t, tc.negotiated, tc.c(t))
		})
	}
}

func elicitOverHeadless(t *testing.T, negotiated bool, c elicitCase) {
	model := llmtest.NewServer(t,
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: c.call, Input: c.input}}, InputTokens: 100, OutputTokens: 10},
		llmtest.Turn{Text: []string{"Done."}, InputTokens: 100, OutputTokens: 10},
	)
	home := t.TempDir()
	writeFile(t, home, "config.yaml", "mcp_servers:\n  web: "+c.server+"\n")
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "headless", "--approval-mode", "auto", "--sandbox", "off", "--model", "anthropic/fake", "--workspace", t.TempDir())
	cmd.Env = append(proctest.NoModelEnv(home), "ANTHROPIC_API_KEY=sk-test", "ANTHROPIC_BASE_URL="+model.URL())
	var stderr proctest.Buffer
	cmd.Stderr = &stderr
	stdin, stdout := proctest.StartPiped(t, cmd)
	enc := json.NewEncoder(stdin)
	send := func(m map[string]any) {
		if err := enc.Encode(m); err != nil {
			t.Fatalf("headless stdin: %v", err)
		}
	}
	hello := map[string]any{"type": "hello", "protocol_version": protocol.Version}
	if negotiated {
		hello["capabilities"] = map[string]any{"server_requests": []string{"mcp_elicitation"}}
	}
	send(hello)
	send(map[string]any{"type": "prompt", "content": "ask me"})
	v, err := protocol.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	var advertised, asked, done bool
	ends := 0 // one response_end per model response: the second ends the prompt
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if err := v.ValidateServerFrame(sc.Bytes()); err != nil {
			t.Errorf("frame does not validate: %s: %v", sc.Bytes(), err)
		}
		var f map[string]any
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatal(err)
		}
		switch f["type"] {
		case "hello_ok":
			advertised = strings.Contains(mustJSON(t, f["server_capabilities"]), `"mcp_elicitation"`)
		case "server_request":
			args := mustJSON(t, f["args"])
			if f["request_type"] != "mcp_elicitation" || !strings.Contains(args, `"serverName":"web"`) || !strings.Contains(args, c.ask) {
				t.Errorf("server_request = %v, want the server's elicitation", f)
			}
			asked = true
			send(map[string]any{"type": "server_request_response", "request_id": f["request_id"], "request_type": "mcp_elicitation",
				"content": []map[string]any{{"type": "text", "text": c.answer}}})
		case "response_end", "error":
			if f["type"] == "error" {
				t.Errorf("error frame: %v", f)
			} else if ends++; ends < 2 {
				continue
			}
			if !done {
				done = true
				send(map[string]any{"type": "shutdown"})
				stdin.Close()
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("headless: %v\n%s", err, stderr.String())
	}
	if !advertised || asked != negotiated {
		t.Errorf("mcp_elicitation advertised %v, raised %v; want advertised, raised %v", advertised, asked, negotiated)
	}
	reqs := model.Requests()
	if len(reqs) != 2 || !strings.Contains(toolResults(reqs[1]), c.want) {
		t.Errorf("the tool result did not carry the client's answer (%d model requests)\nstderr:\n%s", len(reqs), stderr.String())
	}
}
