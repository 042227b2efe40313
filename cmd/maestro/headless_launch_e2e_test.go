package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/proctest"
	"github.com/maestro-run/maestro/internal/protocol"
)

// TestHeadlessLauncherIDs (issue 12): `maestro headless` started by a
// launcher that picked the session id (MAESTRO_SESSION_ID) and an agent
// run id (MAESTRO_AGENT_RUN_ID) reports the launcher's session id in
// ready and session_info (schema-checked) and records both ids in the
// session's metadata under MAESTRO_HOME.
func TestHeadlessLauncherIDs(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "headless", "--sandbox", "off", "--workspace", t.TempDir())
	cmd.Env = append(proctest.NoModelEnv(home), "MAESTRO_SESSION_ID=ses_launcher_7", "MAESTRO_AGENT_RUN_ID=run_launcher_7")
	var stderr proctest.Buffer
	cmd.Stderr = &stderr
	stdin, stdout := proctest.StartPiped(t, cmd)
	got := map[string]string{}
	for f := range readFrames(t, stdout) {
		if f.Type == protocol.TypeReady || f.Type == protocol.TypeSessionInfo {
			got[f.Type] = f.SessionID
		}
		if len(got) == 2 {
			break
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("headless: %v\n%s", err, stderr.String())
	}
	for _, typ := range []string{protocol.TypeReady, protocol.TypeSessionInfo} {
		if got[typ] != "ses_launcher_7" {
			t.Errorf("%s session_id %q, want the launcher's ses_launcher_7", typ, got[typ])
		}
	}
	metas, _ := filepath.Glob(filepath.Join(home, "sessions", "*", "session.json"))
	if len(metas) != 1 {
		t.Fatalf("session metadata files %v, want one", metas)
	}
	data, err := os.ReadFile(metas[0])
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		ClientSessionID string `json:"client_session_id"`
		AgentRunID      string `json:"agent_run_id"`
	}
	if err := json.Unmarshal(data, &meta); err != nil || meta.ClientSessionID != "ses_launcher_7" || meta.AgentRunID != "run_launcher_7" {
		t.Errorf("session metadata %s (%v): want both launcher ids", data, err)
	}
}
