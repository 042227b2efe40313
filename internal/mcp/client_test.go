package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/mcp/mcptest"
	"github.com/maestro-run/maestro/internal/tool"
)

func TestMain(m *testing.M) {
	mcptest.RunStdioIfRequested()
	runDuplicateListerIfRequested()
	runFakeRunIfRequested()
	runMCPParentIfRequested()
	os.Exit(m.Run())
}

// duplicateListerEnv makes the test binary a raw MCP server over stdio
// whose tools/list names one tool twice (the SDK's server cannot).
const duplicateListerEnv = "MAESTRO_MCPTEST_DUPLICATES"

// oddNamesEnv makes the test binary a raw MCP server over stdio whose
// tools have names model APIs refuse (a dot, a slash, too long, not
// ASCII, one the server itself gives a replaced name); a call answers
// "called <the name the server got>".
const oddNamesEnv = "MAESTRO_MCPTEST_ODD_NAMES"

// oddNames are the tools of the oddNamesEnv server.
var oddNames = []string{"files.read", "files_read", "repo/search", "読む", "書く", strings.Repeat("x", 70), "", "bad\nname", "plain"}

// silentListerEnv makes the test binary a raw MCP server over stdio
// that answers initialize and never tools/list.
const silentListerEnv = "MAESTRO_MCPTEST_SILENT_LIST"

// hugeReplyEnv makes the test binary a raw MCP server over stdio whose
// tool "huge" answers 100 KiB of text, "small" a line, and "hang"
// never answers.
const hugeReplyEnv = "MAESTRO_MCPTEST_HUGE"

func runDuplicateListerIfRequested() {
	odd := os.Getenv(oddNamesEnv) == "1"
	silent := os.Getenv(silentListerEnv) == "1"
	huge := os.Getenv(hugeReplyEnv) == "1"
	if os.Getenv(duplicateListerEnv) != "1" && !odd && !silent && !huge {
		return
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Name            string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil || req.ID == nil {
			continue
		}
		var result any = map[string]any{}
		switch req.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": req.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "dup", "version": "1"}}
		case "tools/list":
			if silent {
				continue
			}
			if huge {
				result = map[string]any{"tools": []any{map[string]any{"name": "huge", "inputSchema": map[string]any{"type": "object"}},
					map[string]any{"name": "small", "inputSchema": map[string]any{"type": "object"}},
					map[string]any{"name": "hang", "inputSchema": map[string]any{"type": "object"}},
					map[string]any{"name": "logs", "inputSchema": map[string]any{"type": "object"}}}}
				break
			}
			if odd {
				var tools []any
				for _, n := range oddNames {
					tools = append(tools, map[string]any{"name": n, "inputSchema": map[string]any{"type": "object"}})
				}
				result = map[string]any{"tools": tools}
				break
			}
			echo := map[string]any{"name": "echo", "inputSchema": map[string]any{"type": "object"}}
			result = map[string]any{"tools": []any{echo, echo, map[string]any{"name": "other", "inputSchema": map[string]any{"type": "object"}}}}
		case "tools/call":
			text := "called " + req.Params.Name
			switch req.Params.Name {
			case "huge":
				text = strings.Repeat("y", 100<<10)
			case "hang":
				continue
			case "logs":
				// What a server says of its work while it works.
				os.Stdout.WriteString(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"indexer","data":"indexed 3 files"}}` + "\n")
				os.Stdout.WriteString(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":{"file":"b.go","error":"unreadable"}}}` + "\n")
			}
			result = map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
		}
		out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
		os.Stdout.Write(append(out, '\n'))
	}
	os.Exit(0)
}

// TestDuplicateToolNames: a server that lists a tool twice offers it
// once; before, the session's tool set panicked on the duplicate name and
// the process died at its first prompt (maestro headless, and every
// session and job of maestro serve).
func TestDuplicateToolNames(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(Options{Servers: map[string]config.MCPServer{"dup": {Command: exe, Env: map[string]string{duplicateListerEnv: "1"}}}})
	t.Cleanup(func() { m.Close() })
	tools, err := m.All(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"mcp__dup__echo", "mcp__dup__other"}, names(tools)); d != "" {
		t.Errorf("tools (-want +got):\n%s", d)
	}
	tool.NewSet(tools...) // panicked on a duplicate name
}

// TestOddToolNames: a server's tools whose names model APIs refuse
// (files.read, repo/search, not ASCII, too long) are offered under names
// they accept, all different, and a call reaches the server under its
// own name. Before, files.read and the long name were offered as such
// (every model request of the session refused) and repo/search and the
// Japanese names were left out.
func TestOddToolNames(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var reports []string
	var mu sync.Mutex
	m := NewManager(Options{Servers: map[string]config.MCPServer{"odd": {Command: exe, Env: map[string]string{oddNamesEnv: "1"}}},
		Report: func(msg string) { mu.Lock(); reports = append(reports, msg); mu.Unlock() }})
	t.Cleanup(func() { m.Close() })
	tools, err := m.All(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tl := range tools {
		n := tl.Spec().Name
		if !ValidName(n) || seen[n] {
			t.Errorf("tool name %q: not one model APIs accept, or given twice", n)
		}
		seen[n] = true
	}
	tool.NewSet(tools...)      // panics on a name given twice
	want := map[string]string{ // the name the model sees → the server's
		"mcp__odd__files.read":                 "files.read",
		"mcp__odd__files_read":                 "files_read",
		"mcp__odd__repo/search":                "repo/search",
		"mcp__odd__読む":                         "読む",
		"mcp__odd__書く":                         "書く",
		"mcp__odd__" + strings.Repeat("x", 70): strings.Repeat("x", 70),
		"mcp__odd__plain":                      "plain",
	}
	if len(tools) != len(want) {
		t.Errorf("tools = %v, want %d (the empty name and the one with a newline left out)", names(tools), len(want))
	}
	byOwn := map[string]tool.Tool{}
	for _, tl := range tools {
		own := strings.TrimPrefix(run(t, tl, `{}`).Content, "called ")
		byOwn[own] = tl
	}
	for _, own := range want {
		tl, ok := byOwn[own]
		if !ok {
			t.Errorf("no offered tool calls %q (offered: %v)", own, names(tools))
			continue
		}
		if n := tl.Spec().Name; n != Name("odd", own) && !strings.Contains(tl.Spec().Description, fmt.Sprintf("%q", own)) {
			t.Errorf("%s: its description %q does not give the server's name %q", n, tl.Spec().Description, own)
		}
	}
	if got := byOwn["files_read"]; got == nil || got.Spec().Name != "mcp__odd__files_read" {
		t.Errorf("files_read is not offered under its own name")
	}
	if got := byOwn["plain"]; got == nil || got.Spec().Name != "mcp__odd__plain" {
		t.Errorf("plain is not offered under its own name")
	}
	sel, err := m.Tools(testCtx(t), "mcp__odd__files.read")
	if err != nil || len(sel) != 1 || run(t, sel[0], `{}`).Content != "called files.read" {
		t.Errorf("allowed_tools mcp__odd__files.read selects %v (%v), want files.read's tool", names(sel), err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 1 || !strings.Contains(reports[0], `"files.read" as mcp__odd__files_`) {
		t.Errorf("reports = %q, want one line giving the names", reports)
	}
}

// stdioServer is the test server run by this test binary over stdio.
func stdioServer(t *testing.T) config.MCPServer {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return config.MCPServer{Command: exe, Env: map[string]string{mcptest.StdioEnv: "1"}}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func names(ts []tool.Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Spec().Name)
	}
	slices.Sort(out)
	return out
}

// find returns the tool named name among tools.
func find(t *testing.T, tools []tool.Tool, name string) tool.Tool {
	t.Helper()
	for _, tl := range tools {
		if tl.Spec().Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %s among %v", name, names(tools))
	return nil
}

func run(t *testing.T, tl tool.Tool, input string) tool.Result {
	t.Helper()
	res, err := tl.Run(testCtx(t), tool.Call{ID: "1", Input: json.RawMessage(input)})
	if err != nil {
		t.Fatalf("%s: %v", tl.Spec().Name, err)
	}
	return res
}

// TestToolsOverStreamableHTTP: the in-process server's tools are offered
// as mcp__<server>__<tool> with their schemas, selected by the
// allowed_tools patterns, and calls reach the server.
func TestToolsOverStreamableHTTP(t *testing.T) {
	t.Parallel()
	url := mcptest.Serve(t)
	m := NewManager(Options{Servers: map[string]config.MCPServer{
		"web":   {URL: url, Headers: map[string]string{"X-Test": "${TEST_TOKEN}"}},
		"other": {URL: url},
	}, Getenv: func(string) string { return "t" }})
	t.Cleanup(func() { m.Close() })
	ctx := testCtx(t)

	cases := []struct {
		pattern string
		want    []string
	}{
		{"mcp__*", []string{"mcp__other__add", "mcp__other__ask", "mcp__other__crash", "mcp__other__echo", "mcp__other__files_read",
			"mcp__web__add", "mcp__web__ask", "mcp__web__crash", "mcp__web__echo", "mcp__web__files_read"}},
		{"mcp__web__*", []string{"mcp__web__add", "mcp__web__ask", "mcp__web__crash", "mcp__web__echo", "mcp__web__files_read"}},
		{"mcp__web__echo", []string{"mcp__web__echo"}},
		// A tool the model sees under another name is selected by the
		// server's name of it, or by the name the model sees.
		{"mcp__web__files.read", []string{"mcp__web__files_read"}},
		{"mcp__web__files_read", []string{"mcp__web__files_read"}},
		{"mcp__web__nope", nil},
	}
	for _, tc := range cases {
		got, err := m.Tools(ctx, tc.pattern)
		if err != nil {
			t.Fatalf("Tools(%s): %v", tc.pattern, err)
		}
		if !slices.Equal(names(got), tc.want) {
			t.Errorf("Tools(%s) = %v, want %v", tc.pattern, names(got), tc.want)
		}
	}
	if _, err := m.Tools(ctx, "mcp__missing__*"); !errors.As(err, new(*MissingError)) || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("Tools(mcp__missing__*) = %v, want a MissingError naming missing", err)
	}

	echo, _ := m.Tools(ctx, "mcp__web__echo")
	if !echo[0].ReadOnly() {
		t.Error("echo (readOnlyHint) is not read-only")
	}
	var schema map[string]any
	if err := json.Unmarshal(echo[0].Spec().InputSchema, &schema); err != nil || !strings.Contains(string(echo[0].Spec().InputSchema), `"text"`) {
		t.Errorf("schema not passed through: %s (%v)", echo[0].Spec().InputSchema, err)
	}
	if res := run(t, echo[0], `{"text":"hi"}`); res.IsError || res.Content != "echo: hi" {
		t.Errorf("echo = %+v", res)
	}
	add, _ := m.Tools(ctx, "mcp__web__add")
	if res := run(t, add[0], `{"a":2,"b":40}`); res.IsError || res.Content != "42" {
		t.Errorf("add = %+v", res)
	}
	if res := run(t, add[0], `{"a":"x"}`); !res.IsError {
		t.Errorf("add with a bad argument = %+v, want an error result", res)
	}
	if res := run(t, add[0], `[1]`); res.ErrorCode() != tool.CodeInvalidInput {
		t.Errorf("add with an array = %+v, want invalid_input", res)
	}
}

// TestRequire: a required server that is not configured, or does not
// start, is an error naming it.
func TestRequire(t *testing.T) {
	t.Parallel()
	m := NewManager(Options{Servers: map[string]config.MCPServer{
		"web":    {URL: mcptest.Serve(t)},
		"broken": {Command: filepath.Join(t.TempDir(), "no-such-server")},
	}})
	t.Cleanup(func() { m.Close() })
	ctx := testCtx(t)
	if err := m.Require(ctx, []string{"web"}); err != nil {
		t.Errorf("Require(web) = %v", err)
	}
	for _, slug := range []string{"tracker", "broken"} {
		err := m.Require(ctx, []string{"web", slug})
		var me *MissingError
		if !errors.As(err, &me) || me.Server != slug || !strings.Contains(err.Error(), `"`+slug+`"`) {
			t.Errorf("Require(%s) = %v, want a MissingError naming it", slug, err)
		}
	}
	// mcp__* leaves the broken server out and reports it.
	var reports []string
	m2 := NewManager(Options{Servers: map[string]config.MCPServer{"web": {URL: mcptest.Serve(t)}, "broken": {Command: "/nonexistent/server"}},
		Report: func(s string) { reports = append(reports, s) }})
	t.Cleanup(func() { m2.Close() })
	all, err := m2.All(ctx)
	broken := slices.IndexFunc(reports, func(s string) bool { return strings.Contains(s, "broken is left out") })
	if err != nil || len(all) != 5 || broken < 0 {
		t.Errorf("All = %v, %v; reports %q", names(all), err, reports)
	}
}

// TestStdioCrashRestartsOnce: a stdio server's stderr goes to its log
// file; when it crashes, it is reported and restarted once at its next
// use; a second crash leaves it down.
func TestStdioCrashRestartsOnce(t *testing.T) {
	t.Parallel()
	logDir := t.TempDir()
	ctx := testCtx(t)
	var mu sync.Mutex
	var reports []string
	// stopped receives each "stopped" report: the manager has then marked
	// the server down, so the next call restarts it (or refuses to) rather
	// than racing the dying connection.
	stopped := make(chan struct{}, 4)
	m := NewManager(Options{Servers: map[string]config.MCPServer{"local": stdioServer(t)}, LogDir: logDir,
		Report: func(s string) {
			mu.Lock()
			reports = append(reports, s)
			mu.Unlock()
			if strings.Contains(s, "MCP server local stopped") {
				stopped <- struct{}{}
			}
		}})
	waitStopped := func() {
		t.Helper()
		select {
		case <-stopped:
		case <-ctx.Done():
			t.Fatal("the crash was not reported")
		}
	}
	t.Cleanup(func() { m.Close() })
	tools, err := m.Tools(ctx, "mcp__local__*")
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) tool.Tool { return find(t, tools, name) }
	echo, crash := get("mcp__local__echo"), get("mcp__local__crash")
	if res := run(t, echo, `{"text":"one"}`); res.Content != "echo: one" {
		t.Fatalf("echo = %+v", res)
	}
	if res := run(t, crash, `{}`); !res.IsError {
		t.Fatalf("crash = %+v, want an error result", res)
	}
	waitStopped()
	if res := run(t, echo, `{"text":"two"}`); res.Content != "echo: two" {
		t.Fatalf("echo after a restart = %+v", res)
	}
	run(t, crash, `{}`)
	waitStopped()
	res := run(t, echo, `{"text":"three"}`)
	if !res.IsError || !strings.Contains(res.Content, "not restarted twice") {
		t.Errorf("echo after a second crash = %+v, want an error saying it is not restarted again", res)
	}
	mu.Lock()
	got := strings.Join(reports, "\n")
	mu.Unlock()
	if !strings.Contains(got, "Restarting MCP server local") {
		t.Errorf("reports = %q, want the restart", got)
	}
	if _, err := os.Stat(filepath.Join(logDir, "mcp-local.log")); err != nil {
		t.Errorf("stderr log: %v", err)
	}
}

// TestElicitation: a server's elicitation reaches Options.Elicit with the
// server's slug, and the answer flows back into the tool's result;
// without Elicit the capability is not advertised and the call fails.
func TestElicitation(t *testing.T) {
	t.Parallel()
	url := mcptest.Serve(t)
	var asked string
	m := NewManager(Options{Servers: map[string]config.MCPServer{"web": {URL: url}},
		Elicit: func(_ context.Context, server string, p *sdk.ElicitParams) (*sdk.ElicitResult, error) {
			asked = server + ": " + p.Message
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"answer": "blue"}}, nil
		}})
	t.Cleanup(func() { m.Close() })
	ask, err := m.Tools(testCtx(t), "mcp__web__ask")
	if err != nil || len(ask) != 1 {
		t.Fatalf("Tools = %v, %v", ask, err)
	}
	if res := run(t, ask[0], `{"question":"colour?"}`); res.Content != "action=accept answer=blue" || asked != "web: colour?" {
		t.Errorf("ask = %+v (asked %q)", res, asked)
	}

	plain := NewManager(Options{Servers: map[string]config.MCPServer{"web": {URL: url}}})
	t.Cleanup(func() { plain.Close() })
	ask, _ = plain.Tools(testCtx(t), "mcp__web__ask")
	if res := run(t, ask[0], `{"question":"colour?"}`); !res.IsError {
		t.Errorf("ask without elicitation = %+v, want an error", res)
	}
}

// TestServerEverything: the reference server-everything (npm, over
// stdio) lists its tools, answers calls, and its elicitation reaches
// Options.Elicit and the answer flows back.
func TestServerEverything(t *testing.T) {
	t.Parallel()
	bin := mcptest.Installed(t, "server-everything")
	var asked *sdk.ElicitParams
	m := NewManager(Options{Servers: map[string]config.MCPServer{"everything": {Command: "node", Args: []string{bin, "stdio"}}},
		LogDir: t.TempDir(),
		Elicit: func(_ context.Context, server string, p *sdk.ElicitParams) (*sdk.ElicitResult, error) {
			asked = p
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada Lovelace", "check": true}}, nil
		}})
	t.Cleanup(func() { m.Close() })
	ctx := testCtx(t)
	tools, err := m.Tools(ctx, "mcp__everything__*")
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) tool.Tool { return find(t, tools, name) }
	if res := run(t, get("mcp__everything__echo"), `{"message":"hi"}`); res.IsError || !strings.Contains(res.Content, "hi") {
		t.Errorf("echo = %+v", res)
	}
	if res := run(t, get("mcp__everything__get-sum"), `{"a":2,"b":3}`); res.IsError || !strings.Contains(res.Content, "5") {
		t.Errorf("get-sum = %+v", res)
	}
	res := run(t, get("mcp__everything__trigger-elicitation-request"), `{}`)
	if res.IsError || !strings.Contains(res.Content, "Ada Lovelace") || asked == nil || asked.RequestedSchema == nil {
		t.Errorf("trigger-elicitation-request = %+v (asked %+v)", res, asked)
	}
}

// TestServerFilesystem: the reference server-filesystem (npm, over stdio)
// reads a file of the directory it is given.
func TestServerFilesystem(t *testing.T) {
	t.Parallel()
	bin := mcptest.Installed(t, "server-filesystem")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("remember the milk"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := NewManager(Options{Servers: map[string]config.MCPServer{"fs": {Command: "node", Args: []string{bin, dir}}}, LogDir: t.TempDir()})
	t.Cleanup(func() { m.Close() })
	read, err := m.Tools(testCtx(t), "mcp__fs__read_text_file")
	if err != nil || len(read) != 1 {
		t.Fatalf("Tools = %v, %v", read, err)
	}
	in, _ := json.Marshal(map[string]string{"path": filepath.Join(dir, "notes.txt")})
	if res := run(t, read[0], string(in)); res.IsError || !strings.Contains(res.Content, "remember the milk") {
		t.Errorf("read_text_file = %+v", res)
	}
	in, _ = json.Marshal(map[string]string{"path": "/etc/passwd"})
	if res := run(t, read[0], string(in)); !res.IsError {
		t.Errorf("read_text_file outside its directory = %+v, want the server's refusal", res)
	}
}

// TestResultText: what the model sees of a result: texts joined, other
// content as a line, structured content when there is no text, cut at
// MaxResultBytes on a character boundary.
func TestResultText(t *testing.T) {
	t.Parallel()
	long := "a" + strings.Repeat("é", MaxResultBytes) // é is 2 bytes: byte MaxResultBytes is inside one
	cases := []struct {
		name string
		res  *sdk.CallToolResult
		want string
	}{
		{"texts", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a"}, &sdk.TextContent{Text: "b"}}}, "a\nb"},
		{"image", &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{MIMEType: "image/png", Data: []byte("AAAA")}}}, "[image image/png, 3 bytes]"},
		{"structured", &sdk.CallToolResult{Content: []sdk.Content{}, StructuredContent: map[string]any{"n": 1}}, `{"n":1}`},
		{"cut", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: long}}}, long[:MaxResultBytes-1] + fmt.Sprintf("\n[… %d more bytes not shown]", len(long)-MaxResultBytes+1)},
	}
	for _, tc := range cases {
		if got := resultText(tc.res); got != tc.want {
			t.Errorf("%s: resultText = %.80q…, want %.80q…", tc.name, got, tc.want)
		}
		if !utf8.ValidString(resultText(tc.res)) {
			t.Errorf("%s: not UTF-8", tc.name)
		}
	}
}
