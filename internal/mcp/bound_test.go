package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/mcp/mcptest"
)

// serveHuge serves over streamable HTTP a server whose tool "huge"
// answers 100 KiB of text and "small" a line; json makes it answer a
// POST with application/json rather than an event stream.
func serveHuge(t *testing.T, json bool) string {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "huge", Version: "1"}, nil)
	for name, text := range map[string]string{"huge": strings.Repeat("y", 100<<10), "small": "called small"} {
		sdk.AddTool(srv, &sdk.Tool{Name: name}, func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil, nil
		})
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{JSONResponse: json})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

type none struct{}

// TestMessageOverTheBound: a server answering with a message over the
// bound fails that call saying so, and the next call restarts the
// server, whether it speaks stdio or streamable HTTP (a JSON answer or an
// event stream). Over HTTP the bound did not apply: the go-sdk reads a
// JSON answer whole, so a server answering with an endless body took all
// of Maestro's memory, and an event was bounded only by the SDK's own
// 16 MiB whatever MaxMessageBytes said.
func TestMessageOverTheBound(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name, srv := range map[string]config.MCPServer{
		"stdio":      {Command: exe, Env: map[string]string{hugeReplyEnv: "1"}},
		"http json":  {URL: serveHuge(t, true)},
		"http event": {URL: serveHuge(t, false)},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := NewManager(Options{Servers: map[string]config.MCPServer{"big": srv}, MaxMessageBytes: 64 << 10})
			t.Cleanup(func() { m.Close() })
			tools, err := m.Tools(testCtx(t), "mcp__big__*")
			if err != nil {
				t.Fatal(err)
			}
			res := run(t, find(t, tools, "mcp__big__huge"), `{}`)
			if !res.IsError || !strings.Contains(res.Content, "MCP server big answered with a message over 64 KiB") ||
				!strings.Contains(res.Content, "restarted at its next use") {
				t.Errorf("huge = error %v, %d bytes %.200q, want an error saying the message was over 64 KiB", res.IsError, len(res.Content), res.Content)
			}
			if res := run(t, find(t, tools, "mcp__big__small"), `{}`); res.IsError || res.Content != "called small" {
				t.Errorf("the next call = %+v, want it answered by the restarted server", res)
			}
		})
	}
}

// recordHandler is a slog handler that sends each record's message on a
// channel (dropped when it is full).
type recordHandler chan string

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h <- r.Message:
	default: // the test has stopped reading: never block the logger
	}
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

// TestHTTPServerLogBounded: an HTTP server that sends log messages
// without end on its event stream gets at most 1 MiB of them per start
// into Maestro's log, then one line saying the rest is dropped (a stdio
// server's go to a file bounded the same way); before, every one was
// logged, filling serve's log, which every session and job shares.
func TestHTTPServerLogBounded(t *testing.T) {
	t.Parallel()
	const sent, size = 600, 4 << 10
	srv := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return mcptest.NewServer() }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			srv.ServeHTTP(w, r)
			return
		}
		// The stream the client opens: log messages, then nothing.
		w.Header().Set("Content-Type", "text/event-stream")
		note := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + strings.Repeat("z", size) + `"}}`
		for range sent {
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", note)
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(ts.Close)
	records := make(recordHandler, sent+16)
	m := NewManager(Options{Servers: map[string]config.MCPServer{"noisy": {URL: ts.URL + "/mcp"}}, Logger: slog.New(records)})
	t.Cleanup(func() { m.Close() })
	ctx := testCtx(t)
	if _, err := m.Tools(ctx, "mcp__noisy__*"); err != nil {
		t.Fatal(err)
	}
	logged := 0
	for {
		select {
		case msg := <-records:
			switch {
			case msg == "MCP server log message":
				logged++
				if logged == sent {
					t.Fatalf("all %d log messages (%d KiB) were logged, want at most 1 MiB of them", sent, sent*size>>10)
				}
				continue
			case !strings.HasPrefix(msg, "MCP server log messages dropped"):
				continue
			}
			if logged != 1<<20/size {
				t.Errorf("%d messages of %d bytes logged before the drop, want %d (1 MiB)", logged, size, 1<<20/size)
			}
			return
		case <-ctx.Done():
			t.Fatalf("%d log messages logged, and no line saying the rest is dropped", logged)
		}
	}
}
