package agentcli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/protocol"
)

// Codex 0.169.0 under --sandbox read-only, asked by the fake model to run
// `echo maestro > maestro-perm.txt`: in early-denial its sandbox refused
// the command before the command had an item, and the stream shows no
// command_execution (openai/codex#47433); in denied-reported the same
// refusal came later and the stream has the item. Each holds the stream
// (<name>.jsonl) and the rollout Codex wrote (<name>/home/.codex).
const (
	earlyDenialThread    = "01a21c33-03d5-7081-87e3-16e7303ffe2f"
	deniedReportedThread = "01a21c32-ee7a-7d80-8f2f-66a71d777627"
)

func codexFixtureStore(name string) *codexStore {
	return &codexStore{root: filepath.Join("testdata", "codex-0.169.0", name, "home", ".codex")}
}

// TestCodexRolloutShellCalls reads the shell calls of a rollout's last
// turn: the refused call is unreported in early-denial only.
func TestCodexRolloutShellCalls(t *testing.T) {
	t.Parallel()
	denied := ShellCall{CallID: "call_perm1", Command: "echo maestro > maestro-perm.txt",
		Output: "/bin/bash: line 1: maestro-perm.txt: Read-only file system\n"}
	for _, tt := range []struct {
		name, thread string
		want         ShellCalls
	}{
		{"early-denial", earlyDenialThread, ShellCalls{Total: 1, Unreported: []ShellCall{denied}}},
		{"denied-reported", deniedReportedThread, ShellCalls{Total: 1}},
		{"early-denial", "01a21c33-0000-7000-8000-000000000000", ShellCalls{}}, // no such rollout
	} {
		got := codexFixtureStore(tt.name).lastTurnShellCalls(context.Background(), tt.thread)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", tt.name, tt.thread, diff)
		}
	}
}

// parseCodex parses the fixture stream name with lookup as
// LookupShellCalls and returns its event types (compressed) and messages.
func parseCodex(t *testing.T, name string, lookup func(string) ShellCalls) (string, []protocol.Message) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "codex-0.169.0", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	def := mustDef(t, "codex")
	p, err := NewParser(def.Parser, ParserOptions{Provider: def.ID, Classifier: NewClassifier(def), LookupShellCalls: lookup})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	var msgs []protocol.Message
	for ev, err := range Parse(strings.NewReader(string(data)), p) {
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ev.Messages {
			types = append(types, m.MessageType())
			msgs = append(msgs, m)
		}
	}
	if r := p.Result(); r == nil || r.IsError || r.Text != "Done." {
		t.Errorf("%s: result %+v", name, r)
	}
	return strings.ReplaceAll(compress(types), protocol.TypeResponseChunk, "chunk"), msgs
}

// TestCodexUnreportedShellCall: the call Codex ran without an item is
// reported from its rollout at the end of the turn (its tool_end failed,
// with the sandbox's message as output), and only when the stream
// missed it.
func TestCodexUnreportedShellCall(t *testing.T) {
	t.Parallel()
	const turn = "response_start chunk response_end"
	fromStore := func(name string) func(string) ShellCalls {
		return func(id string) ShellCalls {
			return codexFixtureStore(name).lastTurnShellCalls(context.Background(), id)
		}
	}

	got, msgs := parseCodex(t, "early-denial", fromStore("early-denial"))
	if want := turn + " " + toolSeq; got != want {
		t.Errorf("early-denial: events %s, want %s", got, want)
	}
	var output string
	var end protocol.ToolEnd
	for _, m := range msgs {
		switch m := m.(type) {
		case protocol.ToolCall:
			var args struct{ Command string }
			if err := json.Unmarshal(m.Args, &args); err != nil || m.CallID != "call_perm1" || m.Tool != "command_execution" ||
				args.Command != "echo maestro > maestro-perm.txt" {
				t.Errorf("tool_call %s %s %s (%v)", m.CallID, m.Tool, m.Args, err)
			}
		case protocol.ToolOutput:
			output += m.Content
		case protocol.ToolEnd:
			end = m
		case protocol.ResponseEnd:
			if s := m.ToolsSummary; s.CallsFailed != 1 || len(s.ToolsUsed) != 1 {
				t.Errorf("tools summary %+v", s)
			}
		}
	}
	if !matchAny(mustDef(t, "codex").Denied, output) {
		t.Errorf("the output %q matches none of codex's denied patterns", output)
	}
	if end.Success || end.ErrorCode != "failed" {
		t.Errorf("tool_end %+v", end)
	}

	// Without storage the turn ends at turn.completed, as before.
	if got, _ := parseCodex(t, "early-denial", nil); got != turn {
		t.Errorf("early-denial without storage: events %s, want %s", got, turn)
	}
	// The stream that has the item reads the same from its rollout.
	if got, _ := parseCodex(t, "denied-reported", fromStore("denied-reported")); got != toolSeq+" "+turn {
		t.Errorf("denied-reported: events %s", got)
	}
	// A rollout whose unreported calls are not exactly those the stream
	// lacks is left alone: here the stream's one item may be the call.
	stub := func(string) ShellCalls {
		return ShellCalls{Total: 1, Unreported: []ShellCall{{CallID: "c1", Command: "true", Success: true}}}
	}
	if got, _ := parseCodex(t, "denied-reported", stub); got != toolSeq+" "+turn {
		t.Errorf("denied-reported, one unreported of one: events %s", got)
	}
}
