package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/tool"
)

// MCPServers is what a run needs of the session's MCP client
// (internal/mcp.Manager): which servers are configured, starting the
// servers a piece requires, and the tools an allowed_tools pattern
// (mcp__*, mcp__<server>__*, mcp__<server>__<tool>) selects.
type MCPServers interface {
	Configured(slug string) bool
	Require(ctx context.Context, slugs []string) error
	Tools(ctx context.Context, pattern string) ([]tool.Tool, error)
}

// requireMCP starts the servers p's required_mcp lists: a run whose
// server is missing or does not start fails before its first movement,
// naming the server.
func (e *Engine) requireMCP(ctx context.Context, p *piece.Piece) error {
	if len(p.RequiredMCP) == 0 {
		return nil
	}
	if e.cfg.MCP == nil {
		return fmt.Errorf("piece %s requires the MCP server %q, which is not configured (mcp_servers in config.yaml; see docs/mcp.md)", p.Name, p.RequiredMCP[0])
	}
	if err := e.cfg.MCP.Require(ctx, p.RequiredMCP); err != nil {
		return fmt.Errorf("piece %s: %w", p.Name, err)
	}
	return nil
}

// addMCPTools adds to set the MCP tools m's allowed_tools select, each
// guarded; an entry that selects none is returned as omitted with the
// reason.
func (r *run) addMCPTools(ctx context.Context, m *piece.Movement, set *tool.Set, ctl *movementCtl) []OmittedTool {
	if r.cfg.MCP == nil {
		return nil // movementTools reported them
	}
	var omitted []OmittedTool
	for _, name := range m.AllowedTools {
		if !strings.HasPrefix(name, "mcp__") {
			continue
		}
		tools, err := r.cfg.MCP.Tools(ctx, name)
		switch {
		case err != nil:
			omitted = append(omitted, OmittedTool{Name: name, Reason: err.Error()})
			continue
		case len(tools) == 0:
			omitted = append(omitted, OmittedTool{Name: name, Reason: "no configured MCP server offers such a tool"})
			continue
		}
		for _, t := range tools {
			if _, dup := set.Get(t.Spec().Name); !dup {
				set.Add(guarded{Tool: t, ctl: ctl})
			}
		}
	}
	return omitted
}
