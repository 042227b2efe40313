package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/engine"
)

// agentMovements is the engine's runner for movements that name an agent
// CLI (`agent:` in a piece): the built-in adapters and the user's
// ~/.maestro/agents/*.yaml, the binary looked up on PATH. The registry is
// loaded once, on the first agent movement. model is --model: it is passed
// to the CLI only in the form "<agent id>/<model>".
func agentMovements(io *IOStreams, model string) engine.AgentRunner {
	load := sync.OnceValues(func() (*agentcli.Registry, error) { return agentRegistry(io) })
	return engine.AgentRunnerFunc(func(_ context.Context, id string) (*engine.AgentCLI, error) {
		reg, err := load()
		if err != nil {
			return nil, err
		}
		def, ok := reg.Get(id)
		if !ok {
			return nil, fmt.Errorf("unknown agent (known: %s; add your own in ~/.maestro/agents/)", strings.Join(reg.IDs(), ", "))
		}
		bin, err := def.Resolve(io.Getenv("PATH"))
		if err != nil {
			return nil, fmt.Errorf("%w (install it, or see maestro agents list)", err)
		}
		env := os.Environ()
		if p := io.Getenv("PATH"); p != "" {
			env = append(env, "PATH="+p)
		}
		cli := &engine.AgentCLI{Executor: &agentcli.Executor{Def: def, Path: bin, Env: env}}
		if m, ok := strings.CutPrefix(model, def.ID+"/"); ok {
			cli.Base.Model = m
		}
		return cli, nil
	})
}
