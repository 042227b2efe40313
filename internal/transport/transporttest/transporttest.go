// Package transporttest builds the real parts that the tests of both
// transports (stdio and HTTP attach) drive: a replay scenario, the
// built-in tools on a workspace, and the runtime configuration of a replay
// session logged to a session store. The schema validator is prototest's.
package transporttest

import (
	"context"
	"fmt"
	"testing"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/internal/workspace"
)

// DefaultScenario is a replay scenario whose only frame answers "ok".
const DefaultScenario = `schemaVersion: evalops.maestro.scripted-scenario.v1
id: ok
description: Answers ok.
metadata: {recordedAt: "2026-01-01T00:00:00Z", toolsExpected: []}
frames:
  - index: 0
    statements:
      - {kind: text, text: ok}
      - {kind: end, reason: complete}
`

// Scenario loads the replay scenario file at path, or DefaultScenario when
// path is empty, failing t if it does not parse.
func Scenario(t testing.TB, path string) *replay.Scenario {
	t.Helper()
	var s *replay.Scenario
	var err error
	if path == "" {
		s, err = replay.Parse([]byte(DefaultScenario), "default.yaml")
	} else {
		s, err = replay.Load(path)
	}
	if err != nil {
		t.Fatalf("load scenario: %v", err)
	}
	return s
}

// Tools returns the built-in file tools on root and bash in it, without a
// sandbox (the tests' workspaces are temporary directories).
func Tools(t testing.TB, root *workspace.Root) *tool.Set {
	t.Helper()
	sb, err := sandbox.New(t.Context(), sandbox.Config{Mode: sandbox.ModeOff})
	if err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	return tool.NewSet(tool.NewRead(root), tool.NewWrite(root), tool.NewEdit(root),
		tool.NewGlob(root), tool.NewGrep(root), tool.NewBash(sb, root.Dir(), tool.BashOptions{}))
}

// Session creates a replay session log in store for a runtime in root
// driven by provider, and returns it with the runtime configuration that
// logs to it, uses tools and validates every frame with v. The caller
// sets what its test varies (approval mode, ring size, utilities, …) and
// closes the session.
func Session(store *session.Store, root *workspace.Root, provider llm.Provider, tools *tool.Set, v *protocol.Validator) (runtime.Config, *session.Session, error) {
	sess, err := store.Create(session.Meta{Workspace: root.Dir(), Provider: provider.Name(), Model: provider.Model(), ExecutorType: protocol.ExecutorReplay})
	if err != nil {
		return runtime.Config{}, nil, fmt.Errorf("create session: %w", err)
	}
	return runtime.Config{
		Provider:  provider,
		Executor:  protocol.ExecutorReplay,
		Tools:     func(context.Context) (*tool.Set, error) { return tools, nil },
		Log:       sess,
		SessionID: sess.ID(),
		Cwd:       root.Dir(),
		Home:      root.Dir(),
		System:    "You are a test.",
		Validate:  v.ValidateServerFrame,
	}, sess, nil
}
