package agentcli

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"
)

// opencodeStore reads OpenCode (≥ 1.2) sessions from its SQLite database,
// $XDG_DATA_HOME/opencode/opencode.db, opened read-only while OpenCode may
// be writing it (WAL mode, busy timeout).
type opencodeStore struct{ db string }

func (s *opencodeStore) Kind() string { return "opencode-sqlite" }

func (s *opencodeStore) Locations(string) []string { return []string{s.db} }

// open opens the database read-only; a missing file gives (nil, nil).
func (s *opencodeStore) open(ctx context.Context) (*sql.DB, error) {
	if _, err := os.Stat(s.db); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "query_only(ON)")
	db, err := sql.Open("sqlite", "file:"+s.db+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("opencode-sqlite: %s: %w", s.db, err)
	}
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("opencode-sqlite: %s: %w", s.db, err)
	}
	return db, nil
}

// columns returns the column names of table.
func columns(ctx context.Context, db *sql.DB, table string) (map[string]bool, error) {
	rows, err := db.QueryContext(ctx, "SELECT name FROM pragma_table_info(?)", table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out[n] = true
	}
	return out, rows.Err()
}

type opencodeSession struct {
	id, projectID, directory, title, worktree string
	created, updated                          int64
}

// sessions reads the top-level sessions (sub-agent sessions excluded),
// or only the one with id when id is set.
func (s *opencodeStore) sessions(ctx context.Context, db *sql.DB, id string) ([]opencodeSession, error) {
	cols, err := columns(ctx, db, "session")
	if err != nil {
		return nil, fmt.Errorf("opencode-sqlite: %s: %w", s.db, err)
	}
	if !cols["id"] || !cols["directory"] {
		return nil, fmt.Errorf("opencode-sqlite: %s: table session lacks id/directory columns (not an OpenCode ≥ 1.2 database?)", s.db)
	}
	q := `SELECT s.id, s.project_id, s.directory, s.title, COALESCE(p.worktree, ''), s.time_created, s.time_updated
		FROM session s LEFT JOIN project p ON p.id = s.project_id WHERE 1=1`
	var args []any
	if cols["parent_id"] && id == "" {
		q += " AND s.parent_id IS NULL"
	}
	if id != "" {
		q += " AND s.id = ?"
		args = append(args, id)
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("opencode-sqlite: %s: %w", s.db, err)
	}
	defer rows.Close()
	var out []opencodeSession
	for rows.Next() {
		var r opencodeSession
		if err := rows.Scan(&r.id, &r.projectID, &r.directory, &r.title, &r.worktree, &r.created, &r.updated); err != nil {
			return nil, fmt.Errorf("opencode-sqlite: %s: %w", s.db, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// matches applies OpenCode's project rule: the session's project worktree
// is the project, an ancestor or a descendant of it (the "global" project,
// worktree "/", by directory only), or the session ran in the project.
func (r opencodeSession) matches(cands []string) bool {
	for _, c := range cands {
		if within(r.directory, c) {
			return true
		}
		if r.projectID != "global" && r.worktree != "" && r.worktree != "/" &&
			(within(c, r.worktree) || within(r.worktree, c)) {
			return true
		}
	}
	return false
}

func (s *opencodeStore) List(ctx context.Context, project string) ([]SessionInfo, error) {
	db, err := s.open(ctx)
	if err != nil || db == nil {
		return nil, err
	}
	defer db.Close()
	all, err := s.sessions(ctx, db, "")
	if err != nil {
		return nil, err
	}
	cands := projectCandidates(project)
	var out []SessionInfo
	for _, r := range all {
		if !r.matches(cands) {
			continue
		}
		tr, err := s.transcript(ctx, db, r)
		if err != nil {
			return nil, err
		}
		if tr.Session.MessageCount > 0 {
			out = append(out, tr.Session)
		}
	}
	sortSessions(out)
	return out, nil
}

func (s *opencodeStore) Read(ctx context.Context, id string) (*Transcript, error) {
	db, err := s.open(ctx)
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, notFound(s.Kind(), id, s.db+" (missing)")
	}
	defer db.Close()
	list, err := s.sessions(ctx, db, id)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, notFound(s.Kind(), id, s.db)
	}
	return s.transcript(ctx, db, list[0])
}

type opencodeMessageData struct {
	Role       string `json:"role"`
	ModelID    string `json:"modelID"`
	ProviderID string `json:"providerID"`
	Model      *struct {
		ModelID string `json:"modelID"`
	} `json:"model"`
}

type opencodePartData struct {
	Type  string `json:"type"`
	Text  string `json:"text"`
	Tool  string `json:"tool"`
	Call  string `json:"callID"`
	Synth bool   `json:"synthetic"`
	State *struct {
		Status string          `json:"status"`
		Input  json.RawMessage `json:"input"`
		Output string          `json:"output"`
		Error  string          `json:"error"`
	} `json:"state"`
	Mime string `json:"mime"`
	File string `json:"filename"`
}

// opencodeKnownParts are part types that carry no conversation text.
var opencodeKnownParts = map[string]bool{
	"step-start": true, "step-finish": true, "snapshot": true, "patch": true, "agent": true,
	"retry": true, "compaction": true, "subtask": true,
}

// transcript reads a session's messages and parts in order.
func (s *opencodeStore) transcript(ctx context.Context, db *sql.DB, r opencodeSession) (*Transcript, error) {
	tr := &Transcript{Session: SessionInfo{ID: r.id, Title: r.title, Dir: r.directory, Path: s.db}}
	rows, err := db.QueryContext(ctx, `SELECT m.id, m.time_created, m.data, p.data
		FROM message m LEFT JOIN part p ON p.message_id = m.id
		WHERE m.session_id = ? ORDER BY m.time_created, m.id, p.time_created, p.id`, r.id)
	if err != nil {
		return nil, fmt.Errorf("opencode-sqlite: %s: %w", s.db, err)
	}
	defer rows.Close()
	lastMsg := ""
	cur := -1 // index of the message being filled
	for rows.Next() {
		var id string
		var created int64
		var mdata string
		var pdata sql.NullString
		if err := rows.Scan(&id, &created, &mdata, &pdata); err != nil {
			return nil, fmt.Errorf("opencode-sqlite: %s: %w", s.db, err)
		}
		if id != lastMsg {
			lastMsg = id
			tr.Stats.Records++
			var md opencodeMessageData
			if json.Unmarshal([]byte(mdata), &md) != nil {
				tr.Stats.Malformed++
				cur = -1
				continue
			}
			m := SessionMessage{Time: millis(created)}
			switch md.Role {
			case "user":
				m.Role = RoleUser
			case "assistant":
				m.Role, m.Model = RoleAssistant, md.ModelID
			default:
				tr.Stats.Unknown++
				cur = -1
				continue
			}
			tr.Messages = append(tr.Messages, m)
			cur = len(tr.Messages) - 1
		}
		if cur < 0 || !pdata.Valid {
			continue
		}
		tr.Stats.Records++
		var pd opencodePartData
		if json.Unmarshal([]byte(pdata.String), &pd) != nil {
			tr.Stats.Malformed++
			continue
		}
		m := &tr.Messages[cur]
		model := m.Model
		switch pd.Type {
		case "text":
			if !pd.Synth || m.Role == RoleAssistant {
				m.Text = joinNonEmpty(m.Text, pd.Text)
			}
		case "reasoning":
			m.Thinking = joinNonEmpty(m.Thinking, pd.Text)
		case "file":
			m.Text = joinNonEmpty(m.Text, "["+pd.Mime+" "+pd.File+"]")
		case "tool":
			call := SessionToolCall{ID: pd.Call, Name: pd.Tool}
			var res *SessionToolResult
			if pd.State != nil {
				call.Input = pd.State.Input
				switch pd.State.Status {
				case "completed":
					res = &SessionToolResult{ID: pd.Call, Name: pd.Tool, Output: pd.State.Output}
				case "error":
					res = &SessionToolResult{ID: pd.Call, Name: pd.Tool, Output: pd.State.Error, IsError: true}
				}
			}
			m.ToolCalls = append(m.ToolCalls, call)
			if res != nil {
				// The result follows the assistant message as a tool message;
				// parts after it start a new assistant message.
				tr.Messages = append(tr.Messages, SessionMessage{Role: RoleTool, Time: m.Time, ToolResults: []SessionToolResult{*res}})
				cur = -2
			}
		default:
			if !opencodeKnownParts[pd.Type] {
				tr.Stats.Unknown++
			}
		}
		if cur == -2 {
			// Later parts of the same message continue the assistant reply.
			tr.Messages = append(tr.Messages, SessionMessage{Role: RoleAssistant, Time: tr.Messages[len(tr.Messages)-1].Time, Model: model})
			cur = len(tr.Messages) - 1
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("opencode-sqlite: %s: %w", s.db, err)
	}
	// Drop the empty continuation messages opened after a tool result.
	kept := tr.Messages[:0]
	for _, m := range tr.Messages {
		if m.Role == RoleAssistant && m.Text == "" && m.Thinking == "" && len(m.ToolCalls) == 0 {
			continue
		}
		kept = append(kept, m)
	}
	tr.Messages = kept
	finishTranscript(tr)
	if t := millis(r.created); !t.IsZero() {
		tr.Session.Created = t
	}
	if t := millis(r.updated); t.After(tr.Session.Updated) {
		tr.Session.Updated = t
	}
	return tr, nil
}
