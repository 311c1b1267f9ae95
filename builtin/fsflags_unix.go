//go:build unix

package builtin

import (
	"io/fs"
	"syscall"
)

// Flags of the tools' opens: never block on a FIFO or a device, never take
// a terminal, open only a directory, never follow a final symlink.
const (
	oNonblock  = syscall.O_NONBLOCK
	oNoctty    = syscall.O_NOCTTY
	oDirectory = syscall.O_DIRECTORY
	oNofollow  = syscall.O_NOFOLLOW
)

// fsNlink returns the number of hard links of fi (1 when unknown).
func fsNlink(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// fsOwner returns fi's owner and group.
func fsOwner(fi fs.FileInfo) (uid, gid int, ok bool) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid), true
	}
	return 0, 0, false
}
