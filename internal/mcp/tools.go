package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

// Prefix starts the name of every MCP tool: mcp__<server>__<tool>.
const Prefix = "mcp__"

// MaxResultBytes bounds what the model sees of one tool call's result.
const MaxResultBytes = 256 << 10

// Name is mcp__<server>__<tool>: the name the model sees of a server's
// tool when that is one the model APIs accept (else see ModelNames), and
// the name an allowed_tools entry gives a tool.
func Name(server, tool string) string { return Prefix + server + "__" + tool }

// offer is one of a server's tools as offered to the model: name is
// the name the model sees (ModelNames), t.Name the server's own.
type offer struct {
	t    *sdk.Tool
	name string
}

// selects reports whether the allowed_tools pattern selects o, a tool of
// the server slug: mcp__* and mcp__<slug>__* select every tool, an exact
// pattern the tool it names by the server's name of it or by the name
// the model sees.
func (o offer) selects(pattern, slug string) bool {
	if pattern == Prefix+"*" || pattern == Name(slug, "*") {
		return true
	}
	return pattern == Name(slug, o.t.Name) || pattern == o.name
}

// offers are the tools of a server's listing that can be offered, each
// with the name the model sees: a name that is empty, not UTF-8 or
// holds control characters is left out, and a name listed twice is
// offered once (the first), both logged. The tools offered under
// another name than mcp__<server>__<tool> are reported in one status
// line of the session, so that what the model calls can be told.
func (s *server) offers(list []*sdk.Tool) []offer {
	out := []offer{}
	seen := make(map[string]bool, len(list))
	var names []string
	for _, t := range list {
		if !usableName(t.Name) {
			s.m.o.Logger.Warn("MCP tool with an unusable name left out", "server", s.slug, "tool", t.Name)
			continue
		}
		if seen[t.Name] {
			// A server listing a name twice: the model can be offered
			// one tool of a name (a tool set refuses a second).
			s.m.o.Logger.Warn("MCP tool listed twice: the first is kept", "server", s.slug, "tool", t.Name)
			continue
		}
		seen[t.Name] = true
		out = append(out, offer{t: t})
		names = append(names, t.Name)
	}
	var renamed []string
	for i, n := range ModelNames(s.slug, names) {
		out[i].name = n
		if n != Name(s.slug, names[i]) {
			renamed = append(renamed, fmt.Sprintf("%q as %s", names[i], n))
		}
	}
	if len(renamed) > 0 {
		// Every one: the session's events are where a name the model
		// called can be told (maestro run keeps no other log).
		s.m.report(fmt.Sprintf("MCP server %s: tools offered under names model APIs accept (letters, digits, _ and -, at most %d): %s",
			s.slug, MaxNameLen, strings.Join(renamed, ", ")))
	}
	return out
}

// patternServers are the servers a pattern can select: nil for every
// server (mcp__*), else the one it names.
func patternServers(pattern string) (server string, all bool) {
	rest := strings.TrimPrefix(pattern, Prefix)
	if rest == "*" {
		return "", true
	}
	server, _, _ = strings.Cut(rest, "__")
	return server, false
}

// Tools returns the tools of the configured servers that pattern (an
// allowed_tools entry) selects, starting the servers it names. A pattern
// naming one server fails when that server is not configured or does not
// start; mcp__* skips a server that does not start (reported) and fails
// only when ctx ends.
func (m *Manager) Tools(ctx context.Context, pattern string) ([]tool.Tool, error) {
	slug, all := patternServers(pattern)
	slugs := []string{slug}
	if all {
		slugs = m.Slugs()
	} else if !m.Configured(slug) {
		return nil, &MissingError{Server: slug}
	}
	var out []tool.Tool
	given := map[string]string{} // the slug whose tool has the name
	for _, slug := range slugs {
		s := m.servers[slug]
		list, err := s.tools(ctx)
		if err != nil {
			if !all || ctx.Err() != nil {
				return nil, err
			}
			m.report(fmt.Sprintf("MCP server %s is left out: %v", slug, err))
			continue
		}
		for _, o := range list {
			if !o.selects(pattern, slug) {
				continue
			}
			if other, ok := given[o.name]; ok {
				// Two servers' tools of one name (slugs a and a_, tools _b
				// and b): the model can be offered one. Said once as a
				// status line: a log line alone left the tool missing
				// without a word.
				if _, said := m.collided.LoadOrStore(slug+"\x00"+o.t.Name, true); !said {
					m.report(fmt.Sprintf("MCP server %s: tool %q is left out: its name %s is that of a tool of MCP server %s (rename one of the two servers in config.yaml)",
						slug, o.t.Name, o.name, other))
				}
				continue
			}
			given[o.name] = slug
			out = append(out, newTool(s, o))
		}
	}
	return out, nil
}

// All returns every configured server's tools (a session without a
// piece); a server that does not start is reported and left out.
func (m *Manager) All(ctx context.Context) ([]tool.Tool, error) {
	if m == nil || len(m.servers) == 0 {
		return nil, nil
	}
	return m.Tools(ctx, Prefix+"*")
}

// remote is one server tool as a Maestro tool.
type remote struct {
	s        *server
	name     string
	spec     llm.ToolSpec
	readOnly bool
}

func newTool(s *server, o offer) *remote {
	t := o.t
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || t.InputSchema == nil {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	if o.name == Name(s.slug, t.Name) {
		desc = fmt.Sprintf("[MCP server %s] %s", s.slug, desc)
	} else {
		desc = fmt.Sprintf("[MCP server %s, tool %q] %s", s.slug, t.Name, desc)
	}
	ro := t.Annotations != nil && t.Annotations.ReadOnlyHint
	return &remote{s: s, name: t.Name, spec: llm.ToolSpec{Name: o.name, Description: desc, InputSchema: schema}, readOnly: ro}
}

func (t *remote) Spec() llm.ToolSpec { return t.spec }
func (t *remote) ReadOnly() bool     { return t.readOnly }

func (t *remote) Run(ctx context.Context, call tool.Call) (tool.Result, error) {
	args := json.RawMessage(call.Input)
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	var probe map[string]any
	if err := json.Unmarshal(args, &probe); err != nil {
		return tool.Failf(tool.CodeInvalidInput, "%s: expected a JSON object of arguments: %s", t.spec.Name, workspace.Excerpt(err.Error())), nil
	}
	res, err := t.s.call(ctx, t.name, args)
	switch {
	case err != nil && ctx.Err() != nil:
		return tool.Result{}, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return tool.Failf(tool.CodeTimeout, "%s: %v", t.spec.Name, err), nil
	case err != nil:
		return tool.Failf(tool.CodeFailed, "%s: %v", t.spec.Name, err), nil
	}
	text := resultText(res)
	if res.IsError {
		return tool.Failf(tool.CodeFailed, "%s", text), nil
	}
	return tool.Result{Content: text}, nil
}

// resultText is what the model sees of a call's result: its text, a
// line for each other content, else the structured content as JSON;
// at most MaxResultBytes.
func resultText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		switch c := c.(type) {
		case *sdk.TextContent:
			b.WriteString(c.Text)
		case *sdk.ImageContent:
			fmt.Fprintf(&b, "[image %s, %d bytes]", c.MIMEType, base64.StdEncoding.DecodedLen(len(c.Data)))
		case *sdk.AudioContent:
			fmt.Fprintf(&b, "[audio %s, %d bytes]", c.MIMEType, base64.StdEncoding.DecodedLen(len(c.Data)))
		case *sdk.ResourceLink:
			fmt.Fprintf(&b, "[resource %s %s]", c.Name, c.URI)
		case *sdk.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				fmt.Fprintf(&b, "[resource %s]\n%s", c.Resource.URI, c.Resource.Text)
			} else if c.Resource != nil {
				fmt.Fprintf(&b, "[resource %s, %s]", c.Resource.URI, c.Resource.MIMEType)
			}
		default:
			data, _ := json.Marshal(c)
			b.Write(data)
		}
	}
	if b.Len() == 0 && res.StructuredContent != nil {
		data, _ := json.Marshal(res.StructuredContent)
		b.Write(data)
	}
	s := b.String()
	if len(s) > MaxResultBytes {
		n := MaxResultBytes
		for n > 0 && !utf8.RuneStart(s[n]) {
			n-- // not inside a character
		}
		s = s[:n] + fmt.Sprintf("\n[… %d more bytes not shown]", len(s)-n)
	}
	return s
}
