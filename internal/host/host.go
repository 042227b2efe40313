// Package host is Maestro's composition root: the one place that
// assembles a session — the executor (Maestro's own loop over a live
// model, a replay scenario, or an agent CLI), the workspace and its
// tools, the sandbox, the system prompt, the session log — into a
// headless runtime (internal/runtime). Every surface gets its session
// from here: `maestro run` (a local client of the runtime), `maestro
// headless` (stdio), the sessions `maestro serve` creates over HTTP
// (Sessions, a registry of httpattach), and the hosted runner
// (HostedRunner). Commands keep their flags, help and rendering; see
// docs/architecture.md, "Composition root".
package host

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/gitinfo"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/mcp"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/providers"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/utility"
	"github.com/maestro-run/maestro/internal/workspace"
)

// Options configure a Host.
type Options struct {
	// Getenv reads the environment (model keys, MAESTRO_HOME, limits).
	Getenv func(string) string
	// Home is Maestro's home (config.yaml, pieces); "" takes
	// config.Home(Getenv).
	Home string
	// DataDir holds the session logs (<DataDir>/sessions); "" is Home.
	DataDir string
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// BusLogger receives the event bus's diagnostics (a stream missing,
	// NATS down, events left for a later process); nil: Logger. `maestro
	// run`, which shows no other diagnostics, still shows these.
	BusLogger *slog.Logger
}

// Host is what the sessions of one process share: the user's
// configuration, the environment, the session store and the logger.
type Host struct {
	home   string
	data   string // the data directory (sessions, serve's database and tasks)
	cfg    config.Config
	getenv func(string) string
	store  *session.Store
	log    *slog.Logger
	busLog *slog.Logger
	bus    *busState
}

// New reads the configuration file under the home directory.
func New(o Options) (*Host, error) {
	if o.Getenv == nil {
		o.Getenv = func(string) string { return "" }
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	home := o.Home
	if home == "" {
		var err error
		if home, err = config.Home(o.Getenv); err != nil {
			return nil, err
		}
	}
	cfg, err := config.Load(filepath.Join(home, "config.yaml"))
	if err != nil {
		return nil, err
	}
	data := o.DataDir
	if data == "" {
		data = home
	}
	if o.BusLogger == nil {
		o.BusLogger = o.Logger
	}
	h := &Host{home: home, data: data, cfg: cfg, getenv: o.Getenv, store: session.NewStore(filepath.Join(data, "sessions")), log: o.Logger, busLog: o.BusLogger, bus: &busState{}}
	h.warnBusSettings()
	return h, nil
}

// Home is Maestro's home directory.
func (h *Host) Home() string { return h.home }

// Config is the user's configuration.
func (h *Host) Config() config.Config { return h.cfg }

// Sessions is the store of the sessions' logs (maestro sessions reads it).
func (h *Host) Sessions() *session.Store { return h.store }

// SpecError is a session spec that cannot be honoured as given (a flag's
// value, a combination of flags): commands report it as a usage error.
type SpecError struct{ Msg string }

func (e *SpecError) Error() string { return e.Msg }

func specErr(format string, args ...any) error {
	return &SpecError{Msg: fmt.Sprintf(format, args...)}
}

// Spec describes one session.
type Spec struct {
	// Workspace is the workspace directory ("" : the resumed session's,
	// else the current directory). Root, when set, is a workspace the
	// caller opened under its own policy (maestro serve); the session
	// owns it from then on, on failure too.
	Workspace string
	Root      *workspace.Root
	// Model and Replay choose the model as providers.Select does (none:
	// the configured default, else the bundled replay demo). Choice, when
	// set, is a choice the caller made already.
	Model, Replay string
	Choice        *providers.Choice
	// Agent runs the prompts on this agent CLI (internal/agentcli)
	// instead of Maestro's own loop; see agentcli.go. Permission is its
	// permission level (read-only, edit, full; "": the configuration's
	// agent_permission, else edit).
	Agent      string
	Permission string
	// Resume continues this session (a full id or a unique prefix): its
	// model, workspace and conversation.
	Resume string
	// Sandbox is the Bash sandbox mode ("" : the configuration's, else
	// auto). Probe, when set, is a probe shared with other sessions.
	Sandbox string
	Probe   *Probe
	// RequireSandbox makes NewSession wait for the sandbox when the mode
	// names one (bwrap, landlock): without it Bash cannot run at all, a
	// start-up failure rather than a failure at the first prompt.
	RequireSandbox bool
	ApprovalMode   protocol.ApprovalMode
	Thinking       llm.ThinkingLevel
	// MaxIterations caps model calls per prompt (0: the configuration's,
	// else the agent's default).
	MaxIterations int
	// System replaces the default system prompt.
	System      string
	ClientTools []runtime.ClientTool
	// BufferFrames is the runtime's replay ring (0: its default).
	BufferFrames int
	// SessionID, when set, is the session id clients see (ready,
	// session_info, snapshots), chosen by the launcher (maestro headless:
	// MAESTRO_SESSION_ID); the log keeps its own id, and a resumed
	// session keeps the one it recorded. AgentRunID is the launcher's
	// agent run id (MAESTRO_AGENT_RUN_ID). Both are recorded in the
	// session's metadata (session.Meta).
	SessionID, AgentRunID string
}

// MaxLaunchID bounds Spec.SessionID and Spec.AgentRunID.
const MaxLaunchID = 256

// checkLaunchID refuses a launcher id that would be unsafe on the wire
// or in the metadata: longer than MaxLaunchID bytes, not UTF-8, or with
// control characters or spaces.
func checkLaunchID(name, v string) error {
	switch {
	case len(v) > MaxLaunchID:
		return specErr("%s: expected at most %d bytes, found %d", name, MaxLaunchID, len(v))
	case !utf8.ValidString(v):
		return specErr("%s: expected UTF-8 text", name)
	case strings.IndexFunc(v, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0:
		return specErr("%s %q: expected an id without spaces or control characters", name, v)
	}
	return nil
}

// limitVars are the environment's limits on prompt attachments
// (docs/protocol.md, "Launching"), read by runtimeConfig.
var limitVars = []string{"MAESTRO_HEADLESS_MAX_ATTACHMENT_BYTES", "MAESTRO_HEADLESS_MAX_TEXT_CHARS"}

// checkLimits refuses a limit variable that is set but not a positive
// whole number: it fell back to the default in silence (10 MiB for
// MAESTRO_HEADLESS_MAX_ATTACHMENT_BYTES=50MB, or =0).
func (h *Host) checkLimits() error {
	for _, name := range limitVars {
		if v := h.getenv(name); v != "" {
			if n, err := strconv.ParseInt(v, 10, 64); err != nil || n <= 0 {
				return specErr("%s %q: expected a positive whole number", name, workspace.Excerpt(v))
			}
		}
	}
	return nil
}

// Session is an assembled session: its runtime, not started, over its
// log and workspace.
type Session struct {
	Runtime *runtime.Runtime
	Log     *session.Session
	Root    *workspace.Root
	// Choice is the model of Maestro's own loop; nil on an agent CLI.
	Choice *providers.Choice
	// MCP is the session's MCP client (nil when no server is
	// configured); piece runs take their mcp__ tools from it.
	MCP    *mcp.Manager
	probe  *Probe
	closed func() error
}

// ID is the session id.
func (s *Session) ID() string { return s.Log.ID() }

// Started starts the sandbox probe: call it once the start-up frames
// are out (probing runs processes, which should not delay ready).
func (s *Session) Started() { s.probe.Start() }

// Sandbox waits for the session's sandbox.
func (s *Session) Sandbox(ctx context.Context) (*sandbox.Sandbox, error) { return s.probe.Wait(ctx) }

// Close closes the runtime, then the log (saved) and the workspace.
func (s *Session) Close() error { return errors.Join(s.Runtime.Close(), s.closed()) }

// NewSession assembles the session spec describes.
func (h *Host) NewSession(ctx context.Context, spec Spec) (_ *Session, err error) {
	var sess *session.Session
	root := spec.Root
	defer func() {
		if err != nil {
			if sess != nil {
				sess.Close()
			}
			if root != nil {
				root.Close()
			}
		}
	}()
	if err := checkLaunchID("MAESTRO_SESSION_ID", spec.SessionID); err != nil {
		return nil, err
	}
	if err := checkLaunchID("MAESTRO_AGENT_RUN_ID", spec.AgentRunID); err != nil {
		return nil, err
	}
	if err := h.checkLimits(); err != nil {
		return nil, err
	}
	if spec.Resume != "" {
		if sess, err = h.resume(&spec); err != nil {
			return nil, err
		}
	}
	if root != nil {
		// A workspace the caller opened (a serve session's workspaceRoot,
		// accepted under the server's policy) holding the home was let
		// through: the agent's Read returned ~/.maestro/config.yaml.
		if err := checkHome(root, h.home, h.data); err != nil {
			return nil, err
		}
	}
	if spec.Agent != "" || (sess != nil && sess.Meta().Agent != "") {
		return h.agentSession(spec, &sess, &root)
	}
	if root == nil {
		dir, err := WorkspaceDir(spec.Workspace)
		if err != nil {
			return nil, specErr("%v", err)
		}
		// The choice comes before the workspace: a bad --model is
		// reported first.
		if spec.Choice == nil {
			if spec.Choice, err = providers.Select(ctx, providers.Options{Model: spec.Model, Replay: spec.Replay, Config: h.cfg, Getenv: h.getenv}); err != nil {
				return nil, err
			}
		}
		mode, err := SandboxMode(spec.Sandbox, h.cfg)
		if err != nil {
			return nil, specErr("--sandbox: %v", err)
		}
		if spec.Probe == nil {
			spec.Probe = NewProbe(SandboxConfig(mode, h.log))
		}
		if root, err = OpenWorkspace(dir, h.home); err != nil {
			return nil, fmt.Errorf("open workspace: %w", err)
		}
		if spec.RequireSandbox && (mode == sandbox.ModeBwrap || mode == sandbox.ModeLandlock) {
			if _, err := spec.Probe.Wait(ctx); err != nil {
				return nil, err
			}
		}
	}
	choice := spec.Choice
	if choice == nil {
		return nil, errors.New("new session: no model chosen")
	}
	if sess == nil {
		sess, err = h.store.Create(session.Meta{
			Workspace: root.Dir(), Provider: choice.Provider.Name(), Model: choice.Provider.Model(),
			ExecutorType: choice.Executor, Replay: choice.Replay,
		})
		if err != nil {
			return nil, err
		}
	}
	var rt atomic.Pointer[runtime.Runtime]
	mcps := h.mcpManager(sess, root, choice.Provider, &rt)
	web, err := h.sessionWebTools(root, &rt)
	if err != nil {
		return nil, err
	}
	tools := lazyTools(root, spec.Probe, FileLimits(h.cfg), mcps, web...)
	rcfg := h.runtimeConfig(sess, root, spec)
	rcfg.MCPElicitation = mcps != nil
	rcfg.Provider, rcfg.Executor, rcfg.Retry = choice.Provider, choice.Executor, &llm.RetryPolicy{}
	rcfg.Tools, rcfg.SystemPrompt = tools, lazySystemPrompt(root, spec.Probe, tools)
	rcfg.ClientTools, rcfg.Thinking = spec.ClientTools, spec.Thinking
	rcfg.MaxIterations = cmp.Or(spec.MaxIterations, h.cfg.MaxIterations)
	if spec.System != "" {
		rcfg.System, rcfg.SystemPrompt = spec.System, nil
	}
	s, err := h.assemble(rcfg, sess, root, choice, spec.Probe, mcps)
	if err == nil {
		rt.Store(s.Runtime)
	}
	return s, err
}

// resume opens the session spec.Resume names and takes from it what the
// spec leaves open: the model and the workspace.
func (h *Host) resume(spec *Spec) (*session.Session, error) {
	if spec.Agent == "" && (spec.Model != "" || spec.Replay != "") {
		return nil, specErr("--resume continues a session with its own model; drop --model/--replay")
	}
	sess, err := h.store.Open(spec.Resume)
	if err != nil {
		if spec.Agent != "" && errors.Is(err, session.ErrNotFound) {
			return nil, nil // the agent CLI's own session id
		}
		return nil, fmt.Errorf("resume: %w", err)
	}
	m := sess.Meta()
	if m.Agent != "" {
		return sess, nil // agentSession checks and applies it
	}
	if spec.Agent != "" {
		sess.Close()
		return nil, specErr("--resume %s: the session ran on Maestro's own loop (%s/%s), not on an agent CLI; resume it without --agent", spec.Resume, m.Provider, m.Model)
	}
	if m.ExecutorType == protocol.ExecutorReplay {
		spec.Replay = m.Replay
	} else {
		spec.Model = m.Provider + "/" + m.Model
	}
	if spec.Workspace == "" {
		if st, err := os.Stat(m.Workspace); err != nil || !st.IsDir() {
			// Said here: WorkspaceDir would name a --workspace flag the
			// user did not pass.
			sess.Close()
			return nil, fmt.Errorf("session %s worked in %s, which is no longer a directory: to continue it elsewhere, add --workspace DIR", m.ID, m.Workspace)
		}
		spec.Workspace = m.Workspace
	}
	return sess, nil
}

// runtimeConfig is what every session's runtime shares whatever runs its
// prompts: the log, the workspace's utilities, session_info, the approval
// mode and the limits from the environment.
func (h *Host) runtimeConfig(sess *session.Session, root *workspace.Root, spec Spec) runtime.Config {
	hide := storeDirs(sess.Dir())
	if err := sess.SetLaunch(spec.SessionID, spec.AgentRunID); err != nil {
		h.log.Warn("record the launcher's session and agent run ids", "session", sess.ID(), "err", err)
	}
	return runtime.Config{
		Utilities: func(emit func(protocol.Message)) runtime.Utilities {
			return utility.New(utility.Config{Root: root, Emit: emit, Logger: h.log, Hide: hide})
		},
		Log:                sess,
		SessionID:          cmp.Or(sess.Meta().ClientSessionID, sess.ID()),
		History:            sess.History(),
		Cwd:                root.Dir(),
		GitBranch:          gitinfo.Branch(root.Dir(), h.log),
		System:             spec.System,
		ApprovalMode:       spec.ApprovalMode,
		BufferFrames:       spec.BufferFrames,
		MaxAttachmentBytes: envInt(h.getenv, limitVars[0]),
		MaxAttachmentChars: int(envInt(h.getenv, limitVars[1])),
		Logger:             h.log,
		CompactAt:          h.cfg.CompactAt,
		Values:             h.sessionValues(cmp.Or(spec.SessionID, sess.Meta().ClientSessionID, sess.ID())),
	}
}

// assemble builds the runtime of rcfg, which releases the log and the
// workspace when it is closed.
func (h *Host) assemble(rcfg runtime.Config, sess *session.Session, root *workspace.Root, choice *providers.Choice, probe *Probe, mcps *mcp.Manager) (*Session, error) {
	var follower *eventbus.Follower
	if bus := h.EventBus(); bus != nil {
		follower = bus.FollowSession(sess.Dir(), sess.Meta())
	}
	values, endSpan := startSessionSpan(rcfg.Values)
	rcfg.Values = values
	var rt *runtime.Runtime // set below; closed runs once it has stopped
	closed := sync.OnceValue(func() error {
		defer endSpan()
		if err := mcps.Close(); err != nil {
			h.log.Warn("stop the session's MCP servers", "session", sess.ID(), "err", err)
		}
		if follower != nil {
			// Recorded while the log is still held: a process catching
			// up meanwhile sees a session closing, not one whose process
			// died.
			reason := "completed"
			if rt != nil {
				reason = cmp.Or(rt.CloseReason(), eventbus.EndReason(rt.Snapshot().State.LastErrorType))
			}
			follower.Closing(sess.Cursor(), reason)
		}
		err := sess.Close()
		root.Close()
		if follower != nil {
			follower.Close(sess.Cursor(), "")
		}
		if err != nil {
			h.log.Warn("close headless session", "session", sess.ID(), "err", err)
		} else {
			h.log.Info("headless session closed", "session", sess.ID())
		}
		return err
	})
	rcfg.Release = closed
	rt, err := runtime.New(rcfg)
	if err != nil {
		return nil, err
	}
	return &Session{Runtime: rt, Log: sess, Root: root, Choice: choice, MCP: mcps, probe: probe, closed: closed}, nil
}
