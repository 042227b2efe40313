package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/maestro-run/maestro/internal/agent"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/tool"
)

// Names of the control tools.
const (
	toolTransition = "transition"
	toolComplete   = "complete"
)

// completeStatus is the status argument of the complete tool.
type completeStatus string

const (
	statusSuccess    completeStatus = "success"
	statusAborted    completeStatus = "aborted"
	statusNeedsInput completeStatus = "needs_user_input"
)

// decision is how a movement ended: a transition or a completion, made by
// the model through a control tool or by the engine (forced).
type decision struct {
	complete bool
	// next, summary and lessons describe a transition.
	next    string
	summary string
	lessons []string
	// status and result describe a completion; for needs_user_input the
	// result is the question.
	status completeStatus
	result string
	// forced is true when the engine decided; reason says why.
	forced bool
	reason string
	// conversation is the movement's conversation, kept when the model
	// asks the user a question so the movement continues after the answer.
	conversation []llm.Message
}

func (d *decision) String() string {
	if d.complete {
		return "complete with status " + string(d.status)
	}
	return "transition to " + d.next
}

// movementCtl is the state one movement's tools share with the engine: the
// decision, once made, and the context pressure reached.
type movementCtl struct {
	mu      sync.Mutex
	decided *decision
	level   int // 0 none, 1 warn, 2 prompt, 3 force
	forced  bool
	usage   agent.ContextUsage
	notes   []string
}

// decide records d unless a decision was made already, which it returns.
func (c *movementCtl) decide(d *decision) *decision {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.decided != nil {
		return c.decided
	}
	c.decided = d
	return nil
}

func (c *movementCtl) decision() *decision {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.decided
}

func (c *movementCtl) isForced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.forced
}

// takeNotes returns the pending notes for the model and clears them.
func (c *movementCtl) takeNotes() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := strings.Join(c.notes, "\n\n")
	c.notes = nil
	return s
}

// guarded wraps every non-control tool of a movement: once the movement
// has decided, further calls are refused; once context pressure forces the
// movement to end, calls are refused and end the turn; pending pressure
// notes ride on the next tool result.
type guarded struct {
	tool.Tool
	ctl *movementCtl
}

func (g guarded) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	if d := g.ctl.decision(); d != nil {
		return tool.Errorf("Not run: this movement already ended (%s).", d), nil
	}
	if g.ctl.isForced() {
		return tool.Result{Content: "Not run: the context window is full. Maestro is ending this movement and hands a summary to the next one.", IsError: true, StopTurn: true}, nil
	}
	res, err := g.Tool.Run(ctx, call)
	if err == nil {
		if n := g.ctl.takeNotes(); n != "" {
			res.Content += "\n\n" + n
		}
	}
	return res, err
}

// controlTool is transition or complete: a hand-written schema (its enum
// lists the movement's own targets) and strict decoding.
type controlTool struct {
	spec llm.ToolSpec
	run  func(ctx context.Context, input json.RawMessage) tool.Result
}

func (t *controlTool) Spec() llm.ToolSpec { return t.spec }
func (t *controlTool) ReadOnly() bool     { return false }
func (t *controlTool) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	return t.run(ctx, call.Input), nil
}

func isControl(name string) bool { return name == toolTransition || name == toolComplete }

func schema(v map[string]any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("engine: control tool schema: %v", err))
	}
	return data
}

// targets returns the distinct rule targets of m, in rule order.
func targets(m *piece.Movement) []string {
	var out []string
	for _, r := range m.Rules {
		if !slices.Contains(out, r.Next) {
			out = append(out, r.Next)
		}
	}
	return out
}

// newTransition returns the transition tool of m. canWait explains why
// WAIT_SUBTASKS cannot be chosen now ("" when it can).
func newTransition(m *piece.Movement, ctl *movementCtl, canWait func() string) tool.Tool {
	next := targets(m)
	var desc strings.Builder
	desc.WriteString("End this movement and hand the run to the next step. next must be one of:")
	for _, r := range m.Rules {
		fmt.Fprintf(&desc, " %s (when %s);", r.Next, strings.TrimSpace(r.Condition))
	}
	desc.WriteString(" summary is everything the next movement needs (it starts with a fresh context and sees only the task, your summary and the lessons). " +
		"lessons are short, reusable insights for every later movement (conventions, commands that work, pitfalls).")
	return &controlTool{
		spec: llm.ToolSpec{Name: toolTransition, Description: desc.String(), InputSchema: schema(map[string]any{
			"type": "object",
			"properties": map[string]any{
				"next":    map[string]any{"type": "string", "enum": next, "description": "the movement (or WAIT_SUBTASKS) to go to, from this movement's rules"},
				"summary": map[string]any{"type": "string", "description": "what this movement did, found and left open, for the next movement"},
				"lessons": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "short reusable insights for later movements"},
			},
			"required":             []string{"next", "summary"},
			"additionalProperties": false,
		})},
		run: func(_ context.Context, input json.RawMessage) tool.Result {
			var in struct {
				Next    string   `json:"next"`
				Summary string   `json:"summary"`
				Lessons []string `json:"lessons"`
			}
			if err := decodeInput(input, &in); err != nil {
				return tool.Errorf("transition: invalid input: %v", err)
			}
			if !slices.Contains(next, in.Next) {
				return tool.Errorf("transition: next must be one of %s, got %q", strings.Join(next, ", "), in.Next)
			}
			if strings.TrimSpace(in.Summary) == "" {
				return tool.Errorf("transition: summary is required: say what this movement did and found, for the next movement")
			}
			if in.Next == piece.WaitSubtasks {
				if why := canWait(); why != "" {
					return tool.Errorf("transition: cannot wait for subtasks: %s", why)
				}
			}
			if prev := ctl.decide(&decision{next: in.Next, summary: strings.TrimSpace(in.Summary), lessons: in.Lessons}); prev != nil {
				return tool.Errorf("transition: this movement already ended (%s)", prev)
			}
			if in.Next == piece.WaitSubtasks {
				return tool.Result{Content: "Waiting for the subtasks. This movement continues with their results in a fresh context; your summary will be there.", StopTurn: true}
			}
			return tool.Result{Content: "Transition to " + in.Next + " recorded. This movement ends here.", StopTurn: true}
		},
	}
}

// newComplete returns the complete tool.
func newComplete(ctl *movementCtl) tool.Tool {
	return &controlTool{
		spec: llm.ToolSpec{Name: toolComplete, Description: "End the run. status success: the task is done and result is the final answer, " +
			"the only thing the user sees (say what was done and how it was checked). status aborted: the task cannot be done; result says why. " +
			"status needs_user_input: a decision only the user can make blocks the work; result is one precise question, and the run continues here with the answer.",
			InputSchema: schema(map[string]any{
				"type": "object",
				"properties": map[string]any{
					"status": map[string]any{"type": "string", "enum": []string{string(statusSuccess), string(statusAborted), string(statusNeedsInput)}},
					"result": map[string]any{"type": "string", "description": "the final answer, the reason for aborting, or the question for the user"},
				},
				"required":             []string{"status", "result"},
				"additionalProperties": false,
			})},
		run: func(_ context.Context, input json.RawMessage) tool.Result {
			var in struct {
				Status completeStatus `json:"status"`
				Result string         `json:"result"`
			}
			if err := decodeInput(input, &in); err != nil {
				return tool.Errorf("complete: invalid input: %v", err)
			}
			switch in.Status {
			case statusSuccess, statusAborted, statusNeedsInput:
			default:
				return tool.Errorf("complete: status must be success, aborted or needs_user_input, got %q", in.Status)
			}
			if strings.TrimSpace(in.Result) == "" {
				return tool.Errorf("complete: result is required (the final answer, the reason, or the question)")
			}
			if prev := ctl.decide(&decision{complete: true, status: in.Status, result: strings.TrimSpace(in.Result)}); prev != nil {
				return tool.Errorf("complete: this movement already ended (%s)", prev)
			}
			switch in.Status {
			case statusNeedsInput:
				return tool.Result{Content: "The question was sent to the user. The run is paused until the answer arrives.", StopTurn: true}
			case statusAborted:
				return tool.Result{Content: "The run is aborted.", StopTurn: true}
			}
			return tool.Result{Content: "The run is complete.", StopTurn: true}
		},
	}
}

// decodeInput decodes a tool input strictly.
func decodeInput(input json.RawMessage, v any) error {
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage("{}")
	}
	return strictJSON(input, v)
}
