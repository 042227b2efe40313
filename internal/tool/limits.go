package tool

import (
	"context"
	"strconv"

	"github.com/maestro-run/maestro/internal/workspace"
)

// DefaultMaxFileBytes is the default of FileLimits.MaxFileBytes: 10 MiB.
const DefaultMaxFileBytes = 10 << 20

// FileLimits bounds the file tools (Read, Edit, Write). The zero value
// means the defaults.
type FileLimits struct {
	// MaxFileBytes is the largest file Read returns without a range, Edit
	// edits (before and after the change) and Write writes; 0 means
	// DefaultMaxFileBytes. Read reads larger files by ranges; Edit refuses
	// them without reading them; Write refuses larger content before
	// touching the disk.
	MaxFileBytes int64
}

func (l FileLimits) maxFileBytes() int64 {
	if l.MaxFileBytes <= 0 {
		return DefaultMaxFileBytes
	}
	return l.MaxFileBytes
}

// fileChanger is a tool that changes one file of root (Edit, Write): a
// call whose context is already done fails before touching the file, and
// change gets the input and lim's file size limit.
func fileChanger[In any](name, description string, root *workspace.Root, lim FileLimits, change func(*workspace.Root, In, int64) Result) Tool {
	return New(name, description, false, func(ctx context.Context, in In, _ Call) (Result, error) {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		return change(root, in, lim.maxFileBytes()), nil
	})
}

// sizeText writes a limit for a message: "10 MiB", or "1500 bytes" when
// it is not a whole number of MiB.
func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
