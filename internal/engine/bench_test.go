package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

// benchMovements is the length of the benchmark's transition chain.
const benchMovements = 10

// benchPiece is a chain m0 → m1 → … → m9; m9 completes.
func benchPiece(b *testing.B) *piece.Piece {
	p := &piece.Piece{Name: "bench", Description: "transition chain", MaxMovements: 2 * benchMovements, InitialMovement: "m0"}
	for i := range benchMovements {
		m := piece.Movement{Name: fmt.Sprintf("m%d", i), Persona: "p", Instruction: "i", AllowedTools: []string{}, Rules: []piece.Rule{}}
		if i < benchMovements-1 {
			m.Rules = []piece.Rule{{Condition: "always", Next: fmt.Sprintf("m%d", i+1)}}
		}
		p.Movements = append(p.Movements, m)
	}
	return p
}

// benchScenario plays one control-tool call per movement.
func benchScenario(b *testing.B) *replay.Scenario {
	type stmt struct {
		Kind  string         `json:"kind"`
		Tool  string         `json:"tool,omitempty"`
		Input map[string]any `json:"input,omitempty"`
	}
	type frame struct {
		Index      int    `json:"index"`
		Statements []stmt `json:"statements"`
	}
	var frames []frame
	for i := range benchMovements {
		s := stmt{Kind: "tool_call", Tool: "transition", Input: map[string]any{"next": fmt.Sprintf("m%d", i+1), "summary": "moved on"}}
		if i == benchMovements-1 {
			s = stmt{Kind: "tool_call", Tool: "complete", Input: map[string]any{"status": "success", "result": "done"}}
		}
		frames = append(frames, frame{Index: i, Statements: []stmt{s}})
	}
	data, err := json.Marshal(map[string]any{
		"schemaVersion": replay.SchemaVersion, "id": "bench", "description": "transition chain",
		"metadata": map[string]any{"recordedAt": "2026-11-22T00:00:00Z", "toolsExpected": []string{"transition", "complete"}},
		"frames":   frames,
	})
	if err != nil {
		b.Fatal(err)
	}
	s, err := replay.Parse(data, "bench.json")
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkMovementTransition measures a piece run on replay per movement
// (one model turn calling transition, or complete for the last): agent
// loop, tool set and prompt construction, loop control, run events and the
// state file written atomically (and synced) once per movement. The run
// directory is on the test's temporary disk, and on /dev/shm (tmpfs, where
// a sync costs nothing) to separate the engine's CPU cost from the disk's.
func BenchmarkMovementTransition(b *testing.B) {
	root, err := workspace.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	p := benchPiece(b)
	prov := replay.New(benchScenario(b))
	dirs := map[string]string{"disk": b.TempDir()}
	if shm, err := os.MkdirTemp("/dev/shm", "maestro-bench-"); err == nil {
		defer os.RemoveAll(shm)
		dirs["tmpfs"] = shm
	}
	for _, name := range []string{"disk", "tmpfs"} {
		base, ok := dirs[name]
		if !ok {
			continue
		}
		b.Run("state="+name, func(b *testing.B) {
			for b.Loop() {
				dir, err := os.MkdirTemp(base, "run-")
				if err != nil {
					b.Fatal(err)
				}
				e, err := New(Config{Provider: prov, Workspace: root, RunDir: dir})
				if err != nil {
					b.Fatal(err)
				}
				out, err := e.Start(context.Background(), p, "go", StartOptions{})
				if err != nil || out.Status != StatusSucceeded {
					b.Fatalf("%+v %v", out, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchMovements, "ns/movement")
		})
	}
}

// BenchmarkMovementTransitionBaseline is the same ten replay turns through
// the bare agent loop: one Run per "movement", each in a fresh
// conversation, calling a tool that ends the turn — no engine around it.
func BenchmarkMovementTransitionBaseline(b *testing.B) {
	prov := replay.New(benchScenario(b))
	stop := func(name string) tool.Tool {
		return &controlTool{spec: llm.ToolSpec{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			run: func(context.Context, json.RawMessage) tool.Result { return tool.Result{Content: "ok", StopTurn: true} }}
	}
	tools := tool.NewSet(stop("transition"), stop("complete"))
	agents := make([]*agent.Agent, benchMovements)
	for k := range agents {
		agents[k] = agent.New(agent.Config{Provider: atFrame(prov, k), Tools: tools, System: "p"})
	}
	for b.Loop() {
		for _, ag := range agents {
			if _, err := ag.Run(context.Background(), nil, llm.UserText("go"), discard{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchMovements, "ns/movement")
}
