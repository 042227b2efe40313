package agentcli

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var updateSessionGolden = flag.Bool("update-sessions", false, "rewrite testdata/sessions/*/golden/*.json")

// sessionFixtures are the storage trees captured from the real CLIs by
// TestIntegrationAgentCLIs (MAESTRO_CAPTURE_SESSIONS=1).
var sessionFixtures = []struct {
	dir, agent, tool string
	// plainFile is the file (relative to home) the plain session is in,
	// for the tests that corrupt it; empty for SQLite.
	plainFile func(home string, runs sessionRuns) string
}{
	{"claude-code-2.1.330", "claude-code", "Bash", func(home string, r sessionRuns) string {
		return filepath.Join(home, ".claude", "projects", "-home-dev-project", r.Plain+".jsonl")
	}},
	{"codex-0.169.0", "codex", "exec_command", func(home string, r sessionRuns) string {
		m, _ := filepath.Glob(filepath.Join(home, ".codex", "sessions", "*", "*", "*", "rollout-*-"+r.Plain+".jsonl"))
		if len(m) != 1 {
			return ""
		}
		return m[0]
	}},
	{"gemini-cli-0.61.0", "gemini-cli", "run_shell_command", func(home string, r sessionRuns) string {
		m, _ := filepath.Glob(filepath.Join(home, ".gemini", "tmp", "*", "chats", "session-*-"+r.Plain[:8]+".jsonl"))
		if len(m) != 1 {
			return ""
		}
		return m[0]
	}},
	{"opencode-1.18.33", "opencode", "bash", nil},
	{"qwen-code-0.24.4", "qwen-code", "run_shell_command", func(home string, r sessionRuns) string {
		return filepath.Join(home, ".qwen", "projects", "-home-dev-project", "chats", r.Plain+".jsonl")
	}},
}

func loadSessionRuns(t *testing.T, dir string) sessionRuns {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "sessions", dir, "sessions.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Project string `json:"project"`
		sessionRuns
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.Project != fixtureProject || m.Plain == "" || m.Tool == "" {
		t.Fatalf("%s/sessions.json: %+v", dir, m)
	}
	return m.sessionRuns
}

func homeGetenv(home string) func(string) string {
	return func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
}

// copyTree copies a fixture home so a test may change it.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSessionFixtures(t *testing.T) {
	t.Parallel()
	for _, fx := range sessionFixtures {
		t.Run(fx.dir, func(t *testing.T) {
			t.Parallel()
			runs := loadSessionRuns(t, fx.dir)
			home, err := filepath.Abs(filepath.Join("testdata", "sessions", fx.dir, "home"))
			if err != nil {
				t.Fatal(err)
			}
			store, err := NewSessionStore(mustDef(t, fx.agent).SessionStorage, homeGetenv(home))
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			list, err := store.List(ctx, fixtureProject)
			if err != nil {
				t.Fatal(err)
			}
			checkSessionPair(t, fx.agent, store, list, runs, fx.tool)
			for _, s := range list {
				if s.Dir != fixtureProject {
					t.Errorf("session %s: dir %q, want %q", s.ID, s.Dir, fixtureProject)
				}
			}

			// Other projects have none; a sub-directory is not the project
			// (except where the CLI matches descendants: Codex, OpenCode).
			if other, err := store.List(ctx, "/home/dev/other"); err != nil || len(other) != 0 {
				t.Errorf("other project: %+v, %v", other, err)
			}
			if _, err := store.Read(ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, ErrSessionNotFound) {
				t.Errorf("unknown id: err %v, want ErrSessionNotFound", err)
			}
			if _, err := store.Read(ctx, "../../etc/passwd"); !errors.Is(err, ErrSessionNotFound) {
				t.Errorf("path-like id: err %v, want ErrSessionNotFound", err)
			}

			// Golden transcripts, paths relative to the fixture home.
			for _, id := range []string{runs.Plain, runs.Tool} {
				tr, err := store.Read(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				got, err := json.MarshalIndent(tr, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				got = append(bytes.ReplaceAll(got, []byte(home), []byte("$HOME")), '\n')
				golden := filepath.Join("testdata", "sessions", fx.dir, "golden", id+".json")
				if *updateSessionGolden {
					writeFile(t, golden, string(got))
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test -run TestSessionFixtures -update-sessions)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("transcript of %s differs from %s:\n%s", id, golden, got)
				}
			}
		})
	}
}

// TestSessionTolerance appends what a reader must survive to a real
// session file: a non-JSON line, a record of an unknown type and a last
// line cut short (the CLI still writing). The transcript stays the same
// and the stats count each.
func TestSessionTolerance(t *testing.T) {
	t.Parallel()
	for _, fx := range sessionFixtures {
		if fx.plainFile == nil {
			continue
		}
		t.Run(fx.dir, func(t *testing.T) {
			t.Parallel()
			runs := loadSessionRuns(t, fx.dir)
			home := t.TempDir()
			copyTree(t, filepath.Join("testdata", "sessions", fx.dir, "home"), home)
			store, err := NewSessionStore(mustDef(t, fx.agent).SessionStorage, homeGetenv(home))
			if err != nil {
				t.Fatal(err)
			}
			before, err := store.Read(t.Context(), runs.Plain)
			if err != nil {
				t.Fatal(err)
			}
			path := fx.plainFile(home, runs)
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.WriteString("not json at all\n{\"type\":\"brand-new-record\",\"payload\":{}}\n{\"type\":\"user\",\"message\":{\"role\":\"us")
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			after, err := store.Read(t.Context(), runs.Plain)
			if err != nil {
				t.Fatal(err)
			}
			want := SessionStats{Records: before.Stats.Records + 3, Unknown: before.Stats.Unknown + 1,
				Malformed: before.Stats.Malformed + 1, Partial: 1}
			if after.Stats != want {
				t.Errorf("stats %+v, want %+v", after.Stats, want)
			}
			b, _ := json.Marshal(before.Messages)
			a, _ := json.Marshal(after.Messages)
			if !bytes.Equal(a, b) {
				t.Errorf("messages changed:\n%s\nwant\n%s", a, b)
			}
			list, err := store.List(t.Context(), fixtureProject)
			if err != nil || len(list) != 2 {
				t.Errorf("list after corruption: %+v, %v", list, err)
			}
		})
	}
}

// TestGeminiRewind checks {"$rewindTo": id}: the message and all after it
// are dropped.
func TestGeminiRewind(t *testing.T) {
	t.Parallel()
	const dir = "gemini-cli-0.61.0"
	runs := loadSessionRuns(t, dir)
	home := t.TempDir()
	copyTree(t, filepath.Join("testdata", "sessions", dir, "home"), home)
	store, err := NewSessionStore("gemini-chats", homeGetenv(home))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := store.Read(t.Context(), runs.Plain)
	if err != nil {
		t.Fatal(err)
	}
	path := tr.Session.Path
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The id of the "and again" message.
	var againID string
	for line := range strings.Lines(string(data)) {
		var m struct {
			ID      string          `json:"id"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.ID != "" && strings.Contains(string(m.Content), "and again") {
			againID = m.ID
		}
	}
	if againID == "" {
		t.Fatal("fixture has no 'and again' message")
	}
	if err := os.WriteFile(path, append(data, []byte(`{"$rewindTo":"`+againID+`"}`+"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err = store.Read(t.Context(), runs.Plain)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Session.MessageCount != 2 || tr.Messages[len(tr.Messages)-1].Text != "Hello from the fake model." {
		t.Errorf("after rewind: %d messages, %+v", tr.Session.MessageCount, tr.Messages)
	}
}

// TestGeminiLegacyJSON reads the single-object .json chat format.
func TestGeminiLegacyJSON(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFile(t, filepath.Join(home, ".gemini", "projects.json"), `{"projects":{"/src/app":"app"}}`)
	writeFile(t, filepath.Join(home, ".gemini", "tmp", "app", "chats", "session-2025-01-02T03-04-aaaaaaaa.json"), `{
 "sessionId":"aaaaaaaa-1111-2222-3333-444444444444","projectHash":"x","startTime":"2025-01-02T03:04:05Z","lastUpdated":"2025-01-02T03:09:00Z",
 "summary":"Fix the build","messages":[
  {"id":"1","timestamp":"2025-01-02T03:04:06Z","type":"user","content":"why does it fail?"},
  {"id":"2","timestamp":"2025-01-02T03:04:07Z","type":"gemini","content":"Checking.","model":"gemini-2.5-pro",
   "thoughts":[{"subject":"Plan","description":"run the tests"}],
   "toolCalls":[{"id":"t1","name":"run_shell_command","args":{"command":"make"},"status":"error","resultDisplay":"make: *** failed"}]},
  {"id":"3","timestamp":"2025-01-02T03:04:08Z","type":"info","content":"Request cancelled."}]}`)
	store, err := NewSessionStore("gemini-chats", homeGetenv(home))
	if err != nil {
		t.Fatal(err)
	}
	list, err := store.List(t.Context(), "/src/app")
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	s := list[0]
	if s.Label() != "Fix the build" || s.FirstPrompt != "why does it fail?" || s.MessageCount != 2 || s.Model != "gemini-2.5-pro" ||
		!s.Updated.Equal(time.Date(2025, 1, 2, 3, 9, 0, 0, time.UTC)) {
		t.Errorf("summary %+v", s)
	}
	tr, err := store.Read(t.Context(), s.ID)
	if err != nil {
		t.Fatal(err)
	}
	roles := []string{}
	for _, m := range tr.Messages {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "user,assistant,tool,system" || tr.Messages[1].Thinking != "Plan: run the tests" ||
		!tr.Messages[2].ToolResults[0].IsError || tr.Messages[2].ToolResults[0].Output != "make: *** failed" {
		t.Errorf("transcript %+v", tr.Messages)
	}
}

// TestClaudeTitleAndSidechain: a custom-title record names the session;
// sub-agent (sidechain) records are not part of it.
func TestClaudeTitleAndSidechain(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFile(t, filepath.Join(home, ".claude", "projects", "-src-my-app", "s1.jsonl"),
		`{"type":"user","message":{"role":"user","content":"first"},"timestamp":"2025-01-01T00:00:00Z","cwd":"/src/my.app","sessionId":"s1"}
{"type":"assistant","message":{"id":"m1","role":"assistant","model":"claude-x","content":[{"type":"thinking","thinking":"hmm"}]},"timestamp":"2025-01-01T00:00:01Z"}
{"type":"assistant","message":{"id":"m1","role":"assistant","model":"claude-x","content":[{"type":"text","text":"answer"}]},"timestamp":"2025-01-01T00:00:02Z"}
{"type":"user","isSidechain":true,"message":{"role":"user","content":"subagent prompt"},"timestamp":"2025-01-01T00:00:03Z"}
{"type":"user","isMeta":true,"message":{"role":"user","content":"Caveat: local command output"},"timestamp":"2025-01-01T00:00:04Z"}
{"type":"custom-title","customTitle":"My title","sessionId":"s1"}
`)
	store, err := NewSessionStore("claude-projects", homeGetenv(home))
	if err != nil {
		t.Fatal(err)
	}
	list, err := store.List(t.Context(), "/src/my.app/")
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if s := list[0]; s.Label() != "My title" || s.FirstPrompt != "first" || s.MessageCount != 2 || s.Model != "claude-x" {
		t.Errorf("summary %+v", s)
	}
	tr, err := store.Read(t.Context(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Messages) != 3 || tr.Messages[1].Thinking != "hmm" || tr.Messages[1].Text != "answer" || tr.Messages[2].Role != RoleSystem {
		t.Errorf("transcript %+v", tr.Messages)
	}
	// CLAUDE_CONFIG_DIR moves the root.
	moved, err := NewSessionStore("claude-projects", func(k string) string {
		return map[string]string{"HOME": "/nonexistent", "CLAUDE_CONFIG_DIR": filepath.Join(home, ".claude")}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	if list, err := moved.List(t.Context(), "/src/my.app"); err != nil || len(list) != 1 {
		t.Errorf("CLAUDE_CONFIG_DIR: %+v, %v", list, err)
	}
}

// TestOpenCodeWAL reads the database while another connection holds it in
// WAL mode with committed rows not yet checkpointed and a write
// transaction open, as a running OpenCode does.
func TestOpenCodeWAL(t *testing.T) {
	t.Parallel()
	const dir = "opencode-1.18.33"
	home := t.TempDir()
	copyTree(t, filepath.Join("testdata", "sessions", dir, "home"), home)
	dbPath := filepath.Join(home, ".local", "share", "opencode", "opencode.db")
	w, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=journal_mode(WAL)&_pragma=wal_autocheckpoint(0)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.SetMaxOpenConns(1)
	ctx := t.Context()
	now := time.Now().UnixMilli()
	insert := func(c interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}, id string) {
		t.Helper()
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO session (id, project_id, slug, directory, title, version, time_created, time_updated) VALUES (?, 'global', 'x', ?, 'WAL session', '1.18.33', ?, ?)`,
				[]any{id, fixtureProject, now, now}},
			{`INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, '{"role":"user"}')`,
				[]any{"msg_" + id, id, now, now}},
			{`INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?, '{"type":"text","text":"from the WAL"}')`,
				[]any{"prt_" + id, "msg_" + id, id, now, now}},
		} {
			if _, err := c.ExecContext(ctx, q.sql, q.args...); err != nil {
				t.Fatal(err)
			}
		}
	}
	insert(w, "ses_committed")
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	insert(tx, "ses_uncommitted")
	if st, err := os.Stat(dbPath + "-wal"); err != nil || st.Size() == 0 {
		t.Fatalf("no WAL content: %v", err)
	}

	store, err := NewSessionStore("opencode-sqlite", homeGetenv(home))
	if err != nil {
		t.Fatal(err)
	}
	list, err := store.List(ctx, fixtureProject)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range list {
		ids = append(ids, s.ID)
	}
	if len(list) != 3 || list[0].ID != "ses_committed" || list[0].FirstPrompt != "from the WAL" || list[0].Title != "WAL session" {
		t.Errorf("sessions %v (%+v), want ses_committed first plus the two captured", ids, list)
	}
	if _, err := store.Read(ctx, "ses_uncommitted"); !errors.Is(err, ErrSessionNotFound) {
		t.Errorf("uncommitted session: %v", err)
	}
}

func TestEncodeProjectDir(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/Users/me/my.app":   "-Users-me-my-app",
		"/Users/me/my.app/":  "-Users-me-my-app",
		`C:\src\app`:         "C--src-app",
		"/home/dev/project":  "-home-dev-project",
		"/tmp/ünï code_dir1": "-tmp--n--code-dir1",
	} {
		if got := encodeProjectDir(in); got != want {
			t.Errorf("encodeProjectDir(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNewSessionStore(t *testing.T) {
	t.Parallel()
	for _, kind := range StorageNames() {
		s, err := NewSessionStore(kind, homeGetenv("/home/u"))
		if kind == "none" {
			if err == nil {
				t.Error("none: want an error")
			}
			continue
		}
		if err != nil || s.Kind() != kind || len(s.Locations("/p")) == 0 {
			t.Errorf("%s: %v, %v", kind, s, err)
		}
	}
	if _, err := NewSessionStore("nope", homeGetenv("/home/u")); err == nil || !strings.Contains(err.Error(), "claude-projects") {
		t.Errorf("unknown kind: %v", err)
	}
	if _, err := NewSessionStore("codex-rollouts", homeGetenv("")); err == nil || !strings.Contains(err.Error(), "HOME") {
		t.Errorf("no HOME: %v", err)
	}
	// An empty HOME has no sessions, and List says nothing is wrong.
	s, _ := NewSessionStore("opencode-sqlite", homeGetenv(t.TempDir()))
	if list, err := s.List(t.Context(), "/p"); err != nil || len(list) != 0 {
		t.Errorf("empty opencode: %v, %v", list, err)
	}
}
