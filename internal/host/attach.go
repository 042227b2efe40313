package host

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/providers"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/transport/httpattach"
	"github.com/maestro-run/maestro/internal/workspace"
	"github.com/maestro-run/maestro/internal/workspace/index"
)

// AttachPolicy is where the sessions clients create over HTTP work.
type AttachPolicy struct {
	// Workspaces is where a session without workspaceRoot gets a fresh
	// directory.
	Workspaces string
	// Roots are the directories a client's workspaceRoot must lie in
	// (absolute, existing); with none, AnyRoot says whether any existing
	// directory is accepted (a loopback listener: the clients are local
	// users) or none is (only fresh workspaces).
	Roots   []string
	AnyRoot bool
}

// attached makes the sessions of maestro serve's session API (POST
// /api/headless/sessions): each a session as NewSession assembles one,
// its model chosen as for `maestro run` (none configured: the bundled
// replay demo), its workspace under the policy, its log in the host's
// store. One sandbox probe serves them all, started with the first.
type attached struct {
	h      *Host
	policy AttachPolicy
	probe  *Probe
}

// AttachSessions returns the registry of the sessions clients create
// over HTTP (httpattach.SessionMap), under policy. A root that is not an
// absolute path to an existing directory is a *SpecError.
func (h *Host) AttachSessions(policy AttachPolicy) (*httpattach.SessionMap, error) {
	policy, err := policy.resolve()
	if err != nil {
		return nil, err
	}
	mode, err := SandboxMode("", h.cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: sandbox: %w", filepath.Join(h.home, "config.yaml"), err)
	}
	a := &attached{h: h, policy: policy, probe: NewProbe(SandboxConfig(mode, h.log))}
	return httpattach.NewSessionMap(a.create), nil
}

// resolve checks the roots and resolves their symlinks.
func (p AttachPolicy) resolve() (AttachPolicy, error) {
	resolved := make([]string, 0, len(p.Roots))
	for _, r := range p.Roots {
		if !filepath.IsAbs(r) {
			return p, specErr("--workspace-root %q: expected an absolute path to an existing directory", r)
		}
		real, err := filepath.EvalSymlinks(r)
		if err != nil {
			return p, specErr("--workspace-root %q: %v", r, err)
		}
		if st, err := os.Stat(real); err != nil || !st.IsDir() {
			return p, specErr("--workspace-root %q: not a directory", r)
		}
		resolved = append(resolved, real)
	}
	p.Roots = resolved
	return p, nil
}

func badCreate(format string, args ...any) *httpattach.Error {
	return &httpattach.Error{Status: http.StatusBadRequest, Code: httpattach.CodeBadRequest, Message: fmt.Sprintf(format, args...)}
}

func createFailed(msg string, err error) *httpattach.Error {
	return &httpattach.Error{Status: http.StatusInternalServerError, Code: httpattach.CodeRuntimeFailed, Message: msg + ": " + err.Error()}
}

// create is the registry's httpattach.NewRuntime. The handler has checked
// the body's enums (thinkingLevel, approvalMode).
func (a *attached) create(ctx context.Context, req httpattach.CreateRequest) (*runtime.Runtime, string, error) {
	if req.Agent != "" {
		return a.createAgent(ctx, req)
	}
	choice, herr := a.choose(ctx, req.Model)
	if herr != nil {
		return nil, "", herr
	}
	root, herr := a.policy.open(req.WorkspaceRoot)
	if herr != nil {
		return nil, "", herr
	}
	dir := root.Dir()
	s, err := a.h.NewSession(ctx, Spec{
		Root: root, Choice: choice, Probe: a.probe,
		Thinking: llm.ThinkingLevel(req.ThinkingLevel), ApprovalMode: req.ApprovalMode, BufferFrames: req.ReplayRing,
	})
	if err != nil {
		if req.WorkspaceRoot == "" {
			os.Remove(dir) // the fresh directory, still empty
		}
		if hh, ok := errors.AsType[*HoldsHomeError](err); ok {
			return nil, "", &httpattach.Error{Status: http.StatusForbidden, Code: httpattach.CodeWorkspaceViolation, Message: hh.Error()}
		}
		return nil, "", fmt.Errorf("create the session: %w", err)
	}
	a.onRefused(req, s)
	// Probing the sandbox runs processes: in the background, once.
	a.probe.Start()
	a.h.warmIndex(root)
	a.h.log.Info("headless session created", "session", s.ID(), "workspace", dir,
		"provider", choice.Provider.Name(), "model", choice.Provider.Model(), "executor", string(choice.Executor))
	return s.Runtime, s.ID(), nil
}

// onRefused makes a session refused once made (serve's cluster could
// not record it: the store is down) leave nothing behind: its log under
// <data dir>/sessions and, when Maestro made it (req named no
// workspace), its fresh workspace.
func (a *attached) onRefused(req httpattach.CreateRequest, s *Session) {
	if req.OnRefused == nil {
		return
	}
	fresh := req.WorkspaceRoot == ""
	req.OnRefused(func() {
		if err := os.RemoveAll(s.Log.Dir()); err != nil {
			a.h.log.Warn("remove a refused session's log", "session", s.ID(), "err", err)
		}
		if fresh {
			if err := os.RemoveAll(s.Root.Dir()); err != nil {
				a.h.log.Warn("remove a refused session's workspace", "session", s.ID(), "err", err)
			}
		}
	})
}

// choose selects the model of a new session: the request's model, else
// the server's default as for `maestro run` (none configured: the bundled
// replay demo). A client may not name a replay scenario file: that would
// read any file the server can.
func (a *attached) choose(ctx context.Context, model string) (*providers.Choice, *httpattach.Error) {
	if rest, ok := strings.CutPrefix(model, "replay/"); ok && rest != "demo" {
		return nil, badCreate("model %q: over HTTP the only replay scenario is replay/demo (scenario files are not read from a client's path)", model)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	choice, err := providers.Select(ctx, providers.Options{Model: model, Config: a.h.cfg, Getenv: a.h.getenv})
	if err != nil {
		if model != "" {
			if strings.HasPrefix(err.Error(), "model ") {
				return nil, badCreate("%v", err) // it names the field already: model "acme/x": …
			}
			return nil, badCreate("model: %v", err)
		}
		return nil, createFailed("choose the server's model", err)
	}
	return choice, nil
}

// open opens the workspace of a new session: dir, which must be an
// absolute path to an existing directory (and, where the policy bounds
// them, lie in a root once symlinks are resolved), else a fresh empty
// directory under Workspaces. The check is made on the directory actually
// opened.
func (p AttachPolicy) open(dir string) (*workspace.Root, *httpattach.Error) {
	if dir == "" {
		if err := os.MkdirAll(p.Workspaces, 0o700); err != nil {
			return nil, createFailed("create the workspaces directory", err)
		}
		fresh, err := os.MkdirTemp(p.Workspaces, time.Now().UTC().Format("20060102-150405-"))
		if err == nil {
			var root *workspace.Root
			if root, err = workspace.Open(fresh); err == nil {
				return root, nil
			}
			os.Remove(fresh)
		}
		return nil, createFailed("create a session workspace", err)
	}
	if !filepath.IsAbs(dir) {
		return nil, badCreate("workspaceRoot %q: expected an absolute path to an existing directory on the server", dir)
	}
	root, err := workspace.Open(dir)
	if err != nil {
		return nil, badCreate("workspaceRoot %q is not an existing directory", dir)
	}
	if len(p.Roots) == 0 && p.AnyRoot {
		return root, nil
	}
	for _, r := range p.Roots {
		if _, ok := workspace.Within(r, root.Dir()); ok {
			return root, nil
		}
	}
	root.Close()
	msg := fmt.Sprintf("workspaceRoot %q is outside the directories this server allows (maestro serve --workspace-root)", dir)
	if len(p.Roots) == 0 {
		msg = fmt.Sprintf("workspaceRoot %q: this server listens beyond loopback and allows no client-chosen directory; "+
			"omit workspaceRoot for a fresh workspace, or start maestro serve with --workspace-root DIR", dir)
	}
	return nil, &httpattach.Error{Status: http.StatusForbidden, Code: httpattach.CodeWorkspaceViolation, Message: msg}
}

// warmIndex builds the workspace file index of a serve session in the
// background, so that its first utility_file_search, Glob or Grep is warm
// (issue 22); closing the session's workspace stops it.
func (h *Host) warmIndex(root *workspace.Root) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := index.Of(root).Warm(ctx); err != nil && !errors.Is(err, index.ErrClosed) {
			h.log.Debug("index the session's workspace", "workspace", root.Dir(), "err", err)
		}
	}()
}
