package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/store"
)

// surfaceTask is the task every surface runs on the bundled replay demo.
const surfaceTask = "Show me what you can do in this workspace"

// TestSurfacesAgree is the acceptance test of "every surface is a
// projection of one log" (docs/events.md, "One sequence on every surface"): the bundled replay demo
// runs the same task in the plain agent loop through
//
//	(a) maestro run -o jsonl            (stdout)
//	(b) maestro headless                (stdio: hello, prompt, shutdown)
//	(c) maestro serve's attach API      (create a session, register and
//	    subscribe a controller, prompt; a viewer's SSE stream from cursor 0)
//	(d) a queued job on maestro serve   (tasks submit with payload
//	    {"replay": the demo, "no_piece": true}; the job log's protocol events)
//
// and each must show the same sequence of protocol messages. What a
// surface adds about its own connection is dropped, and what differs by
// run or place is normalised (surfaceMessages): the rule is written once,
// there, and the failure message prints a line diff against (b).
func TestSurfacesAgree(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	frames := len(replay.Demo().Frames)

	got := map[string][]string{}
	got["(a) run -o jsonl"] = runJSONLSurface(ctx, t)
	got["(b) headless stdio"] = headlessSurface(ctx, t, frames)
	got["(c) serve attach"], got["(d) queued job"] = serveSurfaces(ctx, t, frames)

	want := got["(b) headless stdio"]
	if len(want) < frames*2 {
		t.Fatalf("headless showed %d messages for a demo of %d model turns:\n%s", len(want), frames, strings.Join(want, "\n"))
	}
	for _, name := range []string{"(a) run -o jsonl", "(c) serve attach", "(d) queued job"} {
		if d := messageDiff(want, got[name]); d != "" {
			t.Errorf("%s differs from (b) headless stdio (- headless, + %s):\n%s", name, name, d)
		}
	}
	// The demo writes files and runs commands: the last response_end's
	// tools_summary names them on every surface (the agent loop sets
	// summary_labels, so a queued job has them as much as a session).
	for name, lines := range got {
		if labels := lastSummaryLabels(t, lines); len(labels) == 0 {
			t.Errorf("%s: the last response_end has no tools_summary.summary_labels", name)
		}
	}
}

// lastSummaryLabels returns tools_summary.summary_labels of the last
// response_end among lines (as surfaceMessages prints them).
func lastSummaryLabels(t *testing.T, lines []string) []string {
	t.Helper()
	var labels []string
	for _, line := range lines {
		var m struct {
			Type  string `json:"type"`
			Tools struct {
				Labels []string `json:"summary_labels"`
			} `json:"tools_summary"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("surface line %s: %v", line, err)
		}
		if m.Type == protocol.TypeResponseEnd {
			labels = m.Tools.Labels
		}
	}
	return labels
}

// surfaceMessages turns the protocol messages one surface showed into
// comparable lines, by this rule:
//
//   - dropped: hello_ok and connection_info (about the client's own
//     connection: stdio and attach have one, run and a job have none);
//     the SSE envelopes that are not "message" (snapshot, heartbeat,
//     reset) and job events that are not "protocol" (the job's status
//     changes) never reach this function;
//   - joined: consecutive tool_output messages of one call, into one
//     (how a command's output is cut into chunks depends on timing);
//   - normalised: response_id to resp_1, resp_2, … in order of first
//     appearance; session_id to "$SESSION", whatever it is (a job has no
//     session: null); duration_ms and ttft_ms to 0; the workspace path
//     (session_info's cwd) to "$WORKSPACE" in every string; ls -l
//     modification times to "$MTIME" (the demo lists its files);
//   - each message is then printed as JSON with sorted keys, one a line.
func surfaceMessages(t *testing.T, raw []json.RawMessage) []string {
	t.Helper()
	var msgs []map[string]any
	ws := ""
	for _, r := range raw {
		var m map[string]any
		if err := json.Unmarshal(r, &m); err != nil {
			t.Fatalf("protocol message %s: %v", r, err)
		}
		switch m["type"] {
		case protocol.TypeHelloOK, protocol.TypeConnectionInfo:
			continue
		case protocol.TypeSessionInfo:
			if cwd, _ := m["cwd"].(string); ws == "" {
				ws = cwd
			}
		case protocol.TypeToolOutput:
			if n := len(msgs); n > 0 && msgs[n-1]["type"] == protocol.TypeToolOutput && msgs[n-1]["call_id"] == m["call_id"] {
				prev, _ := msgs[n-1]["content"].(string)
				next, _ := m["content"].(string)
				msgs[n-1]["content"] = prev + next
				continue
			}
		}
		msgs = append(msgs, m)
	}
	ids := map[string]string{}
	mtime := regexp.MustCompile(`[A-Z][a-z]{2} [ \d]\d (\d\d:\d\d|\d{4})`)
	var norm func(key string, v any) any
	norm = func(key string, v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				v[k] = norm(k, x)
			}
			return v
		case []any:
			for i, x := range v {
				v[i] = norm("", x)
			}
			return v
		case string:
			if key == "response_id" {
				if ids[v] == "" {
					ids[v] = fmt.Sprintf("resp_%d", len(ids)+1)
				}
				return ids[v]
			}
			if ws != "" {
				v = strings.ReplaceAll(v, ws, "$WORKSPACE")
			}
			return mtime.ReplaceAllString(v, "$$MTIME")
		case float64:
			if key == "duration_ms" || key == "ttft_ms" {
				return 0
			}
		}
		return v
	}
	out := make([]string, 0, len(msgs))
	for _, m := range msgs {
		if _, ok := m["session_id"]; ok {
			m["session_id"] = "$SESSION"
		}
		line, err := json.Marshal(norm("", m))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(line))
	}
	return out
}

// messageDiff is a line diff of two message sequences ("" when equal):
// the lines of the longest common subsequence are kept as context around
// what was removed (-) and added (+).
func messageDiff(want, got []string) string {
	n, m := len(want), len(got)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if want[i] == got[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var b strings.Builder
	differs := false
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && want[i] == got[j]:
			fmt.Fprintf(&b, "  %s\n", clip(want[i]))
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&b, "+ %s\n", clip(got[j]))
			j, differs = j+1, true
		default:
			fmt.Fprintf(&b, "- %s\n", clip(want[i]))
			i, differs = i+1, true
		}
	}
	if !differs {
		return ""
	}
	return b.String()
}

func clip(s string) string {
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}

// surfaceWorkspace is a fresh workspace directory for one surface, of
// mode 0755 as a job's work/ is (the demo's ls -la shows it).
func surfaceWorkspace(t *testing.T) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return ws
}

// runJSONLSurface is (a): maestro run -o jsonl prints every message on
// stdout.
func runJSONLSurface(ctx context.Context, t *testing.T) []string {
	t.Helper()
	cctx, ccancel := context.WithTimeout(ctx, 90*time.Second)
	defer ccancel()
	cmd := exec.CommandContext(cctx, binary, "run", "-o", "jsonl", "--workspace", surfaceWorkspace(t), surfaceTask)
	cmd.Env = proctest.NoModelEnv(t.TempDir())
	var stderr proctest.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run -o jsonl: %v\n%s", err, stderr.String())
	}
	var raw []json.RawMessage
	for line := range strings.Lines(string(out)) {
		raw = append(raw, json.RawMessage(line))
	}
	return surfaceMessages(t, raw)
}

// headlessSurface is (b): maestro headless over stdio, approvals automatic
// as in maestro run; hello, the prompt, and shutdown once the demo's last
// model turn has ended (or an error came), then every line to EOF.
func headlessSurface(ctx context.Context, t *testing.T, frames int) []string {
	t.Helper()
	cctx, ccancel := context.WithTimeout(ctx, 90*time.Second)
	defer ccancel()
	cmd := exec.CommandContext(cctx, binary, "headless", "--approval-mode", "auto", "--workspace", surfaceWorkspace(t))
	cmd.Env = proctest.NoModelEnv(t.TempDir())
	var stderr proctest.Buffer
	cmd.Stderr = &stderr
	stdin, stdout := proctest.StartPiped(t, cmd)
	send := func(m map[string]any) {
		data, _ := json.Marshal(m)
		if _, err := stdin.Write(append(data, '\n')); err != nil {
			t.Errorf("headless stdin: %v", err)
		}
	}
	send(map[string]any{"type": "hello", "protocol_version": protocol.Version, "client_info": map[string]any{"name": "surfaces"}})
	send(map[string]any{"type": "prompt", "content": surfaceTask})
	var raw []json.RawMessage
	ends := 0
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		line := json.RawMessage(append([]byte(nil), sc.Bytes()...))
		raw = append(raw, line)
		var head struct{ Type string }
		json.Unmarshal(line, &head)
		if head.Type == protocol.TypeResponseEnd {
			ends++
		}
		if ends == frames && head.Type == protocol.TypeResponseEnd || head.Type == protocol.TypeError {
			send(map[string]any{"type": "shutdown"})
			stdin.Close()
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("headless: %v\n%s", err, stderr.String())
	}
	return surfaceMessages(t, raw)
}

// serveSurfaces runs one maestro serve and returns (c), the attach API,
// and (d), a queued job.
func serveSurfaces(ctx context.Context, t *testing.T, frames int) (attach, job []string) {
	t.Helper()
	home := t.TempDir()
	env := proctest.NoModelEnv(home)
	url, stderr, stop := startServe(ctx, t, env, "--workers", "1", "--data-dir", home)
	defer stop()
	attach = attachSurface(t, url, frames)

	payload, err := json.Marshal(map[string]any{"replay": string(replay.DemoSource()), "no_piece": true})
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, err := tasksCLI(ctx, env, url, "submit", surfaceTask, "--payload", string(payload), "-f")
	if err != nil || !strings.Contains(errOut, "job 1 succeeded") {
		t.Fatalf("tasks submit -f: %v\nstdout:\n%s\nstderr:\n%s\nserve:\n%s", err, out, errOut, stderr.String())
	}
	out, errOut, err = tasksCLI(ctx, env, url, "logs", "1", "--json")
	if err != nil {
		t.Fatalf("tasks logs --json: %v\n%s", err, errOut)
	}
	var raw []json.RawMessage
	for line := range strings.Lines(out) {
		var e store.JobEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("job event %q: %v", line, err)
		}
		if e.Type == store.JobEventProtocol {
			raw = append(raw, e.Data)
		}
	}
	return attach, surfaceMessages(t, raw)
}

// attachSurface is (c): a session created over HTTP (approvals automatic,
// in a workspace made as the other surfaces' are: the demo lists it),
// a controller registered and subscribed (its stream opened), the prompt
// sent as that controller, and the messages of a viewer's stream read from
// cursor 0 until the demo's last model turn has ended (or an error came).
func attachSurface(t *testing.T, url string, frames int) []string {
	t.Helper()
	// The attach client of the hosted-runner tests speaks the same API.
	p := &runnerProc{t: t, base: url}
	var snap struct {
		SessionID string `json:"session_id"`
	}
	if code := p.call("POST", "/api/headless/sessions", map[string]any{"approvalMode": "auto", "workspaceRoot": surfaceWorkspace(t), "clientInfo": map[string]any{"name": "surfaces"}}, nil, &snap); code/100 != 2 || snap.SessionID == "" {
		t.Fatalf("create session: %d %+v", code, snap)
	}
	p.session = snap.SessionID
	var reg struct {
		ConnectionID string `json:"connection_id"`
	}
	if code := p.call("POST", "/api/headless/connections", map[string]any{"sessionId": p.session, "role": "controller", "protocolVersion": protocol.Version}, nil, &reg); code != http.StatusOK {
		t.Fatalf("register controller: %d", code)
	}
	var sub struct {
		SubscriptionID string `json:"subscription_id"`
	}
	if code := p.call("POST", "/api/headless/sessions/"+p.session+"/subscribe", map[string]any{"connectionId": reg.ConnectionID, "role": "controller"}, nil, &sub); code != http.StatusOK {
		t.Fatalf("subscribe: %d", code)
	}
	ctrl := p.open(http.DefaultClient, "subscriptionId="+sub.SubscriptionID, nil, nil)
	ctrl.conn, ctrl.sub = reg.ConnectionID, sub.SubscriptionID
	viewer := p.open(http.DefaultClient, "cursor=0", map[string]string{"x-maestro-headless-role": "viewer"}, nil)
	ctrl.send(map[string]any{"type": "prompt", "content": surfaceTask})
	var raw []json.RawMessage
	for ends := 0; ends < frames; {
		e := viewer.next()
		if e.Type != protocol.TypeMessageEnvelope {
			continue
		}
		raw = append(raw, e.Message)
		var head struct{ Type string }
		json.Unmarshal(e.Message, &head)
		switch head.Type {
		case protocol.TypeResponseEnd:
			ends++
		case protocol.TypeError:
			ends = frames
		}
	}
	return surfaceMessages(t, raw)
}
