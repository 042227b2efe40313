package tool

import "strconv"

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

// sizeText writes a limit for a message: "10 MiB", or "1500 bytes" when
// it is not a whole number of MiB.
func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return strconv.FormatInt(n>>20, 10) + " MiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
