package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/tool/sshtest"
)

// TestSSHConnectionsKeyFileInHome: key_file: ~/.ssh/k is read from the
// home directory (it was opened as a path under a directory named "~",
// and the run failed: "open ~/.ssh/k: no such file or directory"); a
// host_key that is not one says what is expected.
func TestSSHConnectionsKeyFileInHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	signer, pem := sshtest.NewKeyFile(t)
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "k"), pem, 0o600); err != nil {
		t.Fatal(err)
	}
	hostKey := string(ssh.MarshalAuthorizedKey(sshtest.NewSigner(t).PublicKey()))
	cfg := config.Config{SSHConnections: map[string]config.SSHConnection{
		"box": {Host: "h", User: "ops", KeyFile: "~/.ssh/k", HostKey: hostKey},
	}}
	conns, err := SSHConnections(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := conns["box"].Signer; got == nil || string(got.PublicKey().Marshal()) != string(signer.PublicKey().Marshal()) {
		t.Errorf("signer = %v, want the key of ~/.ssh/k", got)
	}
	cfg.SSHConnections["box"] = config.SSHConnection{Host: "h", User: "ops", KeyFile: "~/.ssh/k", HostKey: "build.example.com"}
	if _, err := SSHConnections(cfg); err == nil || !strings.Contains(err.Error(), `expected the server's public key as "TYPE BASE64"`) {
		t.Errorf("a host_key that is not a key: %v", err)
	}
}
