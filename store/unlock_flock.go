//go:build !windows && !plan9 && !solaris && !aix && !android

package store

import (
	"os"
	"syscall"
)

// unlockFile releases the flock bbolt took on f.
func unlockFile(f *os.File) {
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
