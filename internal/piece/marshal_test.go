package piece

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestMarshalRoundTrip(t *testing.T) {
	t.Parallel()
	// Values chosen to trip an encoder: strings YAML would read as other
	// types, leading and trailing space, multi-line text with indentation,
	// quotes, non-ASCII, and the omitted-versus-empty lists.
	p := &Piece{
		Name:            "round-trip",
		Description:     "Line one.\n  indented line\nlast line without newline",
		MaxMovements:    7,
		InitialMovement: "first",
		Triggers:        &Triggers{Keywords: []string{"yes", "123", "null", "~", "a: b", "#tag", "日本語"}},
		RequiredMCP:     []string{"github"},
		Model:           "openai/0.5",
		Movements: []Movement{
			{
				Name: "first", Agent: "codex", Edit: true,
				Persona:               "  leading and trailing spaces  ",
				Instruction:           "Say \"hi\" and 'bye'.\n- a list item\n\n  code block\n",
				AllowedTools:          []string{"Read", "Write", "Bash", "SshExec", "mcp__github__*"},
				AllowedCommands:       []string{},
				AllowedSSHConnections: []string{},
				Rules:                 []Rule{{Condition: "true", Next: "second"}, {Condition: "waiting: on children", Next: WaitSubtasks}},
				DefaultNext:           Ask,
			},
			{
				Name: "second", Persona: "p", Instruction: "i",
				AllowedTools: []string{}, Rules: []Rule{},
				TextAnswer: TextAnswerResult, Model: "openai/gpt-5",
				MaxConsecutiveRevisits: 2,
			},
			{
				Name: "third", Persona: "p", Instruction: "i",
				AllowedTools: []string{"Bash", "SshDownload"}, AllowedCommands: []string{"git"},
				AllowedSSHConnections: []string{"*"}, Rules: []Rule{{Condition: "c", Next: "first"}},
			},
		},
	}
	out, err := Marshal(p)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	got, err := Parse("rt.yaml", out)
	if err != nil {
		t.Fatalf("Parse(Marshal(p)): %v\n%s", err, out)
	}
	if diff := cmp.Diff(p, got, cmpopts.IgnoreTypes(Pos{})); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s\nYAML:\n%s", diff, out)
	}
	// Omitted optional fields stay omitted; the empty lists stay present.
	text := string(out)
	for _, want := range []string{"allowed_commands: []", "allowed_ssh_connections: []", "default_next: ASK", "max_consecutive_revisits: 2"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if n := strings.Count(text, "allowed_commands:"); n != 2 {
		t.Errorf("allowed_commands appears %d times, want 2 (omitted on the second movement)", n)
	}
}

func TestMarshalFieldOrder(t *testing.T) {
	t.Parallel()
	p, err := Parse("f.yaml", []byte(one("    allowed_tools: [Read]", "    rules: []")+"model: openai/m\n"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `name: p
description: d
max_movements: 3
initial_movement: a
model: openai/m
movements:
- name: a
  edit: false
  persona: x
  instruction: y
  allowed_tools: [Read]
  rules: []
`
	if diff := cmp.Diff(want, string(out)); diff != "" {
		t.Errorf("Marshal output mismatch (-want +got):\n%s", diff)
	}
}
