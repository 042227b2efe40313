package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/maestro-run/maestro/internal/host"
)

// maestro mcp's pieces name the piece files the catalog ignored, with
// the reason, so that list_pieces and run_task can say why a piece of
// the workspace is not there (an invalid file was left out silently,
// and run_task said "unknown piece").
func TestMCPPiecesNameTheIgnoredFiles(t *testing.T) {
	t.Parallel()
	home, ws := t.TempDir(), t.TempDir()
	dir := filepath.Join(ws, ".maestro", "pieces")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "deploy.yaml")
	if err := os.WriteFile(file, []byte("name: deploy\ndescription: d\ncolour: blue\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ios := &IOStreams{Getenv: func(k string) string {
		if k == "MAESTRO_HOME" {
			return home
		}
		return ""
	}}
	o := mcpServerOptions(ios, "maestro", slog.New(slog.NewTextHandler(io.Discard, nil)))
	pieces, err := o.Pieces(t.Context(), ws)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, p := range pieces {
		if p.Ignored == "" {
			continue
		}
		found = true
		if p.Name != "deploy" || p.Source != file || !strings.Contains(p.Ignored, "deploy.yaml:3:1: colour: unknown field") {
			t.Errorf("ignored piece %+v, want deploy from %s, its error", p, file)
		}
	}
	if !found {
		t.Errorf("pieces %+v name no ignored file", pieces)
	}
}

// maestro mcp run by hand in a terminal says what it is for and how it
// ends (it waited in silence); started by a client (stdin a pipe), it
// writes nothing but MCP. Stopped, it logs no error.
func TestMCPInATerminalSaysWhatItIs(t *testing.T) {
	t.Parallel()
	ptm, pts, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	t.Cleanup(func() { ptm.Close(); pts.Close() })
	for _, in := range []io.Reader{pts, strings.NewReader("")} {
		var stdout, stderr bytes.Buffer
		ios := &IOStreams{In: in, Out: &stdout, ErrOut: &stderr, Getenv: func(k string) string {
			if k == "MAESTRO_HOME" {
				return t.TempDir()
			}
			return ""
		}}
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // served until the client goes: here at once
		if code := Run(ctx, ios, []string{"mcp"}); code != 0 {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
		_, tty := in.(*os.File)
		// Nor does it log an error for being stopped (the SDK's
		// "level=ERROR msg=\"server run cancelled\"").
		if got := strings.Contains(stderr.String(), "to the MCP client that starts it"); got != tty || stdout.Len() != 0 || strings.Contains(stderr.String(), "ERROR") {
			t.Errorf("stdin a terminal %v: stderr %q, stdout %q", tty, stderr.String(), stdout.String())
		}
	}
}

// maestro mcp answers a line that is not JSON with a JSON-RPC Parse
// error and goes on: the request before it and the one after are
// answered, even as stdin ends, and it exits 0. Before, the go-sdk ended
// the session at the line: exit 1 with "mcp server: invalid character
// …", the initialize reply never written.
func TestMCPGoesOnPastAMalformedLine(t *testing.T) {
	t.Parallel()
	in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
this is not json
{"jsonrpc":"2.0","id":2,"method":"ping"}
`
	var stdout, stderr bytes.Buffer
	home := t.TempDir()
	ios := &IOStreams{In: strings.NewReader(in), Out: &stdout, ErrOut: &stderr, Getenv: func(k string) string {
		if k == "MAESTRO_HOME" {
			return home
		}
		return ""
	}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if code := Run(ctx, ios, []string{"mcp"}); code != 0 {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{`"id":1,"result"`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: not JSON: invalid character`, `"id":2,"result"`} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout has no %s:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr.String(), "line=2 code=-32700") {
		t.Errorf("stderr does not log the line answered: %s", stderr.String())
	}
}

// serve's /mcp answers a body that is no JSON-RPC message 400 naming
// the problem (not a 500, nor a bare error). A guard: it did already.
func TestServedMCPRefusesAMalformedBody(t *testing.T) {
	t.Parallel()
	ios := &IOStreams{Getenv: func(string) string { return "" }}
	m, err := serveMCP(ios, host.AttachPolicy{Workspaces: filepath.Join(t.TempDir(), "ws")}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for body, want := range map[string]string{
		"this is not json": "malformed payload: ",
		`{"foo":1}`:        `malformed payload: invalid message version tag ""`,
		"[]":               "malformed payload: empty batch",
	} {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		rec := httptest.NewRecorder()
		m.handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("%s: %d %q, want 400 %q", body, rec.Code, rec.Body.String(), want)
		}
	}
}
