package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/tool"
)

// AskUserTool is the name of the tool through which the model asks the
// user structured questions (a user_input server request).
const AskUserTool = "ask_user"

// AskUserInput is the input of ask_user: 1 to 4 questions.
type AskUserInput struct {
	Questions []AskUserQuestion `json:"questions" jsonschema:"the questions to ask, 1 to 4"`
}

// AskUserQuestion is one question with 2 to 4 options.
type AskUserQuestion struct {
	Question    string          `json:"question" jsonschema:"the full question"`
	Header      string          `json:"header" jsonschema:"a very short label for the question (a few words)"`
	Options     []AskUserOption `json:"options" jsonschema:"the choices, 2 to 4"`
	MultiSelect bool            `json:"multiSelect,omitempty" jsonschema:"whether several options may be chosen"`
}

// AskUserOption is one choice.
type AskUserOption struct {
	Label       string          `json:"label" jsonschema:"the option's short label"`
	Description string          `json:"description" jsonschema:"what choosing it means"`
	Preview     *AskUserPreview `json:"preview,omitempty" jsonschema:"optional content shown with the option"`
}

// AskUserPreview is content shown with an option.
type AskUserPreview struct {
	Kind  string `json:"kind" jsonschema:"markdown, text or diff"`
	Title string `json:"title,omitempty"`
	Body  string `json:"body"`
}

func (in AskUserInput) validate() error {
	if n := len(in.Questions); n < 1 || n > 4 {
		return fmt.Errorf("ask between 1 and 4 questions (got %d)", n)
	}
	for i, q := range in.Questions {
		if strings.TrimSpace(q.Question) == "" {
			return fmt.Errorf("questions[%d].question is empty", i)
		}
		if n := len(q.Options); n < 2 || n > 4 {
			return fmt.Errorf("questions[%d] needs 2 to 4 options (got %d)", i, n)
		}
		for j, o := range q.Options {
			if p := o.Preview; p != nil && p.Kind != "markdown" && p.Kind != "text" && p.Kind != "diff" {
				return fmt.Errorf("questions[%d].options[%d].preview.kind %q: expected markdown, text or diff", i, j, p.Kind)
			}
		}
	}
	return nil
}

// clientSide marks tools whose calls the client executes; they never need
// approval.
type clientSide interface{ clientSide() }

func isClientSide(t tool.Tool) bool {
	_, ok := t.(clientSide)
	return ok
}

// askUser wraps the typed ask_user tool to mark it client-side.
type askUser struct{ tool.Tool }

func (askUser) clientSide() {}

// askUserTool is offered when the prompting connection negotiated
// user_input: the call becomes client_tool_request{tool:"ask_user"} plus
// a user_input server request, and the client's text answer is the
// result.
func (r *Runtime) askUserTool(run *activeRun) tool.Tool {
	t := tool.New(AskUserTool,
		"Ask the user one to four multiple-choice questions and wait for the answers. Use it only when you cannot proceed without the user's decision.",
		false,
		func(ctx context.Context, in AskUserInput, call tool.Call) (tool.Result, error) {
			if err := in.validate(); err != nil {
				return tool.Errorf("ask_user: %v", err), nil
			}
			return r.clientCall(ctx, run, protocol.RequestUserInput, AskUserTool, call.ID, call.Input, "Agent requested structured user input")
		})
	return askUser{t}
}

// clientTool is a tool declared by the embedder and run by its client.
type clientTool struct {
	r    *Runtime
	run  *activeRun
	spec ClientTool
}

func (*clientTool) clientSide() {}

func (t *clientTool) Spec() llm.ToolSpec {
	schema := t.spec.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	return llm.ToolSpec{Name: t.spec.Name, Description: t.spec.Description, InputSchema: schema}
}

func (t *clientTool) ReadOnly() bool { return false }

func (t *clientTool) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	return t.r.clientCall(ctx, t.run, protocol.RequestClientTool, t.spec.Name, call.ID, call.Input,
		"Client tool "+t.spec.Name+" requires local execution")
}

// clientCall sends a call to the client (client_tool_request, then the
// server request) and turns its answer into the tool result.
func (r *Runtime) clientCall(ctx context.Context, run *activeRun, kind protocol.RequestType, name, callID string, input json.RawMessage, reason string) (tool.Result, error) {
	args := input
	if len(args) == 0 || !json.Valid(args) {
		args = json.RawMessage("{}")
	}
	o, err := r.raise(ctx, run.id,
		protocol.ServerRequest{RequestID: callID, RequestType: kind, CallID: callID, Tool: name, Args: args, Reason: reason},
		protocol.ClientToolRequest{CallID: callID, Tool: name, Args: args})
	if err != nil {
		return tool.Result{}, err
	}
	if o.by == protocol.ResolvedByPolicy {
		return tool.Result{Content: o.reason, IsError: true}, nil
	}
	text := contentText(o.content)
	if o.isError && text == "" {
		text = name + " failed on the client"
	}
	return tool.Result{Content: text, IsError: o.isError}, nil
}
