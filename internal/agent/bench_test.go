package agent

import (
	"context"
	"fmt"
	"testing"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/tool"
)

// discard is a Sink that drops everything.
type discard struct{}

func (discard) Event(protocol.Message) {}
func (discard) Message(llm.Message)    {}

// benchScenario: frame 0 asks for a no-op tool, frame 1 answers — two
// model calls (turns) per Run.
const benchScenario = `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"bench","description":"loop overhead",
"metadata":{"recordedAt":"2026-11-22T00:00:00Z","toolsExpected":["noop"]},
"frames":[
 {"index":0,"statements":[{"kind":"text","text":"Let me look.","chunks":["Let ","me ","look."]},{"kind":"tool_call","tool":"noop","input":{"text":"x"}},{"kind":"usage","input_tokens":1000,"output_tokens":20}]},
 {"index":1,"statements":[{"kind":"text","text":"All done here.","chunks":["All ","done ","here."]},{"kind":"usage","input_tokens":1100,"output_tokens":10}]}]}`

func benchProvider(b *testing.B) llm.Provider {
	s, err := replay.Parse([]byte(benchScenario), "bench.json")
	if err != nil {
		b.Fatal(err)
	}
	return replay.New(s)
}

func noopTool() tool.Tool {
	return tool.New("noop", "does nothing", true, func(context.Context, echoIn, tool.Call) (tool.Result, error) {
		return tool.Result{Content: "ok"}, nil
	})
}

// BenchmarkReplayStreamBaseline is the baseline: the same two replay model
// calls consumed bare, without the loop.
func BenchmarkReplayStreamBaseline(b *testing.B) {
	p := benchProvider(b)
	first := []llm.Message{llm.UserText("go")}
	var second []llm.Message
	for ev, err := range p.Stream(b.Context(), &llm.Request{Messages: first}) {
		if err != nil {
			b.Fatal(err)
		}
		if ev.Type == llm.EventDone {
			calls := ev.Response.Message.ToolCalls()
			second = append(first, ev.Response.Message, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartToolResult,
				ToolResult: &llm.ToolResult{CallID: calls[0].ID, Content: "ok"}}}})
		}
	}
	for b.Loop() {
		for _, msgs := range [][]llm.Message{first, second} {
			for _, err := range p.Stream(b.Context(), &llm.Request{Messages: msgs}) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/turn")
}

// BenchmarkLoopTurn measures the agent loop per model call on replay,
// excluding tool work (the tool is a no-op), with events discarded and with
// events appended to a real session log.
func BenchmarkLoopTurn(b *testing.B) {
	for _, withLog := range []bool{false, true} {
		b.Run(fmt.Sprintf("session_log=%v", withLog), func(b *testing.B) {
			var sink Sink = discard{}
			if withLog {
				s, err := session.NewStore(b.TempDir()).Create(session.Meta{})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				sink = s
			}
			a := New(Config{Provider: benchProvider(b), Tools: tool.NewSet(noopTool())})
			for b.Loop() {
				if _, err := a.Run(b.Context(), nil, llm.UserText("go"), sink); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/turn")
		})
	}
}
