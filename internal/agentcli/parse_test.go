package agentcli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/protocol/prototest"
)

var builtinRegistry = sync.OnceValues(func() (*Registry, error) { return Load("") })

func mustDef(t testing.TB, id string) *Definition {
	t.Helper()
	reg, err := builtinRegistry()
	if err != nil {
		t.Fatal(err)
	}
	d, ok := reg.Get(id)
	if !ok {
		t.Fatalf("no built-in definition %q", id)
	}
	return d
}

// outcome is the shape of a parsed fixture: ids, timestamps and durations
// change every run, so tests compare these instead of bytes.
type outcome struct {
	Events    string // event types, compressed: "response_start chunk*2 response_end"
	SessionID string
	Text      string
	IsError   bool
	Category  Category // from the stream, else from stderr + exit status
	Usage     [4]int64 // summed response_end usage: input, output, cache read, cache write
	// Thinking is the text of the thinking chunks (is_thinking).
	Thinking string
	// CostUSD is the Result's cost, per each CLI's semantics (Claude's
	// total_cost_usd, OpenCode's summed step costs; the others report none);
	// parseFixture checks that the response_end costs add up to it.
	CostUSD float64
	ToolsOK int
	Unknown int
}

func parseFixture(t *testing.T, def *Definition, path string) outcome {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewParser(def.Parser, ParserOptions{Provider: def.ID, Classifier: NewClassifier(def)})
	if err != nil {
		t.Fatal(err)
	}
	var o outcome
	var types []string
	var endCost float64
	for ev, err := range Parse(bytes.NewReader(data), p) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Error != nil && o.Category == "" {
			o.Category = ev.Error.Category
		}
		for _, m := range ev.Messages {
			typ := m.MessageType()
			if typ == protocol.TypeResponseChunk {
				typ = "chunk"
			}
			types = append(types, typ)
			if c, ok := m.(protocol.ResponseChunk); ok && c.IsThinking {
				o.Thinking += c.Content
			}
			if end, ok := m.(protocol.ResponseEnd); ok {
				endCost += end.Usage.TotalCostUSD
				o.Usage[0] += end.Usage.InputTokens
				o.Usage[1] += end.Usage.OutputTokens
				o.Usage[2] += end.Usage.CacheReadTokens
				o.Usage[3] += end.Usage.CacheWriteTokens
				if end.Usage.TotalTokens != end.Usage.InputTokens+end.Usage.OutputTokens+end.Usage.CacheReadTokens+end.Usage.CacheWriteTokens {
					t.Errorf("response_end total_tokens %d is not the sum of its parts", end.Usage.TotalTokens)
				}
			}
			if end, ok := m.(protocol.ToolEnd); ok && end.Success {
				o.ToolsOK++
			}
			// Every event must encode as a protocol frame that validates
			// against the JSON Schemas.
			line, err := protocol.Marshal(m)
			if err != nil {
				t.Errorf("marshal %s: %v", m.MessageType(), err)
				continue
			}
			v := prototest.Validator(t)
			if err := v.ValidateServerFrame(line); err != nil {
				t.Errorf("%s: frame does not validate: %s: %v", path, line, err)
			}
		}
	}
	o.Events = compress(types)
	o.SessionID = p.SessionID()
	if r := p.Result(); r != nil {
		o.Text, o.IsError, o.CostUSD = r.Text, r.IsError, r.CostUSD
		if r.Usage.TotalCostUSD != r.CostUSD {
			t.Errorf("%s: result usage total_cost_usd %v, cost_usd %v", path, r.Usage.TotalCostUSD, r.CostUSD)
		}
	}
	if endCost != o.CostUSD {
		t.Errorf("%s: response_end costs sum to %v, the result's cost is %v", path, endCost, o.CostUSD)
	}
	o.Unknown = p.Stats().Unknown
	base := strings.TrimSuffix(path, ".jsonl")
	if o.Category == "" {
		if code, err := os.ReadFile(base + ".exit"); err == nil {
			n, _ := strconv.Atoi(strings.TrimSpace(string(code)))
			if n != 0 {
				stderr, _ := os.ReadFile(base + ".stderr")
				o.Category = NewClassifier(def).ClassifyExit(n, string(stderr), "").Category
			}
		}
	}
	return o
}

func compress(types []string) string {
	var out []string
	for i := 0; i < len(types); {
		j := i
		for j < len(types) && types[j] == types[i] {
			j++
		}
		if j-i > 1 {
			out = append(out, fmt.Sprintf("%s*%d", types[i], j-i))
		} else {
			out = append(out, types[i])
		}
		i = j
	}
	return strings.Join(out, " ")
}

const toolSeq = "tool_call tool_start tool_output tool_end"

// TestFixtures parses the streams captured from the real CLIs (see
// testdata/README.md) and checks each one's shape.
func TestFixtures(t *testing.T) {
	t.Parallel()
	plain := "response_start chunk response_end"
	thinking := "response_start chunk*2 response_end" // a thinking chunk, then the answer
	tests := []struct {
		id, dir, file string
		want          outcome
	}{
		{"claude-code", "claude-code-2.1.330", "plain-turn", outcome{Events: plain, SessionID: "cb867ec0-5250-4aad-9beb-3e2e4705ce5c", Text: "Hello from the fake model.", Usage: [4]int64{12, 7, 0, 0}, CostUSD: 0.000188}},
		{"claude-code", "claude-code-2.1.330", "tool-turn", outcome{Events: "response_start response_end " + toolSeq + " " + plain, SessionID: "41e03c1b-3de0-476a-a6e8-b6e287c68898", Text: "Tool said: maestro-tool-ok", Usage: [4]int64{50, 15, 0, 0}, CostUSD: 0.0005, ToolsOK: 1}},
		{"claude-code", "claude-code-2.1.330", "resume", outcome{Events: plain, SessionID: "cb867ec0-5250-4aad-9beb-3e2e4705ce5c", Text: "Second turn after resume.", Usage: [4]int64{40, 5, 0, 0}, CostUSD: 0.00026000000000000003}}, // the turn's cost (model_usage_since_last_result), not the session's total_cost_usd
		{"claude-code", "claude-code-2.1.330", "error-400", outcome{Events: "error", SessionID: "d73e034e-6ae3-4f90-afdc-a58a03d79c97", Text: "API Error: 400 invalid request", IsError: true, Category: InvalidRequest}},
		{"claude-code", "claude-code-2.1.330", "error-401", outcome{Events: "error", SessionID: "6674439a-6180-4666-afda-daf466d346a8", Text: "Invalid API key · Fix external API key", IsError: true, Category: AuthExpired}},
		{"claude-code", "claude-code-2.1.330", "api-retry-401", outcome{Events: "status*7", SessionID: "05567648-4597-4ffd-a20c-3c1c547ddb00", Category: AgentCrashed}},
		{"claude-code", "claude-code-2.1.330", "bad-resume", outcome{Events: "error", SessionID: "00000000-0000-4000-8000-000000000000", IsError: true, Category: SessionNotFound}},
		{"claude-code", "claude-code-2.1.330", "thinking-turn", outcome{Events: thinking, SessionID: "383533bb-60bb-42ad-8273-dd5fedc90836", Text: "Hello after thinking.", Usage: [4]int64{15, 9, 0, 0}, Thinking: thinkingText, CostUSD: 0.00024}},
		// --include-partial-messages: token-level thinking deltas.
		{"claude-code", "claude-code-2.1.330", "partial-turn", outcome{Events: "response_start chunk*3 response_end", SessionID: "ac4e3d6a-a210-4ab9-9420-f9ec632c9cd7", Text: "Hello after thinking.", Usage: [4]int64{15, 9, 0, 0}, Thinking: thinkingText, CostUSD: 0.00024}},
		{"codex", "codex-0.169.0", "plain-turn", outcome{Events: plain, SessionID: "01a2024c-f6b3-73e2-a089-dbedc6848b33", Text: "Hello from the fake model.", Usage: [4]int64{12, 7, 0, 0}}},
		{"codex", "codex-0.169.0", "tool-turn", outcome{Events: toolSeq + " " + plain, SessionID: "01a2024d-43c3-7622-81a2-bced68681d82", Text: "Tool said: maestro-tool-ok", Usage: [4]int64{50, 15, 0, 0}, ToolsOK: 1}},
		// Codex reports the thread's running total; without the baseline
		// of the stored session (TestResumedTurnUsage) that is all there is.
		{"codex", "codex-0.169.0", "resume", outcome{Events: plain, SessionID: "01a2024c-f6b3-73e2-a089-dbedc6848b33", Text: "Second turn after resume.", Usage: [4]int64{52, 12, 0, 0}}},
		{"codex", "codex-0.169.0", "error-400", outcome{Events: "error", SessionID: "01a2024e-9ddf-7043-81b3-965f8d4cc1e0", IsError: true, Category: InvalidRequest}},
		{"codex", "codex-0.169.0", "error-401", outcome{Events: "status*5 error", SessionID: "01a2024e-a181-71e2-a12a-0ef1c7444965", IsError: true, Category: AuthExpired}},
		{"codex", "codex-0.169.0", "bad-resume", outcome{Category: SessionNotFound}},
		{"codex", "codex-0.169.0", "thinking-turn", outcome{Events: thinking, SessionID: "01a2127f-c71b-7ef1-a93a-8258c7dce0d0", Text: "Hello after thinking.", Usage: [4]int64{15, 9, 0, 0}, Thinking: thinkingText}},
		{"gemini-cli", "gemini-cli-0.61.0", "plain-turn", outcome{Events: "response_start chunk*2 response_end", SessionID: "8bc1745a-9ae9-4593-a2e6-4d5aa987a587", Text: "Hello from the fake model.", Usage: [4]int64{12, 7, 0, 0}}},
		{"gemini-cli", "gemini-cli-0.61.0", "tool-turn", outcome{Events: toolSeq + " " + plain, SessionID: "9d5da271-dd1c-4e1a-b319-105e6a60eeed", Text: "Tool said: maestro-tool-ok", Usage: [4]int64{50, 15, 0, 0}, ToolsOK: 1}},
		{"gemini-cli", "gemini-cli-0.61.0", "resume", outcome{Events: "response_start chunk*2 response_end", SessionID: "8bc1745a-9ae9-4593-a2e6-4d5aa987a587", Text: "Second turn after resume.", Usage: [4]int64{40, 5, 0, 0}}},
		{"gemini-cli", "gemini-cli-0.61.0", "error-400", outcome{Events: "error", SessionID: "81b5fe3e-d84d-4d09-affa-439ac48b4522", IsError: true, Category: InvalidRequest}},
		{"gemini-cli", "gemini-cli-0.61.0", "error-401", outcome{Events: "error", SessionID: "0a99fba6-f3e5-48b2-b88b-5a6b8b802e91", IsError: true, Category: AuthExpired}},
		{"gemini-cli", "gemini-cli-0.61.0", "bad-resume", outcome{Category: SessionNotFound}},
		// Gemini CLI 0.61.0 drops thought parts from stream-json: no thinking.
		{"gemini-cli", "gemini-cli-0.61.0", "thinking-turn", outcome{Events: plain, SessionID: "10c3c6e3-eced-409a-acad-c5ec688f50f4", Text: "Hello after thinking.", Usage: [4]int64{15, 9, 0, 0}}},
		{"opencode", "opencode-1.18.33", "plain-turn", outcome{Events: plain, SessionID: "ses_dfdb2f591ffeBc2xWUL728W81z", Text: "Hello from the fake model.", Usage: [4]int64{12, 7, 0, 0}}},
		{"opencode", "opencode-1.18.33", "tool-turn", outcome{Events: "response_start response_end " + toolSeq + " " + plain, SessionID: "ses_dfdb26079ffeTaLtjhGXhI20eW", Text: "Tool said: maestro-tool-ok", Usage: [4]int64{50, 15, 0, 0}, ToolsOK: 1}},
		{"opencode", "opencode-1.18.33", "resume", outcome{Events: plain, SessionID: "ses_dfdb2f591ffeBc2xWUL728W81z", Text: "Second turn after resume.", Usage: [4]int64{40, 5, 0, 0}}},
		{"opencode", "opencode-1.18.33", "error-400", outcome{Events: "error", SessionID: "ses_dfdb12a7effeDkEvPZJq3wTIkR", IsError: true, Category: InvalidRequest}},
		{"opencode", "opencode-1.18.33", "error-401", outcome{Events: "error", SessionID: "ses_dfdb1161affeaqmt9WwO4pzF2M", IsError: true, Category: AuthExpired}},
		{"opencode", "opencode-1.18.33", "bad-resume", outcome{Category: SessionNotFound}},
		{"opencode", "opencode-1.18.33", "thinking-turn", outcome{Events: thinking, SessionID: "ses_ded8045d8ffeggJE0iclEDEmlm", Text: "Hello after thinking.", Usage: [4]int64{15, 9, 0, 0}, Thinking: thinkingText, CostUSD: 0.00018}},
		{"qwen-code", "qwen-code-0.24.4", "plain-turn", outcome{Events: plain, SessionID: "dc21346f-b59d-473e-bb17-f7a7e8e0c7f7", Text: "Hello from the fake model.", Usage: [4]int64{12, 7, 0, 0}}}, // the model call's usage, not the result's doubled total
		{"qwen-code", "qwen-code-0.24.4", "tool-turn", outcome{Events: "response_start response_end " + toolSeq + " " + plain, SessionID: "50039e28-8142-479f-8a0d-f724991a9cef", Text: "Tool said: maestro-tool-ok", Usage: [4]int64{50, 15, 0, 0}, ToolsOK: 1}},
		{"qwen-code", "qwen-code-0.24.4", "resume", outcome{Events: plain, SessionID: "dc21346f-b59d-473e-bb17-f7a7e8e0c7f7", Text: "Second turn after resume.", Usage: [4]int64{40, 5, 0, 0}}}, // this turn's model call, not the session's running total
		{"qwen-code", "qwen-code-0.24.4", "error-400", outcome{Events: "error", SessionID: "0956c81d-e65d-4835-8cba-2967669bdbd8", IsError: true, Category: InvalidRequest}},
		{"qwen-code", "qwen-code-0.24.4", "error-401", outcome{Events: "error", SessionID: "05db8858-6139-493a-ba44-ac2e81332b56", IsError: true, Category: AuthExpired}},
		{"qwen-code", "qwen-code-0.24.4", "bad-resume", outcome{Category: SessionNotFound}},
		{"qwen-code", "qwen-code-0.24.4", "thinking-turn", outcome{Events: thinking, SessionID: "1dbf1b52-72a4-476a-8fe5-864b6b93ba9a", Text: "Hello after thinking.", Usage: [4]int64{15, 9, 0, 0}, Thinking: thinkingText}},
	}
	for _, tt := range tests {
		t.Run(tt.dir+"/"+tt.file, func(t *testing.T) {
			t.Parallel()
			got := parseFixture(t, mustDef(t, tt.id), filepath.Join("testdata", tt.dir, tt.file+".jsonl"))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEveryFixtureParses guards against fixtures added without a test
// entry going unnoticed: every captured stream parses with no unknown
// event types.
func TestEveryFixtureParses(t *testing.T) {
	t.Parallel()
	reg, err := builtinRegistry()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/*/*.jsonl")
	if len(files) < 30 {
		t.Fatalf("found %d fixtures, want the captured set (>= 30)", len(files))
	}
	for _, f := range files {
		dir := filepath.Base(filepath.Dir(f))
		var def *Definition
		for _, d := range reg.All() {
			if strings.HasPrefix(dir, d.ID+"-") {
				def = d
			}
		}
		if def == nil {
			continue // user-adapter test data
		}
		if o := parseFixture(t, def, f); o.Unknown != 0 {
			t.Errorf("%s: %d unknown event types", f, o.Unknown)
		}
	}
}

func TestPartialAndNoise(t *testing.T) {
	t.Parallel()
	stream := "YOLO mode is enabled.\n" +
		`{"type":"init","session_id":"s1","model":"m"}` + "\n" +
		`{"type":"brand_new_event"}` + "\n" +
		`{"type":"message","role":"assistant","content":"hi","delta":true}` + "\n" +
		`{"type":"result","status":"success","stats":{"input_tokens":3,"output_tokens":1}}`
	p, err := NewParser("gemini-stream-json", ParserOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for ev, err := range Parse(strings.NewReader(stream), p) {
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ev.Messages {
			types = append(types, m.MessageType())
		}
	}
	want := Stats{Lines: 5, Events: 3, Unknown: 1, NonJSON: 1, Partial: 1}
	if diff := cmp.Diff(want, p.Stats()); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	if got := compress(types); got != "response_start response_chunk response_end" {
		t.Errorf("events = %s", got)
	}
	if r := p.Result(); r == nil || r.Text != "hi" || r.Usage.InputTokens != 3 {
		t.Errorf("result = %+v", r)
	}
}

func TestUnknownParser(t *testing.T) {
	t.Parallel()
	if _, err := NewParser("nope", ParserOptions{}); err == nil {
		t.Fatal("NewParser(nope) succeeded")
	}
}

// TestParseLineLimit: a line of the limit's length (its newline aside),
// within the stream or last without a newline, is read; one byte more
// ends the stream with a *LineTooLongError.
func TestParseLineLimit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		n    int
		rest string
		ok   bool
	}{{100, "\nlast\n", true}, {100, "", true}, {101, "\nlast\n", false}, {101, "", false}} {
		p, err := NewParser("text", ParserOptions{MaxLine: 100})
		if err != nil {
			t.Fatal(err)
		}
		var lines []int
		var tooLong *LineTooLongError
		for ev, err := range Parse(strings.NewReader("first\n"+strings.Repeat("a", tt.n)+tt.rest), p) {
			if err != nil && !errors.As(err, &tooLong) {
				t.Fatalf("%d%q: %v", tt.n, tt.rest, err)
			}
			if ev.Raw != nil {
				lines = append(lines, len(ev.Raw))
			}
		}
		want := []int{5}
		if tt.ok {
			want = append(want, tt.n)
			if tt.rest != "" {
				want = append(want, 4)
			}
		}
		if (tooLong == nil) != tt.ok || !slices.Equal(lines, want) {
			t.Errorf("line of %d then %q: lines %v, error %v; want lines %v", tt.n, tt.rest, lines, tooLong, want)
		}
	}
}
