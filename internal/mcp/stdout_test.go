package mcp

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/config"
)

// TestStdioServerWritesNonMessages: a stdio server that writes lines
// other than JSON-RPC messages on its stdout (a banner, a blank line, a
// JSON log line before it serves; a log line after every message) works,
// as under the official TypeScript and Python SDKs, which skip such
// lines: the go-sdk ended the connection at the first one, and the
// server did not start. The skipped lines are noted in the server's log,
// a few of them.
func TestStdioServerWritesNonMessages(t *testing.T) {
	t.Parallel()
	srv := stdioServer(t)
	exe := srv.Command
	srv.Command, srv.Args = "sh", []string{"-c", `echo 'Server running on stdio'; echo; echo '{"level":"info","msg":"ready"}'
"$SERVER" | while IFS= read -r line; do printf '%s\n' "$line"; echo 'handled a message'; done`}
	srv.Env["SERVER"] = exe
	logDir := t.TempDir()
	m := NewManager(Options{Servers: map[string]config.MCPServer{"chatty": srv}, LogDir: logDir})
	t.Cleanup(func() { m.Close() })
	tools, err := m.Tools(testCtx(t), "mcp__chatty__*")
	if err != nil {
		t.Fatal(err)
	}
	echo := find(t, tools, "mcp__chatty__echo")
	for _, text := range []string{"one", "two"} {
		if got := run(t, echo, `{"text":"`+text+`"}`).Content; got != "echo: "+text {
			t.Errorf("echo = %q, want %q", got, "echo: "+text)
		}
	}
	m.Close()
	log, err := os.ReadFile(filepath.Join(logDir, "mcp-chatty.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), `not a JSON-RPC message (a stdio server writes its logs on stderr): "Server running on stdio"`) {
		t.Errorf("the server's log does not note the skipped banner:\n%s", log)
	}
	if n := strings.Count(string(log), "[maestro] skipped a line"); n != 3 {
		t.Errorf("the server's log notes %d skipped lines one by one, want 3:\n%s", n, log)
	}
}

// TestStdoutFilter: what the filter passes on of a server's stdout and
// what it skips, within its bound.
func TestStdoutFilter(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 100)
	in := strings.Join([]string{
		"Server running on stdio",
		"",
		"   ",
		`{"jsonrpc":"2.0","id":1,"result":{}}  ` + "\r",
		`{"level":30,"msg":"a JSON log line"}`,
		`{"jsonrpc":"2.0",`, // a message over lines: not one
		`[{"jsonrpc":"2.0","method":"a"}]`,
		long,                                   // over the bound: skipped
		`{"jsonrpc":"2.0","x":"` + long + `"}`, // over the bound: the SDK refuses it
		`{"jsonrpc":"2.0","method":"last"}`,    // no newline at the end
	}, "\n")
	var skipped []string
	f := newStdoutFilter(strings.NewReader(in), 64, func(b []byte) { skipped = append(skipped, string(b)) })
	f.r = bufio.NewReaderSize(strings.NewReader(in), 16) // lines over the buffer
	out, err := io.ReadAll(&smallReads{f})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n" +
		`[{"jsonrpc":"2.0","method":"a"}]` + "\n" +
		`{"jsonrpc":"2.0","x":"` + long + `"}` + "\n" +
		`{"jsonrpc":"2.0","method":"last"}` + "\n"
	if string(out) != want {
		t.Errorf("passed on:\n%s\nwant:\n%s", out, want)
	}
	// Of a line over the bound, its start.
	wantSkipped := []string{"Server running on stdio", `{"level":30,"msg":"a JSON log line"}`, `{"jsonrpc":"2.0",`, long}
	if len(skipped) != len(wantSkipped) {
		t.Fatalf("skipped %q, want %q", skipped, wantSkipped)
	}
	for i, w := range wantSkipped {
		if skipped[i] == "" || !strings.HasPrefix(w, skipped[i]) || (w != long && skipped[i] != w) {
			t.Errorf("skipped %q, want %q", skipped[i], w)
		}
	}
}

// smallReads reads 7 bytes at a time, as a slow reader would.
type smallReads struct{ r io.Reader }

func (s *smallReads) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), 7)]) }
