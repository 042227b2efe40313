package agentcli

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// setCapability sets the capability named name (its YAML name) to on; false
// when there is none.
func setCapability(c *Capabilities, name string, on bool) bool {
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		if v.Type().Field(i).Tag.Get("yaml") == name {
			v.Field(i).SetBool(on)
			return true
		}
	}
	return false
}

// withCapability returns a copy of the built-in definition id with the
// capability named flag (its YAML name) set to on.
func withCapability(t *testing.T, id, flag string, on bool) *Definition {
	t.Helper()
	d := *mustDef(t, id)
	if !setCapability(&d.Capabilities, flag, on) {
		t.Fatalf("no capability %q", flag)
	}
	return &d
}

// parseWith parses a captured stream with def's parser options.
func parseWith(t *testing.T, def *Definition, stream []byte) (*Parser, []Event) {
	t.Helper()
	p, err := NewParser(def.Parser, DefinitionParserOptions(def))
	if err != nil {
		t.Fatal(err)
	}
	var evs []Event
	for ev, err := range Parse(bytes.NewReader(stream), p) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return p, evs
}

func fixture(t *testing.T, dir, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", dir, name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestCapabilitiesGate: each of the twelve capability flags of the seed
// (docs/agent-clis.md, "Capabilities gate") gates its feature: the same run with
// the flag on shows the feature, with it off does not.
func TestCapabilitiesGate(t *testing.T) {
	t.Parallel()
	const claude, claudeDir = "claude-code", "claude-code-2.1.330"
	plain := filepath.Join("testdata", claudeDir, "plain-turn.jsonl")
	// feature reports what the feature looks like in a run with def.
	tests := []struct {
		flag    string
		feature func(t *testing.T, on bool) any
		on, off any
	}{
		{"resume", func(t *testing.T, on bool) any {
			r := runFixture(t, withCapability(t, claude, "resume", on), plain, t.TempDir(), Invocation{Prompt: "hi", SessionID: "s-1"})
			return [2]bool{slices.Contains(r.args, "--resume"), len(r.statuses) > 0 && strings.Contains(r.statuses[0], "cannot resume")}
		}, [2]bool{true, false}, [2]bool{false, true}},
		{"read_only_mode", func(t *testing.T, on bool) any {
			r := runFixture(t, withCapability(t, claude, "read_only_mode", on), plain, t.TempDir(), Invocation{Prompt: "hi", Permission: PermissionReadOnly})
			return r.err == nil && slices.Contains(r.args, "plan")
		}, true, false},
		{"json_output", func(t *testing.T, on bool) any {
			r := runFixture(t, withCapability(t, claude, "json_output", on), plain, t.TempDir(), Invocation{Prompt: "hi"})
			return slices.Contains(r.args, "--output-format")
		}, true, false},
		{"session_id", func(t *testing.T, on bool) any {
			r := runFixture(t, withCapability(t, claude, "session_id", on), plain, t.TempDir(), Invocation{Prompt: "hi"})
			return [3]bool{r.res.SessionID != "", len(r.sessions) > 0, r.res.Result.SessionID != ""}
		}, [3]bool{true, true, true}, [3]bool{false, false, false}},
		{"image_input", func(t *testing.T, on bool) any {
			r := runFixture(t, withCapability(t, "codex", "image_input", on), filepath.Join("testdata", "codex-0.169.0", "plain-turn.jsonl"), t.TempDir(),
				Invocation{Prompt: "hi", Images: []string{"/tmp/shot.png"}})
			return slices.Contains(r.args, "/tmp/shot.png")
		}, true, false},
		{"slash_commands", func(t *testing.T, on bool) any {
			p, _ := parseWith(t, withCapability(t, claude, "slash_commands", on), fixture(t, claudeDir, "plain-turn"))
			return slices.Contains(p.SlashCommands(), "compact")
		}, true, false},
		{"session_storage", func(t *testing.T, on bool) any {
			// Codex's resumed turn is diffed against its stored rollout.
			home, id := t.TempDir(), "01a2024c-f6b3-73e2-a089-dbedc6848b33"
			codexRolloutAfterFirstTurn(t, home, id)
			r := runFixture(t, withCapability(t, "codex", "session_storage", on), filepath.Join("testdata", "codex-0.169.0", "resume.jsonl"), home,
				Invocation{Prompt: "again", SessionID: id})
			return r.res.Result.Usage.InputTokens
		}, int64(40), int64(52)},
		{"cost_tracking", func(t *testing.T, on bool) any {
			r := runFixture(t, withCapability(t, claude, "cost_tracking", on), plain, t.TempDir(), Invocation{Prompt: "hi"})
			return [2]bool{r.ends[0].Usage.TotalCostUSD > 0, r.res.Result.CostUSD > 0}
		}, [2]bool{true, true}, [2]bool{false, false}},
		{"usage_stats", func(t *testing.T, on bool) any {
			r := runFixture(t, withCapability(t, claude, "usage_stats", on), plain, t.TempDir(), Invocation{Prompt: "hi"})
			return [2]int64{r.ends[0].Usage.InputTokens + r.ends[0].Usage.OutputTokens, r.res.Result.Usage.TotalTokens}
		}, [2]int64{19, 19}, [2]int64{0, 0}},
		{"batch_mode", func(t *testing.T, on bool) any {
			r := runFixture(t, withCapability(t, claude, "batch_mode", on), plain, t.TempDir(), Invocation{Prompt: "hi"})
			return r.err == nil && r.res.Result != nil
		}, true, false},
		{"streaming", func(t *testing.T, on bool) any {
			r := runFixture(t, withCapability(t, claude, "streaming", on), filepath.Join("testdata", claudeDir, "partial-turn.jsonl"), t.TempDir(), Invocation{Prompt: "hi"})
			var kinds []string
			for _, c := range r.chunks {
				kinds = append(kinds, map[bool]string{true: "thinking", false: "text"}[c.IsThinking])
			}
			return [2]any{slices.Contains(r.args, "--include-partial-messages"), strings.Join(kinds, " ")}
		}, [2]any{true, "thinking thinking text"}, [2]any{false, "thinking text"}},
		{"result_messages", func(t *testing.T, on bool) any {
			// A result whose text differs from what was streamed.
			stream := bytes.Replace(fixture(t, claudeDir, "plain-turn"), []byte(`"result":"Hello from the fake model."`), []byte(`"result":"The result message."`), 1)
			p, _ := parseWith(t, withCapability(t, claude, "result_messages", on), stream)
			return p.Result().Text
		}, "The result message.", "Hello from the fake model."},
	}
	if len(tests) != 12 {
		t.Fatalf("%d flags tested, the seed has 12", len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.on, tt.feature(t, true)); diff != "" {
				t.Errorf("%s on (-want +got):\n%s", tt.flag, diff)
			}
			if diff := cmp.Diff(tt.off, tt.feature(t, false)); diff != "" {
				t.Errorf("%s off (-want +got):\n%s", tt.flag, diff)
			}
		})
	}
}

// TestCapabilityFlags: every capability is listed by its YAML name.
func TestCapabilityFlags(t *testing.T) {
	t.Parallel()
	flags := mustDef(t, "codex").Capabilities.Flags()
	var names []string
	for _, f := range flags {
		names = append(names, f.Name)
	}
	for _, want := range []string{"resume", "read_only_mode", "json_output", "session_id", "image_input", "slash_commands",
		"session_storage", "cost_tracking", "usage_stats", "batch_mode", "streaming", "result_messages"} {
		if !slices.Contains(names, want) {
			t.Errorf("Flags() lacks %s: %v", want, names)
		}
	}
	if len(flags) != 29 {
		t.Errorf("%d flags, want every field of Capabilities (29)", len(flags))
	}
}

// TestGateModelWithoutArgs: --model for a definition with no args.model
// was dropped without a word, and still reported as the run's model
// ("model echoer/foo").
func TestGateModelWithoutArgs(t *testing.T) {
	t.Parallel()
	def, err := ParseDefinition("my.yaml", []byte("id: mine\nname: Mine\nbinary: mine\nparser: text\ncapabilities: {batch_mode: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, inv, notes, err := def.gate(Invocation{Prompt: "p", Model: "foo"})
	if err != nil || inv.Model != "" || len(notes) != 1 || notes[0] != "Mine takes no model (its definition has no args.model); --model foo not passed" {
		t.Errorf("gate: model %q, notes %q, err %v", inv.Model, notes, err)
	}
	if _, inv, notes, _ := mustDef(t, "codex").gate(Invocation{Prompt: "p", Model: "gpt-5.5"}); inv.Model != "gpt-5.5" || len(notes) != 0 {
		t.Errorf("codex: model %q, notes %q", inv.Model, notes)
	}
}
