package cli

import (
	"context"
	"os"
	"sync"

	"github.com/maestro-run/maestro/internal/agentcli"
	"github.com/maestro-run/maestro/internal/engine"
)

// agentMovements is the engine's runner for movements that name an agent
// CLI (`agent:` in a piece): the built-in adapters and the user's
// ~/.maestro/agents/*.yaml, loaded on the first agent movement, the binary
// looked up on PATH. model is --model: it reaches the CLI only in the form
// "<agent id>/<model>". level is the permission level of movements that
// may edit (engine.RegistryAgentsAt).
func agentMovements(io *IOStreams, model string, level agentcli.Permission) engine.AgentRunner {
	load := sync.OnceValues(func() (engine.AgentRunner, error) {
		reg, err := agentRegistry(io)
		if err != nil {
			return nil, err
		}
		env := os.Environ()
		if p := io.Getenv("PATH"); p != "" {
			env = append(env, "PATH="+p)
		}
		return engine.RegistryAgentsAt(reg, io.Getenv("PATH"), env, model, level), nil
	})
	return engine.AgentRunnerFunc(func(ctx context.Context, id string) (*engine.AgentCLI, error) {
		runner, err := load()
		if err != nil {
			return nil, err
		}
		return runner.AgentCLI(ctx, id)
	})
}
