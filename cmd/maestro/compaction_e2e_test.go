package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
)

// oldTask is a first prompt that only requests before a compaction carry.
var oldTask = "OLD-TASK " + strings.Repeat("background that only the first requests carry. ", 300)

// frame is the part of a protocol frame these tests read.
type frame struct {
	Type          string `json:"type"`
	Message       string `json:"message"`
	SessionID     string `json:"session_id"`
	Summary       string `json:"summary"`
	TokensBefore  int64  `json:"tokens_before"`
	Auto          bool   `json:"auto"`
	FirstKeptFrom int    `json:"first_kept_entry_index"`
}

// runLive runs the binary against a fake model server (env adds the
// model's variables) and returns its -o jsonl frames, each validated
// against the protocol's schemas.
func runLive(t *testing.T, home string, env []string, args ...string) []frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"run", "-o", "jsonl", "--sandbox", "off"}, args...)...)
	cmd.Env = append(proctest.NoModelEnv(home), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("maestro %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, stderr.String())
	}
	var frames []frame
	for f := range readFrames(t, bytes.NewReader(out)) {
		frames = append(frames, f)
	}
	return frames
}

// readFrames yields the protocol frames of JSON lines read from r, each
// validated against the protocol's schemas.
func readFrames(t *testing.T, r io.Reader) iter.Seq[frame] {
	t.Helper()
	v, err := protocol.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	return func(yield func(frame) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			if err := v.ValidateServerFrame(sc.Bytes()); err != nil {
				t.Errorf("frame does not validate against the protocol schemas: %s: %v", sc.Bytes(), err)
			}
			var f frame
			if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
				t.Fatal(err)
			}
			if !yield(f) {
				return
			}
		}
	}
}

func framesOf(frames []frame, typ string) []frame {
	var out []frame
	for _, f := range frames {
		if f.Type == typ {
			out = append(out, f)
		}
	}
	return out
}

// workspaceWithFile returns a workspace holding notes.txt.
func workspaceWithFile(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("remember the milk\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return ws
}

// listedServer is a fake model server that lists model with a context
// window and answers turns.
func listedServer(t *testing.T, model string, window int64, turns ...llmtest.Turn) *llmtest.Server {
	srv := llmtest.NewServer(t, turns...)
	srv.Models = []string{model}
	srv.ContextWindows = map[string]int64{model: window}
	return srv
}

// thresholdTurns script a tool call whose request used input tokens, the
// summary a compaction asks for, and then answers.
func thresholdTurns(input int64, answers ...string) []llmtest.Turn {
	turns := []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{readNotes}, InputTokens: input, OutputTokens: 20},
		{Text: []string{"SUMMARY: OLD-TASK was asked; notes.txt says remember the milk."}, InputTokens: 4_000, OutputTokens: 20},
	}
	for i, a := range answers {
		turns = append(turns, llmtest.Turn{Text: []string{a}, InputTokens: 900 + 50*int64(i), OutputTokens: 3})
	}
	return turns
}

var readNotes = llmtest.ToolCall{ID: "call_read", Name: "Read", Input: `{"path":"notes.txt"}`}

// tooLongTurns script a tool call, a request rejected as too long, the
// summary the compaction asks for, and the answer to the retried request.
func tooLongTurns() []llmtest.Turn {
	return []llmtest.Turn{
		{ToolCalls: []llmtest.ToolCall{readNotes}, InputTokens: 100, OutputTokens: 10},
		{ContextExceeded: true},
		{Text: []string{"SUMMARY of OLD-TASK"}, InputTokens: 80, OutputTokens: 5},
		{Text: []string{"answer after compaction"}, InputTokens: 60, OutputTokens: 4},
	}
}

// tooLongPieceTurns are tooLongTurns whose answer also completes a piece
// movement.
func tooLongPieceTurns() []llmtest.Turn {
	turns := tooLongTurns()
	turns[3].ToolCalls = []llmtest.ToolCall{{ID: "call_done", Name: "complete", Input: `{"status":"success","result":"answer after compaction"}`}}
	return turns
}

// A local model's window comes from the server's listing; a session that
// crosses 85 % of it is compacted (compaction frame), the next request is
// smaller than the window, and `--resume` in a new process sends the
// compacted history, not the old prompt.
func TestCompactionAtThresholdAndResume(t *testing.T) {
	t.Parallel()
	const window = 10_000
	srv := listedServer(t, "local-x", window, thresholdTurns(8_900, "first answer", "second answer")...)
	home := t.TempDir()
	env := []string{"OPENAI_BASE_URL=" + srv.URL() + "/v1"}
	ws := workspaceWithFile(t)

	frames := runLive(t, home, env, "--no-piece", "--model", "openai/local-x", "-w", ws, oldTask)
	comps := framesOf(frames, protocol.TypeCompaction)
	if len(comps) != 1 || !comps[0].Auto || comps[0].TokensBefore < window*85/100 || !strings.Contains(comps[0].Summary, "SUMMARY") {
		t.Fatalf("compaction frames %+v: want one, auto, tokens_before ≥ 85%% of %d, with the model's summary", comps, window)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3 (call, summary, call)", len(reqs))
	}
	after := string(reqs[2].Body)
	if strings.Contains(after, "OLD-TASK background") || !strings.Contains(after, "SUMMARY") || !strings.Contains(after, "remember the milk") {
		t.Errorf("the request after the compaction should carry the summary and the kept tool result only: %.600s", after)
	}
	if n := len(after) / 4; n >= window {
		t.Errorf("the request after the compaction is about %d tokens, not below the window (%d)", n, window)
	}
	ready := framesOf(frames, protocol.TypeReady)
	if len(ready) != 1 || ready[0].SessionID == "" {
		t.Fatalf("ready frames %+v: want the session id", ready)
	}

	runLive(t, home, env, "--resume", ready[0].SessionID, "and now?")
	reqs = srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model requests after the resume, want 4", len(reqs))
	}
	resumed := string(reqs[3].Body)
	if strings.Contains(resumed, "OLD-TASK background") || !strings.Contains(resumed, "SUMMARY") || !strings.Contains(resumed, "first answer") || !strings.Contains(resumed, "and now?") {
		t.Errorf("the resumed session should send the compacted history: %.800s", resumed)
	}
}

// compact_at in config.yaml moves the threshold: at 0.5 a session whose
// next request would fill 55 % of the listed window compacts, which the
// default 85 % would not.
func TestCompactionConfiguredThreshold(t *testing.T) {
	t.Parallel()
	const window = 20_000
	srv := listedServer(t, "local-c", window, thresholdTurns(11_000, "the answer")...)
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte("compact_at: 0.5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	frames := runLive(t, home, []string{"OPENAI_BASE_URL=" + srv.URL() + "/v1"}, "--no-piece", "--model", "openai/local-c", "-w", workspaceWithFile(t), oldTask)
	comps := framesOf(frames, protocol.TypeCompaction)
	if len(comps) != 1 || comps[0].TokensBefore < window/2 || comps[0].TokensBefore >= window*85/100 {
		t.Fatalf("compaction frames %+v: want one, tokens_before between 50 %% and 85 %% of %d", comps, window)
	}
	if reqs := srv.Requests(); len(reqs) != 3 || strings.Contains(string(reqs[2].Body), "OLD-TASK background") {
		t.Errorf("%d model requests; want 3, the last without the old prompt", len(reqs))
	}
}

// A provider's "too long" answer (Anthropic's and OpenAI's real error
// bodies) triggers a compaction and a retry, not a fatal error, in a
// plain run and in a piece movement (where compaction is the last line
// after the 70/85/95 % pressure, docs/compaction.md).
func TestCompactionOnProviderTooLong(t *testing.T) {
	t.Parallel()
	openaiEnv := func(url string) []string { return []string{"OPENAI_BASE_URL=" + url + "/v1"} }
	for _, tc := range []struct {
		name  string
		model string
		env   func(url string) []string
		piece []string
		turns func() []llmtest.Turn
	}{
		{"anthropic", "anthropic/claude-sonnet-4-5", func(url string) []string {
			return []string{"ANTHROPIC_API_KEY=sk-test", "ANTHROPIC_BASE_URL=" + url}
		}, []string{"--no-piece"}, tooLongTurns},
		{"openai", "openai/local-y", openaiEnv, []string{"--no-piece"}, tooLongTurns},
		{"piece movement", "openai/local-y", openaiEnv, []string{"--piece", "chat"}, tooLongPieceTurns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t, tc.turns()...)
			args := append(slices.Clone(tc.piece), "--model", tc.model, "-w", workspaceWithFile(t), oldTask)
			frames := runLive(t, t.TempDir(), tc.env(srv.URL()), args...)
			if errs := framesOf(frames, protocol.TypeError); len(errs) != 0 {
				t.Errorf("error frames %+v: want none", errs)
			}
			var sawStatus bool
			for _, f := range framesOf(frames, protocol.TypeStatus) {
				sawStatus = sawStatus || strings.HasPrefix(f.Message, "Prompt exceeded the context window. Compacting history")
			}
			if comps := framesOf(frames, protocol.TypeCompaction); len(comps) != 1 || !sawStatus {
				t.Errorf("compaction frames %+v, contract status seen %v: want both", comps, sawStatus)
			}
			reqs := srv.Requests()
			if len(reqs) != 4 || strings.Contains(string(reqs[3].Body), "OLD-TASK background") {
				t.Errorf("%d requests; the retried one should not carry the old prompt", len(reqs))
			}
		})
	}
}

// The window of an unlisted local model (in no catalogue) is read from
// the fake OpenAI-compatible server — its /v1/models listing, or as
// llama.cpp's server (/props) and LM Studio (/api/v0/models/<id>) state
// it — and drives a piece movement's context pressure at 70, 85 and 95 %.
func TestPiecePressureFromListedWindow(t *testing.T) {
	t.Parallel()
	for _, listing := range []llmtest.ListingStyle{llmtest.ListingContextLength, llmtest.ListingLlamaCpp, llmtest.ListingLMStudio} {
		t.Run(cmp.Or(string(listing), "context_length"), func(t *testing.T) {
			t.Parallel()
			piecePressure(t, listing)
		})
	}
}

func piecePressure(t *testing.T, listing llmtest.ListingStyle) {
	const window = 10_000
	srv := listedServer(t, "local-p", window,
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{readNotes}, InputTokens: 7_200, OutputTokens: 10},
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{readNotes}, InputTokens: 8_700, OutputTokens: 10},
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{readNotes}, InputTokens: 9_600, OutputTokens: 10},
	)
	srv.Listing = listing
	srv.Loop = true
	frames := runLive(t, t.TempDir(), []string{"OPENAI_BASE_URL=" + srv.URL() + "/v1"},
		"--piece", "chat", "--model", "openai/local-p", "-w", workspaceWithFile(t), "what do my notes say?")
	want := []string{
		"context 72% full (7210 of 10000 tokens): warning the model",
		"context 87% full (8710 of 10000 tokens): asking the model to summarise and transition",
		"context 96% full (9610 of 10000 tokens): ending the movement",
	}
	var got []string
	for _, f := range framesOf(frames, protocol.TypeStatus) {
		if strings.Contains(f.Message, "% full") {
			got = append(got, f.Message)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("pressure statuses %q, want %d: %q", got, len(want), want)
	}
	for i := range want {
		if !strings.HasSuffix(got[i], want[i]) {
			t.Errorf("pressure %d = %q, want …%q", i, got[i], want[i])
		}
	}
	for _, f := range framesOf(frames, protocol.TypeStatus) {
		if strings.Contains(f.Message, "assuming") {
			t.Errorf("the window was assumed, not read from the listing: %q", f.Message)
		}
	}
}

// A headless client that opted out of compaction notifications (hello
// opt_out_notifications, wire contract §8.6) is not sent the compaction
// message, while the session still compacts (its statuses arrive) and the
// prompt succeeds.
func TestHeadlessCompactionOptOut(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, tooLongTurns()...)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "headless", "--approval-mode", "auto", "--sandbox", "off",
		"--model", "openai/local-y", "--workspace", workspaceWithFile(t))
	cmd.Env = append(proctest.NoModelEnv(t.TempDir()), "OPENAI_BASE_URL="+srv.URL()+"/v1")
	var stderr proctest.Buffer
	cmd.Stderr = &stderr
	stdin, stdout := proctest.StartPiped(t, cmd)
	enc := json.NewEncoder(stdin)
	for _, m := range []map[string]any{
		{"type": "hello", "protocol_version": protocol.Version, "client_info": map[string]any{"name": "opt-out"}, "opt_out_notifications": []string{"compaction"}},
		{"type": "prompt", "content": oldTask},
	} {
		if err := enc.Encode(m); err != nil {
			t.Fatalf("headless stdin: %v", err)
		}
	}
	var types []string
	compacted := false
	for f := range readFrames(t, stdout) {
		types = append(types, f.Type)
		compacted = compacted || f.Type == protocol.TypeStatus && strings.HasPrefix(f.Message, "Compacted the conversation")
		if f.Type == protocol.TypeError || f.Type == protocol.TypeResponseEnd && compacted {
			_ = enc.Encode(map[string]string{"type": "shutdown"})
			stdin.Close()
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("headless: %v\n%s", err, stderr.String())
	}
	if !compacted || slices.Contains(types, protocol.TypeCompaction) || slices.Contains(types, protocol.TypeError) {
		t.Errorf("frames %v: want the compaction statuses, no compaction message (opted out) and no error", types)
	}
}

// A hosted runner on a live model compacts too: the provider's "too long"
// answer becomes status, compaction and a retried request over SSE, and
// the prompt ends with the model's answer, not an error.
func TestHostedRunnerCompaction(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, tooLongTurns()...)
	ws := workspaceWithFile(t)
	p := startRunner(t, fixtureEnv(t, ws, "runner_compact", "MAESTRO_MODEL=openai/local-y", "OPENAI_BASE_URL="+srv.URL()+"/v1"))
	c := p.attach(nil)
	c.send(map[string]any{"type": "prompt", "content": oldTask})
	expectCompactedAnswer(t, c, srv)
}

// expectCompactedAnswer reads c's stream after a prompt of oldTask on
// the tooLongTurns script: the compaction message with the model's
// summary, then the retried call's answer, and the retried request
// without the old prompt.
func expectCompactedAnswer(t *testing.T, c *client, srv *llmtest.Server) {
	t.Helper()
	_, comp := c.until(func(m map[string]any) bool {
		return m["type"] == protocol.TypeCompaction || m["type"] == protocol.TypeError
	})
	if comp["type"] != protocol.TypeCompaction || comp["auto"] != true || !strings.Contains(comp["summary"].(string), "SUMMARY") {
		t.Fatalf("got %v, want the compaction message", comp)
	}
	_, chunk := c.until(func(m map[string]any) bool {
		return m["type"] == protocol.TypeResponseChunk || m["type"] == protocol.TypeError
	})
	if chunk["type"] != protocol.TypeResponseChunk || !strings.Contains(chunk["content"].(string), "answer after compaction") {
		t.Errorf("after the compaction: %v, want the retried call's answer", chunk)
	}
	if reqs := srv.Requests(); len(reqs) != 4 || strings.Contains(string(reqs[3].Body), "OLD-TASK background") {
		t.Errorf("%d model requests; the retried one should carry the summary, not the old prompt", len(reqs))
	}
}

// A session of `maestro serve` created over HTTP on a live model compacts
// like the other surfaces: the provider's "too long" answer becomes the
// compaction message and a retried request on the controller's stream.
func TestServeSessionCompaction(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, tooLongTurns()...)
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	env := append(proctest.NoModelEnv(home), "MAESTRO_MODEL=openai/local-y", "OPENAI_BASE_URL="+srv.URL()+"/v1")
	url, _, stop := startServe(ctx, t, env, "--workers", "0", "--data-dir", home)
	defer stop()
	p := &runnerProc{t: t, base: url, named: true}
	var snap struct {
		SessionID string `json:"session_id"`
	}
	if code := p.call("POST", "/api/headless/sessions", map[string]any{"approvalMode": "auto", "workspaceRoot": workspaceWithFile(t), "clientInfo": map[string]any{"name": "compaction"}}, nil, &snap); code/100 != 2 || snap.SessionID == "" {
		t.Fatalf("create session: %d %+v", code, snap)
	}
	p.session = snap.SessionID
	c := p.attach(nil)
	c.send(map[string]any{"type": "prompt", "content": oldTask})
	expectCompactedAnswer(t, c, srv)
}
