package agentcli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// SessionInfo summarises one session a CLI stored on disk.
type SessionInfo struct {
	// ID is the CLI's own session id (what --resume takes).
	ID string `json:"id"`
	// Title is the title the CLI recorded (OpenCode's generated title,
	// Gemini's summary, Claude's custom title), empty when it keeps none.
	Title string `json:"title,omitempty"`
	// FirstPrompt is the first prompt the user typed, context injections
	// excluded.
	FirstPrompt string `json:"first_prompt,omitempty"`
	// Dir is the working directory the session was started in.
	Dir     string    `json:"dir,omitempty"`
	Created time.Time `json:"created,omitzero"`
	Updated time.Time `json:"updated,omitzero"`
	// MessageCount counts user and assistant messages (tool results and
	// system context are not counted).
	MessageCount int `json:"message_count"`
	// Model is the last model that answered, when the CLI records it.
	Model string `json:"model,omitempty"`
	// Path is the file (or database) the session lives in.
	Path string `json:"path"`
}

// Label is the title, else the first prompt, on one line.
func (s SessionInfo) Label() string {
	l := s.Title
	if l == "" {
		l = s.FirstPrompt
	}
	return strings.Join(strings.Fields(l), " ")
}

// Transcript is one stored session read in full, in a form common to every
// CLI.
type Transcript struct {
	Session  SessionInfo      `json:"session"`
	Messages []SessionMessage `json:"messages"`
	Stats    SessionStats     `json:"stats"`
}

// Message roles of a SessionMessage.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	// RoleTool messages carry tool results.
	RoleTool = "tool"
	// RoleSystem messages are context the CLI injected (environment,
	// instructions, notices), not typed by the user.
	RoleSystem = "system"
)

// SessionMessage is one message of a Transcript.
type SessionMessage struct {
	Role        string              `json:"role"`
	Time        time.Time           `json:"time,omitzero"`
	Text        string              `json:"text,omitempty"`
	Thinking    string              `json:"thinking,omitempty"`
	Model       string              `json:"model,omitempty"`
	ToolCalls   []SessionToolCall   `json:"tool_calls,omitempty"`
	ToolResults []SessionToolResult `json:"tool_results,omitempty"`
}

// SessionToolCall is a tool call an assistant message made.
type SessionToolCall struct {
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input,omitempty"`
}

// SessionToolResult is the result of the tool call with the same ID.
type SessionToolResult struct {
	ID      string `json:"id,omitempty"`
	Name    string `json:"name,omitempty"`
	Output  string `json:"output"`
	IsError bool   `json:"is_error,omitempty"`
}

// SessionStats counts what a reader met in a session's records.
type SessionStats struct {
	// Records is how many records (lines, rows) were read.
	Records int `json:"records"`
	// Unknown counts records of a type the reader does not know (skipped).
	Unknown int `json:"unknown"`
	// Malformed counts lines that are not JSON objects.
	Malformed int `json:"malformed"`
	// Partial is 1 when the last line was cut short (a CLI still writing).
	Partial int `json:"partial"`
}

// ErrSessionNotFound is returned by SessionStore.Read for an unknown id.
var ErrSessionNotFound = errors.New("session not found")

// SessionStore lists and reads the sessions one CLI stores on disk.
type SessionStore interface {
	// Kind is the storage name (claude-projects, codex-rollouts, …).
	Kind() string
	// Locations are the directories or files List looks in for project.
	Locations(project string) []string
	// List returns the sessions of project (a directory), newest first.
	List(ctx context.Context, project string) ([]SessionInfo, error)
	// Read reads one session by id, whatever its project; an unknown id
	// gives an error wrapping ErrSessionNotFound.
	Read(ctx context.Context, id string) (*Transcript, error)
}

// NewSessionStore returns the reader of a session storage kind (see
// [StorageNames]). getenv supplies HOME and the CLI-specific overrides
// (CLAUDE_CONFIG_DIR, CODEX_HOME, GEMINI_CLI_HOME, XDG_DATA_HOME,
// QWEN_RUNTIME_DIR, QWEN_HOME).
func NewSessionStore(kind string, getenv func(string) string) (SessionStore, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	home := getenv("HOME")
	if home == "" && kind != "none" {
		return nil, fmt.Errorf("session storage %s: HOME is not set", kind)
	}
	switch kind {
	case "claude-projects":
		root := getenv("CLAUDE_CONFIG_DIR")
		if root == "" {
			root = filepath.Join(home, ".claude")
		}
		return &projectsStore{kind: kind, root: filepath.Join(root, "projects"), parse: parseClaudeSession}, nil
	case "qwen-projects":
		root := getenv("QWEN_RUNTIME_DIR")
		if root == "" {
			root = getenv("QWEN_HOME")
		}
		if root == "" {
			root = filepath.Join(home, ".qwen")
		}
		return &projectsStore{kind: kind, root: filepath.Join(root, "projects"), sub: "chats", parse: parseQwenSession}, nil
	case "codex-rollouts":
		root := getenv("CODEX_HOME")
		if root == "" {
			root = filepath.Join(home, ".codex")
		}
		return &codexStore{root: root}, nil
	case "gemini-chats":
		root := getenv("GEMINI_CLI_HOME")
		if root == "" {
			root = home
		}
		return &geminiStore{root: filepath.Join(root, ".gemini")}, nil
	case "opencode-sqlite":
		data := getenv("XDG_DATA_HOME")
		if data == "" {
			data = filepath.Join(home, ".local", "share")
		}
		return &opencodeStore{db: filepath.Join(data, "opencode", "opencode.db")}, nil
	case "none":
		return nil, fmt.Errorf("session storage: this agent keeps no sessions Maestro can read (session_storage: none)")
	}
	return nil, fmt.Errorf("session storage %q: unknown (known: %s)", kind, strings.Join(StorageNames(), ", "))
}

// projectCandidates returns the absolute, cleaned forms of dir (and its
// symlink-resolved form when that differs).
func projectCandidates(dir string) []string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = filepath.Clean(dir)
	}
	out := []string{abs}
	if real, err := filepath.EvalSymlinks(abs); err == nil && real != abs {
		out = append(out, real)
	}
	return out
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	if path == "" || dir == "" {
		return false
	}
	path, dir = filepath.Clean(path), filepath.Clean(dir)
	if path == dir {
		return true
	}
	if !strings.HasSuffix(dir, string(filepath.Separator)) {
		dir += string(filepath.Separator)
	}
	return strings.HasPrefix(path, dir)
}

// encodeProjectDir is Claude Code's and Qwen Code's project directory name:
// the path without a trailing separator, every character outside
// [A-Za-z0-9] replaced by '-'.
func encodeProjectDir(dir string) string {
	dir = strings.TrimRight(dir, `/\`)
	out := make([]byte, 0, len(dir))
	for _, r := range dir {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			out = append(out, byte(r))
		} else {
			out = append(out, '-')
		}
	}
	return string(out)
}

// jsonRecords is jsonLines decoding each line into a record R for fn
// (with the line itself); a JSON line that is not an R counts as
// malformed.
func jsonRecords[R any](path string, st *SessionStats, fn func(r R, line []byte) error) error {
	return jsonLines(path, st, func(line []byte) error {
		var r R
		if json.Unmarshal(line, &r) != nil {
			st.Malformed++
			return nil
		}
		return fn(r, line)
	})
}

// jsonLines reads a JSONL file, calling fn with each line that is a JSON
// object; other lines are counted in st (a cut-short last line as Partial).
func jsonLines(path string, st *SessionStats, fn func(line []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 256<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			complete := line[len(line)-1] == '\n'
			line = bytes.TrimSpace(line)
			if len(line) > 0 {
				st.Records++
				if line[0] != '{' || !json.Valid(line) {
					if complete {
						st.Malformed++
					} else {
						st.Partial++
					}
				} else if ferr := fn(line); ferr != nil {
					return ferr
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// parseTime reads an RFC 3339 timestamp (zero when absent or invalid).
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// millis converts epoch milliseconds.
func millis(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// finishTranscript derives the session summary from the messages: first
// prompt, message count, last model, first and last times.
func finishTranscript(tr *Transcript) {
	s := &tr.Session
	for _, m := range tr.Messages {
		if !m.Time.IsZero() {
			if s.Created.IsZero() || m.Time.Before(s.Created) {
				s.Created = m.Time
			}
			if m.Time.After(s.Updated) {
				s.Updated = m.Time
			}
		}
		switch m.Role {
		case RoleUser:
			s.MessageCount++
			if s.FirstPrompt == "" && strings.TrimSpace(m.Text) != "" {
				s.FirstPrompt = strings.TrimSpace(m.Text)
			}
		case RoleAssistant:
			s.MessageCount++
			if m.Model != "" {
				s.Model = m.Model
			}
		}
	}
}

// sortSessions orders newest first (then by id, for stable output).
func sortSessions(list []SessionInfo) {
	slices.SortFunc(list, func(a, b SessionInfo) int {
		if c := b.Updated.Compare(a.Updated); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// notFound builds the error of Read for an unknown id.
func notFound(kind, id, where string) error {
	return fmt.Errorf("%s: session %q: %w (looked in %s)", kind, id, ErrSessionNotFound, where)
}

// rawText returns a JSON value as text: strings unquoted, arrays of
// {type:"text",text} blocks joined, anything else as JSON.
func rawText(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(v, &blocks) == nil {
		var parts []string
		for _, b := range blocks {
			if b.Text != "" {
				parts = append(parts, b.Text)
			}
		}
		if len(parts) > 0 || len(blocks) == 0 {
			return strings.Join(parts, "\n")
		}
	}
	return string(v)
}

// ctxErr returns ctx's error when it is done.
func ctxErr(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	default:
		return nil
	}
}
