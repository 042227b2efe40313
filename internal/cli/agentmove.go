package cli

import (
	"context"
	"os"
	"sync"

	"github.com/maestro-run/maestro/internal/engine"
)

// agentMovements is the engine's runner for movements that name an agent
// CLI (`agent:` in a piece): the built-in adapters and the user's
// ~/.maestro/agents/*.yaml, loaded on the first agent movement, the binary
// looked up on PATH. model is --model: it reaches the CLI only in the form
// "<agent id>/<model>".
func agentMovements(io *IOStreams, model string) engine.AgentRunner {
	load := sync.OnceValues(func() (engine.AgentRunner, error) {
		reg, err := agentRegistry(io)
		if err != nil {
			return nil, err
		}
		env := os.Environ()
		if p := io.Getenv("PATH"); p != "" {
			env = append(env, "PATH="+p)
		}
		return engine.RegistryAgents(reg, io.Getenv("PATH"), env, model), nil
	})
	return engine.AgentRunnerFunc(func(ctx context.Context, id string) (*engine.AgentCLI, error) {
		runner, err := load()
		if err != nil {
			return nil, err
		}
		return runner.AgentCLI(ctx, id)
	})
}
