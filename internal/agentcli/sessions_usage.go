package agentcli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/maestro-run/maestro/internal/protocol"
)

// SessionTotals is what a CLI recorded of a whole stored session.
type SessionTotals struct {
	// Usage is the session's running total in Maestro's convention (input
	// excludes cache reads and writes), as the CLI last recorded it.
	Usage protocol.Usage
	// Model is the last model the session used.
	Model string
}

// SessionTotaler is a SessionStore that can read a session's running
// usage total (Codex: its rollout's last token_count event).
type SessionTotaler interface {
	Totals(ctx context.Context, id string) (SessionTotals, error)
}

// Totals reads the last token_count total and turn_context model of the
// rollout of id.
func (s *codexStore) Totals(ctx context.Context, id string) (SessionTotals, error) {
	path, err := s.find(ctx, id)
	if err != nil {
		return SessionTotals{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return SessionTotals{}, fmt.Errorf("read codex rollout: %w", err)
	}
	defer f.Close()
	var t SessionTotals
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), `"token_count"`) && !strings.Contains(string(line), `"turn_context"`) {
			continue
		}
		var r struct {
			Type    string `json:"type"`
			Payload struct {
				Type  string `json:"type"`
				Model string `json:"model"`
				Info  *struct {
					Total codexUsage `json:"total_token_usage"`
				} `json:"info"`
			} `json:"payload"`
		}
		if json.Unmarshal(line, &r) != nil {
			continue
		}
		switch {
		case r.Type == "turn_context" && r.Payload.Model != "":
			t.Model = r.Payload.Model
		case r.Payload.Type == "token_count" && r.Payload.Info != nil:
			t.Usage = r.Payload.Info.Total.protocol()
		}
	}
	if err := sc.Err(); err != nil {
		return SessionTotals{}, fmt.Errorf("read codex rollout %s: %w", path, err)
	}
	t.Usage.ModelID = t.Model
	return t, nil
}

// parserOptions are the options of the parser of one run of inv: the
// definition's, plus what the CLI's session storage tells of the session —
// the running total a resumed session starts from (the baseline a CLI
// reporting cumulative usage is diffed against) and, for CLIs whose stream
// names no model, the model.
func (x *Executor) parserOptions(ctx context.Context, inv Invocation, env []string) ParserOptions {
	def := x.Def
	opt := DefinitionParserOptions(def)
	opt.Model = inv.Model
	if def.SessionStorage == "" || def.SessionStorage == "none" || !def.Capabilities.SessionStorage {
		return opt
	}
	store, err := NewSessionStore(def.SessionStorage, func(k string) string { return envValue(env, k) })
	if err != nil {
		return opt
	}
	if tot, ok := store.(SessionTotaler); ok && inv.SessionID != "" {
		if t, err := tot.Totals(ctx, inv.SessionID); err == nil {
			opt.BaselineUsage = t.Usage
		}
	}
	opt.LookupModel = func(id string) string {
		if tot, ok := store.(SessionTotaler); ok {
			if t, err := tot.Totals(ctx, id); err == nil {
				return t.Model
			}
		}
		if tr, err := store.Read(ctx, id); err == nil {
			return tr.Session.Model
		}
		return ""
	}
	if c, ok := store.(*codexStore); ok {
		opt.LookupShellCalls = func(id string) ShellCalls { return c.lastTurnShellCalls(ctx, id) }
	}
	return opt
}

// environ is the environment the CLI of inv runs with.
func (x *Executor) environ(inv Invocation) []string {
	if x.Env == nil {
		return x.Def.Environ(os.Environ(), inv)
	}
	return x.Def.Environ(x.Env, inv)
}
