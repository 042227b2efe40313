package queue_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/engine"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/anthropic"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/mcp"
	"github.com/maestro-run/maestro/internal/mcp/mcptest"
	"github.com/maestro-run/maestro/internal/queue"
	"github.com/maestro-run/maestro/internal/store"
)

// lookupPiece requires the server web and offers all its tools.
const lookupPiece = mcptest.LookupPiece + "    allowed_tools: [mcp__web__*]\n    rules: []\n"

// echoModel is a fake model that calls the web server's echo tool, then
// completes; its second request carries the tool's result.
func echoModel(t *testing.T) (*llmtest.Server, llm.Provider) {
	t.Helper()
	return callThenComplete(t, "mcp__web__echo", `{"text":"ping"}`, "the server answered")
}

// callThenComplete is a fake model that calls tool with input, then
// completes with result.
func callThenComplete(t *testing.T, tool, input, result string) (*llmtest.Server, llm.Provider) {
	t.Helper()
	done, err := json.Marshal(struct {
		Status string `json:"status"`
		Result string `json:"result"`
	}{"success", result})
	if err != nil {
		t.Fatal(err)
	}
	model := llmtest.NewServer(t,
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: tool, Input: input}}, InputTokens: 100, OutputTokens: 10},
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "c2", Name: "complete", Input: string(done)}}, InputTokens: 100, OutputTokens: 10},
	)
	prov, err := anthropic.New(anthropic.Config{APIKey: "test", BaseURL: model.URL(), Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	return model, prov
}

// mcpRunner is an engine runner whose pieces are lookup and tickets and
// whose MCP servers are servers (the default of every job); data is its
// data directory.
func mcpRunner(t *testing.T, data string, prov llm.Provider, servers map[string]config.MCPServer) queue.Runner {
	t.Helper()
	pieces := t.TempDir()
	for name, text := range map[string]string{"lookup.yaml": lookupPiece, "tickets.yaml": mcptest.TrackerPiece} {
		if err := os.WriteFile(filepath.Join(pieces, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var slugs []string
	for slug := range servers {
		slugs = append(slugs, slug)
	}
	r := queue.NewEngineRunner(queue.EngineRunnerConfig{
		DataDir:  data,
		Provider: func(*queue.Job) (llm.Provider, error) { return prov, nil },
		Pieces: func(ctx context.Context) (*engine.Library, error) {
			return engine.NewLibrary(ctx, []string{pieces}, "")
		},
		MCP: &queue.JobMCP{Lookup: mcp.ConfigLookup(servers), Default: slugs},
	})
	t.Cleanup(func() { r.(io.Closer).Close() }) // parked runs stop (before the servers)
	return r
}

// jobLog is the text of every event in the job's log.
func jobLog(t *testing.T, st store.Store, id int64) string {
	t.Helper()
	evs, err := st.ReadJobEvents(t.Context(), id, 0, store.MaxListLimit)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(string(ev.Type) + " " + string(ev.Data) + "\n")
	}
	return b.String()
}

// A queued job's movement calls an MCP tool of the configured servers
// (here over streamable HTTP, and over stdio with its stderr in the
// job's log); a task naming an unknown server, and a piece requiring a
// server that is not configured, fail at start naming the server
// (issue 20).
func TestEngineRunnerMCP(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	httpServer := config.MCPServer{URL: mcptest.Serve(t)}
	stdioServer := config.MCPServer{Command: "sh", Args: []string{"-c", `echo "warming up" >&2; exec "$0"`, exe}, Env: map[string]string{mcptest.StdioEnv: "1"}}
	for _, tc := range []struct {
		name    string
		server  config.MCPServer
		task    store.NewTask
		state   store.State
		wantLog []string
		wantErr string
	}{
		{"over streamable HTTP", httpServer,
			store.NewTask{Title: "Look it up", Piece: "lookup", Payload: nil},
			store.StateSucceeded, nil, ""},
		{"over stdio, stderr in the job log", stdioServer,
			store.NewTask{Title: "Look it up", Piece: "lookup", Payload: nil},
			store.StateSucceeded, []string{`"message":"MCP server web: warming up"`}, ""},
		{"the task names its servers", httpServer,
			store.NewTask{Title: "Look it up", Piece: "lookup", Payload: payloadWith(t, map[string]any{"mcp_servers": []string{"web"}})},
			store.StateSucceeded, nil, ""},
		{"the task names an unknown server", httpServer,
			store.NewTask{Title: "Look it up", Piece: "lookup", Payload: payloadWith(t, map[string]any{"mcp_servers": []string{"nope"}})},
			store.StateFailed, nil, `MCP server "nope" is not configured`},
		{"required_mcp is missing", httpServer,
			store.NewTask{Title: "File a ticket", Piece: "tickets", Payload: nil},
			store.StateFailed, nil, `requires the MCP server "tracker", which is not configured`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, data := openSQLite(t, nil), t.TempDir()
			model, prov := echoModel(t)
			startPool(t, queue.Config{Store: st, Backoff: func(int) time.Duration { return 0 },
				Runner: mcpRunner(t, data, prov, map[string]config.MCPServer{"web": tc.server})})
			_, job, err := st.CreateTask(t.Context(), tc.task)
			if err != nil {
				t.Fatal(err)
			}
			done := waitJob(t, st, job.ID, "its end", func(j store.Job) bool { return j.State.Terminal() })
			if done.State != tc.state || !strings.Contains(done.Error, tc.wantErr) {
				t.Fatalf("job ended %s (%q), want %s with an error containing %q", done.State, done.Error, tc.state, tc.wantErr)
			}
			if tc.state == store.StateFailed && done.Attempt != 1 {
				t.Errorf("the failure was retried (attempt %d): it cannot succeed on another attempt", done.Attempt)
			}
			reqs := model.Requests()
			if tc.state == store.StateSucceeded && (len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "echo: ping")) {
				t.Errorf("the model did not get the MCP tool's result (%d requests)", len(reqs))
			}
			if tc.state == store.StateFailed && len(reqs) != 0 {
				t.Errorf("the model was called %d times: the job should fail at start", len(reqs))
			}
			log := jobLog(t, st, job.ID)
			for _, want := range tc.wantLog {
				if !strings.Contains(log, want) {
					t.Errorf("job log lacks %s:\n%s", want, log)
				}
			}
		})
	}
}

// An MCP server's elicitation during a job is an ASK: the job waits with
// the server's question and form as an agent comment; a reply that does
// not fit the form gets a comment saying why; a fitting one resumes the
// job, whose tool call completes with the answer (issue 20).
func TestEngineRunnerMCPElicitationIsAnAsk(t *testing.T) {
	t.Parallel()
	model, prov := callThenComplete(t, "mcp__web__ask", `{"question":"Which colour should the fence be?"}`, "painted")
	st := openSQLite(t, nil)
	startPool(t, queue.Config{Store: st, Runner: mcpRunner(t, t.TempDir(), prov, map[string]config.MCPServer{"web": {URL: mcptest.Serve(t)}})})
	ctx := t.Context()
	task, job, err := st.CreateTask(ctx, store.NewTask{Title: "Paint the fence", Piece: "lookup"})
	if err != nil {
		t.Fatal(err)
	}
	lastComment := func() string {
		t.Helper()
		cs, err := st.ListComments(ctx, task.ID, 0, 50)
		if err != nil || len(cs) == 0 {
			t.Fatalf("comments: %v %v", cs, err)
		}
		return cs[len(cs)-1].Body
	}
	reply := func(body string) {
		t.Helper()
		if _, _, err := st.AddComment(ctx, store.NewComment{TaskID: task.ID, AuthorKind: store.AuthorUser, Body: body, ResumeWaiting: true}); err != nil {
			t.Fatal(err)
		}
	}
	waitJob(t, st, job.ID, "waiting_human", inState(store.StateWaitingHuman))
	q := lastComment()
	for _, want := range []string{"The MCP server web asks: Which colour should the fence be?", "- answer (string, required)", `"decline" or "cancel"`} {
		if !strings.Contains(q, want) {
			t.Errorf("question comment lacks %q:\n%s", want, q)
		}
	}
	reply(`{"colour":"green"}`)
	waitJob(t, st, job.ID, "waiting again", func(j store.Job) bool { return j.State == store.StateWaitingHuman && j.Attempt == 2 })
	if got := lastComment(); !strings.Contains(got, "That answer does not fit the form of the MCP server web: the field answer is required") {
		t.Errorf("reply that does not fit: comment %q", got)
	}
	reply("green")
	done := waitJob(t, st, job.ID, "its end", func(j store.Job) bool { return j.State.Terminal() })
	if done.State != store.StateSucceeded {
		t.Fatalf("job ended %s: %s", done.State, done.Error)
	}
	reqs := model.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "action=accept answer=green") {
		t.Errorf("the model did not get the answered call's result (%d requests)", len(reqs))
	}
	if log := jobLog(t, st, job.ID); !strings.Contains(log, "The MCP server web got the answer (accept).") {
		t.Errorf("job log lacks the answer's status line:\n%s", log)
	}
}
