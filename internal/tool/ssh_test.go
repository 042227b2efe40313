package tool

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

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
		// ~/ is the remote user's home, where commands run: quoted, it
		// was a directory named "~".
		{"download from ~/", NewSshDownload(root, opts(id)), SshDownloadInput{id, "~/remote.log", "logs/home.log"}, "", []string{"(8 bytes)"}},
		{"upload to ~/", NewSshUpload(root, opts(id)), SshUploadInput{id, "deploy/app.conf", "~/home.conf"}, "", []string{"uploaded deploy/app.conf (10 bytes)"}},
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

// TestSSHHostWithSeveralKeys: a host has a key of each type (OpenSSH:
// Ed25519, ECDSA, RSA) and the connection pins one of them: the client
// asks for that one. Left to its own preference it was shown the ECDSA
// key, and an Ed25519 or RSA pin (the docs' example is Ed25519) failed
// every call with "host key mismatch".
func TestSSHHostWithSeveralKeys(t *testing.T) {
	t.Parallel()
	key := sshtest.NewSigner(t)
	newKey := func(k crypto.Signer, err error) ssh.Signer {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		s, err := ssh.NewSignerFromSigner(k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ed := sshtest.NewSigner(t)
	ec := newKey(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	rs := newKey(rsa.GenerateKey(rand.Reader, 1024))
	srv := sshtest.StartKeys(t, key.PublicKey(), ed, ec, rs)
	for _, host := range []ssh.Signer{ed, ec, rs} {
		t.Run(host.PublicKey().Type(), func(t *testing.T) {
			c := SSHConnection{ID: "c", Host: "127.0.0.1", Port: srv.Addr.Port, User: "ops", Signer: key, HostKey: host.PublicKey()}
			o := SSHOptions{Connections: map[string]SSHConnection{"c": c}, Allowed: []string{"c"}, Timeout: 10 * time.Second}
			res := call(t, NewSshExec(o), SshExecInput{"c", "echo hi"})
			wantResult(t, res, false, "hi")
		})
	}
	t.Run("refused key", func(t *testing.T) {
		// The user and the key are named: "ssh: unable to authenticate,
		// attempted methods [none publickey]" said neither.
		wrong := sshtest.NewSigner(t)
		c := SSHConnection{ID: "c", Host: "127.0.0.1", Port: srv.Addr.Port, User: "ops", Signer: wrong, HostKey: ed.PublicKey()}
		o := SSHOptions{Connections: map[string]SSHConnection{"c": c}, Allowed: []string{"c"}, Timeout: 10 * time.Second}
		res := call(t, NewSshExec(o), SshExecInput{"c", "echo hi"})
		wantResult(t, res, true, "the server refused user ops with its key (ssh-ed25519 "+ssh.FingerprintSHA256(wrong.PublicKey()))
	})
	t.Run("changed", func(t *testing.T) {
		other := sshtest.NewSigner(t).PublicKey()
		c := SSHConnection{ID: "c", Host: "127.0.0.1", Port: srv.Addr.Port, User: "ops", Signer: key, HostKey: other}
		o := SSHOptions{Connections: map[string]SSHConnection{"c": c}, Allowed: []string{"c"}, Timeout: 10 * time.Second}
		res := call(t, NewSshExec(o), SshExecInput{"c", "echo hi"})
		wantResult(t, res, true, "host key mismatch", "presented the ssh-ed25519 key "+ssh.FingerprintSHA256(ed.PublicKey()),
			"connection c pins "+ssh.FingerprintSHA256(other), "set the connection's host_key")
	})
}

// TestSSHStopsTheRemoteCommand: a call cancelled (Ctrl-C) or past its
// timeout signals its command on the host before it closes the
// connection; the command ran on (an sshd does not stop a command
// without a terminal when its client goes), for as long as it liked.
func TestSSHStopsTheRemoteCommand(t *testing.T) {
	t.Parallel()
	key := sshtest.NewSigner(t)
	srv := sshtest.Start(t, key.PublicKey())
	c := SSHConnection{ID: "c", Host: "127.0.0.1", Port: srv.Addr.Port, User: "ops", Signer: key, HostKey: srv.HostKey}
	ended := func(t *testing.T) {
		t.Helper()
		select {
		case how := <-srv.Ended:
			if !strings.Contains(how, "signal") {
				t.Errorf("the remote command ended with %q, want a signal", how)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the remote command still runs 10 s after the call ended")
		}
	}
	// One at a time: they share the server's channels.
	t.Run("cancelled", func(t *testing.T) {
		o := SSHOptions{Connections: map[string]SSHConnection{"c": c}, Allowed: []string{"c"}, Timeout: time.Minute}
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			<-srv.Started
			cancel()
		}()
		in, _ := json.Marshal(SshExecInput{"c", "sleep 30"})
		if _, err := NewSshExec(o).Run(ctx, Call{ID: "1", Input: in}); !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
		ended(t)
	})
	t.Run("timeout", func(t *testing.T) {
		o := SSHOptions{Connections: map[string]SSHConnection{"c": c}, Allowed: []string{"c"}, Timeout: 2 * time.Second}
		res := call(t, NewSshExec(o), SshExecInput{"c", "sleep 30"})
		if res.ErrorCode() != CodeTimeout {
			t.Fatalf("error code %q, want %q: %s", res.ErrorCode(), CodeTimeout, res.Content)
		}
		wantResult(t, res, true, "took longer than 2s")
		select {
		case <-srv.Started:
		default:
			t.Fatal("the command did not start")
		}
		ended(t)
	})
}

// TestSSHDownloadStopsPastTheCap: a remote file over the cap stops the
// transfer as soon as the cap is passed: the whole file was read first
// (a 5 GB log over a slow link ran into the call's timeout, which then
// said "took longer than 60s" instead of "over the 25 MiB limit").
func TestSSHDownloadStopsPastTheCap(t *testing.T) {
	t.Parallel()
	key := sshtest.NewSigner(t)
	srv := sshtest.Start(t, key.PublicKey())
	os.WriteFile(filepath.Join(srv.Dir, "big.bin"), []byte(strings.Repeat("x", 200)), 0o644)
	c := SSHConnection{ID: "c", Host: "127.0.0.1", Port: srv.Addr.Port, User: "ops", Signer: key, HostKey: srv.HostKey}
	o := SSHOptions{Connections: map[string]SSHConnection{"c": c}, Allowed: []string{"c"}, Timeout: 10 * time.Second}
	// A file that goes on coming after the cap: its first 200 bytes,
	// then nothing for 30 s.
	out, over, fail := o.transfer(t.Context(), c, "SshDownload", "reading big.bin", "cat big.bin; exec sleep 30", nil, 100)
	if fail != nil || !over || len(out) != 100 {
		t.Fatalf("transfer = %d bytes, over %v, %+v; want it stopped once over 100 bytes", len(out), over, fail)
	}
	select {
	case how := <-srv.Ended:
		if !strings.Contains(how, "signal") {
			t.Errorf("the remote command ended with %q, want a signal", how)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the remote command still runs")
	}
}
