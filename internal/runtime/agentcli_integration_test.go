package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/tool"
)

// The integration tier of the approval relay: the real Claude Code,
// installed by scripts/install-agent-clis.sh into .cache/agent-clis (or
// $MAESTRO_AGENT_CLIS), against the fake model server with an isolated
// HOME. A missing CLI skips loudly, and fails the test under CI=true.

func claudeBin(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MAESTRO_AGENT_CLIS")
	if dir == "" {
		var err error
		if dir, err = filepath.Abs("../../.cache/agent-clis"); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "bin", "claude")
	if st, err := os.Stat(bin); err == nil && !st.IsDir() {
		return bin
	}
	msg := fmt.Sprintf("AGENT CLI claude NOT INSTALLED at %s: run scripts/install-agent-clis.sh (integration tier skipped)", bin)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

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

// waitWithin is waitFor with a longer bound (a real CLI starts slowly on
// a loaded machine).
func (h *harness) waitWithin(d time.Duration, what string, ok func([]protocol.Message) bool) {
	h.t.Helper()
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		h.mu.Lock()
		frames, ch := slices.Clone(h.frames), h.changed
		h.mu.Unlock()
		if ok(frames) {
			return
		}
		select {
		case <-ch:
		case <-timeout.C:
			h.t.Fatalf("timed out waiting for %s; frames: %v", what, h.types())
		}
	}
}

func TestIntegrationClaudeApprovalRelay(t *testing.T) {
	t.Parallel()
	bin := claudeBin(t)
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
			h := newHarness(t, Config{Provider: a.Provider(), Tools: func(context.Context) (*tool.Set, error) { return tool.NewSet(), nil },
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
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			if err := h.rt.WaitIdle(ctx); err != nil {
				t.Fatalf("the turn did not end: frames %v", h.types())
			}
			h.settle()
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
