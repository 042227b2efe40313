package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/tool"
)

// SSHConnections is the SSH tools' registered connections from the
// configuration file (ssh_connections): each with its pinned host key and
// its private key (read from key_file) or password.
func SSHConnections(cfg config.Config) (map[string]tool.SSHConnection, error) {
	if len(cfg.SSHConnections) == 0 {
		return nil, nil
	}
	out := make(map[string]tool.SSHConnection, len(cfg.SSHConnections))
	for id, c := range cfg.SSHConnections {
		hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(c.HostKey))
		if err != nil {
			return nil, fmt.Errorf("configuration ssh_connections.%s.host_key: %w (expected the server's public key as \"TYPE BASE64\", e.g. a line of ssh-keyscan -t ed25519 HOST without the host name)", id, err)
		}
		conn := tool.SSHConnection{ID: id, Host: c.Host, Port: c.Port, User: c.User, Password: c.Password, HostKey: hostKey}
		if c.KeyFile != "" {
			pem, err := os.ReadFile(expandHome(c.KeyFile))
			if err != nil {
				return nil, fmt.Errorf("configuration ssh_connections.%s.key_file: %w", id, err)
			}
			if conn.Signer, err = ssh.ParsePrivateKey(pem); err != nil {
				return nil, fmt.Errorf("configuration ssh_connections.%s.key_file %s: %w", id, c.KeyFile, err)
			}
		}
		out[id] = conn
	}
	return out, nil
}

// expandHome replaces a leading ~/ of path by the user's home directory,
// as a shell would: key_file: ~/.ssh/id_ed25519 was opened as a path
// beginning with a directory named "~".
func expandHome(path string) string {
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return path
}
