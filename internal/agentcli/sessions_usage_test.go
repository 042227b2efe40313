package agentcli

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
)

// fixtureRun is what one run of the replaying fake CLI produced.
type fixtureRun struct {
	ends     []protocol.ResponseEnd
	chunks   []protocol.ResponseChunk
	statuses []string
	// sessions are the session ids events announced.
	sessions []string
	// args are the CLI's arguments.
	args []string
	res  *RunResult
	err  error
}

// runFixture runs def's executor on a fake CLI that replays the captured
// stream file, with HOME at home.
func runFixture(t *testing.T, def *Definition, file, home string, inv Invocation) fixtureRun {
	t.Helper()
	fixture, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := filepath.Abs(filepath.Join("testdata", "generic", "cat-fixture"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	argsOut := filepath.Join(t.TempDir(), "args")
	x := &Executor{Def: def, Path: bin, MaxAttempts: 1,
		Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home, "FIXTURE=" + fixture, "ARGS_OUT=" + argsOut}}
	inv.Dir = t.TempDir()
	var r fixtureRun
	r.res, r.err = x.Run(ctx, Request{Invocation: inv}, func(ev Event) {
		if ev.SessionID != "" {
			r.sessions = append(r.sessions, ev.SessionID)
		}
		for _, m := range ev.Messages {
			switch m := m.(type) {
			case protocol.ResponseEnd:
				r.ends = append(r.ends, m)
			case protocol.ResponseChunk:
				r.chunks = append(r.chunks, m)
			case protocol.Status:
				r.statuses = append(r.statuses, m.Message)
			}
		}
	})
	if data, err := os.ReadFile(argsOut); err == nil {
		r.args = strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	}
	return r
}

// codexRolloutAfterFirstTurn writes, under home, the rollout Codex keeps of
// thread id after its first turn: the captured rollout of a plain turn
// (testdata/sessions) up to that turn's token_count event.
func codexRolloutAfterFirstTurn(t *testing.T, home, id string) {
	t.Helper()
	src := filepath.Join("testdata", "sessions", "codex-0.169.0", "home", ".codex", "sessions", "2026", "11", "23",
		"rollout-2026-11-23T19-37-18-01a209e9-aa5a-7c03-bd1b-cc2faef66424.jsonl")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for line := range bytes.Lines(data) {
		out.Write(line)
		if bytes.Contains(line, []byte(`"token_count"`)) && bytes.Contains(line, []byte(`"total_token_usage":{`)) {
			break
		}
	}
	dir := filepath.Join(home, ".codex", "sessions", "2026", "11", "23")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rollout-2026-11-23T19-37-18-"+id+".jsonl"), out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestResumedTurnUsage: for every CLI that resumes, the usage a resumed
// turn reports (its response_end events and its result) is that turn's
// model call (the fake answered 40 in, 5 out), not the session's running
// total. Codex reports the thread's total (52/12 after a 12/7 first
// turn): the executor diffs it against the total its rollout recorded
// before the run, and names the rollout's model.
func TestResumedTurnUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id, dir, session string
		model            string
	}{
		{"claude-code", "claude-code-2.1.330", "cb867ec0-5250-4aad-9beb-3e2e4705ce5c", "claude-opus-5-5"},
		{"codex", "codex-0.169.0", "01a2024c-f6b3-73e2-a089-dbedc6848b33", "gpt-5.5"},
		{"gemini-cli", "gemini-cli-0.61.0", "8bc1745a-9ae9-4593-a2e6-4d5aa987a587", ""},
		{"opencode", "opencode-1.18.33", "ses_dfdb2f591ffeBc2xWUL728W81z", ""},
		{"qwen-code", "qwen-code-0.24.4", "dc21346f-b59d-473e-bb17-f7a7e8e0c7f7", "fake-model"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			if tt.id == "codex" {
				codexRolloutAfterFirstTurn(t, home, tt.session)
			}
			r := runFixture(t, mustDef(t, tt.id), filepath.Join("testdata", tt.dir, "resume.jsonl"), home, Invocation{Prompt: "and again", SessionID: tt.session})
			if r.err != nil {
				t.Fatal(r.err)
			}
			var in, out int64
			for _, e := range r.ends {
				in, out = in+e.Usage.InputTokens, out+e.Usage.OutputTokens
				if tt.model != "" && e.Usage.ModelID != tt.model {
					t.Errorf("response_end model_id %q, want %q", e.Usage.ModelID, tt.model)
				}
			}
			if in != 40 || out != 5 {
				t.Errorf("response_end usage %d in, %d out; want the turn's 40, 5", in, out)
			}
			if res := r.res.Result; res == nil || res.Usage.InputTokens != 40 || res.Usage.OutputTokens != 5 {
				t.Errorf("result %+v, want usage 40, 5", res)
			}
		})
	}
}

// TestModelIDFromInvocation: a CLI whose stream names no model (Codex,
// OpenCode) reports the invocation's model in response_end.
func TestModelIDFromInvocation(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ id, dir string }{{"codex", "codex-0.169.0"}, {"opencode", "opencode-1.18.33"}} {
		ends := runFixture(t, mustDef(t, tt.id), filepath.Join("testdata", tt.dir, "plain-turn.jsonl"), t.TempDir(), Invocation{Prompt: "hi", Model: "m-1"}).ends
		if len(ends) == 0 {
			t.Fatalf("%s: no response_end", tt.id)
		}
		for _, e := range ends {
			if e.Usage.ModelID != "m-1" {
				t.Errorf("%s: response_end model_id %q, want m-1", tt.id, e.Usage.ModelID)
			}
		}
	}
}

// TestClaudeTwoTurnCosts: one Claude stream holding two turns (stream-json
// input, or a resumed session) costs each turn its own: Claude's
// total_cost_usd is the session's running total, so the second turn's cost
// is model_usage_since_last_result's, or without it what the total grew.
func TestClaudeTwoTurnCosts(t *testing.T) {
	t.Parallel()
	var stream []byte
	for _, f := range []string{"plain-turn", "resume"} {
		data, err := os.ReadFile(filepath.Join("testdata", "claude-code-2.1.330", f+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, data...)
	}
	withoutSince := bytes.ReplaceAll(stream, []byte(`"model_usage_since_last_result"`), []byte(`"other_field"`))
	for name, s := range map[string][]byte{"since_last_result": stream, "total_cost_usd only": withoutSince} {
		p, err := NewParser("claude-stream-json", DefinitionParserOptions(mustDef(t, "claude-code")))
		if err != nil {
			t.Fatal(err)
		}
		var costs []float64
		var usage [][2]int64
		var results []float64
		for ev, err := range Parse(bytes.NewReader(s), p) {
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ev.Messages {
				if end, ok := m.(protocol.ResponseEnd); ok {
					costs = append(costs, math.Round(end.Usage.TotalCostUSD*1e9)/1e9)
					usage = append(usage, [2]int64{end.Usage.InputTokens, end.Usage.OutputTokens})
				}
			}
			if ev.Result != nil {
				results = append(results, math.Round(ev.Result.CostUSD*1e9)/1e9)
			}
		}
		want := []float64{0.000188, 0.00026}
		if !equalFloats(costs, want) || !equalFloats(results, want) {
			t.Errorf("%s: response_end costs %v, result costs %v; want %v", name, costs, results, want)
		}
		if len(usage) != 2 || usage[0] != [2]int64{12, 7} || usage[1] != [2]int64{40, 5} {
			t.Errorf("%s: response_end usage %v, want [[12 7] [40 5]]", name, usage)
		}
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-12 {
			return false
		}
	}
	return true
}

// TestModelIDFromSessionStorage: with no --model, Codex's and OpenCode's
// response_end name the model their session storage recorded for the
// session (Codex's rollout turn_context, OpenCode's messages), read from
// the captured storage trees of testdata/sessions.
func TestModelIDFromSessionStorage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id, dir, stream, from, session, model string
	}{
		{"codex", "codex-0.169.0", "plain-turn", "01a2024c-f6b3-73e2-a089-dbedc6848b33", "01a209e9-aa5a-7c03-bd1b-cc2faef66424", "gpt-5.5"},
		{"opencode", "opencode-1.18.33", "plain-turn", "ses_dfdb2f591ffeBc2xWUL728W81z", "ses_df604e0f9ffeSGmTdp0zNfyKEZ", "fake-model"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			// The captured stream, as if it were the stored session's.
			data, err := os.ReadFile(filepath.Join("testdata", tt.dir, tt.stream+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			stream := filepath.Join(t.TempDir(), "stream.jsonl")
			if err := os.WriteFile(stream, bytes.ReplaceAll(data, []byte(tt.from), []byte(tt.session)), 0o644); err != nil {
				t.Fatal(err)
			}
			home, err := filepath.Abs(filepath.Join("testdata", "sessions", tt.dir, "home"))
			if err != nil {
				t.Fatal(err)
			}
			r := runFixture(t, mustDef(t, tt.id), stream, home, Invocation{Prompt: "hi"})
			if r.err != nil || len(r.ends) == 0 {
				t.Fatalf("err %v, %d response_end", r.err, len(r.ends))
			}
			for _, e := range r.ends {
				if e.Usage.ModelID != tt.model {
					t.Errorf("response_end model_id %q, want %q", e.Usage.ModelID, tt.model)
				}
			}
		})
	}
}
