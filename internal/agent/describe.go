package agent

import (
	"encoding/json"
	"fmt"

	"github.com/maestro-run/maestro/internal/oneline"
)

// Display is how a tool call is presented to a client: an approval
// request's display_name, summary_label and action_description, and the
// label response_end's tools_summary.summary_labels lists (wire contract
// §6, docs/spec/headless-wire-contract.md).
type Display struct {
	Name    string
	Summary string
	Action  string
}

// Describe returns the presentation of a call of the tool name with the
// JSON arguments args. Only the built-in mutating tools (Write, Edit, Bash)
// get a summary and an action; any other tool gets its name alone.
func Describe(name string, args []byte) Display {
	var in struct {
		Path    string `json:"path"`
		Content string `json:"content"`
		Command string `json:"command"`
	}
	_ = json.Unmarshal(args, &in) // a call with bad arguments is shown by name only
	d := Display{Name: name}
	switch name {
	case "Write":
		if in.Path != "" {
			d.Summary = "Write " + in.Path
			d.Action = fmt.Sprintf("Write %d bytes to %s", len(in.Content), in.Path)
		}
	case "Edit":
		if in.Path != "" {
			d.Summary = "Edit " + in.Path
			d.Action = "Replace text in " + in.Path
		}
	case "Bash":
		if in.Command != "" {
			c := oneline.Cut(in.Command, 60)
			d.Summary = "Run " + c
			d.Action = "Run the shell command `" + c + "` in the workspace"
		}
	}
	return d
}
