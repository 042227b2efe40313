package queue

import "time"

// NewEngineRunnerSyncRetry is NewEngineRunner with the first pause of a
// final sync that found the artifact store unreachable set to d.
func NewEngineRunnerSyncRetry(cfg EngineRunnerConfig, d time.Duration) Runner {
	return &engineRunner{cfg: cfg, syncRetry: d}
}
