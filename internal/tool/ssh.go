package tool

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/maestro-run/maestro/internal/workspace"
)

// Defaults of SSHOptions' caps.
const (
	DefaultSSHTimeout     = 60 * time.Second
	DefaultSSHOutputBytes = 256 << 10
	DefaultSSHFileBytes   = 25 << 20
)

// ErrNoConnectionsDeclared is the refusal of an SSH tool in a movement
// whose allowed_ssh_connections is omitted or empty (docs/spec/seed-piece-schema.md).
const ErrNoConnectionsDeclared = "no_allowed_connections_declared"

// SSHConnection is one registered SSH connection.
type SSHConnection struct {
	// ID is the connection's id, as allowed_ssh_connections names it.
	ID   string
	Host string
	Port int
	User string
	// Signer is the private key to log in with; Password is used when it
	// is nil.
	Signer   ssh.Signer
	Password string
	// HostKey is the server's pinned public key: any other key is
	// refused (no trust on first use).
	HostKey ssh.PublicKey
}

// SSHOptions configures the SSH tools of one movement.
type SSHOptions struct {
	// Connections are the registered connections, by id.
	Connections map[string]SSHConnection
	// Allowed is the movement's allowed_ssh_connections: ids, or "*" for
	// any registered connection; nil or empty refuses every call.
	Allowed []string
	// Timeout bounds a call, connection included (0: DefaultSSHTimeout).
	Timeout time.Duration
	// MaxOutputBytes caps SshExec's output (0: DefaultSSHOutputBytes).
	MaxOutputBytes int64
	// MaxFileBytes caps SshUpload and SshDownload (0: DefaultSSHFileBytes).
	MaxFileBytes int64
}

func (o SSHOptions) timeout() time.Duration {
	if o.Timeout <= 0 {
		return DefaultSSHTimeout
	}
	return o.Timeout
}

// connection returns the connection id names, or the refusal.
func (o SSHOptions) connection(tool, id string) (SSHConnection, *Result) {
	deny := func(format string, args ...any) (SSHConnection, *Result) {
		r := Failf(CodeDenied, "%s: "+format, append([]any{tool}, args...)...)
		return SSHConnection{}, &r
	}
	if len(o.Allowed) == 0 {
		return deny("%s: this movement declares no allowed_ssh_connections, so it may use no SSH connection", ErrNoConnectionsDeclared)
	}
	if !slices.Contains(o.Allowed, "*") && !slices.Contains(o.Allowed, id) {
		return deny("connection_not_allowed: connection %q is not in this movement's allowed_ssh_connections (%s)", id, strings.Join(o.Allowed, ", "))
	}
	c, ok := o.Connections[id]
	if !ok {
		ids := make([]string, 0, len(o.Connections))
		for k := range o.Connections {
			ids = append(ids, k)
		}
		slices.Sort(ids)
		r := Failf(CodeNotFound, "%s: no registered SSH connection %q (registered: %s)", tool, id, strings.Join(ids, ", "))
		return SSHConnection{}, &r
	}
	return c, nil
}

// dial connects and logs in to c, checking its pinned host key.
func dialSSH(ctx context.Context, c SSHConnection, timeout time.Duration) (*ssh.Client, error) {
	if c.HostKey == nil {
		return nil, fmt.Errorf("connection %s has no pinned host key; add it to the configuration", c.ID)
	}
	auth := []ssh.AuthMethod{ssh.Password(c.Password)}
	if c.Signer != nil {
		auth = []ssh.AuthMethod{ssh.PublicKeys(c.Signer)}
	}
	addr := net.JoinHostPort(c.Host, strconv.Itoa(cmp.Or(c.Port, 22)))
	// The server is asked for the key of the pinned key's type: a host
	// has several (OpenSSH: Ed25519, ECDSA and RSA), and left to the
	// client's preference it showed its ECDSA key, which a pinned Ed25519
	// or RSA key never matched.
	cfg := &ssh.ClientConfig{User: c.User, Auth: auth, Timeout: timeout,
		HostKeyAlgorithms: hostKeyAlgorithms(c.HostKey),
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			if bytes.Equal(key.Marshal(), c.HostKey.Marshal()) {
				return nil
			}
			return &hostKeyError{addr: addr, id: c.ID, got: key, pinned: c.HostKey}
		}}
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	conn.SetDeadline(time.Now().Add(timeout))
	sc, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		conn.Close()
		if hk := (*hostKeyError)(nil); errors.As(err, &hk) {
			return nil, hk
		}
		if strings.Contains(err.Error(), "no common algorithm for host key") {
			return nil, fmt.Errorf("ssh handshake with %s: the server has no %s host key, the type connection %s pins (%w)", addr, c.HostKey.Type(), c.ID, err)
		}
		if strings.Contains(err.Error(), "unable to authenticate") {
			how := "its password"
			if c.Signer != nil {
				how = "its key (" + c.Signer.PublicKey().Type() + " " + ssh.FingerprintSHA256(c.Signer.PublicKey()) + ")"
			}
			return nil, fmt.Errorf("ssh handshake with %s: the server refused user %s with %s, connection %s's credentials: %w", addr, c.User, how, c.ID, err)
		}
		return nil, fmt.Errorf("ssh handshake with %s: %w", addr, err)
	}
	conn.SetDeadline(time.Time{})
	return ssh.NewClient(sc, chans, reqs), nil
}

// hostKeyError is a host presenting another key than the pinned one.
type hostKeyError struct {
	addr, id    string
	got, pinned ssh.PublicKey
}

func (e *hostKeyError) Error() string {
	return fmt.Sprintf("host key mismatch: %s presented the %s key %s, but connection %s pins %s; "+
		"if the host's key was changed on purpose, set the connection's host_key to the new one, "+
		"else something answers in the host's place", e.addr, e.got.Type(), ssh.FingerprintSHA256(e.got), e.id, ssh.FingerprintSHA256(e.pinned))
}

// hostKeyAlgorithms are the host key algorithms of key's type.
func hostKeyAlgorithms(key ssh.PublicKey) []string {
	if key.Type() == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{key.Type()}
}

// runSSH runs cmd on c with stdin, returning stdout and stderr (each
// capped at max bytes: over is reported) and the exit status. With
// stopOver, a stdout over max stops the command (a file transfer has
// failed then: the rest is not worth reading).
func (o SSHOptions) runSSH(ctx context.Context, c SSHConnection, cmd string, stdin io.Reader, max int64, stopOver bool) (out, errOut []byte, over bool, exit int, err error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	client, err := dialSSH(ctx, c, o.timeout())
	if err != nil {
		return nil, nil, false, 0, err
	}
	defer client.Close()
	stop := context.AfterFunc(ctx, func() { client.Close() })
	sess, err := client.NewSession()
	if err != nil {
		stop()
		return nil, nil, false, 0, fmt.Errorf("open an ssh session: %w", err)
	}
	stop()
	defer sess.Close()
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	stdout, stderr := &cappedBuffer{max: max}, &cappedBuffer{max: max}
	if stopOver {
		stdout.onOver = func() { stopRun(errOutputOver) }
	}
	sess.Stdout, sess.Stderr, sess.Stdin = stdout, stderr, stdin
	if err := sess.Start(cmd); err != nil {
		return nil, nil, false, 0, fmt.Errorf("run over ssh: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	select {
	case err = <-done:
	case <-runCtx.Done():
		// Closing the connection leaves the command running on the
		// host (an sshd does not stop a command without a terminal when
		// its client goes): it is signalled first, as Ctrl-C stops a
		// local one.
		stopRemote(sess, done)
		err = ctx.Err()
	}
	var exitErr *ssh.ExitError
	switch {
	case ctx.Err() == nil && context.Cause(runCtx) == errOutputOver:
		return stdout.buf.Bytes(), stderr.buf.Bytes(), true, 0, nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, nil, false, 0, fmt.Errorf("ssh command took longer than %s, its limit: it was stopped: %w", o.timeout(), ctx.Err())
	case ctx.Err() != nil:
		return nil, nil, false, 0, fmt.Errorf("ssh command stopped: %w", ctx.Err())
	case errors.As(err, &exitErr):
		exit = exitErr.ExitStatus()
	case err != nil:
		return nil, nil, false, 0, fmt.Errorf("run over ssh: %w", err)
	}
	return stdout.buf.Bytes(), stderr.buf.Bytes(), stdout.over || stderr.over, exit, nil
}

// remoteKillGrace is how long a remote command signalled TERM has to
// end before it is signalled KILL, and that before the connection closes.
var remoteKillGrace = time.Second

// stopRemote signals the command of sess TERM, then KILL, until it ends
// (done), each remoteKillGrace apart.
func stopRemote(sess *ssh.Session, done <-chan error) {
	for _, sig := range []ssh.Signal{ssh.SIGTERM, ssh.SIGKILL} {
		if sess.Signal(sig) != nil {
			return
		}
		select {
		case <-done:
			return
		case <-time.After(remoteKillGrace):
		}
	}
}

// errOutputOver stops a transfer whose output passed its cap.
var errOutputOver = errors.New("the output is over its cap")

// cappedBuffer keeps the first max bytes written to it; onOver, when
// set, is called once as more comes.
type cappedBuffer struct {
	buf    bytes.Buffer
	max    int64
	over   bool
	onOver func()
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	room := b.max - int64(b.buf.Len())
	if int64(len(p)) > room {
		if !b.over && b.onOver != nil {
			b.onOver()
		}
		b.over = true
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}

// remotePath is p as the remote command names it: a leading ~/ (the
// remote user's home, where the command runs) is left out, since the
// path is quoted and no shell expands it; "~/notes.txt" was looked for
// in a directory named "~".
func remotePath(p string) string {
	if p == "~" {
		return "."
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok && rest != "" {
		return rest
	}
	return p
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// sshFailure turns a connection or run error into a Result.
func sshFailure(tool string, err error) Result {
	if hk := (*hostKeyError)(nil); errors.As(err, &hk) {
		return Errorf("%s: %s", tool, hk) // whole: its parts come from the configuration
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Failf(CodeTimeout, "%s: %s", tool, workspace.Excerpt(err.Error()))
	}
	return Errorf("%s: %s", tool, workspace.Excerpt(err.Error()))
}

// sshTool builds an SSH tool: the call's connection (connOf) must be one
// the movement allows and one that is registered before body runs.
func sshTool[In any](name, description string, o SSHOptions, connOf func(In) string, body func(context.Context, SSHConnection, In) Result) Tool {
	return New(name, description+` ReadToolDoc("`+name+`") has the details.`, false, func(ctx context.Context, in In, _ Call) (Result, error) {
		c, deny := o.connection(name, connOf(in))
		if deny != nil {
			return *deny, nil
		}
		return body(ctx, c, in), ctx.Err()
	})
}

// transfer runs a file transfer's command; a failure (the connection, a
// non-zero exit) is returned as the Result.
func (o SSHOptions) transfer(ctx context.Context, c SSHConnection, tool, what, cmd string, stdin io.Reader, max int64) (out []byte, over bool, fail *Result) {
	out, errOut, over, exit, err := o.runSSH(ctx, c, cmd, stdin, max, true)
	if err != nil {
		r := sshFailure(tool, err)
		return nil, false, &r
	}
	if exit != 0 {
		r := Errorf("%s: %s failed (exit code %d): %s", tool, what, exit, workspace.Excerpt(string(errOut)))
		return nil, false, &r
	}
	return out, over, nil
}

// SshExecInput is the input of the SshExec tool.
type SshExecInput struct {
	Connection string `json:"connection" jsonschema:"the id of a registered SSH connection this movement may use"`
	Command    string `json:"command" jsonschema:"the command to run on the remote host"`
}

// NewSshExec returns the SshExec tool.
func NewSshExec(o SSHOptions) Tool {
	return sshTool("SshExec", "Run a command on a registered SSH connection and return its output and exit status.", o,
		func(in SshExecInput) string { return in.Connection },
		func(ctx context.Context, c SSHConnection, in SshExecInput) Result {
			if strings.TrimSpace(in.Command) == "" {
				return Failf(CodeInvalidInput, "SshExec: command is required")
			}
			max := cmp.Or(o.MaxOutputBytes, DefaultSSHOutputBytes)
			out, errOut, over, exit, err := o.runSSH(ctx, c, in.Command, nil, max, false)
			if err != nil {
				return sshFailure("SshExec", err)
			}
			var b strings.Builder
			b.Write(out)
			if len(errOut) > 0 {
				if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
					b.WriteString("\n")
				}
				b.WriteString("[stderr]\n")
				b.Write(errOut)
			}
			if over {
				fmt.Fprintf(&b, "\n[Maestro: output cut at %s per stream.]", sizeText(max))
			}
			if exit != 0 {
				fmt.Fprintf(&b, "\nexit code %d", exit)
				return Result{Content: b.String(), IsError: true}
			}
			return Result{Content: b.String()}
		})
}

// SshUploadInput is the input of the SshUpload tool.
type SshUploadInput struct {
	Connection string `json:"connection" jsonschema:"the id of a registered SSH connection this movement may use"`
	Path       string `json:"path" jsonschema:"the workspace file to upload, relative to the workspace root"`
	RemotePath string `json:"remote_path" jsonschema:"where to write it on the remote host"`
}

// NewSshUpload returns the SshUpload tool: it reads a workspace file
// through root (confined) and writes it on the remote host.
func NewSshUpload(root *workspace.Root, o SSHOptions) Tool {
	return sshTool("SshUpload", "Upload a workspace file to a path on a registered SSH connection.", o,
		func(in SshUploadInput) string { return in.Connection },
		func(ctx context.Context, c SSHConnection, in SshUploadInput) Result {
			if in.RemotePath == "" {
				return Failf(CodeInvalidInput, "SshUpload: remote_path is required")
			}
			max := cmp.Or(o.MaxFileBytes, DefaultSSHFileBytes)
			data, err := root.ReadFileMax(in.Path, max)
			if errors.Is(err, workspace.ErrTooLarge) {
				return Failf(CodeTooLarge, "SshUpload: %s is over the %s limit", workspace.Excerpt(in.Path), sizeText(max))
			}
			if err != nil {
				return fileErrorResult(in.Path, err)
			}
			if _, _, fail := o.transfer(ctx, c, "SshUpload", "writing "+in.RemotePath, "cat > "+shellQuote(remotePath(in.RemotePath)), bytes.NewReader(data), 4096); fail != nil {
				return *fail
			}
			return Result{Content: fmt.Sprintf("uploaded %s (%d bytes) to %s:%s", workspace.Excerpt(in.Path), len(data), c.ID, in.RemotePath)}
		})
}

// SshDownloadInput is the input of the SshDownload tool.
type SshDownloadInput struct {
	Connection string `json:"connection" jsonschema:"the id of a registered SSH connection this movement may use"`
	RemotePath string `json:"remote_path" jsonschema:"the remote file to download"`
	Path       string `json:"path" jsonschema:"where to save it in the workspace, relative to the workspace root"`
}

// NewSshDownload returns the SshDownload tool: it reads a remote file and
// writes it into root (confined).
func NewSshDownload(root *workspace.Root, o SSHOptions) Tool {
	return sshTool("SshDownload", "Download a remote file from a registered SSH connection into the workspace.", o,
		func(in SshDownloadInput) string { return in.Connection },
		func(ctx context.Context, c SSHConnection, in SshDownloadInput) Result {
			if in.RemotePath == "" || in.Path == "" {
				return Failf(CodeInvalidInput, "SshDownload: remote_path and path are required")
			}
			if _, err := root.Rel(in.Path); err != nil {
				return fileErrorResult(in.Path, err)
			}
			max := cmp.Or(o.MaxFileBytes, DefaultSSHFileBytes)
			out, over, fail := o.transfer(ctx, c, "SshDownload", "reading "+in.RemotePath, "cat -- "+shellQuote(remotePath(in.RemotePath)), nil, max)
			if fail != nil {
				return *fail
			}
			if over {
				return Failf(CodeTooLarge, "SshDownload: %s is over the %s limit; nothing was saved", in.RemotePath, sizeText(max))
			}
			if err := root.WriteFile(in.Path, out, 0o644); err != nil {
				return fileErrorResult(in.Path, err)
			}
			return Result{Content: fmt.Sprintf("downloaded %s:%s (%d bytes) to %s", c.ID, in.RemotePath, len(out), workspace.Excerpt(in.Path))}
		})
}
