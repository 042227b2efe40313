package cli

import (
	"errors"
	"log/slog"

	"github.com/maestro-run/maestro/internal/config"
	"github.com/maestro-run/maestro/internal/host"
	"github.com/maestro-run/maestro/internal/sandbox"
	"github.com/maestro-run/maestro/internal/tool"
)

// The session assembly lives in internal/host; these are the names the
// piece and job commands use for its parts.

func sandboxMode(flag string, cfg config.Config) (sandbox.Mode, error) {
	return host.SandboxMode(flag, cfg)
}

func fileLimits(cfg config.Config) tool.FileLimits { return host.FileLimits(cfg) }

func sandboxConfig(mode sandbox.Mode, log *slog.Logger) sandbox.Config {
	return host.SandboxConfig(mode, log)
}

func workspaceDir(flag string) (string, error) { return host.WorkspaceDir(flag) }

func firstPositive(vals ...int) int {
	for _, v := range vals {
		if v > 0 {
			return v
		}
	}
	return 0
}

// hostErr is the command error of a failed session assembly: a spec the
// host refused is a usage error (exit 2), anything else a failure.
func hostErr(err error) error {
	if se, ok := errors.AsType[*host.SpecError](err); ok {
		return &exitError{ExitUsage, se}
	}
	if _, ok := errors.AsType[*exitError](err); ok {
		return err
	}
	return failErr(err)
}
