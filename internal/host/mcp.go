package host

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/mcp"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/workspace"
)

// mcpManager is the session's MCP client over the configured servers
// (nil when none is configured): servers start at first use, their
// stderr goes to the session's directory, failures are broadcast as
// status lines, elicitations are raised as mcp_elicitation requests and
// the sampling of servers that allow it is served by model (docs/mcp.md).
// rt is set once the runtime is assembled.
func (h *Host) mcpManager(sess *session.Session, root *workspace.Root, model llm.Provider, rt *atomic.Pointer[runtime.Runtime]) *mcp.Manager {
	if len(h.cfg.MCPServers) == 0 {
		return nil
	}
	var seq atomic.Int64
	return mcp.NewManager(mcp.Options{
		Servers: h.cfg.MCPServers, Dir: root.Dir(), Getenv: h.getenv, LogDir: sess.Dir(), Logger: h.log,
		Model: model, // sampling, for the servers configured with allow_sampling
		Report: func(msg string) {
			if r := rt.Load(); r != nil {
				r.Broadcast(protocol.Status{Message: msg})
			}
		},
		Elicit: func(ctx context.Context, server string, p *sdk.ElicitParams) (*sdk.ElicitResult, error) {
			r := rt.Load()
			if r == nil || !r.ElicitationWanted() {
				return &sdk.ElicitResult{Action: "cancel"}, nil // no one to ask
			}
			return elicit(ctx, r, server, strconv.FormatInt(seq.Add(1), 10), p)
		},
	})
}

// elicit raises an MCP server's elicitation as the protocol's
// mcp_elicitation server request and returns the client's answer.
func elicit(ctx context.Context, r *runtime.Runtime, server, id string, p *sdk.ElicitParams) (*sdk.ElicitResult, error) {
	req := runtime.ElicitationRequest{ServerName: server, RequestID: id, Mode: p.Mode, Message: p.Message, URL: p.URL, ElicitationID: p.ElicitationID}
	if req.Mode == "" {
		req.Mode = "form"
		if p.URL != "" {
			req.Mode = "url"
		}
	}
	if p.RequestedSchema != nil {
		schema, err := json.Marshal(p.RequestedSchema)
		if err != nil {
			return nil, fmt.Errorf("elicitation of MCP server %s: encode its schema: %w", server, err)
		}
		req.RequestedSchema = schema
	}
	res, err := r.Elicit(ctx, req)
	if err != nil {
		return &sdk.ElicitResult{Action: "cancel"}, nil // no client answered: the server sees a cancel
	}
	out := &sdk.ElicitResult{Action: res.Action}
	if len(res.Content) > 0 {
		out.Content = map[string]any{}
		for k, v := range res.Content {
			var x any
			if err := json.Unmarshal(v, &x); err != nil {
				return nil, fmt.Errorf("elicitation of MCP server %s: answer %s: %w", server, k, err)
			}
			out.Content[k] = x
		}
	}
	return out, nil
}
