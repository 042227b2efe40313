package tool

import (
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/workspace"
)

// NewWorkspaceSet returns the tools of a plain agent session in root (no
// piece: `maestro run --no-piece`, headless sessions, a queued job with
// payload no_piece): Read, Write and Edit bounded by lim, Glob, Grep, and
// Bash in sb (left out when sb is nil).
func NewWorkspaceSet(root *workspace.Root, sb *sandbox.Sandbox, lim FileLimits) *Set {
	tools := []Tool{NewReadWith(root, lim), NewWriteWith(root, lim), NewEditWith(root, lim), NewGlob(root), NewGrep(root)}
	if sb != nil {
		tools = append(tools, NewBash(sb, root.Dir(), BashOptions{}))
	}
	return NewSet(tools...)
}
