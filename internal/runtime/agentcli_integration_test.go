package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/tool"
)

// The integration tier of the approval relay: the real Claude Code,
// installed by scripts/install-agent-clis.sh into .cache/agent-clis (or
// $MAESTRO_AGENT_CLIS), against the fake model server with an isolated
// HOME. A missing CLI skips loudly, and fails the test under CI=true.

// fakeAnthropic serves the scripted turns to calls that offer tools;
// tool-less calls (titles and the like) get a looping auxiliary answer so
// the script stays in step.
func fakeAnthropic(t *testing.T, turns ...llmtest.Turn) (*llmtest.Server, string) {
	t.Helper()
	main, aux := llmtest.New(turns...), llmtest.New(llmtest.Turn{Text: []string{"Aux answer"}, InputTokens: 1, OutputTokens: 1})
	aux.Loop = true
	mainH, auxH := main.Handler(), aux.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Tools []json.RawMessage `json:"tools"`
		}
		_ = json.Unmarshal(body, &req)
		if r.Method == http.MethodPost && len(req.Tools) == 0 {
			auxH.ServeHTTP(w, r)
			return
		}
		mainH.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return main, srv.URL
}

func TestIntegrationClaudeApprovalRelay(t *testing.T) {
	t.Parallel()
	bin := proctest.AgentCLI(t, "claude")
	def := loadDef(t, "claude-code")
	for _, answer := range []string{"approve", "deny", "interrupt"} {
		t.Run(answer, func(t *testing.T) {
			approve := answer == "approve"
			t.Parallel()
			const file = "maestro-relay-ok.txt"
			model, url := fakeAnthropic(t,
				llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "toolu_perm1", Name: "Bash",
					Input: `{"command":"touch ` + file + `","description":"Create a file"}`}}, InputTokens: 20, OutputTokens: 9},
				llmtest.Turn{Text: []string{"Done."}, InputTokens: 30, OutputTokens: 5})
			home, work := t.TempDir(), t.TempDir()
			if err := os.MkdirAll(filepath.Join(home, "tmp"), 0o755); err != nil {
				t.Fatal(err)
			}
			a := &AgentCLI{
				Executor: &agentcli.Executor{Def: def, Path: bin, MaxAttempts: 1, Env: []string{
					"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TMPDIR=" + filepath.Join(home, "tmp"), "NO_COLOR=1",
					"ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_API_KEY=sk-fake"}},
				Dir: work,
			}
			h := newHarness(t, Config{ProviderName: a.ProviderName(), Model: a.ModelName(), Tools: func(context.Context) (*tool.Set, error) { return tool.NewSet(), nil },
				Turn: a.Turn, ApprovalMode: protocol.ApprovalPrompt},
				ConnectOptions{ID: LocalConnectionID, Local: true, Capabilities: &protocol.Capabilities{ServerRequests: []protocol.RequestType{protocol.RequestApproval}}})
			start := time.Now()
			if err := h.handle(protocol.Prompt{Content: "create the file " + file}); err != nil {
				t.Fatal(err)
			}
			h.waitWithin(120*time.Second, "the approval request", func(fs []protocol.Message) bool {
				return slices.ContainsFunc(fs, func(m protocol.Message) bool { return m.MessageType() == protocol.TypeServerRequest })
			})
			req := ofType[protocol.ServerRequest](h)[0]
			if req.RequestType != protocol.RequestApproval || req.CallID != "toolu_perm1" || req.Tool != "Bash" ||
				!strings.Contains(string(req.Args), "touch "+file) || !strings.HasPrefix(req.Reason, "Create a file") {
				t.Errorf("server_request = %+v", req)
			}
			if _, err := os.Stat(filepath.Join(work, file)); err == nil {
				t.Fatal("the tool ran before it was approved")
			}
			if answer == "interrupt" {
				// The pending request is cancelled and the CLI ends within 2 s.
				h.interruptWithin()
				res := ofType[protocol.ServerRequestResolved](h)
				if len(res) != 1 || res[0].Resolution != protocol.ResolutionCancelled {
					t.Errorf("server_request_resolved = %+v", res)
				}
				return
			}
			if err := h.handle(protocol.ServerRequestResponse{RequestID: req.RequestID, RequestType: protocol.RequestApproval, Approved: &approve}); err != nil {
				t.Fatal(err)
			}
			h.idleWithin(120*time.Second, "the turn")
			t.Logf("claude relay turn (approve=%v): %v", approve, time.Since(start).Round(time.Millisecond))

			ends := ofType[protocol.ToolEnd](h)
			var output string
			for _, o := range ofType[protocol.ToolOutput](h) {
				output += o.Content
			}
			_, statErr := os.Stat(filepath.Join(work, file))
			if approve {
				if len(ends) != 1 || !ends[0].Success || statErr != nil {
					t.Errorf("approved: tool ends %+v, file: %v", ends, statErr)
				}
			} else {
				if len(ends) != 1 || ends[0].Success || statErr == nil || !strings.Contains(output, "Denied by user") {
					t.Errorf("denied: tool ends %+v, output %q, file exists %v", ends, output, statErr == nil)
				}
			}
			if errs := ofType[protocol.Error](h); len(errs) != 0 {
				t.Errorf("errors: %+v", errs)
			}
			reqs := model.Requests()
			if len(reqs) != 2 || !bytes.Contains(reqs[1].Body, []byte("tool_result")) {
				t.Errorf("model calls = %d; the second should carry the tool result", len(reqs))
			}
		})
	}
}

// A headless --agent session on the real Claude Code, resumed as after a
// restart: each round is a new AgentCLI (and runtime) sharing only what a
// Maestro session stores, the CLI session id and the logged conversation.
// Round 2 resumes the stored id with --resume (Claude replays the history
// to the model); round 3 asks for a session Claude never had and gets a
// fresh one seeded with the conversation.
func TestIntegrationClaudeResumeStoredSession(t *testing.T) {
	t.Parallel()
	bin := proctest.AgentCLI(t, "claude")
	def := loadDef(t, "claude-code")
	model, url := fakeAnthropic(t,
		llmtest.Turn{Text: []string{"First answer."}, InputTokens: 10, OutputTokens: 3},
		llmtest.Turn{Text: []string{"Second answer."}, InputTokens: 20, OutputTokens: 3},
		llmtest.Turn{Text: []string{"Third answer."}, InputTokens: 30, OutputTokens: 3})
	home, work := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	var history []llm.Message
	round := func(stored, prompt string, lost bool) (a *AgentCLI, h *harness, reported []string) {
		t.Helper()
		a = &AgentCLI{
			Executor: &agentcli.Executor{Def: def, Path: bin, MaxAttempts: 1, Env: []string{
				"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TMPDIR=" + filepath.Join(home, "tmp"), "NO_COLOR=1",
				"ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_API_KEY=sk-fake"}},
			Dir:       work,
			SessionID: stored,
			History:   slices.Clone(history),
			OnSession: func(id string) { reported = append(reported, id) },
		}
		h = newHarness(t, Config{ProviderName: a.ProviderName(), Model: a.ModelName(), Tools: func(context.Context) (*tool.Set, error) { return tool.NewSet(), nil },
			Turn: a.Turn, ApprovalMode: protocol.ApprovalAuto}, ConnectOptions{})
		start := time.Now()
		if err := h.handle(protocol.Prompt{Content: prompt}); err != nil {
			t.Fatal(err)
		}
		h.idleWithin(120*time.Second, "the turn")
		t.Logf("claude turn %q (resuming %q): %v", prompt, stored, time.Since(start).Round(time.Millisecond))
		for _, e := range ofType[protocol.Error](h) {
			// The failed attempt on a lost session reports its error
			// before the reseeded one runs.
			if !lost || !strings.HasPrefix(e.Message, "session_not_found: ") {
				t.Fatalf("error: %+v", e)
			}
		}
		var answer string
		for _, c := range ofType[protocol.ResponseChunk](h) {
			answer += c.Content
		}
		history = append(history, llm.UserText(prompt), llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text(answer)}})
		return a, h, reported
	}

	a1, _, ids := round("", "remember teal", false)
	first := a1.Session()
	if first == "" || !slices.Equal(ids, []string{first}) {
		t.Fatalf("round 1: session %q, OnSession got %q; want the new session reported once", first, ids)
	}

	a2, h2, ids := round(first, "and now", false)
	if a2.Session() != first || len(ids) != 0 {
		t.Errorf("round 2: session %q, OnSession got %q; want %s kept", a2.Session(), ids, first)
	}
	if st := ofType[protocol.Status](h2); slices.ContainsFunc(st, func(s protocol.Status) bool { return strings.Contains(s.Message, "no longer exists") }) {
		t.Errorf("round 2 reseeded: %+v", st)
	}

	const gone = "0e0e0e0e-1111-4222-8333-444444444444"
	a3, h3, ids := round(gone, "third", true)
	if s := a3.Session(); s == gone || s == first || s == "" || !slices.Equal(ids, []string{s}) {
		t.Errorf("round 3: session %q, OnSession got %q; want a fresh session reported", s, ids)
	}
	if st := ofType[protocol.Status](h3); !slices.ContainsFunc(st, func(s protocol.Status) bool { return strings.Contains(s.Message, "no longer exists") }) {
		t.Errorf("round 3 statuses = %+v, want the reseed announced", st)
	}

	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("model calls = %d, want 3", len(reqs))
	}
	if !bytes.Contains(reqs[1].Body, []byte("remember teal")) || !bytes.Contains(reqs[1].Body, []byte("First answer.")) {
		t.Errorf("round 2: the model call lacks the resumed history: %.2000s", reqs[1].Body)
	}
	for _, want := range []string{"Earlier conversation", "User: remember teal", "Assistant: Second answer."} {
		if !bytes.Contains(reqs[2].Body, []byte(want)) {
			t.Errorf("round 3: the model call lacks %q: %.2000s", want, reqs[2].Body)
		}
	}
}
