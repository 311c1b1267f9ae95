//go:build unix

package wasmtool

import (
	"io/fs"
	"os"
	"syscall"
)

// oNoFollow makes an open fail on a final symlink.
const oNoFollow = syscall.O_NOFOLLOW

// ownedByUs reports whether fi belongs to this process's user.
func ownedByUs(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}
