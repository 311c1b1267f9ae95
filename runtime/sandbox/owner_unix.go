//go:build unix

package sandbox

import (
	"os"
	"syscall"
)

// ownedByUs reports whether fi's owner is this user or root.
func ownedByUs(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && (st.Uid == 0 || int(st.Uid) == os.Geteuid())
}
