package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/oneline"
	"github.com/maestro-run/maestro/internal/piece"
)

// FallbackPiece is the piece chosen when the classifier's answer is
// unusable.
const FallbackPiece = "general"

// ClassifyOptions tune Classify.
type ClassifyOptions struct {
	// Override names the piece to use; the model is not asked (a
	// per-task override, local_tasks.piece_override).
	Override string
	// MCPAvailable reports whether an MCP server is connected; pieces
	// whose required_mcp lists a server it rejects are not offered. Nil
	// means no server is connected.
	MCPAvailable func(slug string) bool
	// MaxTokens caps the answer (default 400).
	MaxTokens int
}

// Classification is the classifier's choice.
type Classification struct {
	// Piece is the chosen piece.
	Piece *piece.Piece
	// Reason is the model's reason, or why the fallback was used.
	Reason string
	// Fallback is true when the model's answer was unusable (or the call
	// failed) and FallbackPiece was chosen.
	Fallback bool
	// Override is true when ClassifyOptions.Override chose the piece.
	Override bool
	// Offered lists the pieces the model could choose from.
	Offered []string
	// Answer is the model's raw answer.
	Answer string
	// Usage is the classifier call's token usage.
	Usage llm.Usage
}

// Event returns the run event reporting c.
func (c *Classification) Event() Classified {
	return Classified{Piece: c.Piece.Name, Reason: c.Reason, Fallback: c.Fallback, Override: c.Override, Offered: c.Offered}
}

// Classify picks the piece for task among lib's pieces: the model is given
// each available piece's name, description and trigger keywords and
// answers with JSON {"piece": "<name>", "reason": "<why>"}. An answer that
// is not such JSON, or names a piece that was not offered, falls back to
// FallbackPiece, as does a failed model call. Pieces whose required_mcp is
// not connected are not offered. It fails only when ctx ends, when the
// override names no available piece, or when the fallback is unavailable.
func Classify(ctx context.Context, p llm.Provider, lib *Library, task string, opts ClassifyOptions) (*Classification, error) {
	avail := opts.MCPAvailable
	if avail == nil {
		avail = func(string) bool { return false }
	}
	var offered []*piece.Piece
	var missing []string
	for _, e := range lib.Catalog().List() {
		ok := true
		for _, slug := range e.Piece.RequiredMCP {
			ok = ok && avail(slug)
		}
		if ok {
			offered = append(offered, e.Piece)
		} else {
			missing = append(missing, e.Piece.Name)
		}
	}
	names := make([]string, len(offered))
	for i, pc := range offered {
		names[i] = pc.Name
	}
	find := func(name string) *piece.Piece {
		if i := slices.Index(names, name); i >= 0 {
			return offered[i]
		}
		return nil
	}
	if opts.Override != "" {
		pc := find(opts.Override)
		if pc == nil {
			if slices.Contains(missing, opts.Override) {
				return nil, missingMCP(lib, opts.Override, avail)
			}
			return nil, fmt.Errorf("unknown piece %q; available: %s", opts.Override, strings.Join(names, ", "))
		}
		return &Classification{Piece: pc, Override: true, Reason: "given for this task", Offered: []string{pc.Name}}, nil
	}
	fallback := find(FallbackPiece)
	if fallback == nil {
		return nil, fmt.Errorf("the fallback piece %q is not available", FallbackPiece)
	}
	c := &Classification{Offered: names}
	if len(offered) == 1 {
		c.Piece, c.Reason = offered[0], "the only piece available"
		return c, nil
	}
	maxTokens := opts.MaxTokens
	if maxTokens <= 0 {
		maxTokens = 400
	}
	req := &llm.Request{
		System:    classifierSystem,
		Messages:  []llm.Message{llm.UserText(classifierPrompt(task, offered))},
		MaxTokens: maxTokens,
	}
	var resp *llm.Response
	var callErr error
	for ev, err := range p.Stream(ctx, req) {
		if err != nil {
			callErr = err
			break
		}
		if ev.Type == llm.EventDone {
			resp = ev.Response
		}
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("classify the task: %w", context.Cause(ctx))
	}
	if callErr == nil && resp == nil {
		callErr = errors.New("the stream ended without a response")
	}
	if callErr != nil {
		c.Piece, c.Fallback, c.Reason = fallback, true, "the classifier call failed: "+oneline.Cut(callErr.Error(), 200)
		return c, nil
	}
	c.Usage = resp.Usage
	c.Answer = resp.Message.TextContent()
	choice, reason, why := parseChoice(c.Answer)
	if why == "" {
		if pc := find(choice); pc != nil {
			c.Piece, c.Reason = pc, reason
			return c, nil
		}
		why = fmt.Sprintf("it named %q, which is not an offered piece", choice)
	}
	c.Piece, c.Fallback, c.Reason = fallback, true, "unusable classifier answer: "+why
	return c, nil
}

const classifierSystem = `You route a task to the workflow ("piece") that fits it best. Read the task and the pieces' descriptions: each says when to choose it, when not to, and its preconditions. Keywords are hints only.
Answer with a single JSON object and nothing else: {"piece": "<one of the piece names>", "reason": "<one short sentence>"}.
When no piece clearly fits, choose "general".`

// classifierPrompt lists the task and the offered pieces.
func classifierPrompt(task string, offered []*piece.Piece) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Task:\n%s\n\nPieces:\n", strings.TrimSpace(task))
	for _, pc := range offered {
		fmt.Fprintf(&b, "\n## %s\n%s\n", pc.Name, strings.TrimSpace(pc.Description))
		if pc.Triggers != nil && len(pc.Triggers.Keywords) > 0 {
			fmt.Fprintf(&b, "Keywords: %s\n", strings.Join(pc.Triggers.Keywords, ", "))
		}
	}
	b.WriteString("\nAnswer with the JSON object only.")
	return b.String()
}

// parseChoice reads {"piece": …, "reason": …} from a model's answer,
// tolerating a code fence or text around the object. why says what is
// wrong when the answer is unusable.
func parseChoice(answer string) (name, reason, why string) {
	s := strings.TrimSpace(answer)
	start, end := strings.Index(s, "{"), strings.LastIndex(s, "}")
	if start < 0 || end < start {
		return "", "", "no JSON object in " + quoteShort(s)
	}
	var v struct {
		Piece  string `json:"piece"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(s[start:end+1]), &v); err != nil {
		return "", "", fmt.Sprintf("invalid JSON (%v) in %s", err, quoteShort(s))
	}
	if v.Piece == "" {
		return "", "", "no piece named in " + quoteShort(s)
	}
	if v.Reason == "" {
		v.Reason = "no reason given"
	}
	return strings.TrimSpace(v.Piece), strings.TrimSpace(v.Reason), ""
}

func quoteShort(s string) string {
	return fmt.Sprintf("%q", oneline.Cut(s, 80))
}

// missingMCP is the error of an override naming a piece whose
// required_mcp lists a server that is not available: it names the server.
func missingMCP(lib *Library, name string, avail func(string) bool) error {
	for _, e := range lib.Catalog().List() {
		if e.Piece.Name != name {
			continue
		}
		for _, slug := range e.Piece.RequiredMCP {
			if !avail(slug) {
				return fmt.Errorf("piece %q requires the MCP server %q, which is not configured (mcp_servers in config.yaml; see docs/mcp.md)", name, slug)
			}
		}
	}
	return fmt.Errorf("piece %q needs an MCP server that is not connected", name)
}
