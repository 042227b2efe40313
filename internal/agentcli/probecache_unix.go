//go:build unix

package agentcli

import (
	"os"
	"syscall"
)

// inode is the file's inode number (0 where the system does not say).
func inode(st os.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Ino)
	}
	return 0
}
