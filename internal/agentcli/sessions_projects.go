package agentcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// projectsStore reads one-JSONL-file-per-session stores kept in a
// directory per project named by encodeProjectDir: Claude Code
// (<root>/<encoded>/<id>.jsonl) and Qwen Code (<root>/<encoded>/chats/<id>.jsonl).
type projectsStore struct {
	kind, root, sub string
	parse           func(path string) (*Transcript, error)
}

func (s *projectsStore) Kind() string { return s.kind }

func (s *projectsStore) Locations(project string) []string {
	var out []string
	for _, c := range projectCandidates(project) {
		d := filepath.Join(s.root, encodeProjectDir(c), s.sub)
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

func (s *projectsStore) List(ctx context.Context, project string) ([]SessionInfo, error) {
	var out []SessionInfo
	for _, dir := range s.Locations(project) {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.kind, err)
		}
		for _, e := range entries {
			if err := ctxErr(ctx); err != nil {
				return nil, err
			}
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".jsonl") {
				continue
			}
			if info, err := e.Info(); err != nil || info.Size() == 0 {
				continue
			}
			tr, err := s.parse(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.kind, err)
			}
			if tr.Session.MessageCount > 0 {
				out = append(out, tr.Session)
			}
		}
	}
	sortSessions(out)
	return out, nil
}

func (s *projectsStore) Read(ctx context.Context, id string) (*Transcript, error) {
	where := filepath.Join(s.root, "*", s.sub, "<id>.jsonl")
	if id == "" || strings.ContainsAny(id, `/\*?[`) || id == "." || id == ".." {
		return nil, notFound(s.kind, id, where)
	}
	matches, err := filepath.Glob(filepath.Join(s.root, "*", s.sub, id+".jsonl"))
	if err != nil {
		return nil, err
	}
	for _, m := range matches {
		if err := ctxErr(ctx); err != nil {
			return nil, err
		}
		return s.parse(m)
	}
	return nil, notFound(s.kind, id, where)
}

// --- Claude Code ---

type storedClaudeRecord struct {
	Type        string               `json:"type"`
	Timestamp   string               `json:"timestamp"`
	SessionID   string               `json:"sessionId"`
	Cwd         string               `json:"cwd"`
	IsSidechain bool                 `json:"isSidechain"`
	IsMeta      bool                 `json:"isMeta"`
	Message     *storedClaudeMessage `json:"message"`
	CustomTitle string               `json:"customTitle"`
	Summary     string               `json:"summary"`
}

type storedClaudeMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"`
}

// claudeKnown are the record types Claude Code 2.1 writes besides user and
// assistant messages; they carry no conversation and are skipped silently.
var claudeKnown = map[string]bool{
	"attachment": true, "queue-operation": true, "atis-latch": true, "api-request-shape": true,
	"api-request-blob": true, "api-request": true, "tools-used": true, "last-prompt": true,
	"cost-state": true, "mode": true, "summary": true, "custom-title": true, "ai-title": true,
	"system": true, "file-history-snapshot": true, "progress": true, "permission-mode": true,
	"agent-name": true, "tag": true, "pr-link": true,
}

// parseClaudeSession reads ~/.claude/projects/<encoded>/<id>.jsonl.
func parseClaudeSession(path string) (*Transcript, error) {
	tr := &Transcript{Session: SessionInfo{ID: strings.TrimSuffix(filepath.Base(path), ".jsonl"), Path: path}}
	toolNames := map[string]string{}
	lastAssistantID := ""
	var customTitle, summary string
	err := jsonRecords(path, &tr.Stats, func(r storedClaudeRecord, _ []byte) error {
		if r.Cwd != "" && tr.Session.Dir == "" {
			tr.Session.Dir = r.Cwd
		}
		switch r.Type {
		case "user", "assistant":
		case "custom-title":
			customTitle = r.CustomTitle
			return nil
		case "summary":
			summary = r.Summary
			return nil
		default:
			if !claudeKnown[r.Type] {
				tr.Stats.Unknown++
			}
			return nil
		}
		if r.IsSidechain || r.Message == nil {
			return nil
		}
		at := parseTime(r.Timestamp)
		blocks, text := claudeBlocks(r.Message.Content)
		if r.Type == "assistant" {
			if r.Message.ID != "" && r.Message.ID == lastAssistantID && len(tr.Messages) > 0 &&
				tr.Messages[len(tr.Messages)-1].Role == RoleAssistant {
				claudeAssistant(&tr.Messages[len(tr.Messages)-1], blocks, toolNames)
				return nil
			}
			m := SessionMessage{Role: RoleAssistant, Time: at, Text: text}
			if r.Message.Model != "<synthetic>" {
				m.Model = r.Message.Model
			}
			claudeAssistant(&m, blocks, toolNames)
			tr.Messages = append(tr.Messages, m)
			lastAssistantID = r.Message.ID
			return nil
		}
		lastAssistantID = ""
		var results []SessionToolResult
		var texts []string
		if text != "" {
			texts = append(texts, text)
		}
		for _, b := range blocks {
			switch b.Type {
			case "tool_result":
				results = append(results, SessionToolResult{ID: b.ToolUseID, Name: toolNames[b.ToolUseID], Output: rawText(b.Content), IsError: b.IsError})
			case "text":
				texts = append(texts, b.Text)
			case "image":
				texts = append(texts, "[image]")
			}
		}
		if len(results) > 0 {
			tr.Messages = append(tr.Messages, SessionMessage{Role: RoleTool, Time: at, ToolResults: results})
		}
		if len(texts) > 0 {
			role := RoleUser
			if r.IsMeta {
				role = RoleSystem
			}
			tr.Messages = append(tr.Messages, SessionMessage{Role: role, Time: at, Text: strings.Join(texts, "\n")})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	tr.Session.Title = customTitle
	if tr.Session.Title == "" {
		tr.Session.Title = summary
	}
	finishTranscript(tr)
	return tr, nil
}

// claudeBlocks decodes message content: a plain string (returned as text)
// or a list of blocks.
func claudeBlocks(content json.RawMessage) ([]claudeBlock, string) {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return nil, s
	}
	var blocks []claudeBlock
	_ = json.Unmarshal(content, &blocks)
	return blocks, ""
}

func claudeAssistant(m *SessionMessage, blocks []claudeBlock, toolNames map[string]string) {
	for _, b := range blocks {
		switch b.Type {
		case "text":
			m.Text = joinNonEmpty(m.Text, b.Text)
		case "thinking":
			m.Thinking = joinNonEmpty(m.Thinking, b.Thinking)
		case "tool_use", "server_tool_use":
			toolNames[b.ID] = b.Name
			m.ToolCalls = append(m.ToolCalls, SessionToolCall{ID: b.ID, Name: b.Name, Input: b.Input})
		}
	}
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n" + b
}

// --- Qwen Code ---

type qwenRecord struct {
	Type       string `json:"type"`
	Timestamp  string `json:"timestamp"`
	SessionID  string `json:"sessionId"`
	Cwd        string `json:"cwd"`
	Model      string `json:"model"`
	Provenance string `json:"provenance"`
	Message    *struct {
		Role  string       `json:"role"`
		Parts []storedPart `json:"parts"`
	} `json:"message"`
	ToolCallResult *struct {
		CallID string `json:"callId"`
		Status string `json:"status"`
	} `json:"toolCallResult"`
}

// storedPart is a Gemini API content part (Qwen Code records them too).
type storedPart struct {
	Text         string `json:"text"`
	Thought      bool   `json:"thought"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
	InlineData *struct {
		MimeType string `json:"mimeType"`
	} `json:"inlineData"`
}

// functionOutput is the text of a functionResponse.response: its output
// (or error) field, else the JSON.
func functionOutput(resp json.RawMessage) (string, bool) {
	var r struct {
		Output *string          `json:"output"`
		Error  *json.RawMessage `json:"error"`
	}
	if json.Unmarshal(resp, &r) == nil {
		if r.Output != nil {
			return *r.Output, false
		}
		if r.Error != nil {
			return rawText(*r.Error), true
		}
	}
	return rawText(resp), false
}

// parseQwenSession reads ~/.qwen/projects/<encoded>/chats/<id>.jsonl.
func parseQwenSession(path string) (*Transcript, error) {
	tr := &Transcript{Session: SessionInfo{ID: strings.TrimSuffix(filepath.Base(path), ".jsonl"), Path: path}}
	err := jsonRecords(path, &tr.Stats, func(r qwenRecord, _ []byte) error {
		if r.Cwd != "" && tr.Session.Dir == "" {
			tr.Session.Dir = r.Cwd
		}
		at := parseTime(r.Timestamp)
		switch r.Type {
		case "user", "assistant", "tool_result":
		case "system":
			return nil
		default:
			tr.Stats.Unknown++
			return nil
		}
		if r.Message == nil {
			return nil
		}
		m := geminiPartsMessage(r.Message.Parts)
		m.Time = at
		switch {
		case r.Type == "assistant":
			m.Role, m.Model = RoleAssistant, r.Model
		case len(m.ToolResults) > 0 && m.Text == "":
			m.Role = RoleTool
			if r.ToolCallResult != nil && (r.ToolCallResult.Status == "error" || r.ToolCallResult.Status == "cancelled") {
				for i := range m.ToolResults {
					m.ToolResults[i].IsError = true
				}
			}
		case r.Provenance != "" && r.Provenance != "real_user":
			m.Role = RoleSystem
		default:
			m.Role = RoleUser
		}
		tr.Messages = append(tr.Messages, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	finishTranscript(tr)
	return tr, nil
}

// geminiPartsMessage converts Gemini API parts (role left empty).
func geminiPartsMessage(parts []storedPart) SessionMessage {
	var m SessionMessage
	for _, p := range parts {
		switch {
		case p.FunctionCall != nil:
			m.ToolCalls = append(m.ToolCalls, SessionToolCall{ID: p.FunctionCall.ID, Name: p.FunctionCall.Name, Input: p.FunctionCall.Args})
		case p.FunctionResponse != nil:
			out, isErr := functionOutput(p.FunctionResponse.Response)
			m.ToolResults = append(m.ToolResults, SessionToolResult{ID: p.FunctionResponse.ID, Name: p.FunctionResponse.Name, Output: out, IsError: isErr})
		case p.InlineData != nil:
			m.Text = joinNonEmpty(m.Text, "["+p.InlineData.MimeType+"]")
		case p.Thought:
			m.Thinking = joinNonEmpty(m.Thinking, p.Text)
		case p.Text != "":
			m.Text = joinNonEmpty(m.Text, p.Text)
		}
	}
	return m
}
