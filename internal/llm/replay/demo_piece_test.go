package replay

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/llm"
)

func TestDemoPieceValidates(t *testing.T) {
	t.Parallel()
	s := DemoPiece()
	if s.Name != DemoPieceName || s.ID != "maestro-piece-demo" || len(s.Frames) != 5 || s.ExpectedOutcome != OutcomePass {
		t.Fatalf("DemoPiece() = %s %s with %d frames, outcome %q", s.Name, s.ID, len(s.Frames), s.ExpectedOutcome)
	}
	checkBundled(t, s, DemoPieceSource, DemoPieceName)
}

// pieceDemoMovements is the general piece's movements as the demo plays
// them: the frames of each, and the tools the movement allows (its
// allowed_tools plus the control tools; pieces/general.yaml).
var pieceDemoMovements = []struct {
	name   string
	frames []int
	tools  []string
}{
	{"execute", []int{0, 1, 2}, []string{"Read", "Write", "Edit", "Glob", "Grep", "Bash", "transition", "complete"}},
	{"verify", []int{3, 4}, []string{"Read", "Glob", "Grep", "Bash", "transition", "complete"}},
}

// TestDemoPieceShape: every call is a tool the movement allows, with the
// exact input shape of the built-in or control tool; shell commands stay
// in the sandbox's default allowlist; each movement's last frame, and only
// it, calls one control tool, and no frame has a terminal statement (a
// movement ends with its control tool, not with end_turn).
func TestDemoPieceShape(t *testing.T) {
	t.Parallel()
	tools := builtInTools()
	tools["transition"] = map[string]bool{"next": true, "summary": true, "lessons": false}
	tools["complete"] = map[string]bool{"status": true, "result": true}
	allow := []string{"ls", "cat", "wc", "grep", "sort", "head", "echo"}
	s := DemoPiece()
	var used []string
	for _, mv := range pieceDemoMovements {
		for n, k := range mv.frames {
			f := s.Frames[k]
			var control []string
			for i, st := range f.Statements {
				if st.Kind.terminal() {
					t.Errorf("frame %d statement %d: %s is terminal; a piece movement ends with a control tool", k, i, st.Kind)
				}
				if st.Kind != KindToolCall {
					continue
				}
				where := DefaultToolCallID(s.ID, k, i)
				if !slices.Contains(mv.tools, st.Tool) {
					t.Errorf("%s: %s is not allowed in movement %s (%v)", where, st.Tool, mv.name, mv.tools)
				}
				if !slices.Contains(used, st.Tool) {
					used = append(used, st.Tool)
				}
				in, ok := checkCallInput(t, where, st, tools[st.Tool])
				if !ok {
					continue
				}
				switch st.Tool {
				case "transition", "complete":
					control = append(control, st.Tool)
					if st.ExpectedResult != "" {
						t.Errorf("%s: a control call's result is never seen by the next frame (a new movement), so expectedResult must be unset", where)
					}
				case "Bash":
					cmd, _ := in["command"].(string)
					checkAllowlisted(t, where, cmd, allow)
				}
			}
			last := n == len(mv.frames)-1
			if last && len(control) != 1 || !last && len(control) != 0 {
				t.Errorf("movement %s frame %d calls control tools %v; want exactly one in the movement's last frame only", mv.name, k, control)
			}
		}
	}
	if diff := cmp.Diff(s.Tools(), used); diff != "" {
		t.Errorf("toolsExpected vs tools used (-want +got):\n%s", diff)
	}
	var tr, done struct {
		Next, Summary, Status, Result string
	}
	json.Unmarshal(s.Frames[2].Statements[1].Input, &tr)
	json.Unmarshal(s.Frames[4].Statements[0].Input, &done)
	if tr.Next != "verify" || tr.Summary == "" {
		t.Errorf("execute's transition = %+v, want next verify with a summary", tr)
	}
	if done.Status != "success" {
		t.Errorf("verify's complete status = %q, want success", done.Status)
	}
	for _, want := range []string{"replay demo", "no model was called", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MAESTRO_MODEL", "config.yaml", "output/hello-maestro/greet.txt"} {
		if !strings.Contains(done.Result, want) {
			t.Errorf("the final result does not mention %q", want)
		}
	}
	// `maestro run --piece general` plays it too, where there is no
	// server to restart: the restart is said of serve and worker.
	if strings.Contains(done.Result, "restart the server") || !strings.Contains(done.Result, "`maestro serve` or `maestro worker`") {
		t.Errorf("the final result speaks of a server without naming it:\n%s", done.Result)
	}
	if first := s.Frames[0].Statements[0]; first.Kind != KindText || !strings.Contains(first.Text, "scripted replay") {
		t.Errorf("first statement %+v does not announce the scripted replay", first)
	}
}

// TestDemoPiecePlaysThrough drives the piece demo the way the engine runs
// the general piece on replay: each movement starts a fresh conversation
// placed at the run's frame count (empty assistant messages in front, as
// engine.atFrame does), tool calls run for real in a temporary workspace,
// and a control tool ends the movement. Then the scenario's assertions
// pass on that workspace and the calls made.
func TestDemoPiecePlaysThrough(t *testing.T) {
	t.Parallel()
	dir, root := demoWorkspace(t)
	p := New(DemoPiece())
	var (
		all       []llm.Message // every movement's conversation, for CalledTools
		turns     int           // model turns so far in the run
		movements []string
		result    string
		bash      string
		usage     llm.Usage
	)
	next := "execute"
	for next != "" && len(movements) < 5 {
		movements = append(movements, next)
		msgs := []llm.Message{llm.UserText("# Task\nsay hello\n\n# Movement " + next)}
		next = ""
		base := turns // the movement's place in the run
		for turn := 0; turn < 10; turn++ {
			pad := make([]llm.Message, base)
			for i := range pad {
				pad[i] = llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{}}
			}
			got := collect(p.Stream(t.Context(), &llm.Request{Messages: append(pad, msgs...)}))
			if got.err != nil {
				t.Fatalf("movement %s, run turn %d: %v", movements[len(movements)-1], turns, got.err)
			}
			turns++
			usage.Add(got.resp.Usage)
			msgs = append(msgs, got.resp.Message)
			if got.resp.StopReason != llm.StopToolUse {
				t.Fatalf("run turn %d stopped with %s; a movement must end with a control tool", turns-1, got.resp.StopReason)
			}
			user := llm.Message{Role: llm.RoleUser}
			ended := false
			for _, c := range got.resp.Message.ToolCalls() {
				r := llm.ToolResult{CallID: c.ID, Name: c.Name}
				switch c.Name {
				case "transition":
					var in struct{ Next string }
					json.Unmarshal(c.Input, &in)
					next, ended, r.Content = in.Next, true, "Transition recorded."
				case "complete":
					var in struct{ Status, Result string }
					json.Unmarshal(c.Input, &in)
					if in.Status != "success" {
						t.Errorf("complete status %q", in.Status)
					}
					result, ended, r.Content = in.Result, true, "The run is complete."
				default:
					r = runDemoTool(t.Context(), root, dir, c)
					if c.Name == "Bash" {
						bash = r.Content
					}
				}
				user.Parts = append(user.Parts, llm.Part{Type: llm.PartToolResult, ToolResult: &r})
			}
			msgs = append(msgs, user)
			if ended {
				break
			}
		}
		all = append(all, msgs...)
	}
	if diff := cmp.Diff([]string{"execute", "verify"}, movements); diff != "" {
		t.Errorf("movements (-want +got):\n%s", diff)
	}
	if turns != 5 || !strings.Contains(result, "replay demo") {
		t.Errorf("%d model turns, result %q", turns, result)
	}
	if !strings.Contains(bash, "README.md") || !strings.Contains(bash, "5 output/hello-maestro/greet.txt") {
		t.Errorf("Bash output = %q, want the listing and a line count of 5", bash)
	}
	if want := (llm.Usage{InputTokens: 4072, OutputTokens: 798, CacheReadTokens: 6600, CacheWriteTokens: 4290}); usage != want {
		t.Errorf("total usage = %+v, want %+v", usage, want)
	}
	wantAllPass(t, DemoPiece(), dir, all)
	// The frames are all played: one more call is a clear script error.
	pad := make([]llm.Message, turns)
	for i := range pad {
		pad[i] = llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{}}
	}
	got := collect(p.Stream(t.Context(), &llm.Request{Messages: append(pad, llm.UserText("again"))}))
	if llm.KindOf(got.err) != llm.KindScript {
		t.Errorf("call past the end: %v", got.err)
	}
}
