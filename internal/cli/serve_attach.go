package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/providers"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
	"github.com/maestro-run/maestro/internal/workspace"
)

// serveSessionIdle is how long a live session of `maestro serve` may go
// unused (no request, no subscription, not responding) before it is
// shut down.
const serveSessionIdle = 30 * time.Minute

// serveSessionClose bounds how long serve's shutdown waits for one
// session's run to stop and its log to be saved.
const serveSessionClose = 10 * time.Second

// serveSessions is the session API's view of `maestro serve`: live
// headless sessions created over HTTP (POST /api/headless/sessions), each
// a runtime built as `maestro headless` builds one: the model chosen as
// for `maestro run`, Maestro's tools in the session's workspace behind the
// sandbox, the session log under <data dir>/sessions. It implements
// httpattach.Sessions and httpattach.SessionRemover.
type serveSessions struct {
	getenv func(string) string
	cfg    config.Config
	store  *session.Store
	// workspaces is where a session without workspaceRoot gets a fresh
	// directory.
	workspaces string
	// roots are the directories a client's workspaceRoot must lie in
	// (serve --workspace-root); with none, anyRoot says whether any
	// existing directory is accepted (a loopback listener: the clients are
	// local users) or none is (only fresh workspaces).
	roots   []string
	anyRoot bool
	log     *slog.Logger
	// sandbox is probed once, at the first session that needs it, and
	// shared by every session.
	sandbox *sandboxProbe

	mu     sync.Mutex
	live   map[string]*liveSession
	closed bool
	// closing counts sessions being closed after a shutdown message or
	// the idle sweep.
	closing sync.WaitGroup
}

// liveSession is what one session holds open.
type liveSession struct {
	rt   *runtime.Runtime
	sess *session.Session
	root *workspace.Root
}

// newServeSessions reads the user's configuration (model, sandbox) from
// home and keeps sessions and default workspaces under dataDir.
func newServeSessions(getenv func(string) string, home, dataDir string, roots []string, anyRoot bool, log *slog.Logger) (*serveSessions, error) {
	resolved := make([]string, 0, len(roots))
	for _, r := range roots {
		if !filepath.IsAbs(r) {
			return nil, usageErr("--workspace-root %q: expected an absolute path to an existing directory", r)
		}
		real, err := filepath.EvalSymlinks(r)
		if err != nil {
			return nil, usageErr("--workspace-root %q: %v", r, err)
		}
		if st, err := os.Stat(real); err != nil || !st.IsDir() {
			return nil, usageErr("--workspace-root %q: not a directory", r)
		}
		resolved = append(resolved, real)
	}
	cfg, err := config.Load(filepath.Join(home, "config.yaml"))
	if err != nil {
		return nil, err
	}
	sbm, err := sandboxMode("", cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: sandbox: %w", filepath.Join(home, "config.yaml"), err)
	}
	return &serveSessions{
		getenv:     getenv,
		cfg:        cfg,
		store:      session.NewStore(filepath.Join(dataDir, "sessions")),
		workspaces: filepath.Join(dataDir, "workspaces"),
		roots:      resolved,
		anyRoot:    anyRoot,
		log:        log,
		sandbox:    &sandboxProbe{cfg: sandboxConfig(sbm, log), done: make(chan struct{})},
		live:       map[string]*liveSession{},
	}, nil
}

func badCreate(format string, args ...any) *httpattach.Error {
	return &httpattach.Error{Status: http.StatusBadRequest, Code: httpattach.CodeBadRequest, Message: fmt.Sprintf(format, args...)}
}

// workspaceFor opens the workspace of a new session: workspaceRoot, which
// must be an absolute path to an existing directory (and, where the server
// bounds them, lie in a --workspace-root once symlinks are resolved), else
// a fresh empty directory under <data dir>/workspaces. The check is made
// on the directory actually opened.
func (s *serveSessions) workspaceFor(dir string) (*workspace.Root, *httpattach.Error) {
	if dir == "" {
		if err := os.MkdirAll(s.workspaces, 0o700); err != nil {
			return nil, &httpattach.Error{Status: http.StatusInternalServerError, Code: httpattach.CodeRuntimeFailed, Message: "create the workspaces directory: " + err.Error()}
		}
		fresh, err := os.MkdirTemp(s.workspaces, time.Now().UTC().Format("20060102-150405-"))
		if err == nil {
			var root *workspace.Root
			if root, err = workspace.Open(fresh); err == nil {
				return root, nil
			}
			os.Remove(fresh)
		}
		return nil, &httpattach.Error{Status: http.StatusInternalServerError, Code: httpattach.CodeRuntimeFailed, Message: "create a session workspace: " + err.Error()}
	}
	if !filepath.IsAbs(dir) {
		return nil, badCreate("workspaceRoot %q: expected an absolute path to an existing directory on the server", dir)
	}
	root, err := workspace.Open(dir)
	if err != nil {
		return nil, badCreate("workspaceRoot %q is not an existing directory", dir)
	}
	if len(s.roots) == 0 && s.anyRoot {
		return root, nil
	}
	for _, r := range s.roots {
		if _, ok := workspace.Within(r, root.Dir()); ok {
			return root, nil
		}
	}
	root.Close()
	msg := fmt.Sprintf("workspaceRoot %q is outside the directories this server allows (maestro serve --workspace-root)", dir)
	if len(s.roots) == 0 {
		msg = fmt.Sprintf("workspaceRoot %q: this server listens beyond loopback and allows no client-chosen directory; "+
			"omit workspaceRoot for a fresh workspace, or start maestro serve with --workspace-root DIR", dir)
	}
	return nil, &httpattach.Error{Status: http.StatusForbidden, Code: httpattach.CodeWorkspaceViolation, Message: msg}
}

// choose selects the model of a new session: the request's model, else
// the server's default as for `maestro run` (none configured: the bundled
// replay demo). A client may not name a replay scenario file: that would
// read any file the server can.
func (s *serveSessions) choose(ctx context.Context, model string) (*providers.Choice, *httpattach.Error) {
	if rest, ok := strings.CutPrefix(model, "replay/"); ok && rest != "demo" {
		return nil, badCreate("model %q: over HTTP the only replay scenario is replay/demo (scenario files are not read from a client's path)", model)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	choice, err := providers.Select(ctx, providers.Options{Model: model, Config: s.cfg, Getenv: s.getenv})
	if err != nil {
		if model != "" {
			return nil, badCreate("model: %v", err)
		}
		return nil, &httpattach.Error{Status: http.StatusInternalServerError, Code: httpattach.CodeRuntimeFailed, Message: "choose the server's model: " + err.Error()}
	}
	return choice, nil
}

// Create implements httpattach.Sessions: a new live session, started.
func (s *serveSessions) Create(ctx context.Context, req httpattach.CreateRequest) (*runtime.Runtime, string, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, "", &httpattach.Error{Status: http.StatusServiceUnavailable, Code: httpattach.CodeRuntimeNotReady, Message: "maestro serve is shutting down"}
	}
	// The handler has checked the body's enums (thinkingLevel,
	// approvalMode).
	choice, herr := s.choose(ctx, req.Model)
	if herr != nil {
		return nil, "", herr
	}
	root, herr := s.workspaceFor(req.WorkspaceRoot)
	if herr != nil {
		return nil, "", herr
	}
	release := func() {
		root.Close()
		if req.WorkspaceRoot == "" {
			os.Remove(root.Dir()) // the fresh directory, still empty
		}
	}
	sess, err := s.store.Create(session.Meta{
		Workspace: root.Dir(), Provider: choice.Provider.Name(), Model: choice.Provider.Model(),
		ExecutorType: choice.Executor, Replay: choice.Replay,
	})
	if err != nil {
		release()
		return nil, "", fmt.Errorf("create the session log: %w", err)
	}
	rt, err := runtime.New(s.runtimeConfig(req, choice, root, sess))
	if err != nil {
		sess.Close()
		release()
		return nil, "", err
	}
	ls := &liveSession{rt: rt, sess: sess, root: root}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.finish(sess.ID(), ls)
		return nil, "", &httpattach.Error{Status: http.StatusServiceUnavailable, Code: httpattach.CodeRuntimeNotReady, Message: "maestro serve is shutting down"}
	}
	s.live[sess.ID()] = ls
	s.mu.Unlock()
	rt.Start()
	// Probing the sandbox runs processes: after ready, not before.
	s.sandbox.start()
	s.log.Info("headless session created", "session", sess.ID(), "workspace", root.Dir(),
		"provider", choice.Provider.Name(), "model", choice.Provider.Model(), "executor", string(choice.Executor))
	return rt, sess.ID(), nil
}

// runtimeConfig is the runtime of one session, as `maestro headless`
// builds it.
func (s *serveSessions) runtimeConfig(req httpattach.CreateRequest, choice *providers.Choice, root *workspace.Root, sess *session.Session) runtime.Config {
	rcfg := sessionRuntime(choice, root, s.sandbox, fileLimits(s.cfg), sess, s.getenv, s.log)
	rcfg.Thinking = llm.ThinkingLevel(req.ThinkingLevel)
	rcfg.ApprovalMode = req.ApprovalMode
	rcfg.MaxIterations = s.cfg.MaxIterations
	rcfg.BufferFrames = req.ReplayRing
	return rcfg
}

// Get implements httpattach.Sessions.
func (s *serveSessions) Get(id string) (*runtime.Runtime, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ls, ok := s.live[id]
	if !ok {
		return nil, false
	}
	return ls.rt, true
}

// Remove implements httpattach.SessionRemover: the session API disposes
// of a session (a shutdown message, or idle past serveSessionIdle) and
// shuts its runtime down; once that is done the log is saved and the
// workspace released.
func (s *serveSessions) Remove(id string) {
	s.mu.Lock()
	ls := s.live[id]
	delete(s.live, id)
	if ls != nil {
		// Counted before Close can see the map without it, so Close's
		// Wait covers this session too.
		s.closing.Add(1)
	}
	s.mu.Unlock()
	if ls == nil {
		return
	}
	go func() {
		defer s.closing.Done()
		<-ls.rt.Done()
		s.finish(id, ls)
	}()
}

// finish closes a session's runtime, log and workspace.
func (s *serveSessions) finish(id string, ls *liveSession) {
	err := errors.Join(ls.rt.Close(), ls.sess.Close(), ls.root.Close())
	if err != nil {
		s.log.Warn("close headless session", "session", id, "err", err)
		return
	}
	s.log.Info("headless session closed", "session", id)
}

// Close shuts every live session down (a shutdown of each runtime: runs
// aborted, pending requests cancelled, utilities stopped), saves the
// logs, and refuses new sessions. It waits at most serveSessionClose for
// sessions whose work does not stop, and reports them.
func (s *serveSessions) Close() error {
	s.mu.Lock()
	s.closed = true
	all := s.live
	s.live = map[string]*liveSession{}
	s.mu.Unlock()
	for id, ls := range all {
		s.closing.Go(func() { s.finish(id, ls) })
	}
	done := make(chan struct{})
	go func() {
		s.closing.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(serveSessionClose):
		return fmt.Errorf("headless sessions did not stop within %s", serveSessionClose)
	}
}

// newServeAttach builds serve's session API for /api/headless/: the
// sessions above, behind serve's token.
func newServeAttach(sessions *serveSessions, token string, log *slog.Logger) *httpattach.Handler {
	return httpattach.NewHandler(httpattach.Config{
		Sessions:    sessions,
		Token:       token,
		RequireAuth: token != "",
		SessionIdle: serveSessionIdle,
		Logger:      log,
	})
}
