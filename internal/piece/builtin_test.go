package piece

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v4"

	"github.com/maestro-run/maestro/pieces"
)

// builtinNames are the pieces Maestro ships.
var builtinNames = []string{"chat", "code", "general", "piece-builder", "research", "review"}

func readBuiltin(t testing.TB, name string) []byte {
	t.Helper()
	data, err := fs.ReadFile(pieces.FS(), name+".yaml")
	if err != nil {
		t.Fatalf("reading built-in %s: %v", name, err)
	}
	return data
}

func TestBuiltinsValidate(t *testing.T) {
	t.Parallel()
	files, err := fs.Glob(pieces.FS(), "*")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(f, ".yaml"))
	}
	if diff := cmp.Diff(builtinNames, names); diff != "" {
		t.Fatalf("built-in files mismatch (-want +got):\n%s", diff)
	}
	for _, name := range builtinNames {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, err := Parse("builtin:"+name+".yaml", readBuiltin(t, name))
			if err != nil {
				t.Fatalf("built-in does not validate:\n%v", err)
			}
			if p.Name != name {
				t.Errorf("name = %q, want %q", p.Name, name)
			}
			// The classifier reads the description: keep its three parts.
			for _, part := range []string{"Choose when:", "Do not choose when:", "Preconditions:"} {
				if !strings.Contains(p.Description, part) {
					t.Errorf("description lacks %q", part)
				}
			}
			// A question answered in plain text must end the run with
			// that answer: each piece declares where (text_answer).
			answers := 0
			for _, m := range p.Movements {
				if m.TextAnswer == TextAnswerResult {
					answers++
				}
			}
			if answers == 0 {
				t.Errorf("no movement declares text_answer: %s", TextAnswerResult)
			}
			for _, m := range p.Movements {
				// Every movement must be able to end or move on.
				if len(m.Rules) == 0 && !strings.Contains(m.Instruction, "complete") {
					t.Errorf("movement %s has no rules and does not mention complete", m.Name)
				}
				// Instructions name every rule target they rely on.
				for _, r := range m.Rules {
					if r.Next != WaitSubtasks && !strings.Contains(m.Instruction, r.Next) {
						t.Errorf("movement %s: instruction never mentions its rule target %s", m.Name, r.Next)
					}
				}
			}
		})
	}
}

// TestBuiltinShapes pins the workflow structure the issue asks for, so an
// edit that breaks a loop or a capability is caught.
func TestBuiltinShapes(t *testing.T) {
	t.Parallel()
	type shape struct {
		initial string
		edges   map[string][]string // movement → rule targets
		editing []string            // movements with edit: true
	}
	want := map[string]shape{
		"general":       {"execute", map[string][]string{"execute": {"verify"}, "verify": {"execute"}}, []string{"execute"}},
		"chat":          {"respond", map[string][]string{"respond": {}}, nil},
		"code":          {"plan", map[string][]string{"plan": {"implement"}, "implement": {"verify", "plan"}, "verify": {"implement", "plan"}}, []string{"implement"}},
		"review":        {"scope", map[string][]string{"scope": {"review"}, "review": {"scope"}}, []string{"review"}},
		"research":      {"plan", map[string][]string{"plan": {"dig"}, "dig": {"synthesize"}, "synthesize": {"dig"}}, []string{"dig", "synthesize"}},
		"piece-builder": {"design", map[string][]string{"design": {"draft"}, "draft": {"check"}, "check": {"draft"}}, nil},
	}
	for name, w := range want {
		p, err := Parse(name, readBuiltin(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := shape{initial: p.InitialMovement, edges: map[string][]string{}}
		for _, m := range p.Movements {
			targets := []string{}
			for _, r := range m.Rules {
				targets = append(targets, r.Next)
			}
			got.edges[m.Name] = targets
			if m.Edit {
				got.editing = append(got.editing, m.Name)
			}
		}
		if diff := cmp.Diff(w, got, cmp.AllowUnexported(shape{})); diff != "" {
			t.Errorf("%s shape mismatch (-want +got):\n%s", name, diff)
		}
	}
	// piece-builder checks its drafts with the validator through CreatePiece.
	pb, _ := Parse("piece-builder", readBuiltin(t, "piece-builder"))
	draft, _ := pb.Movement("draft")
	if draft == nil || !slices.Contains(draft.AllowedTools, "CreatePiece") {
		t.Error("piece-builder's draft movement must be allowed CreatePiece")
	}
}

func TestMarshalRoundTripsBuiltins(t *testing.T) {
	t.Parallel()
	for _, name := range builtinNames {
		p, err := Parse(name, readBuiltin(t, name))
		if err != nil {
			t.Fatal(err)
		}
		out, err := Marshal(p)
		if err != nil {
			t.Fatalf("Marshal %s: %v", name, err)
		}
		again, err := Parse(name, out)
		if err != nil {
			t.Fatalf("re-parsing marshalled %s: %v\n%s", name, err, out)
		}
		if diff := cmp.Diff(p, again, cmpopts.IgnoreTypes(Pos{})); diff != "" {
			t.Errorf("%s round trip mismatch (-want +got):\n%s", name, diff)
		}
	}
}

// BenchmarkValidate measures Parse on the code built-in; the pieces/s
// metric is how many such files one core validates per second.
func BenchmarkValidate(b *testing.B) {
	data := readBuiltin(b, "code")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("code.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pieces/s")
}

// BenchmarkYAMLLoadBaseline is the floor under BenchmarkValidate: the YAML
// library building the node tree of the same file, with no validation.
func BenchmarkYAMLLoadBaseline(b *testing.B) {
	data := readBuiltin(b, "code")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var n yaml.Node
		if err := yaml.Load(data, &n); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pieces/s")
}

// The tools a built-in names that this build lacks are the ones the
// pieces list and show mark (issue 15 item 7).
func TestBuiltinUnavailableTools(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		"chat":          nil,
		"code":          nil,
		"general":       nil,
		"piece-builder": nil,
		"research":      {"ReadPdf"},
		"review":        nil,
	}
	for _, name := range builtinNames {
		p, err := Parse(name, readBuiltin(t, name))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want[name], p.UnavailableTools()); diff != "" {
			t.Errorf("%s: unavailable tools (-want +got):\n%s", name, diff)
		}
	}
	m := Movement{AllowedTools: []string{"Read", "mcp__docs__*", "SpawnSubTask", "AskUser"}}
	// Issue 20: MCP patterns are served by the configured servers, not
	// missing from the build.
	if diff := cmp.Diff([]string{"AskUser"}, m.UnavailableTools()); diff != "" {
		t.Errorf("movement: unavailable tools (-want +got):\n%s", diff)
	}
}

// A run lacks the tools this build lacks and the MCP tools no configured
// server serves; a required server that is not configured is named
// (issue 15 item 7: pieces list|show mark them).
func TestMissingTools(t *testing.T) {
	t.Parallel()
	p := Piece{
		RequiredMCP: []string{"docs", "tickets"},
		Movements: []Movement{
			{Name: "a", AllowedTools: []string{"Read", "AskUser", "mcp__docs__search", "mcp__*"}},
			{Name: "b", AllowedTools: []string{"mcp__tickets__*", "AskUser", "mcp__docs__search"}},
		},
	}
	for _, tc := range []struct {
		name          string
		servers       []string
		tools, mcp    []string
		firstMovement []string
	}{
		{"no server", nil, []string{"AskUser", "mcp__docs__search", "mcp__*", "mcp__tickets__*"}, []string{"docs", "tickets"}, []string{"AskUser", "mcp__docs__search", "mcp__*"}},
		{"another server", []string{"web"}, []string{"AskUser", "mcp__docs__search", "mcp__tickets__*"}, []string{"docs", "tickets"}, []string{"AskUser", "mcp__docs__search"}},
		{"one of them", []string{"docs"}, []string{"AskUser", "mcp__tickets__*"}, []string{"tickets"}, []string{"AskUser"}},
		{"both", []string{"docs", "tickets"}, []string{"AskUser"}, nil, []string{"AskUser"}},
	} {
		if diff := cmp.Diff(tc.tools, p.MissingTools(tc.servers)); diff != "" {
			t.Errorf("%s: piece's missing tools (-want +got):\n%s", tc.name, diff)
		}
		if diff := cmp.Diff(tc.firstMovement, p.Movements[0].MissingTools(tc.servers)); diff != "" {
			t.Errorf("%s: movement a's missing tools (-want +got):\n%s", tc.name, diff)
		}
		if diff := cmp.Diff(tc.mcp, p.MissingMCP(tc.servers)); diff != "" {
			t.Errorf("%s: missing required servers (-want +got):\n%s", tc.name, diff)
		}
	}
	// What the build lacks stays what it was, whatever is configured.
	if diff := cmp.Diff([]string{"AskUser"}, p.UnavailableTools()); diff != "" {
		t.Errorf("unavailable tools (-want +got):\n%s", diff)
	}
}
