package hostedrunner

// Attacks of issue 14 on the hosted runner's own files: links and FIFOs an
// agent plants where the runner keeps its state or writes its drain
// snapshot, a watch that would feed on the runner's own log, and a restore
// that must hand the whole conversation over.

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/anthropic"
	"github.com/maestro-run/maestro/internal/llm/llmtest"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/utility"
	"github.com/maestro-run/maestro/internal/workspace"
	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

// bound is how long a drain, a restore or a shutdown may take in these
// tests however the workspace has been tampered with.
const bound = 2 * time.Second

// within runs fn and fails the test if it takes longer than bound. A call
// that never returns is reported, not waited for.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(bound):
		t.Fatalf("%s did not return within %s", what, bound)
	}
	if d := time.Since(start); d > bound {
		t.Errorf("%s took %s, want at most %s", what, d, bound)
	}
}

// mustBeEmpty fails if anything at all exists under dir.
func mustBeEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	for _, e := range entries {
		t.Errorf("written outside the workspace: %s", filepath.Join(dir, e.Name()))
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

func mkdirAll(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

// postDrain drains over HTTP and returns the status code and body.
func postDrain(t *testing.T, r *Runner, body string) (code int, data []byte) {
	t.Helper()
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	within(t, "drain", func() {
		resp, err := http.Post(srv.URL+DrainPath, "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		code = resp.StatusCode
		data, _ = io.ReadAll(resp.Body)
	})
	return code, data
}

// connectUtil connects a controller negotiating the file utilities.
func connectUtil(t *testing.T, r *Runner) *controller {
	t.Helper()
	return connectWith(t, r, &protocol.Capabilities{UtilityOperations: []protocol.UtilityOperation{protocol.OpFileRead, protocol.OpFileWatch}})
}

// prompt runs one fixture prompt to its end.
func prompt(t *testing.T, r *Runner) {
	t.Helper()
	c := connect(t, r)
	defer c.conn.Close()
	if err := c.conn.Handle(context.Background(), protocol.Prompt{Content: "hello"}); err != nil {
		t.Fatal(err)
	}
	c.until(isStatus("Prompt: hello"))
	if err := r.Runtime().WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestStateOutsideWorkspace: by default the runner's session log lives
// under MAESTRO_HOME, and a drain leaves in the workspace nothing but the
// contract's snapshot root.
func TestStateOutsideWorkspace(t *testing.T) {
	t.Parallel()
	ws, home := newWorkspace(t), t.TempDir()
	env := map[string]string{"MAESTRO_RUNNER_SESSION_ID": "mrs_1", "MAESTRO_WORKSPACE_ROOT": ws,
		"MAESTRO_HOSTED_RUNNER_LISTEN": "127.0.0.1:0", "MAESTRO_HOME": home}
	cfg, err := Load(Flags{}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, "hosted-runner"); cfg.StateDir != want {
		t.Errorf("state dir %q, want %q", cfg.StateDir, want)
	}
	r, _ := newRunner(t, cfg)
	prompt(t, r)
	if _, ok := workspace.Within(ws, r.slog.file); ok {
		t.Errorf("session log %s is inside the workspace", r.slog.file)
	}
	if code, body := postDrain(t, r, ""); code != http.StatusOK {
		t.Fatalf("drain: %d %s", code, body)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	snaps := filepath.Join(ws, ".maestro", "runner-snapshots")
	filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ws, p)
		switch {
		case rel == "." || rel == "notes.txt" || rel == "src" || rel == ".maestro" || p == snaps:
		case filepath.Dir(p) == snaps && d.Type().IsRegular():
		default:
			t.Errorf("Maestro left %s in the workspace", rel)
		}
		return nil
	})
}

// TestDrainPlantedLinks: links planted where the drain writes (the snapshot
// root, .maestro, the manifest's name) or where the runner keeps its state
// when the state dir is inside the workspace: nothing is written outside
// the workspace, and the drain answers promptly.
func TestDrainPlantedLinks(t *testing.T) {
	t.Parallel()
	manifest := "mrs_123-2026-04-23T00_00_00_000Z.json"
	tests := []struct {
		name string
		// stateInWorkspace puts the state dir at <ws>/.maestro/state.
		stateInWorkspace bool
		before           func(t *testing.T, ws, out string)
		after            func(t *testing.T, r *Runner, ws, out string)
		newFails         bool
		drainFails       bool
	}{
		{name: "snapshot root is a link", before: func(t *testing.T, ws, out string) {
			mkdirAll(t, filepath.Join(ws, ".maestro"))
			wstest.Symlink(t, out, filepath.Join(ws, ".maestro", "runner-snapshots"))
		}, drainFails: true},
		{name: ".maestro is a link", before: func(t *testing.T, ws, out string) {
			wstest.Symlink(t, out, filepath.Join(ws, ".maestro"))
		}, drainFails: true},
		{name: "snapshot root replaced by a link during the run", after: func(t *testing.T, _ *Runner, ws, out string) {
			mkdirAll(t, filepath.Join(ws, ".maestro"))
			wstest.Symlink(t, out, filepath.Join(ws, ".maestro", "runner-snapshots"))
		}, drainFails: true},
		{name: "manifest name is a link", before: func(t *testing.T, ws, out string) {
			mkdirAll(t, filepath.Join(ws, ".maestro", "runner-snapshots"))
			wstest.Symlink(t, filepath.Join(out, "victim"), filepath.Join(ws, ".maestro", "runner-snapshots", manifest))
		}},
		{name: "session directory replaced by a link", stateInWorkspace: true, after: func(t *testing.T, r *Runner, ws, out string) {
			dir := filepath.Dir(r.slog.file)
			if err := os.Rename(dir, filepath.Join(ws, "moved")); err != nil {
				t.Fatal(err)
			}
			wstest.Symlink(t, out, dir)
		}},
		{name: "sessions directory replaced by a link", stateInWorkspace: true, after: func(t *testing.T, r *Runner, ws, out string) {
			dir := filepath.Dir(filepath.Dir(r.slog.file))
			if err := os.Rename(dir, filepath.Join(ws, "moved")); err != nil {
				t.Fatal(err)
			}
			wstest.Symlink(t, out, dir)
		}},
		{name: "state directory is a link", stateInWorkspace: true, before: func(t *testing.T, ws, out string) {
			mkdirAll(t, filepath.Join(ws, ".maestro"))
			wstest.Symlink(t, out, filepath.Join(ws, ".maestro", "state"))
		}, newFails: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ws, out := newWorkspace(t), t.TempDir()
			cfg := testConfig(ws)
			if tt.stateInWorkspace {
				cfg.StateDir = filepath.Join(ws, ".maestro", "state")
			}
			if tt.before != nil {
				tt.before(t, ws, out)
			}
			r, err := New(cfg, Options{Now: fixedNow})
			if tt.newFails {
				if err == nil {
					r.Close()
					t.Error("the runner started on a planted link")
				} else if !strings.Contains(err.Error(), "symbolic link") {
					t.Errorf("start-up error %q does not name the link", err)
				}
				mustBeEmpty(t, out)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			r.SetAttach(&fakeAttach{})
			prompt(t, r)
			if tt.after != nil {
				tt.after(t, r, ws, out)
			}
			code, body := postDrain(t, r, "")
			switch {
			case tt.drainFails && code == http.StatusOK:
				t.Errorf("drain succeeded through a planted link: %s", body)
			case tt.drainFails && !strings.Contains(string(body), "symbolic link"):
				t.Errorf("drain error does not name the link: %d %s", code, body)
			case !tt.drainFails && code != http.StatusOK:
				t.Errorf("drain: %d %s", code, body)
			}
			within(t, "close", func() { r.Close() })
			mustBeEmpty(t, out)
		})
	}
}

// TestDrainFIFOs: FIFOs planted where the drain writes or lists answer
// within the bound, and the runner still closes.
func TestDrainFIFOs(t *testing.T) {
	t.Parallel()
	snaps := func(ws string) string { return filepath.Join(ws, ".maestro", "runner-snapshots") }
	tests := []struct {
		name       string
		plant      func(t *testing.T, ws string)
		body       string
		drainFails bool
	}{
		{name: "snapshot root is a FIFO", plant: func(t *testing.T, ws string) {
			mkdirAll(t, filepath.Join(ws, ".maestro"))
			mkfifo(t, snaps(ws))
		}, drainFails: true},
		{name: "manifest name is a FIFO", plant: func(t *testing.T, ws string) {
			mkdirAll(t, snaps(ws))
			mkfifo(t, filepath.Join(snaps(ws), "mrs_123-2026-04-23T00_00_00_000Z.json"))
		}},
		{name: "session file name is a FIFO", plant: func(t *testing.T, ws string) {
			mkdirAll(t, snaps(ws))
			mkfifo(t, filepath.Join(snaps(ws), "mrs_123-2026-04-23T00_00_00_000Z.session.jsonl"))
		}},
		{name: "export path is a FIFO", plant: func(t *testing.T, ws string) {
			mkfifo(t, filepath.Join(ws, "pipe"))
		}, body: `{"export_paths":["pipe"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ws := newWorkspace(t)
			r, _ := newRunner(t, testConfig(ws))
			prompt(t, r)
			tt.plant(t, ws)
			code, body := postDrain(t, r, tt.body)
			if tt.drainFails == (code == http.StatusOK) {
				t.Errorf("drain: %d %s", code, body)
			}
			within(t, "close", func() { r.Close() })
		})
	}
}

// TestCloseAfterStuckWork: work that never ends (a utility read blocked
// opening a FIFO) bounds the drain by its timeout, and Close (what SIGTERM
// runs after a drain) still returns promptly.
func TestCloseAfterStuckWork(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	fifo := filepath.Join(ws, "pipe")
	mkfifo(t, fifo)
	t.Cleanup(func() {
		// Release a reader still blocked in open(2), if any.
		if fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			syscall.Close(fd)
		}
	})
	root, err := workspace.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	r, err := New(testConfig(ws), Options{Now: fixedNow, DrainTimeout: 300 * time.Millisecond, CloseTimeout: time.Second,
		Utilities: func(emit func(protocol.Message), _ []string) runtime.Utilities {
			return utility.New(utility.Config{Root: root, Emit: emit})
		}})
	if err != nil {
		t.Fatal(err)
	}
	r.SetAttach(&fakeAttach{})
	c := connectUtil(t, r)
	if err := c.conn.Handle(context.Background(), protocol.UtilityFileRead{ReadID: "r1", Path: "pipe"}); err != nil {
		t.Fatal(err)
	}
	// Busy for 100 ms: the read is stuck (or, once reads of FIFOs are
	// refused, it has already ended and the drain simply succeeds).
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	r.Runtime().WaitIdle(ctx)
	cancel()
	postDrain(t, r, "")
	within(t, "close after the drain", func() { r.Close() })
}

// fakeModel starts a fake Anthropic server with the turns and returns a
// provider for it.
func fakeModel(t *testing.T, turns ...llmtest.Turn) (*llmtest.Server, llm.Provider) {
	t.Helper()
	srv := llmtest.NewServer(t, turns...)
	p, err := anthropic.New(anthropic.Config{APIKey: "sk-test", BaseURL: srv.URL(), Model: "claude-haiku-4-5"})
	if err != nil {
		t.Fatal(err)
	}
	return srv, p
}

// modelPrompt runs one prompt on a model-driven runner to its end.
func modelPrompt(t *testing.T, c *controller, r *Runner, text string) {
	t.Helper()
	if err := c.conn.Handle(context.Background(), protocol.Prompt{Content: text}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Runtime().WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

// drainModelRunner runs one prompt on a new model-driven runner over ws
// and drains it; it returns the drain's answer.
func drainModelRunner(t *testing.T, ws string, p llm.Provider, text string) DrainResponse {
	t.Helper()
	r, err := New(testConfig(ws), Options{Now: fixedNow, Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	r.SetAttach(&fakeAttach{})
	c := connect(t, r)
	modelPrompt(t, c, r, text)
	c.conn.Close()
	code, body := postDrain(t, r, "")
	if code != http.StatusOK {
		t.Fatalf("drain: %d %s", code, body)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	var d DrainResponse
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// restoreAndPrompt starts a fresh runner (a new machine: a new, empty
// state dir) over ws restored from manifest and runs one prompt.
func restoreAndPrompt(t *testing.T, ws, manifest string, p llm.Provider, text string) *Runner {
	t.Helper()
	cfg := testConfig(ws)
	cfg.RunnerSessionID, cfg.MaestroSessionID = "mrs_456", ""
	cfg.StateDir = filepath.Join(t.TempDir(), "fresh-state")
	cfg.RestoreManifest = manifest
	r, err := New(cfg, Options{Now: fixedNow, Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	r.SetAttach(&fakeAttach{})
	modelPrompt(t, connect(t, r), r, text)
	return r
}

// drainedConversation runs "first question" on a runner over ws whose
// fake model answers "First answer." (and "Second answer." next) and
// drains it: the model's server and provider, and the drain's answer.
func drainedConversation(t *testing.T, ws string) (*llmtest.Server, llm.Provider, DrainResponse) {
	t.Helper()
	srv, p := fakeModel(t,
		llmtest.Turn{Text: []string{"First answer."}, InputTokens: 10, OutputTokens: 3},
		llmtest.Turn{Text: []string{"Second answer."}, InputTokens: 20, OutputTokens: 3})
	return srv, p, drainModelRunner(t, ws, p, "first question")
}

// carriesEarlierTurns checks that the second model request of srv holds
// the first exchange and the new question.
func carriesEarlierTurns(t *testing.T, srv *llmtest.Server) {
	t.Helper()
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	second := string(reqs[1].Body)
	for _, want := range []string{"first question", "First answer.", "second question"} {
		if !strings.Contains(second, want) {
			t.Errorf("the restored runner's model request lacks %q: %.500s", want, second)
		}
	}
}

// TestRestoreContinuesConversation: a drain hands the conversation over in
// the snapshot root, and a fresh runner (a new machine: a new, empty state
// dir) restored from the manifest sends the earlier turns to the model.
func TestRestoreContinuesConversation(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	srv, p, d := drainedConversation(t, ws)
	sf := d.Manifest.Runtime.SessionFile
	if filepath.Dir(sf) != filepath.Dir(d.ManifestPath) {
		t.Errorf("session_file %q is not beside the manifest %q", sf, d.ManifestPath)
	}
	if st, err := os.Lstat(sf); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("session file: %v", err)
	}
	r2 := restoreAndPrompt(t, ws, d.ManifestPath, p, "second question")
	carriesEarlierTurns(t, srv)
	if _, ok := workspace.Within(ws, r2.slog.file); ok {
		t.Errorf("restored session log %s is inside the workspace", r2.slog.file)
	}
}

// TestRestoreLegacySessionFile: a manifest of an older version whose
// runtime.session_file is the session log it kept in the workspace
// (<workspace>/.maestro/sessions/<id>/events.jsonl) still restores the
// conversation, read without following a link: a link planted at
// .maestro/sessions fails start-up naming the file.
func TestRestoreLegacySessionFile(t *testing.T) {
	t.Parallel()
	for _, planted := range []bool{false, true} {
		t.Run(map[bool]string{false: "log in the workspace", true: "link planted"}[planted], func(t *testing.T) {
			t.Parallel()
			ws := newWorkspace(t)
			srv, p, d := drainedConversation(t, ws)
			legacy := filepath.Join(ws, ".maestro", "sessions", "0f0e", "events.jsonl")
			data, err := os.ReadFile(d.Manifest.Runtime.SessionFile)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Dir(legacy)
			if planted {
				out := t.TempDir()
				if err := os.MkdirAll(filepath.Join(out, "0f0e"), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(out, filepath.Dir(dir)); err != nil {
					t.Fatal(err)
				}
			} else if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(legacy, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(d.Manifest.Runtime.SessionFile); err != nil {
				t.Fatal(err)
			}
			m := *d.Manifest
			m.Runtime.SessionFile = legacy
			out, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(d.ManifestPath, out, 0o600); err != nil {
				t.Fatal(err)
			}
			if planted {
				cfg := testConfig(ws)
				cfg.StateDir, cfg.RestoreManifest = filepath.Join(t.TempDir(), "fresh-state"), d.ManifestPath
				if r, err := New(cfg, Options{Now: fixedNow, Provider: p}); err == nil {
					r.Close()
					t.Fatal("a restore through a link planted at .maestro/sessions started")
				} else if !strings.Contains(err.Error(), legacy) || !strings.Contains(err.Error(), "symbolic link") {
					t.Errorf("start-up error %q, want it to name %s and the link", err, legacy)
				}
				return
			}
			restoreAndPrompt(t, ws, d.ManifestPath, p, "second question")
			carriesEarlierTurns(t, srv)
		})
	}
}

// TestRestorePlantedFiles: a restore reads the manifest and the session
// file it names through no link and from no FIFO: start-up fails promptly
// with an error naming the file, and nothing outside is read.
func TestRestorePlantedFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		plant func(t *testing.T, manifest, session, out string)
		want  string
	}{
		{"session file is a link", func(t *testing.T, _, session, out string) {
			data, err := os.ReadFile(session)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(out, "log"), data, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Remove(session)
			wstest.Symlink(t, filepath.Join(out, "log"), session)
		}, "session file"},
		{"session file is a FIFO", func(t *testing.T, _, session, _ string) {
			os.Remove(session)
			mkfifo(t, session)
		}, "session file"},
		{"manifest is a link", func(t *testing.T, manifest, _, out string) {
			// The docs' row says "link or FIFO" for both files; only the
			// session file's link was tried.
			if err := os.Rename(manifest, filepath.Join(out, "manifest.json")); err != nil {
				t.Fatal(err)
			}
			wstest.Symlink(t, filepath.Join(out, "manifest.json"), manifest)
		}, "restore manifest"},
		{"manifest is a FIFO", func(t *testing.T, manifest, _, _ string) {
			os.Remove(manifest)
			mkfifo(t, manifest)
		}, "restore manifest"},
		{"snapshot root is a link", func(t *testing.T, manifest, _, out string) {
			dir := filepath.Dir(manifest)
			if err := os.Rename(dir, filepath.Join(out, "snaps")); err != nil {
				t.Fatal(err)
			}
			wstest.Symlink(t, filepath.Join(out, "snaps"), dir)
		}, "symbolic link"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ws, out := newWorkspace(t), t.TempDir()
			r, _ := newRunner(t, testConfig(ws))
			prompt(t, r)
			code, body := postDrain(t, r, "")
			if code != http.StatusOK {
				t.Fatalf("drain: %d %s", code, body)
			}
			r.Close()
			var d DrainResponse
			if err := json.Unmarshal(body, &d); err != nil {
				t.Fatal(err)
			}
			tt.plant(t, d.ManifestPath, d.Manifest.Runtime.SessionFile, out)
			cfg := testConfig(ws)
			cfg.StateDir = filepath.Join(t.TempDir(), "fresh")
			cfg.RestoreManifest = d.ManifestPath
			var err error
			within(t, "restore", func() {
				var r2 *Runner
				if r2, err = New(cfg, Options{Now: fixedNow}); err == nil {
					r2.Close()
				}
			})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("restore: %v, want an error naming %q", err, tt.want)
			}
		})
	}
}

// TestWatchIgnoresOwnState: a watch on the workspace root during a prompt,
// a tool call and a drain reports the agent's file and nothing of
// Maestro's own writes (issue 12 item 3), also when the state dir is
// inside the workspace.
func TestWatchIgnoresOwnState(t *testing.T) {
	t.Parallel()
	for _, inside := range []bool{false, true} {
		name := map[bool]string{false: "state dir outside", true: "state dir inside the workspace"}[inside]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ws := newWorkspace(t)
			_, p := fakeModel(t,
				llmtest.Turn{ToolCalls: []llmtest.ToolCall{{ID: "toolu_1", Name: "Write", Input: `{"path":"hello.txt","content":"hi"}`}}, InputTokens: 5, OutputTokens: 5},
				llmtest.Turn{Text: []string{"Done."}, InputTokens: 9, OutputTokens: 1})
			root, err := workspace.Open(ws)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { root.Close() })
			cfg := testConfig(ws)
			if inside {
				cfg.StateDir = filepath.Join(ws, "mstate")
			}
			r := newUtilRunner(t, cfg, p, root, tool.NewSet(tool.NewWrite(root)))
			c := connectUtil(t, r)
			if err := c.conn.Handle(context.Background(), protocol.Init{ApprovalMode: protocol.ApprovalAuto}); err != nil {
				t.Fatal(err)
			}
			zero := 0
			if err := c.conn.Handle(context.Background(), protocol.UtilityFileWatchStart{WatchID: "w1", DebounceMS: &zero}); err != nil {
				t.Fatal(err)
			}
			c.until(func(f runtime.Frame) bool { _, ok := f.Message.(protocol.UtilityFileWatchStarted); return ok })
			modelPrompt(t, c, r, "write hello.txt")
			if _, err := os.Stat(filepath.Join(ws, "hello.txt")); err != nil {
				t.Fatalf("the tool call did not run: %v", err)
			}
			// Every watch event up to the drain's end is the agent's: first
			// its hello.txt (waited for before draining, since a drain stops
			// the watch and the file system reports the rename on its own
			// time), then nothing of Maestro's own writes.
			sawAgentFile := false
			agentsOnly := func(f runtime.Frame) {
				if ev, ok := f.Message.(protocol.UtilityFileWatchEvent); ok {
					switch {
					case ev.RelativePath == "hello.txt":
						sawAgentFile = true
					case strings.HasPrefix(ev.RelativePath, ".hello.txt.") && strings.HasSuffix(ev.RelativePath, ".tmp"):
						// The Write tool's temporary file: the agent's write.
					default:
						t.Errorf("watch reported %s %s", ev.ChangeType, ev.RelativePath)
					}
				}
			}
			c.until(func(f runtime.Frame) bool { agentsOnly(f); return sawAgentFile })
			if _, _, err := r.Drain(context.Background(), DrainRequest{}); err != nil {
				t.Fatal(err)
			}
			c.until(func(f runtime.Frame) bool { agentsOnly(f); return isStatus(StatusDrained)(f) })
		})
	}
}

// TestSnapshotRootHidden: the snapshot root inside the workspace holds
// Maestro's own files (manifests, session files): a file search over the
// workspace root of a restored runner does not report them, while it
// finds the agent's file of the same kind.
func TestSnapshotRootHidden(t *testing.T) {
	t.Parallel()
	ws := newWorkspace(t)
	if err := os.WriteFile(filepath.Join(ws, "agent.jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, p := fakeModel(t, llmtest.Turn{Text: []string{"First answer."}, InputTokens: 10, OutputTokens: 3})
	cfg := testConfig(ws)
	cfg.SnapshotRoot = filepath.Join(ws, "snaps") // not a dot directory: searches would list it
	r1, err := New(cfg, Options{Now: fixedNow, Provider: p})
	if err != nil {
		t.Fatal(err)
	}
	r1.SetAttach(&fakeAttach{})
	modelPrompt(t, connect(t, r1), r1, "first question")
	if _, _, err := r1.Drain(context.Background(), DrainRequest{}); err != nil {
		t.Fatal(err)
	}
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}

	root, err := workspace.Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	r := newUtilRunner(t, cfg, p, root, nil)
	c, err := r.Runtime().Connect(runtime.ConnectOptions{Role: protocol.RoleController, ProtocolVersion: protocol.Version,
		Capabilities: &protocol.Capabilities{UtilityOperations: []protocol.UtilityOperation{protocol.OpFileSearch}}})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(runtime.SubscribeOptions{From: runtime.FromNow})
	if err != nil {
		t.Fatal(err)
	}
	ctl := &controller{t: t, conn: c, sub: sub}
	for _, q := range []string{"jsonl", "snaps"} {
		if err := c.Handle(context.Background(), protocol.UtilityFileSearch{SearchID: q, Query: q}); err != nil {
			t.Fatal(err)
		}
		f := ctl.until(func(f runtime.Frame) bool { _, ok := f.Message.(protocol.UtilityFileSearchResults); return ok })
		found := false
		for _, res := range f.Message.(protocol.UtilityFileSearchResults).Results {
			if strings.HasPrefix(res.Path, "snaps") {
				t.Errorf("search %q reported Maestro's own %s", q, res.Path)
			}
			found = found || res.Path == "agent.jsonl"
		}
		if q == "jsonl" && !found {
			t.Errorf("search %q did not find the agent's agent.jsonl", q)
		}
	}
}

// newUtilRunner builds a model-driven runner over cfg whose utilities
// (and tools, when not nil) work in root; it is closed with the test.
func newUtilRunner(t *testing.T, cfg Config, p llm.Provider, root *workspace.Root, tools *tool.Set) *Runner {
	t.Helper()
	opts := Options{Now: fixedNow, Provider: p,
		Utilities: func(emit func(protocol.Message), hide []string) runtime.Utilities {
			return utility.New(utility.Config{Root: root, Emit: emit, Hide: hide})
		}}
	if tools != nil {
		opts.Tools = func(context.Context) (*tool.Set, error) { return tools, nil }
	}
	r, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	r.SetAttach(&fakeAttach{})
	return r
}
