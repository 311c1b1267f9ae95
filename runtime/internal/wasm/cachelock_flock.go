//go:build !windows && !plan9 && !solaris && !aix && !android && !js && !wasip1

package wasm

import (
	"os"
	"path/filepath"
	"syscall"
)

// cacheLocks says whether lockCache can tell that no other process uses
// the cache.
const cacheLocks = true

// lockCache opens dir/.lock and takes a shared lock on it, held until the
// file is closed (by Engine.Close, or the process's end): every engine on
// dir holds one. Before, it tries for an exclusive lock: while it holds
// that, no other process uses the cache, and clean runs (removing what
// killed compiles left). A lock that cannot be taken at all returns nil:
// the cache is used unlocked, and nothing is removed but by age.
func lockCache(dir string, clean func(alone bool)) *os.File {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		clean(false)
		return nil
	}
	fd := int(f.Fd())
	alone := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) == nil
	clean(alone)
	if err := syscall.Flock(fd, syscall.LOCK_SH); err != nil {
		f.Close()
		return nil
	}
	return f
}
