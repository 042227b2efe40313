package agentcli

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/llm/llmtest"
)

// The session-storage checks of the integration tier: TestIntegrationAgentCLIs
// runs each real CLI (plain turn, its resume, a tool turn) with an
// isolated HOME, then lists and reads the sessions it stored through the
// matching SessionStore (checkStoredSessions). With
// MAESTRO_CAPTURE_SESSIONS=1 it also copies the storage trees, with the
// temporary paths rewritten to fixturePaths, into
// testdata/sessions/<cli>-<version>/ for sessions_test.go.

// Fixture paths: the temporary HOME and project directory of a capture are
// rewritten to these.
const (
	fixtureHome    = "/home/dev"
	fixtureProject = "/home/dev/project"
)

// sessionRuns are the session ids the CLI's stream parser reported.
type sessionRuns struct {
	Plain string `json:"plain"`
	Tool  string `json:"tool"`
	// QuotedPrompts: the prompts were stored in double quotes, as OpenCode
	// stored a prompt given on its command line (the 1.18.33 fixtures,
	// captured before its prompt went on stdin).
	QuotedPrompts bool `json:"quoted_prompts,omitempty"`
}

// sessionTurns are the three turns runSessionTurns ran: their outcomes,
// the fake model of the resume (whose first request must replay the plain
// turn) and the session ids.
type sessionTurns struct {
	plain, resume, tool runOutcome
	resumeModel         *fakeModel
	runs                sessionRuns
}

// runSessionTurns runs a plain turn (its model call streams reasoning
// first), its resume and a tool turn (toolCommand, a second session) of one CLI in work with HOME home, failing the test when a turn
// fails or reports no (or, resumed, another) session. Every script ends
// with spare text turns for extra model calls a CLI may make after a turn,
// which an exhausted script would answer 500 and the CLI retry.
func runSessionTurns(t *testing.T, s cliSetup, home, work string) sessionTurns {
	t.Helper()
	const timeout = 300 * time.Second
	spare := llmtest.Turn{Text: []string{"Nothing to add."}, InputTokens: 3, OutputTokens: 3}
	var r sessionTurns
	f := newFakeModel(t, llmtest.Turn{Thinking: thinkingText, Text: []string{"Hello from ", "the fake model."}, InputTokens: 12, OutputTokens: 7}, spare, spare, spare)
	o := runCLI(t, s, home, work, f, Invocation{Prompt: "say hello"}, timeout)
	if o.err != nil || o.res.Err != nil || o.res.ExitCode != 0 || o.res.SessionID == "" {
		t.Fatalf("plain turn: err %v, agent error %v, exit %d, session %q", o.err, o.res.Err, o.res.ExitCode, o.res.SessionID)
	}
	r.plain, r.runs.Plain = o, o.res.SessionID
	f = newFakeModel(t, llmtest.Turn{Text: []string{"Second turn after resume."}, InputTokens: 40, OutputTokens: 5}, spare, spare, spare)
	o = runCLI(t, s, home, work, f, Invocation{Prompt: "and again", SessionID: r.runs.Plain}, timeout)
	if o.err != nil || o.res.Err != nil || o.res.ExitCode != 0 || o.res.SessionID != r.runs.Plain {
		t.Fatalf("resume: err %v, agent error %v, exit %d, session %q (want %q)", o.err, o.res.Err, o.res.ExitCode, o.res.SessionID, r.runs.Plain)
	}
	r.resume, r.resumeModel = o, f
	f = newFakeModel(t,
		llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "call_tool1", Name: s.Tool, Input: s.ToolArgs(toolCommand)}}, InputTokens: 20, OutputTokens: 9},
		llmtest.Turn{Text: []string{"Tool said: maestro-tool-ok"}, InputTokens: 30, OutputTokens: 6}, spare, spare, spare)
	o = runCLI(t, s, home, work, f, Invocation{Prompt: "run echo maestro-tool-ok"}, timeout)
	if o.err != nil || o.res.Err != nil || o.res.ExitCode != 0 || o.res.SessionID == "" {
		t.Fatalf("tool turn: err %v, agent error %v, exit %d, session %q", o.err, o.res.Err, o.res.ExitCode, o.res.SessionID)
	}
	r.tool, r.runs.Tool = o, o.res.SessionID
	return r
}

// toolCommand is the tool turn's shell command: it prints
// maestro-tool-ok and, at the default permission (edit), writes it to
// toolFile in the workspace.
const (
	toolFile    = "maestro-perm.txt"
	toolCommand = "echo maestro-tool-ok | tee " + toolFile
)

// setupGetenv is the environment a CLI ran with (HOME plus its settings),
// as a getenv function for NewSessionStore.
func setupGetenv(t *testing.T, s cliSetup, home string) func(string) string {
	env := map[string]string{"HOME": home}
	for _, kv := range s.Env(t, home, "http://127.0.0.1:9") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return func(k string) string { return env[k] }
}

// checkStoredSessions lists and reads, through the CLI's SessionStore,
// the two sessions runSessionTurns stored in home for work (see
// TestIntegrationAgentCLIs). With MAESTRO_CAPTURE_SESSIONS=1 it copies
// them into testdata/sessions/<cli>-<version>/.
func checkStoredSessions(t *testing.T, s cliSetup, home, work string, runs sessionRuns) {
	t.Helper()
	def := mustDef(t, s.ID)
	store, err := NewSessionStore(def.SessionStorage, setupGetenv(t, s, home))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	list, err := store.List(ctx, work)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 {
		// Show what the CLI stored, to tell a reader bug from a CLI change.
		_ = filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.Contains(p, "node_modules") {
				t.Logf("stored: %s", p)
			}
			return nil
		})
	}
	checkSessionPair(t, s.ID, store, list, runs, s.Tool)
	if os.Getenv("MAESTRO_CAPTURE_SESSIONS") == "1" {
		// The installed version is the one the stream fixtures name.
		dirs, _ := filepath.Glob(filepath.Join("testdata", s.ID+"-[0-9]*"))
		if len(dirs) != 1 {
			t.Fatalf("capture: want one testdata/%s-<version> directory, have %v", s.ID, dirs)
		}
		captureSessions(t, store, filepath.Base(dirs[0]), home, work, runs)
	}
}

// checkSessionPair checks that list holds the plain and tool sessions of
// runs and that their transcripts read back what the CLI was told and
// answered.
func checkSessionPair(t *testing.T, cli string, store SessionStore, list []SessionInfo, runs sessionRuns, tool string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	byID := map[string]SessionInfo{}
	for _, si := range list {
		byID[si.ID] = si
	}
	if len(list) != 2 || byID[runs.Plain].ID == "" || byID[runs.Tool].ID == "" {
		t.Fatalf("%s: listed %+v, want the sessions %s and %s", cli, list, runs.Plain, runs.Tool)
	}
	if list[0].ID != runs.Tool {
		t.Errorf("%s: newest first: got %s first, want the tool session %s", cli, list[0].ID, runs.Tool)
	}
	plain := byID[runs.Plain]
	if plain.MessageCount != 4 || !strings.Contains(plain.FirstPrompt, "say hello") || plain.Created.IsZero() ||
		plain.Updated.Before(plain.Created) || plain.Path == "" {
		t.Errorf("%s: plain session summary %+v", cli, plain)
	}
	for _, id := range []string{runs.Plain, runs.Tool} {
		tr, err := store.Read(ctx, id)
		if err != nil {
			t.Fatalf("%s: read %s: %v", cli, id, err)
		}
		if tr.Session.ID != id {
			t.Errorf("%s: read %s gave session %s", cli, id, tr.Session.ID)
		}
		if tr.Stats.Malformed != 0 || tr.Stats.Partial != 0 || tr.Stats.Unknown != 0 {
			t.Errorf("%s: %s stats %+v, want no malformed, partial or unknown records", cli, id, tr.Stats)
		}
		var got []string
		for _, m := range tr.Messages {
			switch m.Role {
			case RoleUser, RoleAssistant:
				got = append(got, m.Role+": "+m.Text)
			case RoleTool:
				for _, r := range m.ToolResults {
					got = append(got, fmt.Sprintf("tool %s %s error=%v: %t", r.ID, r.Name, r.IsError, strings.Contains(r.Output, "maestro-tool-ok")))
				}
			}
			for _, c := range m.ToolCalls {
				got = append(got, fmt.Sprintf("call %s %s: %t", c.ID, c.Name, strings.Contains(string(c.Input), "echo maestro-tool-ok")))
			}
		}
		var want []string
		if id == runs.Plain {
			want = []string{"user: say hello", "assistant: Hello from the fake model.", "user: and again", "assistant: Second turn after resume."}
		} else {
			want = []string{"user: run echo maestro-tool-ok", "assistant: ", fmt.Sprintf("call %s %s: true", toolCallID(cli), tool),
				fmt.Sprintf("tool %s %s error=false: true", toolCallID(cli), tool), "assistant: Tool said: maestro-tool-ok"}
		}
		if runs.QuotedPrompts {
			for i, w := range want {
				if rest, ok := strings.CutPrefix(w, "user: "); ok {
					want[i] = `user: "` + rest + `"`
				}
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: transcript of %s:\n%s\nwant:\n%s", cli, id, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// toolCallID is the id a CLI stores for the fake model's call_tool1.
func toolCallID(cli string) string {
	if cli == "gemini-cli" {
		return "run_shell_command__call_tool1"
	}
	return "call_tool1"
}

// captureSessions copies the storage trees of one run into
// testdata/sessions/<name>/home with the temporary paths rewritten.
func captureSessions(t *testing.T, store SessionStore, name, home, work string, runs sessionRuns) {
	t.Helper()
	dest := filepath.Join("testdata", "sessions", name)
	if err := os.RemoveAll(dest); err != nil {
		t.Fatal(err)
	}
	destHome := filepath.Join(dest, "home")
	rw := newPathRewriter(home, work)
	copyFile := func(src string) {
		rel, err := filepath.Rel(home, src)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("capture: %s is outside HOME", src)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(destHome, rw.Replace(rel)), rw.Replace(string(data)))
	}
	copyTree := func(root string) {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				copyFile(p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	switch st := store.(type) {
	case *projectsStore, *codexStore:
		for _, l := range store.Locations(work) {
			copyTree(l)
		}
	case *geminiStore:
		copyFile(filepath.Join(st.root, "projects.json"))
		for _, l := range store.Locations(work) {
			if _, err := os.Stat(l); err == nil {
				copyTree(l)
				copyFile(filepath.Join(filepath.Dir(l), ".project_root"))
			}
		}
	case *opencodeStore:
		rel, _ := filepath.Rel(home, st.db)
		captureSQLite(t, st.db, filepath.Join(destHome, rel), rw)
	default:
		t.Fatalf("capture: unknown store %T", store)
	}
	manifest, _ := json.MarshalIndent(struct {
		Project string `json:"project"`
		sessionRuns
	}{fixtureProject, runs}, "", "  ")
	writeFile(t, filepath.Join(dest, "sessions.json"), string(manifest)+"\n")
	t.Logf("captured %s sessions into %s", name, dest)
}

// pathRewriter maps a capture's temporary HOME and project directory (and
// the forms the CLIs derive from them) to the fixture paths.
type pathRewriter struct{ pairs []string }

func newPathRewriter(home, work string) *pathRewriter {
	hash := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	return &pathRewriter{pairs: []string{
		work, fixtureProject,
		encodeProjectDir(work), encodeProjectDir(fixtureProject),
		hash(work), hash(fixtureProject),
		strings.TrimPrefix(work, "/"), strings.TrimPrefix(fixtureProject, "/"),
		home, fixtureHome,
	}}
}

// Replace applies the pairs in order.
func (r *pathRewriter) Replace(s string) string {
	for i := 0; i < len(r.pairs); i += 2 {
		s = strings.ReplaceAll(s, r.pairs[i], r.pairs[i+1])
	}
	return s
}

// captureSQLite writes a compact copy of an SQLite database (WAL content
// included) with every text column rewritten.
func captureSQLite(t *testing.T, src, dest string, rw *pathRewriter) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(t.TempDir(), "copy.db")
	in, err := sql.Open("sqlite", "file:"+src+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if _, err := in.Exec("VACUUM INTO ?", tmp); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p
		WHERE m.type = 'table' AND upper(p.type) = 'TEXT'`)
	if err != nil {
		t.Fatal(err)
	}
	var cols [][2]string
	for rows.Next() {
		var c [2]string
		if err := rows.Scan(&c[0], &c[1]); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	rows.Close()
	for _, c := range cols {
		for i := 0; i < len(rw.pairs); i += 2 {
			q := fmt.Sprintf(`UPDATE %q SET %q = replace(%q, ?, ?) WHERE instr(%q, ?) > 0`, c[0], c[1], c[1], c[1])
			if _, err := db.Exec(q, rw.pairs[i], rw.pairs[i+1], rw.pairs[i]); err != nil {
				t.Fatalf("%s.%s: %v", c[0], c[1], err)
			}
		}
	}
	for _, q := range []string{"PRAGMA journal_mode=DELETE", "VACUUM INTO '" + dest + "'"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
