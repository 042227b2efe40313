package mcp

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/llm/anthropic"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
)

type sampleIn struct {
	Prompt string `json:"prompt"`
}

// serveSampler serves, over streamable HTTP, a server whose tool sample
// asks the client's model for a completion of its prompt.
func serveSampler(t *testing.T) string {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "sampler", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "sample", Description: "Ask the client's model."},
		func(ctx context.Context, req *sdk.CallToolRequest, in sampleIn) (*sdk.CallToolResult, any, error) {
			res, err := req.Session.CreateMessage(ctx, &sdk.CreateMessageParams{
				SystemPrompt: "You write haiku.", MaxTokens: 100,
				Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: in.Prompt}}},
			})
			if err != nil {
				return nil, nil, fmt.Errorf("sampling refused: %w", err)
			}
			text, _ := res.Content.(*sdk.TextContent)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: fmt.Sprintf("model %s said: %s", res.Model, text.Text)}}}, nil, nil
		})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// Server-initiated sampling is served by the session's model for a
// server configured with allow_sampling, and refused for any other.
func TestSampling(t *testing.T) {
	t.Parallel()
	model := llmtest.NewServer(t, llmtest.Turn{Text: []string{"autumn wind"}, InputTokens: 10, OutputTokens: 3})
	prov, err := anthropic.New(anthropic.Config{APIKey: "test", BaseURL: model.URL(), Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	url := serveSampler(t)
	var reports []string
	m := NewManager(Options{Servers: map[string]config.MCPServer{
		"trusted": {URL: url, AllowSampling: true},
		"plain":   {URL: url},
	}, Model: prov, Report: func(msg string) { reports = append(reports, msg) }})
	t.Cleanup(func() { m.Close() })
	for _, tc := range []struct {
		server  string
		want    string
		isError bool
	}{
		{"trusted", "said: autumn wind", false},
		{"plain", "sampling refused", true},
	} {
		tools, err := m.Tools(testCtx(t), Name(tc.server, "sample"))
		if err != nil || len(tools) != 1 {
			t.Fatalf("Tools(%s) = %v, %v", tc.server, tools, err)
		}
		res := run(t, tools[0], `{"prompt":"a haiku about MCP"}`)
		if res.IsError != tc.isError || !strings.Contains(res.Content, tc.want) {
			t.Errorf("%s: sample = %+v, want error=%v and %q", tc.server, res, tc.isError, tc.want)
		}
	}
	reqs := model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the model got %d requests, want 1 (the trusted server's)", len(reqs))
	}
	if body := string(reqs[0].Body); !strings.Contains(body, "You write haiku.") || !strings.Contains(body, "a haiku about MCP") {
		t.Errorf("the model's request lacks the server's system prompt or message: %s", body)
	}
	if len(reports) != 1 || !strings.Contains(reports[0], "MCP server trusted asks the model for a completion") {
		t.Errorf("reports = %q", reports)
	}
}
