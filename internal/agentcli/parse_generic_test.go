package agentcli

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/protocol/prototest"
)

// genericRun is what one run of a fake generic CLI produced.
type genericRun struct {
	Events   string
	Text     string
	Thinking string
	Tools    []string // "name args → output ok"
	Usage    [2]int64 // summed response_end input, output
	Cost     float64
	Models   []string // response_end model ids
	Session  string
	Result   string
	Category Category
}

// runGeneric runs the fake CLI of testdata/generic/<id>.yaml with prompt.
func runGeneric(t *testing.T, id, prompt string) genericRun {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "generic"))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "broken.yaml:5:10: jsonl.text[0].when: required") {
		t.Fatalf("Load: the broken adapter next to the fakes: err = %v", err)
	}
	def, ok := reg.Get(id)
	if !ok {
		t.Fatalf("%s not loaded next to the broken adapter (have %v)", id, reg.IDs())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	x := &Executor{Def: def, Path: filepath.Join(dir, def.Binary), MaxAttempts: 1, Env: []string{"PATH=/usr/bin:/bin"}}
	var g genericRun
	var types []string
	calls := map[string]string{}
	v := prototest.Validator(t)
	res, err := x.Run(ctx, Request{Invocation: Invocation{Prompt: prompt, Dir: t.TempDir()}}, func(ev Event) {
		if ev.Error != nil && g.Category == "" {
			g.Category = ev.Error.Category
		}
		for _, m := range ev.Messages {
			types = append(types, m.MessageType())
			line, err := protocol.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := v.ValidateServerFrame(line); err != nil {
				t.Errorf("frame does not validate: %s: %v", line, err)
			}
			switch m := m.(type) {
			case protocol.ResponseChunk:
				if m.IsThinking {
					g.Thinking += m.Content
				} else {
					g.Text += m.Content
				}
			case protocol.ToolCall:
				calls[m.CallID] = m.Tool + " " + string(m.Args) + " →"
			case protocol.ToolOutput:
				calls[m.CallID] += " " + m.Content
			case protocol.ToolEnd:
				g.Tools = append(g.Tools, calls[m.CallID]+map[bool]string{true: " ok", false: " failed"}[m.Success])
			case protocol.ResponseEnd:
				g.Usage[0] += m.Usage.InputTokens
				g.Usage[1] += m.Usage.OutputTokens
				g.Cost += m.Usage.TotalCostUSD
				g.Models = append(g.Models, m.Usage.ModelID)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	g.Events = compress(types)
	g.Cost = math.Round(g.Cost*1e9) / 1e9
	g.Session = res.SessionID
	if res.Result != nil {
		g.Result = res.Result.Text
		if res.Result.Usage.InputTokens != g.Usage[0] || math.Round(res.Result.CostUSD*1e9)/1e9 != g.Cost {
			t.Errorf("result usage %+v cost %v, the response_ends sum to %v, %v", res.Result.Usage, res.Result.CostUSD, g.Usage, g.Cost)
		}
	}
	return g
}

// TestGenericParsers: a sixth CLI defined only by YAML (its own JSON shape,
// mapped by the jsonl parser) shows text, thinking, a tool call and usage;
// an aider-like plain-text CLI works with the text parser (its lines are
// the answer, banner lines are skipped, the session id, token counts and
// cost come from their regexps). An error line of either is classified by
// the adapter's patterns.
func TestGenericParsers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id, prompt string
		want       genericRun
	}{
		{"fake-jsonl-agent", "run echo hi", genericRun{
			Events:   "response_start response_chunk*2 response_end tool_call tool_start tool_output tool_end response_start response_chunk response_end",
			Text:     "Running a tool. Done: hi",
			Thinking: "Let me run it.",
			Tools:    []string{`shell {"cmd":"echo hi"} → hi ok`},
			Usage:    [2]int64{51, 12}, Cost: 0.0022, Models: []string{"fake-gen-1", "fake-gen-1"},
			Session: "gen-7f3a", Result: "Done: hi",
		}},
		{"fake-jsonl-agent", "fail please", genericRun{Events: "error", Session: "gen-7f3a", Category: AuthExpired}},
		{"fake-aider", "hi there", genericRun{
			Events: "response_start response_chunk*2 response_end",
			Text:   "Hello from aider.\nYou said: hi there\n",
			Usage:  [2]int64{1200, 45}, Cost: 0.0031, Models: []string{""},
			Session: "aid-42", Result: "Hello from aider.\nYou said: hi there",
		}},
		{"fake-aider", "fail please", genericRun{Events: "error", Session: "aid-42", Category: AuthExpired}},
	}
	for _, tt := range tests {
		t.Run(tt.id+"/"+tt.prompt, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, runGeneric(t, tt.id, tt.prompt)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLookupPath(t *testing.T) {
	t.Parallel()
	var doc any
	if err := json.Unmarshal([]byte(`{"a":{"b":[{"c":"x"},{"c":[1,2]}]},"n":null,"k.e":1}`), &doc); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want any
		ok   bool
	}{
		{"a.b[0].c", "x", true},
		{"a.b[1].c[1]", 2.0, true},
		{"a.b[2]", nil, false},
		{"a.x", nil, false},
		{"n", nil, true},
		{"a.b[0].c.d", nil, false},
		{"", nil, false},
	}
	for _, tt := range tests {
		got, ok := lookup(doc, tt.path)
		if ok != tt.ok || !cmp.Equal(got, tt.want) {
			t.Errorf("lookup(%q) = %v, %v; want %v, %v", tt.path, got, ok, tt.want, tt.ok)
		}
	}
	for p, want := range map[string]bool{"a.b[0].c": true, "a": true, "a..b": false, "a[x]": false, "a.": false} {
		if validPath(p) != want {
			t.Errorf("validPath(%q) = %v", p, !want)
		}
	}
}

func TestTokenCount(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"1234": 1234, "1,234": 1234, "2.1k": 2100, "1.5M": 1500000, "x": 0} {
		if got := tokenCount(in); got != want {
			t.Errorf("tokenCount(%q) = %d, want %d", in, got, want)
		}
	}
}
