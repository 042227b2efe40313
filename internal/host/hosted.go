package host

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/maestro-run/maestro/internal/eventbus"
	"github.com/maestro-run/maestro/internal/hostedrunner"
	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/providers"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/utility"
	"github.com/maestro-run/maestro/internal/workspace"
)

// HostedRunner builds the hosted runner of cfg, its executor assembled
// as every session's: the model spec chooses (Model, Replay, as for
// `maestro run`) with Maestro's tools over cfg.WorkspaceRoot behind the
// sandbox (spec.Sandbox) and the default system prompt; or, with
// cfg.Fixture or no model configured, the deterministic fixture agent.
// The runner keeps its own session log, drain and restore
// (internal/hostedrunner); closing it releases the workspace.
func (h *Host) HostedRunner(ctx context.Context, cfg hostedrunner.Config, spec Spec) (*hostedrunner.Runner, error) {
	root, err := workspace.Open(cfg.WorkspaceRoot)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	// The runner's log lives in its state directory, which no other
	// process catches up on: before its own session, each runner closes
	// on the bus the session a runner killed there left open
	// (docs/events.md).
	opts := hostedrunner.Options{Logger: h.log, Release: root.Close}
	opts.Follow = func(dir string, meta session.Meta) func(int64, string) {
		if bus := h.EventBus(); bus != nil {
			return bus.FollowSession(dir, meta, eventbus.AfterCatchUp(filepath.Dir(dir))).Close
		}
		return nil
	}
	opts.FollowRestored = func(dir string, meta session.Meta, cursor int64) func(int64, string) {
		if bus := h.EventBus(); bus != nil {
			return bus.FollowRestored(dir, meta, cursor, eventbus.AfterCatchUp(filepath.Dir(dir))).Close
		}
		return nil
	}
	opts.Utilities = func(emit func(protocol.Message), hide []string) runtime.Utilities {
		return utility.New(utility.Config{Root: root, Emit: emit, Logger: h.log, Hide: hide})
	}
	if err := h.hostedExecutor(ctx, &opts, root, cfg, spec); err != nil {
		root.Close()
		return nil, err
	}
	r, err := hostedrunner.New(cfg, opts)
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("hosted-runner: %w", err)
	}
	return r, nil
}

// hostedExecutor sets the model and the tools of opts, unless the fixture
// agent runs (Provider left nil).
func (h *Host) hostedExecutor(ctx context.Context, opts *hostedrunner.Options, root *workspace.Root, cfg hostedrunner.Config, spec Spec) error {
	if cfg.Fixture {
		return nil
	}
	choice, err := providers.Select(ctx, providers.Options{Model: spec.Model, Replay: spec.Replay, Config: h.cfg, Getenv: h.getenv})
	if err != nil {
		return err
	}
	if choice.Source == "default" {
		return nil // no model configured: the deterministic fixture agent
	}
	mode, err := SandboxMode(spec.Sandbox, h.cfg)
	if err != nil {
		return specErr("--sandbox: %v", err)
	}
	probe := NewProbe(SandboxConfig(mode, h.log))
	tools := lazyTools(root, probe, FileLimits(h.cfg), nil)
	opts.Provider, opts.Executor, opts.Retry = choice.Provider, choice.Executor, &llm.RetryPolicy{}
	opts.Tools, opts.SystemPrompt = tools, lazySystemPrompt(root, probe, tools)
	opts.CompactAt = h.cfg.CompactAt
	return nil
}
