package cli

import (
	"errors"

	"github.com/maestro-run/maestro/internal/host"
)

// firstPositive is the first of vals above zero (0 when none is).
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
