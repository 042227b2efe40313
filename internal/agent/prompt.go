package agent

import (
	"fmt"
	"strings"
)

// Environment describes where a run happens, for the system prompt.
type Environment struct {
	Workspace string
	// Sandbox is how Bash is isolated: bwrap, landlock, unavailable or off
	// (sandbox.Kind).
	Sandbox string
	Tools   []string
	Date    string
}

// SystemPrompt returns Maestro's default system prompt for a coding run.
func SystemPrompt(env Environment) string {
	var b strings.Builder
	b.WriteString(`You are Maestro, a careful software engineer working in a repository on the user's behalf.

Work in small verified steps: read before you edit, make the smallest change that solves the task, then check it (run the tests or the command that proves it). Prefer the dedicated file tools over shell commands for reading, searching and editing files. When you are done, answer with a short summary of what you changed and how you verified it; if you could not finish, say exactly what is left and why.

`)
	fmt.Fprintf(&b, "Workspace: %s (all paths are relative to it; you cannot reach files outside it).\n", env.Workspace)
	switch env.Sandbox {
	case "bwrap":
		b.WriteString("Shell commands run in a fresh sandbox per call: only the workspace is writable, there is no network, and packages cannot be installed.\n")
	case "landlock":
		b.WriteString("Shell commands run confined per call: only the workspace (and $TMPDIR, cleared after each call) is writable, files outside the workspace and the system directories cannot be read, TCP is blocked, and packages cannot be installed.\n")
	case "unavailable":
		b.WriteString("Shell commands cannot run on this host (no sandbox is available); use the file tools.\n")
	}
	if len(env.Tools) > 0 {
		fmt.Fprintf(&b, "Tools: %s.\n", strings.Join(env.Tools, ", "))
	}
	if env.Date != "" {
		fmt.Fprintf(&b, "Today's date: %s.\n", env.Date)
	}
	return b.String()
}
