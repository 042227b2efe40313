package host

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/secrets"
	"github.com/maestro-run/maestro/internal/secrets/secretstest"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
	"github.com/maestro-run/maestro/internal/store/sqlite/sqlitetest"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/tool/sshtest"
	"github.com/maestro-run/maestro/internal/workspace"
)

func registryStore(t *testing.T) *sqlite.Store {
	t.Helper()
	return sqlitetest.Open(t, sqlite.Options{})
}

// TestSSHConnectionsFromStore registers connections in the store as the
// API does (key sealed) and runs SshExec, SshUpload and SshDownload
// against the in-process SSH server through what SSHConnectionsFor
// resolves: the owner's and a grantee's tasks reach the server, another
// user's task does not see the connection, a connection whose pinned host
// key changed is refused, and one sealed under another key is left out
// with the reason.
func TestSSHConnectionsFromStore(t *testing.T) {
	key, pemKey := sshtest.NewKeyFile(t)
	srv := sshtest.Start(t, key.PublicKey())
	st := registryStore(t)
	box := secretstest.Box(t, 1)
	hostKey := string(ssh.MarshalAuthorizedKey(srv.HostKey))
	otherHostKey := string(ssh.MarshalAuthorizedKey(sshtest.NewSigner(t).PublicKey()))
	register := func(id, owner, pinned string, b *secrets.Box) {
		t.Helper()
		sealed, err := b.SealString(string(pemKey), store.SSHSecretPurpose(id, store.SSHAuthKey))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.CreateSSHConnection(t.Context(), store.SSHConnectionRecord{ID: id, Owner: owner, Host: "127.0.0.1",
			Port: srv.Addr.Port, User: "ops", HostKey: pinned, Auth: store.SSHAuthKey, Secret: sealed}); err != nil {
			t.Fatal(err)
		}
	}
	register("b0000000-0001", "alice", hostKey, box)
	register("b0000000-0002", "alice", otherHostKey, box)
	register("b0000000-0003", "alice", hostKey, secretstest.Box(t, 2))
	if _, err := st.GrantSSHConnection(t.Context(), store.SSHGrant{ConnectionID: "b0000000-0001", GranteeKind: store.GranteeUser, Grantee: "bob"}); err != nil {
		t.Fatal(err)
	}
	configured := map[string]tool.SSHConnection{"ops": {ID: "ops", Host: "192.0.2.1", User: "root"}}

	root, err := workspace.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := root.WriteFile("deploy.conf", []byte("v=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	run := func(t *testing.T, tl tool.Tool, in any) tool.Result {
		t.Helper()
		raw, _ := json.Marshal(in)
		res, err := tl.Run(t.Context(), tool.Call{ID: "c", Input: raw})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, user := range []string{"alice", "bob"} {
		t.Run(user, func(t *testing.T) {
			conns, skipped, err := SSHConnectionsFor(t.Context(), st, box, configured, user)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := conns["ops"]; !ok {
				t.Error("the configured connection is missing")
			}
			o := tool.SSHOptions{Connections: conns, Allowed: []string{"*"}, Timeout: 10 * time.Second}
			if res := run(t, tool.NewSshExec(o), tool.SshExecInput{Connection: "b0000000-0001", Command: "echo hi-$USER-from-store"}); res.IsError || !strings.Contains(res.Content, "hi-") {
				t.Fatalf("SshExec on build: %s", res.Content)
			}
			if res := run(t, tool.NewSshUpload(root, o), tool.SshUploadInput{Connection: "b0000000-0001", Path: "deploy.conf", RemotePath: user + ".conf"}); res.IsError {
				t.Fatalf("SshUpload: %s", res.Content)
			}
			if res := run(t, tool.NewSshDownload(root, o), tool.SshDownloadInput{Connection: "b0000000-0001", RemotePath: user + ".conf", Path: "back/" + user + ".conf"}); res.IsError {
				t.Fatalf("SshDownload: %s", res.Content)
			}
			if got, err := root.ReadFile("back/" + user + ".conf"); err != nil || string(got) != "v=1\n" {
				t.Fatalf("downloaded %q, %v", got, err)
			}
			if user != "alice" {
				return
			}
			if res := run(t, tool.NewSshExec(o), tool.SshExecInput{Connection: "b0000000-0002", Command: "echo hi"}); !res.IsError || !strings.Contains(res.Content, "host key mismatch") {
				t.Fatalf("a changed host key: %s", res.Content)
			}
			if len(skipped) != 1 || !errors.Is(skipped[0], secrets.ErrUnknownKey) || !strings.Contains(skipped[0].Error(), "b0000000-0003") {
				t.Fatalf("skipped = %v, want the connection sealed under another key", skipped)
			}
		})
	}
	t.Run("another user", func(t *testing.T) {
		conns, _, err := SSHConnectionsFor(t.Context(), st, box, configured, "eve")
		if err != nil {
			t.Fatal(err)
		}
		o := tool.SSHOptions{Connections: conns, Allowed: []string{"b0000000-0001"}, Timeout: 10 * time.Second}
		res := run(t, tool.NewSshExec(o), tool.SshExecInput{Connection: "b0000000-0001", Command: "echo hi"})
		if res.ErrorCode() != tool.CodeNotFound || !strings.Contains(res.Content, "no registered SSH connection") {
			t.Fatalf("eve's task reached alice's connection: %s", res.Content)
		}
	})
	t.Run("not in the movement's list", func(t *testing.T) {
		conns, _, _ := SSHConnectionsFor(t.Context(), st, box, configured, "alice")
		o := tool.SSHOptions{Connections: conns, Allowed: []string{"ops"}, Timeout: 10 * time.Second}
		res := run(t, tool.NewSshExec(o), tool.SshExecInput{Connection: "b0000000-0001", Command: "echo hi"})
		if res.ErrorCode() != tool.CodeDenied || !strings.Contains(res.Content, "connection_not_allowed") {
			t.Fatalf("a connection outside allowed_ssh_connections: %s", res.Content)
		}
	})
}

// TestStoredMCPServers: registered servers come back with their secrets
// opened, and MCPLookup finds config.yaml's first (it wins a shared
// slug), then the registered ones.
func TestStoredMCPServers(t *testing.T) {
	st := registryStore(t)
	box := secretstest.Box(t, 1)
	tok, _ := box.SealString("s3cret", store.MCPSecretPurpose("gh", "headers", "Authorization"))
	if _, err := st.CreateMCPServer(t.Context(), store.MCPServerRecord{Slug: "gh", Transport: store.MCPHTTP, URL: "https://mcp.example/mcp",
		Headers: map[string]string{"Authorization": tok}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateMCPServer(t.Context(), store.MCPServerRecord{Slug: "fs", Transport: store.MCPStdio, Command: "fs-mcp", Args: []string{"/data"}}); err != nil {
		t.Fatal(err)
	}
	got, err := StoredMCPServers(t.Context(), st, box)
	if err != nil {
		t.Fatal(err)
	}
	if got["gh"].Headers["Authorization"] != "s3cret" || got["gh"].URL != "https://mcp.example/mcp" || got["fs"].Command != "fs-mcp" {
		t.Fatalf("StoredMCPServers = %+v", got)
	}
	lookup := MCPLookup(map[string]config.MCPServer{"fs": {Command: "configured-fs"}}, st, box)
	for slug, want := range map[string]string{"fs": "configured-fs", "gh": "https://mcp.example/mcp"} {
		s, ok, err := lookup(t.Context(), slug)
		if err != nil || !ok || s.Command+s.URL != want {
			t.Fatalf("MCPLookup(%s) = %+v, %v, %v; want %s", slug, s, ok, err, want)
		}
	}
	if _, ok, err := lookup(t.Context(), "nope"); ok || err != nil {
		t.Fatalf("MCPLookup(nope) = %v, %v", ok, err)
	}
	// Without the key only a registered server with secrets fails; the
	// configured one and a registered one without secrets are found.
	noKey := MCPLookup(map[string]config.MCPServer{"cfg": {Command: "c"}}, st, nil)
	if s, ok, err := noKey(t.Context(), "fs"); !ok || err != nil || s.Command != "fs-mcp" {
		t.Fatalf("MCPLookup without key (fs) = %+v, %v, %v", s, ok, err)
	}
	if _, _, err := noKey(t.Context(), "gh"); !errors.Is(err, secrets.ErrNoKey) {
		t.Fatalf("MCPLookup without key (gh) = %v", err)
	}
	if _, err := StoredMCPServers(t.Context(), st, nil); !errors.Is(err, secrets.ErrNoKey) || !strings.Contains(err.Error(), "gh") {
		t.Fatalf("without the key: %v", err)
	}
}
