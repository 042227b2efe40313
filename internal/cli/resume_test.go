package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/agentcli/agentclitest"
	"github.com/maestro-run/maestro/internal/session"
)

// TestResumeUnknownSession: --resume of no session names the id and says
// how to list the sessions, in run and headless (both said a bare
// "session not found: ID").
func TestResumeUnknownSession(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"headless", "--resume", "nosuchsession"}, "session not found: nosuchsession; list them with maestro sessions list"},
		{[]string{"run", "--resume", "nosuchsession", "hi"}, "session not found: nosuchsession; list them with maestro sessions list"},
		{[]string{"headless", "--resume", "nos"}, `session not found: "nos"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, nil, tc.args...)
			if r.code != ExitError || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "maestro sessions list") {
				t.Fatalf("exit %d, want %d with %q:\n%s", r.code, ExitError, tc.want, r.stderr)
			}
			if tc.args[0] == "headless" && !strings.Contains(r.stdout, "maestro sessions list") {
				t.Fatalf("the error event does not say how to list the sessions:\n%s", r.stdout)
			}
		})
	}
}

// TestResumeAgentSessionID: an id copied from maestro sessions list
// --agent X is no Maestro session; run, headless and sessions show said
// only "session not found" and to list Maestro's sessions, where it is
// not. They now name the agent CLI whose id it is and the command that
// takes it.
func TestResumeAgentSessionID(t *testing.T) {
	t.Parallel()
	home, err := filepath.Abs(filepath.Join("..", "agentcli", "testdata", "sessions", "claude-code-2.1.330", "home"))
	if err != nil {
		t.Fatal(err)
	}
	const id = "5e29294a-4100-4b5d-9f78-d5a2d0d65339" // a Claude Code session there
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--resume", id, "hi"}, `it is claude-code's own session id: maestro run --agent claude-code --resume ` + id + ` "…"`},
		{[]string{"headless", "--resume", id}, "it is claude-code's own session id: maestro headless --agent claude-code --resume " + id},
		{[]string{"sessions", "show", id}, "it is claude-code's own session id: maestro sessions show --agent claude-code " + id},
	} {
		r := runCLI(t, map[string]string{"HOME": home}, tc.args...)
		if r.code != ExitError || !strings.Contains(r.stderr, "session not found: "+id+"; "+tc.want) {
			t.Errorf("%q: exit %d, want %d with %q:\n%s", tc.args, r.code, ExitError, tc.want, r.stderr)
		}
	}
}

// TestResumeGoneAgent: resuming a session whose agent CLI is no longer
// defined (its ~/.maestro/agents file removed) blamed an --agent flag the
// user never gave.
func TestResumeGoneAgent(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	s, err := session.NewStore(filepath.Join(home, "sessions")).Create(session.Meta{Workspace: t.TempDir(), Provider: "gone", Model: "default", ExecutorType: "live", Agent: "gone"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, map[string]string{"MAESTRO_HOME": home}, "run", "--resume", s.ID(), "hi")
	want := "--resume " + s.ID() + `: the session ran on agent CLI "gone": unknown agent (known: claude-code,`
	if r.code != ExitUsage || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d, want %d with %q:\n%s", r.code, ExitUsage, want, r.stderr)
	}
}

// TestHeadlessHelpCLISessionID: headless --help said any ID that is no
// Maestro session is the CLI's own id; without --agent it is refused.
func TestHeadlessHelpCLISessionID(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, "headless", "--help")
	if !strings.Contains(r.stdout, "with --agent, an ID that is no Maestro session is taken as the\nCLI's own id") {
		t.Errorf("headless --help:\n%s", r.stdout)
	}
}

// TestAgentModelWithoutArgs: --model for an agent CLI whose definition has
// no args.model is refused; the run said "model mine/foo" and never
// passed it.
func TestAgentModelWithoutArgs(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	agentclitest.WriteFile(t, filepath.Join(home, "agents", "mine.yaml"), "id: mine\nname: Mine\nbinary: /bin/true\nparser: text\ncapabilities: {batch_mode: true}\n")
	r := runCLI(t, map[string]string{"MAESTRO_HOME": home}, "run", "--agent", "mine", "--model", "foo", "hi")
	if want := "--model: mine takes no model (its definition, " + filepath.Join(home, "agents", "mine.yaml") + ", has no args.model); drop --model"; r.code != ExitUsage || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d, want %d with %q:\n%s", r.code, ExitUsage, want, r.stderr)
	}
}

// TestResumeOtherAgentsSession: --agent X --resume ID where ID is another
// CLI's own session id failed with X's "no conversation found" alone; the
// error now names the CLI whose id it is.
func TestResumeOtherAgentsSession(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	agentclitest.InstallUserAdapter(t, home)
	claudeHome, err := filepath.Abs(filepath.Join("..", "agentcli", "testdata", "sessions", "claude-code-2.1.330", "home"))
	if err != nil {
		t.Fatal(err)
	}
	fake, err := filepath.Abs(filepath.Join("..", "agentcli", "testdata", "user-adapter"))
	if err != nil {
		t.Fatal(err)
	}
	const id = "5e29294a-4100-4b5d-9f78-d5a2d0d65339" // a Claude Code session there
	r := runCLI(t, map[string]string{"MAESTRO_HOME": home, "HOME": claudeHome, "PATH": fake + ":/usr/bin:/bin"},
		"run", "--agent", "fake-agent", "--resume", id, "-w", t.TempDir(), "hi")
	want := `session_not_found: Error: No conversation found with session ID: ` + id + `; it is claude-code's own session id: maestro run --agent claude-code --resume ` + id
	if r.code != ExitError || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d, want %d with %q:\n%s", r.code, ExitError, want, r.stderr)
	}
}
