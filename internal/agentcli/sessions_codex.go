package agentcli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// codexStore reads Codex rollouts:
// $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl.
type codexStore struct{ root string }

func (s *codexStore) Kind() string { return "codex-rollouts" }

func (s *codexStore) Locations(string) []string { return []string{filepath.Join(s.root, "sessions")} }

// rollouts walks the sessions tree, calling fn for every rollout file.
func (s *codexStore) rollouts(ctx context.Context, fn func(path string) error) error {
	err := filepath.WalkDir(filepath.Join(s.root, "sessions"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctxErr(ctx); err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() || !strings.HasPrefix(name, "rollout-") || !strings.HasSuffix(name, ".jsonl") {
			return nil
		}
		return fn(path)
	})
	if err != nil {
		return fmt.Errorf("codex-rollouts: %w", err)
	}
	return nil
}

// codexMeta is the first record of a rollout (wrapped in payload, or bare
// in legacy files).
type codexMeta struct {
	ID        string `json:"id"`
	Cwd       string `json:"cwd"`
	Timestamp string `json:"timestamp"`
}

// rolloutMeta reads the session_meta record at the head of a rollout.
func rolloutMeta(path string) (codexMeta, bool) {
	f, err := os.Open(path)
	if err != nil {
		return codexMeta{}, false
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	line, _ := r.ReadBytes('\n')
	var rec struct {
		Type    string    `json:"type"`
		Payload codexMeta `json:"payload"`
		codexMeta
	}
	if json.Unmarshal(line, &rec) != nil {
		return codexMeta{}, false
	}
	if rec.Type == "session_meta" {
		return rec.Payload, true
	}
	return rec.codexMeta, rec.codexMeta.ID != ""
}

func (s *codexStore) List(ctx context.Context, project string) ([]SessionInfo, error) {
	cands := projectCandidates(project)
	var out []SessionInfo
	err := s.rollouts(ctx, func(path string) error {
		meta, ok := rolloutMeta(path)
		if !ok {
			return nil
		}
		match := false
		for _, c := range cands {
			match = match || within(meta.Cwd, c)
		}
		if !match {
			return nil
		}
		tr, err := parseCodexRollout(path)
		if err != nil {
			return err
		}
		if tr.Session.MessageCount > 0 {
			out = append(out, tr.Session)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortSessions(out)
	return out, nil
}

func (s *codexStore) Read(ctx context.Context, id string) (*Transcript, error) {
	found, err := s.find(ctx, id)
	if err != nil {
		return nil, err
	}
	return parseCodexRollout(found)
}

// find returns the rollout file of id.
func (s *codexStore) find(ctx context.Context, id string) (string, error) {
	var found string
	errFound := errors.New("found")
	err := s.rollouts(ctx, func(path string) error {
		if !strings.HasSuffix(filepath.Base(path), "-"+id+".jsonl") {
			return nil
		}
		found = path
		return errFound
	})
	if err != nil && !errors.Is(err, errFound) {
		return "", err
	}
	if found == "" || id == "" {
		return "", notFound(s.Kind(), id, filepath.Join(s.root, "sessions", "YYYY", "MM", "DD", "rollout-*-<id>.jsonl"))
	}
	return found, nil
}

type rolloutRecord struct {
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
}

type rolloutItem struct {
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Summary   json.RawMessage `json:"summary"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	CallID    string          `json:"call_id"`
	Output    json.RawMessage `json:"output"`
	Action    json.RawMessage `json:"action"`
	Status    string          `json:"status"`
	// session_meta and turn_context fields
	ID    string `json:"id"`
	Cwd   string `json:"cwd"`
	Model string `json:"model"`
	// item_completed events (event_msg): the item, whose id is a
	// command's call id (parse_codex.go, lastTurnShellCalls)
	Item *struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"item"`
}

// codexKnown are rollout record types that carry no conversation.
var codexKnown = map[string]bool{
	"event_msg": true, "world_state": true, "token_usage_record": true, "compacted": true,
}

// codexContextPrefixes mark user messages Codex injects (environment,
// instructions) rather than prompts the user typed.
var codexContextPrefixes = []string{"<environment_context>", "<user_instructions>", "<cwd>", "# AGENTS.md", "# Context", "<turn_aborted>", "<user_shell_command>"}

// parseCodexRollout reads one rollout file.
func parseCodexRollout(path string) (*Transcript, error) {
	tr := &Transcript{Session: SessionInfo{Path: path}}
	model := ""
	toolNames := map[string]string{}
	// lastAssistant is the index of the assistant message tool calls and
	// reasoning of the current turn attach to (-1: none yet).
	lastAssistant := -1
	assistant := func(r rolloutRecord) *SessionMessage {
		if lastAssistant < 0 {
			tr.Messages = append(tr.Messages, SessionMessage{Role: RoleAssistant, Time: parseTime(r.Timestamp), Model: model})
			lastAssistant = len(tr.Messages) - 1
		}
		return &tr.Messages[lastAssistant]
	}
	err := jsonRecords(path, &tr.Stats, func(r rolloutRecord, line []byte) error {
		var it rolloutItem
		if len(r.Payload) > 0 {
			if json.Unmarshal(r.Payload, &it) != nil {
				tr.Stats.Malformed++
				return nil
			}
		} else {
			// Legacy rollouts: a bare {id, timestamp, git} head, then bare items.
			_ = json.Unmarshal(line, &it)
			if it.Type == "" {
				if tr.Session.ID == "" && it.ID != "" {
					tr.Session.ID = it.ID
				} else {
					tr.Stats.Unknown++
				}
				return nil
			}
			r.Type = "response_item"
		}
		switch r.Type {
		case "session_meta":
			tr.Session.ID, tr.Session.Dir = it.ID, it.Cwd
			return nil
		case "turn_context":
			if it.Model != "" {
				model = it.Model
			}
			return nil
		case "response_item":
		default:
			if !codexKnown[r.Type] {
				tr.Stats.Unknown++
			}
			return nil
		}
		at := parseTime(r.Timestamp)
		switch it.Type {
		case "message":
			var texts []string
			for _, c := range it.Content {
				if c.Text != "" {
					texts = append(texts, c.Text)
				}
			}
			text := strings.Join(texts, "\n")
			switch it.Role {
			case "assistant":
				if lastAssistant >= 0 && tr.Messages[lastAssistant].Text == "" && len(tr.Messages[lastAssistant].ToolCalls) == 0 {
					tr.Messages[lastAssistant].Text = text
				} else {
					tr.Messages = append(tr.Messages, SessionMessage{Role: RoleAssistant, Time: at, Text: text, Model: model})
					lastAssistant = len(tr.Messages) - 1
				}
			case "user":
				role := RoleUser
				for _, p := range codexContextPrefixes {
					if strings.HasPrefix(strings.TrimSpace(text), p) {
						role = RoleSystem
					}
				}
				tr.Messages = append(tr.Messages, SessionMessage{Role: role, Time: at, Text: text})
				if role == RoleUser {
					lastAssistant = -1
				}
			default: // developer, system
				tr.Messages = append(tr.Messages, SessionMessage{Role: RoleSystem, Time: at, Text: text})
			}
		case "reasoning":
			if t := codexReasoning(it.Summary); t != "" {
				m := assistant(r)
				m.Thinking = joinNonEmpty(m.Thinking, t)
			}
		case "function_call", "custom_tool_call", "local_shell_call", "web_search_call", "tool_search_call":
			args := it.Arguments
			if args == "" {
				args = it.Input
			}
			var input json.RawMessage
			switch {
			case args != "" && json.Valid([]byte(args)):
				input = json.RawMessage(args)
			case args != "":
				input, _ = json.Marshal(args)
			case len(it.Action) > 0:
				input = it.Action
			}
			name := it.Name
			if name == "" {
				name = strings.TrimSuffix(it.Type, "_call")
			}
			toolNames[it.CallID] = name
			m := assistant(r)
			m.ToolCalls = append(m.ToolCalls, SessionToolCall{ID: it.CallID, Name: name, Input: input})
		case "function_call_output", "custom_tool_call_output", "local_shell_call_output", "tool_search_output":
			out, isErr := codexOutput(it.Output)
			tr.Messages = append(tr.Messages, SessionMessage{Role: RoleTool, Time: at,
				ToolResults: []SessionToolResult{{ID: it.CallID, Name: toolNames[it.CallID], Output: out, IsError: isErr}}})
			lastAssistant = -1
		default:
			tr.Stats.Unknown++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if tr.Session.ID == "" {
		// rollout-YYYY-MM-DDThh-mm-ss-<uuid>.jsonl
		base := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		if len(base) > len("rollout-2006-01-02T15-04-05-") {
			tr.Session.ID = base[len("rollout-2006-01-02T15-04-05-"):]
		}
	}
	finishTranscript(tr)
	return tr, nil
}

// codexReasoning joins a reasoning summary: a list of strings or of
// {type:"summary_text", text}.
func codexReasoning(summary json.RawMessage) string {
	var strs []string
	if json.Unmarshal(summary, &strs) == nil {
		return strings.Join(strs, "\n")
	}
	return rawText(summary)
}

// codexOutput reads a tool output: a string, or {content|output, success}.
func codexOutput(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, false
	}
	var o struct {
		Content *string `json:"content"`
		Output  *string `json:"output"`
		Success *bool   `json:"success"`
	}
	if json.Unmarshal(raw, &o) == nil {
		failed := o.Success != nil && !*o.Success
		if o.Content != nil {
			return *o.Content, failed
		}
		if o.Output != nil {
			return *o.Output, failed
		}
	}
	return rawText(raw), false
}
