package tool

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/tool/sshtest"
	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

func TestSSHTools(t *testing.T) {
	key := sshtest.NewSigner(t)
	srv := sshtest.Start(t, key.PublicKey())
	const id, other = "6f9619ff-8b86-d011-b42d-00c04fc964ff", "7a8b9cde-1234-4567-89ab-cdef12345678"
	conns := map[string]SSHConnection{
		id:    {ID: id, Host: "127.0.0.1", Port: srv.Addr.Port, User: "ops", Signer: key, HostKey: srv.HostKey},
		other: {ID: other, Host: "127.0.0.1", Port: srv.Addr.Port, User: "ops", Signer: key, HostKey: sshtest.NewSigner(t).PublicKey()},
	}
	root, outside := testWorkspace(t, map[string]string{"deploy/app.conf": "port=8080\n"})
	wstest.Symlink(t, outside, filepath.Join(root.Dir(), "escape"))
	os.WriteFile(filepath.Join(srv.Dir, "remote.log"), []byte("started\n"), 0o644)
	os.WriteFile(filepath.Join(srv.Dir, "big.bin"), []byte(strings.Repeat("x", 200)), 0o644)
	opts := func(allowed ...string) SSHOptions {
		return SSHOptions{Connections: conns, Allowed: allowed, Timeout: 10 * time.Second, MaxOutputBytes: 100, MaxFileBytes: 100}
	}
	tests := []struct {
		name     string
		tool     Tool
		in       any
		code     string
		contains []string
	}{
		{"exec", NewSshExec(opts(id)), SshExecInput{id, "echo hi; echo oops >&2"}, "", []string{"hi\n[stderr]\noops"}},
		{"exec any", NewSshExec(opts("*")), SshExecInput{id, "echo any"}, "", []string{"any"}},
		{"exit status", NewSshExec(opts(id)), SshExecInput{id, "exit 3"}, CodeFailed, []string{"exit code 3"}},
		{"output cap", NewSshExec(opts(id)), SshExecInput{id, "cat big.bin"}, "", []string{"output cut at 100 bytes"}},
		{"omitted list", NewSshExec(opts()), SshExecInput{id, "echo hi"}, CodeDenied, []string{ErrNoConnectionsDeclared}},
		{"empty list", NewSshExec(SSHOptions{Connections: conns, Allowed: []string{}}), SshExecInput{id, "echo hi"}, CodeDenied, []string{ErrNoConnectionsDeclared}},
		{"not in the list", NewSshExec(opts(other)), SshExecInput{id, "echo hi"}, CodeDenied, []string{"connection_not_allowed", id}},
		{"unregistered", NewSshExec(opts("*")), SshExecInput{"deadbeef-0000", "echo hi"}, CodeNotFound, []string{"no registered SSH connection"}},
		{"changed host key", NewSshExec(opts(other)), SshExecInput{other, "echo hi"}, CodeFailed, []string{"host key mismatch"}},
		{"upload", NewSshUpload(root, opts(id)), SshUploadInput{id, "deploy/app.conf", "app.conf"}, "", []string{"uploaded deploy/app.conf (10 bytes)"}},
		{"upload escape", NewSshUpload(root, opts(id)), SshUploadInput{id, "escape/secret.txt", "s.txt"}, CodeWorkspaceViolation, nil},
		{"upload refused", NewSshUpload(root, opts()), SshUploadInput{id, "deploy/app.conf", "x"}, CodeDenied, []string{ErrNoConnectionsDeclared}},
		{"download", NewSshDownload(root, opts(id)), SshDownloadInput{id, "remote.log", "logs/remote.log"}, "", []string{"downloaded " + id + ":remote.log (8 bytes)"}},
		{"download escape", NewSshDownload(root, opts(id)), SshDownloadInput{id, "remote.log", "escape/x"}, CodeWorkspaceViolation, nil},
		{"download too large", NewSshDownload(root, opts(id)), SshDownloadInput{id, "big.bin", "big.bin"}, CodeTooLarge, nil},
		{"download missing", NewSshDownload(root, opts(id)), SshDownloadInput{id, "nope", "nope"}, CodeFailed, []string{"exit code 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call(t, tt.tool, tt.in)
			if got := res.ErrorCode(); got != tt.code {
				t.Fatalf("error code %q, want %q: %s", got, tt.code, res.Content)
			}
			wantResult(t, res, tt.code != "", tt.contains...)
		})
	}
	if b, err := os.ReadFile(filepath.Join(srv.Dir, "app.conf")); err != nil || string(b) != "port=8080\n" {
		t.Errorf("uploaded file = %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(root.Dir(), "logs", "remote.log")); err != nil || string(b) != "started\n" {
		t.Errorf("downloaded file = %q, %v", b, err)
	}
	for _, p := range []string{filepath.Join(outside, "x"), filepath.Join(srv.Dir, "s.txt"), filepath.Join(root.Dir(), "big.bin")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
}
