package host

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/agentcli"
)

// The agent CLIs' permission level: --permission, else the
// configuration's agent_permission, else edit; a bad flag is a spec error.
func TestAgentPermission(t *testing.T) {
	t.Parallel()
	configured := t.TempDir()
	if err := os.WriteFile(filepath.Join(configured, "config.yaml"), []byte("agent_permission: read-only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		home, flag string
		want       agentcli.Permission
	}{
		{t.TempDir(), "", agentcli.PermissionDefault},
		{t.TempDir(), "full", agentcli.PermissionFull},
		{configured, "", agentcli.PermissionReadOnly},
		{configured, "edit", agentcli.PermissionEdit},
	}
	for _, tt := range tests {
		h, err := New(Options{Home: tt.home})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := h.AgentPermission(tt.flag); err != nil || got != tt.want {
			t.Errorf("AgentPermission(%q) in %s = %q, %v; want %q", tt.flag, tt.home, got, err, tt.want)
		}
	}
	_, err := newHost(t).AgentPermission("yolo")
	var se *SpecError
	if err == nil || !strings.Contains(err.Error(), "--permission") || !errors.As(err, &se) {
		t.Errorf("AgentPermission(yolo) = %v, want a spec error", err)
	}
}
