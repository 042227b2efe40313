// Package tool defines Maestro's tools: the Tool interface the agent loop
// calls, typed construction with input schemas generated from Go structs,
// and the built-in file and shell tools. Every path a tool touches goes
// through internal/workspace; every command through internal/sandbox.
package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/workspace"
)

// Result is what the model sees of a tool call. A failure the model should
// react to is a Result with IsError set, not a Go error.
type Result struct {
	Content string
	IsError bool
	// StopTurn asks the agent loop to end the turn after this call's batch
	// (used by workflow-control tools such as transition and complete).
	StopTurn bool
	// Code classifies a failure for clients (tool_end.error_code, see
	// docs/events.md); empty on a failure means CodeFailed.
	Code string
}

// Error codes of failed tool calls, carried in tool_end.error_code. The
// table in docs/events.md lists them; keep both in step.
const (
	CodeDenied             = "denied"              // the user or the approval policy refused the call
	CodeTimeout            = "timeout"             // the call ran past its time limit
	CodeCancelled          = "cancelled"           // the run was interrupted or cancelled mid-call
	CodeWorkspaceViolation = "workspace_violation" // a path is outside the workspace
	CodeSandboxViolation   = "sandbox_violation"   // the sandbox policy refused the command
	CodeSandboxUnavailable = "sandbox_unavailable" // the sandbox cannot run commands on this host
	CodeNotFound           = "not_found"           // a named file or text does not exist
	CodeTooLarge           = "too_large"           // a file or content is over a size limit
	CodeInvalidInput       = "invalid_input"       // the arguments are missing, malformed or contradictory
	CodeUnknownTool        = "unknown_tool"        // the model called a tool this run does not have
	CodeFirewallBlock      = "firewall_block"      // the network guard refused a web tool's destination
	CodePermission         = "permission_denied"   // the file system refused access
	CodeFailed             = "failed"              // any other failure (e.g. a non-zero exit status)
)

// Errorf returns an error Result with a formatted message and no specific
// code (CodeFailed).
func Errorf(format string, args ...any) Result {
	return Result{Content: fmt.Sprintf(format, args...), IsError: true}
}

// Failf returns an error Result with a code and a formatted message.
func Failf(code, format string, args ...any) Result {
	return Result{Content: fmt.Sprintf(format, args...), IsError: true, Code: code}
}

// ErrorCode returns the code of a failed Result ("" when it succeeded).
func (r Result) ErrorCode() string {
	switch {
	case !r.IsError:
		return ""
	case r.Code == "":
		return CodeFailed
	}
	return r.Code
}

// Call is one invocation of a tool.
type Call struct {
	ID    string
	Input json.RawMessage
	// Output receives partial output as it is produced (may be nil).
	Output func(chunk string)
}

// Emit sends a chunk of partial output, if anyone listens.
func (c Call) Emit(chunk string) {
	if c.Output != nil && chunk != "" {
		c.Output(chunk)
	}
}

// Tool is something the model can call.
type Tool interface {
	// Spec is what the model is told: name, short description, input schema.
	Spec() llm.ToolSpec
	// ReadOnly reports whether the tool never changes anything; read-only
	// calls of one batch run concurrently, the others in order.
	ReadOnly() bool
	// Run executes a call. A non-nil error is an infrastructure failure
	// (for example cancellation) that aborts the turn; anything the model
	// should see is a Result.
	Run(ctx context.Context, call Call) (Result, error)
}

// Func is the body of a typed tool.
type Func[In any] func(ctx context.Context, in In, call Call) (Result, error)

// New builds a tool whose input schema is inferred from In (json tags give
// names; `jsonschema:"..."` tags give descriptions). Input that does not
// decode into In, or that has unknown fields, is answered with an error
// Result naming the problem.
func New[In any](name, description string, readOnly bool, fn Func[In]) Tool {
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: input schema: %v", name, err))
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		panic(fmt.Sprintf("tool %s: encode schema: %v", name, err))
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: resolve schema: %v", name, err))
	}
	return &typed[In]{
		spec:     llm.ToolSpec{Name: name, Description: description, InputSchema: raw},
		readOnly: readOnly,
		resolved: resolved,
		fn:       fn,
	}
}

type typed[In any] struct {
	spec     llm.ToolSpec
	readOnly bool
	resolved *jsonschema.Resolved
	fn       Func[In]
}

func (t *typed[In]) Spec() llm.ToolSpec { return t.spec }
func (t *typed[In]) ReadOnly() bool     { return t.readOnly }

func (t *typed[In]) Run(ctx context.Context, call Call) (Result, error) {
	input := call.Input
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage("{}")
	}
	var generic any
	if err := json.Unmarshal(input, &generic); err != nil {
		return Failf(CodeInvalidInput, "%s: input is not valid JSON: %s", t.spec.Name, workspace.Excerpt(err.Error())), nil
	}
	if err := t.resolved.Validate(generic); err != nil {
		return Failf(CodeInvalidInput, "%s: invalid input: %s", t.spec.Name, workspace.Excerpt(err.Error())), nil
	}
	var in In
	dec := json.NewDecoder(strings.NewReader(string(input)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return Failf(CodeInvalidInput, "%s: invalid input: %s", t.spec.Name, workspace.Excerpt(err.Error())), nil
	}
	return t.fn(ctx, in, call)
}

// Set is an ordered collection of tools with unique names.
type Set struct {
	tools []Tool
	index map[string]Tool
}

// NewSet returns a set of the given tools; a duplicate name panics (it is
// a programming error).
func NewSet(tools ...Tool) *Set {
	s := &Set{index: make(map[string]Tool, len(tools))}
	for _, t := range tools {
		s.Add(t)
	}
	return s
}

// Add adds a tool; a duplicate name panics.
func (s *Set) Add(t Tool) {
	name := t.Spec().Name
	if _, dup := s.index[name]; dup {
		panic("tool: duplicate tool name " + name)
	}
	if s.index == nil {
		s.index = map[string]Tool{}
	}
	s.tools = append(s.tools, t)
	s.index[name] = t
}

// Get returns the named tool.
func (s *Set) Get(name string) (Tool, bool) {
	if s == nil {
		return nil, false
	}
	t, ok := s.index[name]
	return t, ok
}

// Names returns the tool names in order.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	names := make([]string, len(s.tools))
	for i, t := range s.tools {
		names[i] = t.Spec().Name
	}
	return names
}

// Specs returns the specs to offer the model, in order.
func (s *Set) Specs() []llm.ToolSpec {
	if s == nil {
		return nil
	}
	specs := make([]llm.ToolSpec, len(s.tools))
	for i, t := range s.tools {
		specs[i] = t.Spec()
	}
	return specs
}

// Filter returns a new set holding the tools for which keep is true.
func (s *Set) Filter(keep func(Tool) bool) *Set {
	out := NewSet()
	if s == nil {
		return out
	}
	for _, t := range s.tools {
		if keep(t) {
			out.Add(t)
		}
	}
	return out
}

// Only returns a new set with the named tools that exist in s, in s's order.
func (s *Set) Only(names ...string) *Set {
	return s.Filter(func(t Tool) bool { return slices.Contains(names, t.Spec().Name) })
}
