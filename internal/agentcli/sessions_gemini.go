package agentcli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// geminiStore reads Gemini CLI chats:
// ~/.gemini/tmp/<project id>/chats/session-<time>-<id prefix>.json[l], the
// project id being a slug registered in ~/.gemini/projects.json or (legacy)
// the SHA-256 of the project root.
type geminiStore struct{ root string }

func (s *geminiStore) Kind() string { return "gemini-chats" }

// projectIDs lists the tmp/ directory names that may hold project's chats.
func (s *geminiStore) projectIDs(project string) []string {
	cands := projectCandidates(project)
	var ids []string
	add := func(id string) {
		if id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	var reg struct {
		Projects map[string]string `json:"projects"`
	}
	if data, err := os.ReadFile(filepath.Join(s.root, "projects.json")); err == nil && json.Unmarshal(data, &reg) == nil {
		for _, c := range cands {
			add(reg.Projects[c])
		}
	}
	for _, c := range cands {
		sum := sha256.Sum256([]byte(c))
		add(hex.EncodeToString(sum[:]))
	}
	// Each project directory records its root in .project_root.
	roots, _ := filepath.Glob(filepath.Join(s.root, "tmp", "*", ".project_root"))
	for _, r := range roots {
		if data, err := os.ReadFile(r); err == nil && slices.Contains(cands, strings.TrimSpace(string(data))) {
			add(filepath.Base(filepath.Dir(r)))
		}
	}
	return ids
}

func (s *geminiStore) Locations(project string) []string {
	var out []string
	for _, id := range s.projectIDs(project) {
		out = append(out, filepath.Join(s.root, "tmp", id, "chats"))
	}
	return out
}

func (s *geminiStore) List(ctx context.Context, project string) ([]SessionInfo, error) {
	var out []SessionInfo
	seen := map[string]bool{}
	for _, dir := range s.Locations(project) {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("gemini-chats: %w", err)
		}
		for _, e := range entries {
			if err := ctxErr(ctx); err != nil {
				return nil, err
			}
			if e.IsDir() || !isGeminiChat(e.Name()) {
				continue
			}
			tr, kind, err := parseGeminiChat(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("gemini-chats: %w", err)
			}
			if kind == "subagent" || tr.Session.MessageCount == 0 || seen[tr.Session.ID] {
				continue
			}
			seen[tr.Session.ID] = true
			out = append(out, tr.Session)
		}
	}
	sortSessions(out)
	return out, nil
}

func isGeminiChat(name string) bool {
	return strings.HasPrefix(name, "session-") && (strings.HasSuffix(name, ".json") || strings.HasSuffix(name, ".jsonl"))
}

func (s *geminiStore) Read(ctx context.Context, id string) (*Transcript, error) {
	where := filepath.Join(s.root, "tmp", "*", "chats", "session-*-<id prefix>.json[l]")
	if len(id) < 8 || strings.ContainsAny(id, `/\*?[`) {
		return nil, notFound(s.Kind(), id, where)
	}
	var matches []string
	for _, ext := range []string{".jsonl", ".json"} {
		m, _ := filepath.Glob(filepath.Join(s.root, "tmp", "*", "chats", "session-*-"+id[:8]+ext))
		matches = append(matches, m...)
	}
	for _, m := range matches {
		if err := ctxErr(ctx); err != nil {
			return nil, err
		}
		tr, _, err := parseGeminiChat(m)
		if err != nil {
			return nil, fmt.Errorf("gemini-chats: %w", err)
		}
		if tr.Session.ID == id {
			return tr, nil
		}
	}
	return nil, notFound(s.Kind(), id, where)
}

// storedGeminiConversation is the metadata of a chat (ConversationRecord).
type storedGeminiConversation struct {
	SessionID   string                `json:"sessionId"`
	ProjectHash string                `json:"projectHash"`
	StartTime   string                `json:"startTime"`
	LastUpdated string                `json:"lastUpdated"`
	Summary     string                `json:"summary"`
	Kind        string                `json:"kind"`
	Messages    []storedGeminiMessage `json:"messages"`
}

type storedGeminiMessage struct {
	ID        string          `json:"id"`
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Content   json.RawMessage `json:"content"`
	Thoughts  []struct {
		Subject     string `json:"subject"`
		Description string `json:"description"`
	} `json:"thoughts"`
	ToolCalls []struct {
		ID            string          `json:"id"`
		Name          string          `json:"name"`
		Args          json.RawMessage `json:"args"`
		Result        []storedPart    `json:"result"`
		ResultDisplay json.RawMessage `json:"resultDisplay"`
		Status        string          `json:"status"`
		Timestamp     string          `json:"timestamp"`
	} `json:"toolCalls"`
	Model string `json:"model"`
}

// parseGeminiChat reads a chat file: one JSON ConversationRecord (.json)
// or, in newer builds, JSONL records (.jsonl): a metadata head, messages
// (a repeated id replaces the earlier message), {"$set": {…}} metadata
// updates and {"$rewindTo": id} truncations. It returns the chat's kind.
func parseGeminiChat(path string) (*Transcript, string, error) {
	tr := &Transcript{Session: SessionInfo{Path: path}}
	var conv storedGeminiConversation
	if strings.HasSuffix(path, ".json") {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, "", err
		}
		tr.Stats.Records = 1
		if json.Unmarshal(data, &conv) != nil {
			tr.Stats.Malformed = 1
		}
	} else {
		index := map[string]int{}
		reindex := func() {
			clear(index)
			for i, m := range conv.Messages {
				index[m.ID] = i
			}
		}
		err := jsonLines(path, &tr.Stats, func(line []byte) error {
			var probe struct {
				RewindTo  *string         `json:"$rewindTo"`
				ID        *string         `json:"id"`
				Set       json.RawMessage `json:"$set"`
				SessionID *string         `json:"sessionId"`
			}
			if json.Unmarshal(line, &probe) != nil {
				tr.Stats.Malformed++
				return nil
			}
			switch {
			case probe.RewindTo != nil:
				if i, ok := index[*probe.RewindTo]; ok {
					conv.Messages = conv.Messages[:i]
				} else {
					conv.Messages = nil
				}
				reindex()
			case probe.ID != nil:
				var m storedGeminiMessage
				if json.Unmarshal(line, &m) != nil {
					tr.Stats.Malformed++
					return nil
				}
				if i, ok := index[m.ID]; ok {
					conv.Messages[i] = m
				} else {
					index[m.ID] = len(conv.Messages)
					conv.Messages = append(conv.Messages, m)
				}
			case len(probe.Set) > 0:
				before := len(conv.Messages)
				var set struct {
					Messages *[]storedGeminiMessage `json:"messages"`
				}
				_ = json.Unmarshal(probe.Set, &set)
				msgs := conv.Messages
				if json.Unmarshal(probe.Set, &conv) != nil {
					tr.Stats.Malformed++
				}
				conv.Messages = msgs
				if set.Messages != nil {
					conv.Messages = *set.Messages
				}
				if len(conv.Messages) != before || set.Messages != nil {
					reindex()
				}
			case probe.SessionID != nil:
				// A resumed chat writes its head again; the first start time
				// stays.
				msgs, start := conv.Messages, conv.StartTime
				_ = json.Unmarshal(line, &conv)
				conv.Messages = msgs
				if start != "" {
					conv.StartTime = start
				}
			default:
				tr.Stats.Unknown++
			}
			return nil
		})
		if err != nil {
			return nil, "", err
		}
	}
	tr.Session.ID, tr.Session.Title = conv.SessionID, conv.Summary
	if data, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(path)), ".project_root")); err == nil {
		tr.Session.Dir = strings.TrimSpace(string(data))
	}
	results := map[string]bool{}
	for _, gm := range conv.Messages {
		at := parseTime(gm.Timestamp)
		switch gm.Type {
		case "user":
			m := geminiContent(gm.Content)
			m.Time = at
			var fresh []SessionToolResult
			for _, r := range m.ToolResults {
				if !results[r.ID] {
					results[r.ID] = true
					fresh = append(fresh, r)
				}
			}
			m.ToolResults = fresh
			switch {
			case m.Text == "" && len(fresh) > 0:
				m.Role = RoleTool
			case m.Text == "":
				continue
			case strings.HasPrefix(strings.TrimSpace(m.Text), "<session_context>"):
				m.Role, m.ToolResults = RoleSystem, nil
			default:
				m.Role = RoleUser
			}
			tr.Messages = append(tr.Messages, m)
		case "gemini":
			m := geminiContent(gm.Content)
			m.Role, m.Time, m.Model = RoleAssistant, at, gm.Model
			for _, t := range gm.Thoughts {
				m.Thinking = joinNonEmpty(m.Thinking, strings.TrimSpace(t.Subject+": "+t.Description))
			}
			var res []SessionToolResult
			resAt := at
			for _, tc := range gm.ToolCalls {
				m.ToolCalls = append(m.ToolCalls, SessionToolCall{ID: tc.ID, Name: tc.Name, Input: tc.Args})
				if len(tc.Result) == 0 && tc.Status == "" {
					continue
				}
				out, isErr := "", tc.Status == "error" || tc.Status == "cancelled"
				if pm := geminiPartsMessage(tc.Result); len(pm.ToolResults) > 0 {
					var e bool
					out, e = pm.ToolResults[0].Output, pm.ToolResults[0].IsError
					isErr = isErr || e
				} else {
					out = rawText(tc.ResultDisplay)
				}
				results[tc.ID] = true
				res = append(res, SessionToolResult{ID: tc.ID, Name: tc.Name, Output: out, IsError: isErr})
				if t := parseTime(tc.Timestamp); !t.IsZero() {
					resAt = t
				}
			}
			tr.Messages = append(tr.Messages, m)
			if len(res) > 0 {
				tr.Messages = append(tr.Messages, SessionMessage{Role: RoleTool, Time: resAt, ToolResults: res})
			}
		case "info", "error", "warning":
			m := geminiContent(gm.Content)
			m.Role, m.Time = RoleSystem, at
			m.Text = joinNonEmpty(gm.Type+":", m.Text)
			tr.Messages = append(tr.Messages, m)
		default:
			tr.Stats.Unknown++
		}
	}
	finishTranscript(tr)
	if t := parseTime(conv.StartTime); !t.IsZero() {
		tr.Session.Created = t
	}
	if t := parseTime(conv.LastUpdated); t.After(tr.Session.Updated) {
		tr.Session.Updated = t
	}
	return tr, conv.Kind, nil
}

// geminiContent converts a message's content: a string or a part list.
func geminiContent(raw json.RawMessage) SessionMessage {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return SessionMessage{Text: s}
	}
	var parts []storedPart
	if json.Unmarshal(raw, &parts) == nil {
		return geminiPartsMessage(parts)
	}
	var one storedPart
	if json.Unmarshal(raw, &one) == nil {
		return geminiPartsMessage([]storedPart{one})
	}
	return SessionMessage{}
}
