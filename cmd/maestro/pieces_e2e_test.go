package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/proctest"
)

// runEvents reads the run events of every session log under home, in
// order, as {"kind": …, "event": {…}} objects.
func runEvents(t *testing.T, home string) []map[string]any {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(home, "sessions", "*", "events.jsonl"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no session log under %s (%v)", home, err)
	}
	var out []map[string]any
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec struct {
				Kind  string         `json:"kind"`
				Event map[string]any `json:"event"`
			}
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Kind == "run_event" {
				out = append(out, rec.Event)
			}
		}
		f.Close()
	}
	return out
}

// A live model that answers a question in plain text, never calling
// complete, succeeds: after the reminders its answer is the result, the
// run's log says so, and a tool call it made counts (issue 15 item 1).
func TestPlainTextAnswerSucceeds(t *testing.T) {
	t.Parallel()
	const answer = "Hello! How can I help you today?"
	text := llmtest.Turn{Text: []string{answer}, InputTokens: 50, OutputTokens: 9}
	for _, tc := range []struct {
		name      string
		env       func(url string) []string
		turns     []llmtest.Turn
		loop      bool
		toolCalls string
	}{
		{
			name: "openai-compatible, text only",
			env:  func(url string) []string { return []string{"OPENAI_BASE_URL=" + url + "/v1"} },
			// The classifier gets the text too (an unusable answer:
			// the fallback piece general).
			turns: []llmtest.Turn{text}, loop: true, toolCalls: "0 tool call(s)",
		},
		{
			name: "anthropic, a tool call then text",
			env: func(url string) []string {
				return []string{"ANTHROPIC_API_KEY=sk-test", "ANTHROPIC_BASE_URL=" + url}
			},
			turns: []llmtest.Turn{
				{Text: []string{`{"piece": "general", "reason": "a greeting"}`}, InputTokens: 400, OutputTokens: 12},
				{ToolCalls: []llmtest.ToolCall{{ID: "call_glob", Name: "Glob", Input: `{"pattern":"*"}`}}, InputTokens: 100, OutputTokens: 10},
				text, text, text,
			},
			toolCalls: "1 tool call(s)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t, tc.turns...)
			srv.Loop = tc.loop
			if tc.loop { // a local server: it lists the model it serves
				srv.Models = []string{"small-local-model"}
			}
			home := t.TempDir()
			env := append(proctest.NoModelEnv(home), tc.env(srv.URL())...)
			out, stderr := runMaestroEnv(t, env, true, "run", "--workspace", t.TempDir(), "say hello")
			if strings.TrimSpace(out) != answer {
				t.Errorf("stdout = %q, want the answer %q\nstderr:\n%s", out, answer, stderr)
			}
			if !strings.Contains(stderr, tc.toolCalls) {
				t.Errorf("stderr lacks %q:\n%s", tc.toolCalls, stderr)
			}
			var done []map[string]any
			for _, ev := range runEvents(t, home) {
				if ev["kind"] == "complete" {
					done = append(done, ev)
				}
			}
			if len(done) != 1 {
				t.Fatalf("complete run events = %v, want one", done)
			}
			data, _ := done[0]["data"].(map[string]any)
			if data["status"] != "succeeded" || data["result"] != answer || !strings.Contains(data["reason"].(string), "text_answer: result") {
				t.Errorf("complete event = %v, want status succeeded, the answer as result and the text_answer reason", done[0])
			}
		})
	}
}
