// Package sshtest runs an in-process SSH server on loopback for tests of
// the SSH tools: it accepts one client key and runs exec requests with sh
// in a directory of its own.
package sshtest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// Server is a running test SSH server.
type Server struct {
	// Addr is where it listens (127.0.0.1, a free port).
	Addr *net.TCPAddr
	// HostKey is its host key.
	HostKey ssh.PublicKey
	// Dir is the directory commands run in.
	Dir string
	// Started receives each command as it starts, Ended how it ended
	// ("exit status 0", "signal: terminated"), when they have room.
	Started, Ended chan string
}

// NewSigner returns a fresh ed25519 key.
func NewSigner(t testing.TB) ssh.Signer {
	t.Helper()
	s, _ := NewKeyFile(t)
	return s
}

// NewKeyFile returns a fresh ed25519 key and its OpenSSH private key file
// content (unencrypted).
func NewKeyFile(t testing.TB) (ssh.Signer, []byte) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	return s, pem.EncodeToMemory(block)
}

// Start starts a server accepting the client key; it stops at the end of
// the test.
func Start(t testing.TB, client ssh.PublicKey) *Server {
	t.Helper()
	return StartKeys(t, client, NewSigner(t))
}

// StartKeys is Start with the host's keys (HostKey is the first), as a
// real host has several (OpenSSH: Ed25519, ECDSA, RSA).
func StartKeys(t testing.TB, client ssh.PublicKey, hostKeys ...ssh.Signer) *Server {
	t.Helper()
	host := hostKeys[0]
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) != string(client.Marshal()) {
			return nil, os.ErrPermission
		}
		return nil, nil
	}}
	for _, k := range hostKeys {
		cfg.AddHostKey(k)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &Server{Addr: ln.Addr().(*net.TCPAddr), HostKey: host.PublicKey(), Dir: t.TempDir(),
		Started: make(chan string, 16), Ended: make(chan string, 16)}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(conn, cfg)
		}
	}()
	return s
}

func (s *Server) serve(conn net.Conn, cfg *ssh.ServerConfig) {
	defer conn.Close()
	_, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			return
		}
		go s.session(ch, creqs)
	}
}

// session answers a session's first exec request and closes it; a
// signal request (TERM, KILL, INT, HUP) then signals the command, as
// OpenSSH's sshd does.
func (s *Server) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" || len(req.Payload) < 4 || int(binary.BigEndian.Uint32(req.Payload)) > len(req.Payload)-4 {
			req.Reply(false, nil)
			continue
		}
		command := string(req.Payload[4 : 4+binary.BigEndian.Uint32(req.Payload)])
		req.Reply(true, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = s.Dir, ch, ch, ch.Stderr()
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		status := uint32(0)
		if err := cmd.Start(); err != nil {
			cancel()
			ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, 127))
			return
		}
		notify(s.Started, command)
		go func() {
			for req := range reqs {
				var msg struct{ Signal string }
				if req.Type == "signal" && ssh.Unmarshal(req.Payload, &msg) == nil {
					if sig, ok := signals[msg.Signal]; ok {
						syscall.Kill(-cmd.Process.Pid, sig) // its process group, as sshd does
					}
				}
				if req.WantReply {
					req.Reply(false, nil)
				}
			}
		}()
		err := cmd.Wait()
		cancel()
		if err != nil {
			status = 1
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				status = uint32(max(ee.ExitCode(), 0))
			}
		}
		notify(s.Ended, cmd.ProcessState.String())
		ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, status))
		return
	}
}

// signals are the signals a signal request may name (RFC 4254 6.9).
var signals = map[string]syscall.Signal{"TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP}

func notify(c chan string, s string) {
	select {
	case c <- s:
	default:
	}
}
