package agentcli

import (
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/protocol"
)

// A usage error whose help text mentions an HTTP status is classified from
// the CLI's own message, not from the help (Qwen's "--fallback-model …
// (429/503/529)" made it a retried rate limit).
func TestClassifyExitIgnoresUsage(t *testing.T) {
	t.Parallel()
	qwenUsage := "Usage: qwen [options] [command]\n\nQwen Code - Launch an interactive CLI\n\nCommands:\n  qwen [query..]  Launch Qwen Code CLI  [default]\n\n" +
		"Positionals:\n  query  Positional prompt.\n\nOptions:\n  -d, --debug  Run in debug mode?  [boolean]\n" +
		"      --fallback-model  Fallback model(s) for capacity errors (429/503/529), repeatable  [array]\n" +
		"  -p, --prompt  Prompt.  [string]\n\nNot enough arguments following: p\n"
	tests := []struct {
		name, stderr string
		want         Category
		message      string
	}{
		{"usage error", qwenUsage, AgentCrashed, "Agent exited with code 1: Not enough arguments following: p"},
		{"help in stdout tail only", "Error: Not enough arguments following: p\n", AgentCrashed, "Not enough arguments following: p"},
		{"a real rate limit after help", qwenUsage + "API Error: 429 Too Many Requests\n", RateLimited, "Not enough arguments following: p"},
		{"an Error: header is no help section", "Error:\n  rate limit exceeded\n", RateLimited, "Error:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout := ""
			if tt.name == "help in stdout tail only" {
				stdout = qwenUsage
			}
			e := NewClassifier(mustDef(t, "qwen-code")).ClassifyExit(1, tt.stderr, stdout)
			if e.Category != tt.want || !strings.Contains(e.Message, tt.message) {
				t.Errorf("ClassifyExit = %s %q, want %s containing %q", e.Category, e.Message, tt.want, tt.message)
			}
		})
	}
}

// A failed tool call whose output matches the definition's denied
// patterns becomes a denial: its tool_end carries DeniedCode and a status
// line follows; other failures and successes pass unchanged, except a
// refusal reported as a success (OpenCode's invalid tool), which fails.
func TestDenials(t *testing.T) {
	t.Parallel()
	res := &RunResult{}
	d := &denials{def: mustDef(t, "opencode"), level: PermissionReadOnly, res: res, names: map[string]string{}, outputs: map[string]string{}}
	ev := d.watch(Event{Messages: []protocol.Message{
		protocol.ToolCall{CallID: "a", Tool: "bash"}, protocol.ToolStart{CallID: "a"},
		protocol.ToolOutput{CallID: "a", Content: "Model tried to call unavailable tool 'bash'. Available tools: read."},
		protocol.ToolEnd{CallID: "a", Success: true},
		protocol.ToolCall{CallID: "b", Tool: "read"}, protocol.ToolOutput{CallID: "b", Content: "no such file"},
		protocol.ToolEnd{CallID: "b", Success: false, ErrorCode: "failed"},
	}})
	var ends []protocol.ToolEnd
	var status []string
	for _, m := range ev.Messages {
		switch m := m.(type) {
		case protocol.ToolEnd:
			ends = append(ends, m)
		case protocol.Status:
			status = append(status, m.Message)
		}
	}
	if len(ends) != 2 || ends[0].Success || ends[0].ErrorCode != DeniedCode || ends[1].ErrorCode != "failed" {
		t.Errorf("tool ends = %+v", ends)
	}
	if len(status) != 1 || !strings.Contains(status[0], "OpenCode refused the bash call under --permission read-only") {
		t.Errorf("status = %q", status)
	}
	if len(res.Denials) != 1 || res.Denials[0].Tool != "bash" || res.Denials[0].Permission != PermissionReadOnly {
		t.Errorf("denials = %+v", res.Denials)
	}
}
