package agent

import (
	"context"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/llm/openai"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/tool"
)

// benchTurns is the length of the scripted session: model calls that each
// ask for a tool, then the answer.
const benchTurns = 200

// benchWindow is the context window of the compacting session.
const benchWindow = 32_000

// benchModel scripts the fake OpenAI-compatible server by request: a
// summarising request (no tools) gets a summary, the others a tool call
// until the last turn, which answers. Usage is the request's estimated
// size, as a server would count it.
type benchModel struct {
	llm.Provider
	srv   *llmtest.Server
	calls int
}

func (m *benchModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Event, error] {
	in := EstimateTokens(req)
	switch {
	case len(req.Tools) == 0:
		m.srv.Enqueue(llmtest.Turn{Text: []string{strings.Repeat("summary of the work so far. ", 60)}, InputTokens: in, OutputTokens: 420})
	case m.calls+1 >= benchTurns:
		m.calls++
		m.srv.Enqueue(llmtest.Turn{Text: []string{"all done"}, InputTokens: in, OutputTokens: 3})
	default:
		m.calls++
		m.srv.Enqueue(llmtest.Turn{Text: []string{"Looking at the next file."}, ToolCalls: []llmtest.ToolCall{{Name: "Look", Input: `{"text":"x"}`}}, InputTokens: in, OutputTokens: 30})
	}
	return m.Provider.Stream(ctx, req)
}

// compactionMeter is a Sink measuring compactions: their token counts and
// the time from the compaction's first status to its last.
type compactionMeter struct {
	mu            sync.Mutex
	start         time.Time
	spent         time.Duration
	before, after int64
	count         int
	sent          int64
}

func (c *compactionMeter) Event(m protocol.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e := m.(type) {
	case protocol.Status:
		switch {
		case strings.Contains(e.Message, "Compacting history"):
			c.start = time.Now()
		case strings.HasPrefix(e.Message, "Compacted the conversation"):
			c.spent += time.Since(c.start)
		}
	case protocol.ResponseEnd:
		c.sent += e.Usage.InputTokens
	}
}

func (c *compactionMeter) Message(m llm.Message) {
	if m.Compaction == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count++
	c.before += m.Compaction.TokensBefore
	c.after += m.Compaction.TokensAfter
}

// runBenchSession runs one scripted 200-turn session and returns its
// meter and wall time.
func runBenchSession(b *testing.B, window int64, compactAt float64) (*compactionMeter, time.Duration) {
	srv := llmtest.NewServer(b)
	p, err := openai.New(openai.Config{BaseURL: srv.URL() + "/v1", Model: "local-bench", API: openai.APIChat})
	if err != nil {
		b.Fatal(err)
	}
	set := tool.NewSet()
	result := strings.Repeat("a line of the file that was looked at\n", 30) // about 1 KB
	set.Add(tool.New("Look", "looks at a file", true, func(context.Context, echoIn, tool.Call) (tool.Result, error) {
		return tool.Result{Content: result}, nil
	}))
	meter := &compactionMeter{}
	a := New(Config{Provider: &benchModel{Provider: p, srv: srv}, Tools: set, ContextWindow: window, CompactAt: compactAt, MaxIterations: benchTurns + 10})
	start := time.Now()
	res, err := a.Run(b.Context(), nil, llm.UserText("Look at every file and report."), meter)
	if err != nil {
		b.Fatalf("session: %v", err)
	}
	if res.Iterations != benchTurns {
		b.Fatalf("%d model calls, want %d", res.Iterations, benchTurns)
	}
	return meter, time.Since(start)
}

// BenchmarkCompaction200Turns runs a scripted 200-turn session (about 300
// tokens a turn) against the fake OpenAI-compatible server twice: in a
// 32,000-token window, compacting at 85 %, and, as the baseline in the
// same run, in a window too large to need it. It reports the compactions,
// their mean tokens before and after, the mean time one takes (the
// summarising model call included) and what the session's requests sent
// in input tokens, both ways.
func BenchmarkCompaction200Turns(b *testing.B) {
	var (
		m, base       *compactionMeter
		wall, baseDur time.Duration
	)
	for b.Loop() {
		m, wall = runBenchSession(b, benchWindow, 0)
		base, baseDur = runBenchSession(b, 10_000_000, -1)
	}
	if m.count == 0 || base.count != 0 {
		b.Fatalf("compactions %d (want some) and %d in the baseline (want none)", m.count, base.count)
	}
	n := float64(m.count)
	b.ReportMetric(n, "compactions")
	b.ReportMetric(float64(m.before)/n, "tokens-before/compaction")
	b.ReportMetric(float64(m.after)/n, "tokens-after/compaction")
	b.ReportMetric(float64(m.spent.Microseconds())/1000/n, "ms/compaction")
	// The share of the compacting session's wall time its compactions
	// took: a ratio within one run, meaningful on a loaded machine.
	b.ReportMetric(100*float64(m.spent)/float64(wall), "compaction-%-of-session")
	b.ReportMetric(float64(wall.Milliseconds()), "ms/session")
	b.ReportMetric(float64(baseDur.Milliseconds()), "baseline-ms/session")
	b.ReportMetric(float64(m.sent), "input-tokens/session")
	b.ReportMetric(float64(base.sent), "baseline-input-tokens/session")
}
