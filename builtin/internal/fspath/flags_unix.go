//go:build unix

package fspath

import (
	"io/fs"
	"syscall"
)

// Flags of the tools' opens: never block on a FIFO or a device, never take
// a terminal, open only a directory, never follow a final symlink.
const (
	ONonblock  = syscall.O_NONBLOCK
	ONoctty    = syscall.O_NOCTTY
	ODirectory = syscall.O_DIRECTORY
	ONofollow  = syscall.O_NOFOLLOW
)

// Nlink returns the number of hard links of fi (1 when unknown).
func Nlink(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// Owner returns fi's owner and group.
func Owner(fi fs.FileInfo) (uid, gid int, ok bool) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid), true
	}
	return 0, 0, false
}
