package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/maestro-run/maestro/internal/host"
	"github.com/maestro-run/maestro/internal/hostedrunner"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
)

// hostedRunnerOptions are the flags of `maestro hosted-runner`.
type hostedRunnerOptions struct {
	flags   hostedrunner.Flags
	model   string
	replay  string
	sandbox string
	// stdinEOF is auto, exit or ignore.
	stdinEOF string
}

func newHostedRunnerCmd(io *IOStreams) *cobra.Command {
	var o hostedRunnerOptions
	cmd := &cobra.Command{
		Use:   "hosted-runner [flags]",
		Short: "Serve one headless session over HTTP + SSE for a control plane",
		Long: `Run one agent session as a hosted runner: controllers and viewers attach
over HTTP + SSE (/api/headless/...), and a control plane fences, drains and
restores it through /.well-known/evalops/remote-runner/{identity,drain}.
See docs/hosted-runner.md.

Every setting has a flag and environment variables (the flag wins):
  --runner-session-id   MAESTRO_RUNNER_SESSION_ID, REMOTE_RUNNER_SESSION_ID (required)
  --workspace-root      MAESTRO_WORKSPACE_ROOT, WORKSPACE_ROOT (required, existing directory)
  --listen              MAESTRO_HOSTED_RUNNER_LISTEN (host:port or a bare port)
  --host, --port        MAESTRO_HOSTED_RUNNER_HOST, MAESTRO_HOSTED_RUNNER_PORT, PORT
                        (default 0.0.0.0:8080)
  --owner-instance-id   MAESTRO_REMOTE_RUNNER_OWNER_INSTANCE_ID, REMOTE_RUNNER_OWNER_INSTANCE_ID
  --workspace-id        MAESTRO_REMOTE_RUNNER_WORKSPACE_ID, MAESTRO_WORKSPACE_ID
  --agent-run-id        MAESTRO_AGENT_RUN_ID
  --maestro-session-id  MAESTRO_SESSION_ID
  --attach-audience     MAESTRO_ATTACH_AUDIENCE
  --state-dir           MAESTRO_HOSTED_RUNNER_STATE_DIR (Maestro's session log and lock;
                        default $MAESTRO_HOME/hosted-runner, out of the workspace)
  --snapshot-root       MAESTRO_REMOTE_RUNNER_SNAPSHOT_ROOT, REMOTE_RUNNER_SNAPSHOT_ROOT
                        (default <workspace>/.maestro/runner-snapshots)
  (restore manifest)    MAESTRO_REMOTE_RUNNER_RESTORE_MANIFEST, REMOTE_RUNNER_RESTORE_MANIFEST
  --allowed-host        MAESTRO_HOSTED_RUNNER_ALLOWED_HOSTS (comma-separated)
  --max-connections     MAESTRO_HOSTED_RUNNER_MAX_CONNECTIONS (default 1024)

Auth: /api/* requires a bearer token (MAESTRO_HOSTED_RUNNER_AUTH_TOKEN or
MAESTRO_WEB_API_KEY, or a file through --auth-token-file /
MAESTRO_HOSTED_RUNNER_AUTH_TOKEN_FILE) unless the runner listens on loopback
(--require-auth / MAESTRO_WEB_REQUIRE_KEY can require it there too; beyond
loopback the runner refuses to start without one). /healthz, /readyz and
/.well-known/... need no token, but a drain without the token is accepted
only from this machine (a pod's preStop hook).

Every request must name the runner in Host: localhost, 127.0.0.1, [::1],
an IP address when a token is required, or a name given with
--allowed-host (DNS-rebinding protection); requests a browser marks
cross-site are refused, and JSON bodies need Content-Type: application/json.
At most --max-connections connections are open at once (event streams
count): past that an idle one is closed to make room, or the request is
answered 503 with Retry-After; a client address holding more than half of
them loses its oldest GET (an event stream) to another address's request.
See "HTTP edge" in docs/sandbox.md.

Agent: with no model configured (no --model/--replay, MAESTRO_MODEL, keys or
config), or with --fixture / MAESTRO_HOSTED_RUNNER_FIXTURE=1 (or the
harness's MAESTRO_RUST_HOSTED_CONFORMANCE=1), the runner runs
the deterministic fixture agent of the conformance harness: no model is
called; a prompt produces the status "Prompt: <content>", and a prompt
"__maestro_conformance_approval__:{request_id,tool,args,reason}" raises an
approval request.

Once listening, the runner writes one line on stdout,
{"baseUrl":"http://127.0.0.1:<port>","sessionId":"<session>"}; diagnostics go
to stderr. It exits when stdin, if it is a pipe, reaches end of file
(--stdin-eof). SIGTERM and SIGINT drain (reason process_shutdown) before exit;
the exit status is 1 if that drain wrote no manifest or was interrupted.`,
		Example: `  MAESTRO_RUNNER_SESSION_ID=mrs_1 maestro hosted-runner --workspace-root /workspace --listen 127.0.0.1:8080
  MAESTRO_HOSTED_RUNNER_AUTH_TOKEN=s3cret maestro hosted-runner --runner-session-id mrs_1 --workspace-root /workspace
  curl -X POST localhost:8080/.well-known/evalops/remote-runner/drain -H 'Content-Type: application/json' -d '{"reason":"ttl_expired"}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runHostedRunner(cmd.Context(), io, o)
		},
	}
	f := cmd.Flags()
	fl := &o.flags
	f.StringVar(&fl.RunnerSessionID, "runner-session-id", "", "runner session id the control plane knows this runner by (required)")
	f.StringVar(&fl.WorkspaceRoot, "workspace-root", "", "workspace directory the session works in (required, must exist)")
	f.StringVar(&fl.Listen, "listen", "", "listen address, host:port or a bare port (default 0.0.0.0:8080)")
	f.StringVar(&fl.Host, "host", "", "listen host (with --port; default 0.0.0.0)")
	f.StringVar(&fl.Port, "port", "", "listen port (with --host; default 8080; 0 picks a free port)")
	f.StringVar(&fl.OwnerInstanceID, "owner-instance-id", "", "owner generation reported by the identity endpoint (e.g. the pod name)")
	f.StringVar(&fl.WorkspaceID, "workspace-id", "", "workspace id recorded in snapshot manifests")
	f.StringVar(&fl.AgentRunID, "agent-run-id", "", "agent run id recorded in snapshot manifests")
	f.StringVar(&fl.MaestroSessionID, "maestro-session-id", "", "the Maestro session id clients attach to (default: the restored one, else a new id)")
	f.StringVar(&fl.AttachAudience, "attach-audience", "", "attach token audience (recorded, not checked)")
	f.StringVar(&fl.SnapshotRoot, "snapshot-root", "", "directory for drain manifests (default <workspace>/.maestro/runner-snapshots)")
	f.StringVar(&fl.StateDir, "state-dir", "", "directory of Maestro's own session state (default $MAESTRO_HOME/hosted-runner, outside the workspace)")
	f.StringVar(&fl.AuthTokenFile, "auth-token-file", "", "file holding the bearer token /api/* requires")
	f.StringVar(&fl.RequireAuth, "require-auth", "", "require the token on /api/* (default: yes unless listening on loopback)")
	f.Lookup("require-auth").NoOptDefVal = "true"
	f.StringArrayVar(&fl.AllowedHosts, "allowed-host", nil, "public name clients may use in Host, e.g. runner.example.com or *.example.com (repeatable; loopback names always work)")
	f.StringVar(&fl.MaxConnections, "max-connections", "", "most connections open at once, event streams included; past it new requests get 503 with Retry-After (default 1024)")
	f.BoolVar(&fl.Fixture, "fixture", false, "run the deterministic fixture agent even if a model is configured")
	f.StringVarP(&o.model, "model", "m", "", "model as provider/model (default: as for 'maestro run'; none: the fixture agent)")
	f.StringVar(&o.replay, "replay", "", "run a scripted replay scenario file instead of a model")
	f.StringVar(&o.sandbox, "sandbox", "", "Bash sandbox mode: auto (bubblewrap, else Landlock, else Bash refused), bwrap, landlock, off (default from config, else auto; always = bwrap)")
	f.StringVar(&o.stdinEOF, "stdin-eof", "auto", "on end of stdin: exit, ignore, or auto (exit when stdin is a pipe)")
	return cmd
}

// readyLine is the fixture contract's ready signal (wire contract §17).
type readyLine struct {
	BaseURL   string `json:"baseUrl"`
	SessionID string `json:"sessionId"`
}

func runHostedRunner(ctx context.Context, io *IOStreams, o hostedRunnerOptions) error {
	log := io.logger(slog.LevelInfo)
	switch o.stdinEOF {
	case "auto", "exit", "ignore":
	default:
		return usageErr("--stdin-eof %q: expected auto, exit or ignore", o.stdinEOF)
	}
	cfg, err := hostedrunner.Load(o.flags, io.Getenv)
	if err != nil {
		return usageErr("hosted-runner: %v", err)
	}
	h, err := host.New(host.Options{Getenv: io.Getenv, Logger: log})
	if err != nil {
		return failErr(err)
	}
	runner, err := h.HostedRunner(ctx, cfg, host.Spec{Model: o.model, Replay: o.replay, Sandbox: o.sandbox})
	if err != nil {
		return hostErr(err)
	}
	attach := hostedrunner.NewAttach(runner, httpattach.Config{Logger: log})
	defer attach.Close()

	// Signals are caught before the listener exists: a SIGTERM that comes
	// as soon as a client could reach the runner still drains it.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		runner.Close()
		return failErr(fmt.Errorf("hosted-runner: listen on %s: %w", cfg.Listen, err))
	}
	line, _ := json.Marshal(readyLine{BaseURL: "http://" + dialable(ln.Addr(), cfg.Listen), SessionID: runner.SessionID()})
	if _, err := fmt.Fprintf(io.Out, "%s\n", line); err != nil {
		log.Warn("write the ready line", "err", err)
	}
	log.Info("hosted runner listening", "addr", ln.Addr().String(), "runner_session_id", cfg.RunnerSessionID,
		"session_id", runner.SessionID(), "auth", cfg.RequireAuth, "fixture", runner.Fixture())
	if err := runner.Serve(ctx, ln, attach, sig, stdinClosed(io.In, o.stdinEOF)); err != nil {
		return failErr(fmt.Errorf("hosted-runner: %w", err))
	}
	return nil
}

// dialable is the address clients dial: an unspecified host becomes
// loopback, IPv6 only when the configured listen address was IPv6 (Go
// reports a dual-stack 0.0.0.0 listener as [::]).
func dialable(a net.Addr, listen string) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if h, _, _ := net.SplitHostPort(listen); strings.Contains(h, ":") {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}

// stdinClosed returns a channel closed when in reaches end of file, per
// mode: exit always watches, ignore never, auto watches a pipe or socket
// (not a terminal or /dev/null, as in a container) or a non-file reader.
func stdinClosed(in io.Reader, mode string) <-chan struct{} {
	ch := make(chan struct{})
	if in == nil || mode == "ignore" {
		return ch
	}
	if f, ok := in.(*os.File); ok && mode == "auto" {
		st, err := f.Stat()
		if err != nil || st.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
			return ch
		}
	}
	go func() {
		_, _ = io.Copy(io.Discard, in)
		close(ch)
	}()
	return ch
}
