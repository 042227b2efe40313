package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/workspace"
)

// TestPlantedStateLinkRefused: in the layout where the run's files live in
// the workspace (RunDir empty), logs/ replaced by a link (the agent of an
// earlier attempt planted it) makes the run fail before it writes; nothing
// lands in the link's target (issue 14 item 2).
func TestPlantedStateLinkRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "chain")
	target := t.TempDir()
	if err := os.Symlink(target, filepath.Join(h.ws, "logs")); err != nil {
		t.Fatal(err)
	}
	_, err := h.start("chain", "List the fruit in notes.txt.")
	if !errors.Is(err, workspace.ErrOutside) {
		t.Errorf("start with a planted logs link: %v, want an error matching workspace.ErrOutside", err)
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Errorf("the run wrote %s through the planted link", ents[0].Name())
	}
}

// TestJobWorkspaceSeparateState: a queued job's layout, the workspace
// holding input/, output/, subtasks/ (results) and skills/ and the run
// directory elsewhere holding the state, the lock and the subtasks' own
// runs. Nothing of Maestro's is left in the workspace.
func TestJobWorkspaceSeparateState(t *testing.T) {
	t.Parallel()
	runDir := t.TempDir()
	leaf := replay.New(loadScenario(t, "leaf"))
	h := newHarness(t, "fanout", func(c *Config) {
		c.RunDir, c.JobWorkspace = runDir, true
		c.SubtaskProvider = func(SubtaskRecord) (llm.Provider, error) { return leaf, nil }
	})
	// A link planted where a subtask result is written is not followed.
	target := t.TempDir()
	if err := os.MkdirAll(filepath.Join(h.ws, "subtasks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(target, "x.md"), filepath.Join(h.ws, "subtasks", "02-beta.md")); err != nil {
		t.Fatal(err)
	}
	out := h.mustStart("fanout", "Count the letters.")
	if out.Status != StatusSucceeded {
		t.Fatalf("outcome = %+v", out)
	}
	for _, d := range []string{"input", "output", "subtasks", "skills"} {
		if fi, err := os.Stat(filepath.Join(h.ws, d)); err != nil || !fi.IsDir() {
			t.Errorf("workspace %s/: %v", d, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(h.ws, "logs")); err == nil {
		t.Error("the run made logs/ in the workspace")
	}
	for _, name := range []string{"01-alpha", "03-gamma"} {
		if data, err := os.ReadFile(filepath.Join(h.ws, "subtasks", name+".md")); err != nil || !strings.Contains(string(data), "- Status: succeeded") {
			t.Errorf("subtask result %s: %v\n%s", name, err, data)
		}
		if _, err := os.Lstat(filepath.Join(h.ws, "subtasks", name)); err == nil {
			t.Errorf("the subtask's run directory %s is in the workspace", name)
		}
		if st, err := LoadState(filepath.Join(runDir, "subtasks", name)); err != nil || st.Status != StatusSucceeded || st.Depth != 1 {
			t.Errorf("subtask %s state: %+v, %v", name, st, err)
		}
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Errorf("a subtask result was written through a planted link: %s", ents[0].Name())
	}
	if st, err := LoadState(runDir); err != nil || st.Status != StatusSucceeded {
		t.Errorf("run state: %+v, %v", st, err)
	}
	if !strings.Contains(text(h.prov.requests()[0]), "Uploads are under input/") {
		t.Error("the prompt does not describe the job workspace")
	}
}
