package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	initLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	pingLine = `{"jsonrpc":"2.0","id":"after","method":"ping"}`
)

// reply is a line the transport wrote.
type reply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// serveStdio serves a bare SDK server over a StdioTransport reading in
// to its end, and returns the replies by id ("null" for id null;
// "batch" for a batch of replies).
func serveStdio(t *testing.T, in io.Reader, tr *StdioTransport) map[string][]reply {
	t.Helper()
	var out bytes.Buffer
	tr.In, tr.Out = in, &out
	srv := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := srv.Run(ctx, tr); err != nil {
		t.Fatalf("the session ended with %v; wrote:\n%s", err, out.String())
	}
	got := map[string][]reply{}
	for line := range strings.Lines(out.String()) {
		if strings.HasPrefix(line, "[") {
			got["batch"] = append(got["batch"], reply{Result: json.RawMessage(line)})
			continue
		}
		var r reply
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("wrote %q: %v", line, err)
		}
		id := string(r.ID)
		if id == "" {
			id = "null"
		}
		got[id] = append(got[id], r)
	}
	return got
}

// A line that is not a JSON-RPC message is answered as JSON-RPC 2.0
// says (Parse error -32700 for a line that is not JSON, Invalid Request
// -32600 for one that is no message, with the request's id when it can
// be read), and the session goes on: the request before it and the one
// after are answered. Before, the SDK ended the session at the line,
// the process exited 1, and the reply to the request before was lost.
func TestStdioAnswersMalformedLines(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		line, id string
		code     int
		want     string
	}{
		{"this is not json", "null", -32700, "Parse error: not JSON: invalid character"},
		{`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{bad}}`, "9", -32700, "Parse error"},
		{`{"jsonrpc":"2.0","id":3,"method":"ping"}{"jsonrpc":"2.0","id":4,"method":"ping"}`, "3", -32700, "after top-level value"},
		{`{"foo":1}`, "null", -32600, `Invalid Request: invalid message version tag ""`},
		{"42", "null", -32600, "Invalid Request"},
		{"[]", "null", -32600, "Invalid Request: empty batch"},
		{`[{"jsonrpc":"2.0","id":5,"method":"ping"}]`, "null", -32600, "batches are not part of MCP since protocol version 2025-06-18"},
		{`{"jsonrpc":"2.0","id":6,"method":"ping"} `, "6", 0, ""}, // white space around is no error
	} {
		got := serveStdio(t, strings.NewReader(initLine+"\n"+tt.line+"\n\n"+pingLine+"\n"), &StdioTransport{})
		if len(got["1"]) != 1 || got["1"][0].Result == nil || len(got[`"after"`]) != 1 || got[`"after"`][0].Result == nil {
			t.Errorf("%s: the requests before and after were not both answered: %+v", tt.line, got)
		}
		r := got[tt.id]
		if tt.code == 0 {
			if len(r) != 1 || r[0].Error != nil {
				t.Errorf("%s: replies %+v, want a result", tt.line, r)
			}
			continue
		}
		if len(r) != 1 || r[0].Error == nil || r[0].Error.Code != tt.code || !strings.Contains(r[0].Error.Message, tt.want) {
			t.Errorf("%s: replies with id %s %+v, want error %d %q", tt.line, tt.id, r, tt.code, tt.want)
		}
	}
}

// A session of a protocol version before 2025-06-18 still reads
// batches.
func TestStdioPassesBatchesOfOldVersions(t *testing.T) {
	t.Parallel()
	in := strings.Replace(initLine, "2025-06-18", "2025-03-26", 1) + "\n" + `[{"jsonrpc":"2.0","id":5,"method":"ping"}]` + "\n"
	got := serveStdio(t, strings.NewReader(in), &StdioTransport{})
	if len(got["1"]) != 1 || len(got["batch"]) != 1 || !strings.Contains(string(got["batch"][0].Result), `"id":5,"result"`) {
		t.Errorf("replies %+v", got)
	}
}

// repeatReader is n bytes of b.
type repeatReader struct {
	b byte
	n int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	p = p[:min(len(p), r.n)]
	for i := range p {
		p[i] = r.b
	}
	r.n -= len(p)
	return len(p), nil
}

// A line longer than MaxLineLength is read past, not kept: a 10 MB
// line costs far less than 10 MB, and is answered Invalid Request with
// the id its start names; the session goes on. (Not parallel: it counts
// the bytes allocated.)
func TestStdioBoundsALongLine(t *testing.T) {
	in := io.MultiReader(
		strings.NewReader(initLine+"\n"+`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{"text":"`),
		&repeatReader{'a', 10 << 20},
		strings.NewReader(`"}}}`+"\n"+pingLine+"\n"))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := serveStdio(t, in, &StdioTransport{MaxLineLength: 1 << 20})
	runtime.ReadMemStats(&after)
	if r := got["7"]; len(r) != 1 || r[0].Error == nil || r[0].Error.Code != -32600 || !strings.Contains(r[0].Error.Message, "message longer than 1048576 bytes") {
		t.Errorf("replies with id 7 %+v", r)
	}
	if len(got["1"]) != 1 || len(got[`"after"`]) != 1 {
		t.Errorf("the requests before and after were not both answered: %+v", got)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 { // a 10 MiB line kept is more; without the bound, 300 MB
		t.Errorf("allocated %d bytes for a line of 10 MiB read to 1 MiB", alloc)
	}
}

// Once stdin ends, the requests read are answered, but a reply that
// takes longer than EOFGrace is not waited for: the session ends, and
// with it the call (a task it runs is stopped, as when the client goes).
func TestStdioWaitsForRepliesAtMostEOFGrace(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		srv := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "1"}, nil)
		stopped := make(chan struct{})
		sdk.AddTool(srv, &sdk.Tool{Name: "block", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, _ *sdk.CallToolRequest, _ map[string]any) (*sdk.CallToolResult, any, error) {
			<-ctx.Done()
			close(stopped)
			return nil, nil, ctx.Err()
		})
		in := initLine + "\n" + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block","arguments":{}}}` + "\n"
		start := time.Now()
		_ = srv.Run(t.Context(), &StdioTransport{In: strings.NewReader(in), Out: &out, EOFGrace: 3 * time.Second})
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("the session ended after %v, want the grace of 3s", d)
		}
		select {
		case <-stopped:
		case <-time.After(time.Minute):
			t.Error("the call was not stopped")
		}
		if !strings.Contains(out.String(), `"id":1,"result"`) {
			t.Errorf("wrote %s, no reply to initialize", out.String())
		}
	})
}

// Once stdin ends and every request read is answered (ids numbers and
// strings, one in a batch), the session ends at once: no grace waited.
func TestStdioEndsOnceAllIsAnswered(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		srv := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "1"}, nil)
		in := strings.Replace(initLine, "2025-06-18", "2025-03-26", 1) + "\n" + pingLine + "\n" +
			`{"jsonrpc":"2.0","id":-2.0,"method":"ping"}` + "\n" + `[{"jsonrpc":"2.0","id":"b","method":"ping"}]` + "\n"
		start := time.Now()
		if err := srv.Run(t.Context(), &StdioTransport{In: strings.NewReader(in), Out: &out}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the session ended after %v, want at once", d)
		}
		for _, want := range []string{`"id":1,"result"`, `"id":"after","result"`, `"id":-2,"result"`, `"id":"b","result"`} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("wrote %s, no %s", out.String(), want)
			}
		}
	})
}
