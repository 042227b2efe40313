package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/anthropic"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/llm/openai"
)

// fakeProvider returns a real provider of the given kind talking to srv.
func fakeProvider(t *testing.T, kind string, srv *llmtest.Server) llm.Provider {
	t.Helper()
	var p llm.Provider
	var err error
	switch kind {
	case "anthropic":
		p, err = anthropic.New(anthropic.Config{APIKey: "sk-test", BaseURL: srv.URL(), Model: "claude-haiku-4-5"})
	case "openai":
		p, err = openai.New(openai.Config{BaseURL: srv.URL() + "/v1", Model: "llama3.2", API: "chat"})
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// mcpPiece needs an MCP server, so the classifier must not offer it.
const mcpPiece = `name: tickets
description: Work on issue tracker tickets.
max_movements: 2
initial_movement: work
required_mcp: [tracker]
movements:
  - name: work
    edit: false
    persona: You handle tickets.
    instruction: Handle the ticket.
    allowed_tools: [mcp__tracker__*]
    rules: []
`

func TestClassify(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		provider     string
		answer       string
		wantPiece    string
		wantFallback bool
		wantReason   string
	}{
		{"picks by description", "anthropic", `{"piece": "code", "reason": "The task changes source code and must pass its tests."}`, "code", false, "The task changes source code and must pass its tests."},
		{"fenced JSON over chat completions", "openai", "```json\n{\"piece\":\"review\",\"reason\":\"an audit\"}\n```", "review", false, "an audit"},
		{"garbage falls back", "anthropic", "I think you should write some code!", "general", true, "no JSON object"},
		{"unknown piece falls back", "anthropic", `{"piece": "deploy", "reason": "ship it"}`, "general", true, `it named "deploy", which is not an offered piece`},
		{"piece needing MCP falls back", "openai", `{"piece": "tickets", "reason": "a ticket"}`, "general", true, `"tickets", which is not an offered piece`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "tickets.yaml"), []byte(mcpPiece), 0o644); err != nil {
				t.Fatal(err)
			}
			lib, err := NewLibrary(context.Background(), []string{dir}, "")
			if err != nil {
				t.Fatal(err)
			}
			srv := llmtest.NewServer(t, llmtest.Turn{Text: []string{tc.answer}, InputTokens: 900, OutputTokens: 30})
			c, err := Classify(t.Context(), fakeProvider(t, tc.provider, srv), lib, "Fix the failing test in parser_test.go.", ClassifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if c.Piece.Name != tc.wantPiece || c.Fallback != tc.wantFallback || !strings.Contains(c.Reason, tc.wantReason) {
				t.Errorf("classification = %s fallback=%v reason %q; want %s fallback=%v reason containing %q",
					c.Piece.Name, c.Fallback, c.Reason, tc.wantPiece, tc.wantFallback, tc.wantReason)
			}
			reqs := srv.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests", len(reqs))
			}
			body := string(reqs[0].Body)
			for _, want := range []string{"Fix the failing test in parser_test.go.", "## code", "Change a code base", "Keywords: fix, bug", "## general", "one of the piece names"} {
				if !strings.Contains(body, want) {
					t.Errorf("request lacks %q:\n%s", want, body)
				}
			}
			if strings.Contains(body, "## tickets") || strings.Contains(body, "issue tracker") {
				t.Error("a piece whose MCP server is not connected was offered")
			}
			if strings.Join(c.Offered, ",") != "chat,code,general,piece-builder,research,review" {
				t.Errorf("offered = %v", c.Offered)
			}
		})
	}
}

func TestClassifyOverrideAndFailures(t *testing.T) {
	t.Parallel()
	lib, err := NewLibrary(context.Background(), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := llmtest.NewServer(t, llmtest.Turn{Status: 500, ErrorMessage: "boom"})
	p := fakeProvider(t, "anthropic", srv)

	c, err := Classify(t.Context(), p, lib, "anything", ClassifyOptions{Override: "research"})
	if err != nil || c.Piece.Name != "research" || !c.Override {
		t.Errorf("override: %+v, %v", c, err)
	}
	if len(srv.Requests()) != 0 {
		t.Error("the override asked the model")
	}
	if _, err := Classify(t.Context(), p, lib, "anything", ClassifyOptions{Override: "reserch"}); err == nil || !strings.Contains(err.Error(), `unknown piece "reserch"`) {
		t.Errorf("unknown override: %v", err)
	}
	// A failed call falls back too (the run itself reports the failure).
	c, err = Classify(t.Context(), p, lib, "anything", ClassifyOptions{})
	if err != nil || c.Piece.Name != "general" || !c.Fallback || !strings.Contains(c.Reason, "the classifier call failed") {
		t.Errorf("failed call: %+v, %v", c, err)
	}
	ev := c.Event()
	if ev.Piece != "general" || !ev.Fallback || !strings.Contains(ev.Describe(), "fallback") {
		t.Errorf("event = %+v", ev)
	}
}

func TestParseChoice(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, name, why string }{
		{`{"piece":"chat","reason":"hi"}`, "chat", ""},
		{`Sure: {"piece": " code "} done`, "code", ""},
		{`{"piece": 3}`, "", "invalid JSON"},
		{`{"reason": "x"}`, "", "no piece named"},
		{``, "", "no JSON object"},
		{`}{`, "", "no JSON object"},
	}
	for _, tc := range cases {
		name, _, why := parseChoice(tc.in)
		if name != tc.name || !strings.Contains(why, tc.why) || (tc.why == "") != (why == "") {
			t.Errorf("parseChoice(%q) = %q, %q; want %q, %q", tc.in, name, why, tc.name, tc.why)
		}
	}
}
