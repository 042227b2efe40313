//go:build unix

package index

import "syscall"

func unixMkfifo(p string) error { return syscall.Mkfifo(p, 0o644) }
