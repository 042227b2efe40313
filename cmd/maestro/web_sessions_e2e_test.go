package main

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/proctest"
)

// With web.sessions in config.yaml a session without a piece (maestro run
// --no-piece) gets WebFetch, DownloadFile (and no WebSearch without a
// backend) behind the network guard: the loopback page it was allowed is
// fetched as markdown; without web.sessions the tools are not offered
// (issue 20).
func TestWebToolsInPlainSessions(t *testing.T) {
	t.Parallel()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><body><h1>Fence colours</h1><p>Green is best.</p></body></html>"))
	}))
	t.Cleanup(page.Close)
	for _, tc := range []struct {
		name   string
		config string
		offer  bool
	}{
		{"web.sessions", "web:\n  sessions: true\n  allow_hosts: [127.0.0.1]\n", true},
		{"not configured", "web:\n  allow_hosts: [127.0.0.1]\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			turns := []llmtest.Turn{{Text: []string{"no web here"}, InputTokens: 10, OutputTokens: 3}}
			if tc.offer {
				turns = []llmtest.Turn{
					{ToolCalls: []llmtest.ToolCall{{ID: "c1", Name: "WebFetch", Input: `{"url":"` + page.URL + `/fence"}`}}, InputTokens: 100, OutputTokens: 10},
					{Text: []string{"Green."}, InputTokens: 100, OutputTokens: 3},
				}
			}
			model := llmtest.NewServer(t, turns...)
			home, ws := t.TempDir(), t.TempDir()
			writeFile(t, home, "config.yaml", tc.config)
			env := append(proctest.NoModelEnv(home), "ANTHROPIC_API_KEY=sk-test", "ANTHROPIC_BASE_URL="+model.URL())
			out, stderr := runMaestroEnv(t, env, true, "run", "--no-piece", "--workspace", ws, "which colour?")
			reqs := model.Requests()
			if len(reqs) != len(turns) {
				t.Fatalf("%d model requests, want %d\nstdout:\n%s\nstderr:\n%s", len(reqs), len(turns), out, stderr)
			}
			tools := requestTools(reqs[0])
			for _, name := range []string{"WebFetch", "DownloadFile"} {
				if slices.Contains(tools, name) != tc.offer {
					t.Errorf("tools %v: %s offered = %v, want %v", tools, name, !tc.offer, tc.offer)
				}
			}
			if slices.Contains(tools, "WebSearch") {
				t.Errorf("WebSearch offered without a search backend: %v", tools)
			}
			if tc.offer && !strings.Contains(toolResults(reqs[1]), "# Fence colours") {
				t.Errorf("the fetched page (as markdown) is not in the second request:\n%s", toolResults(reqs[1]))
			}
		})
	}
}
