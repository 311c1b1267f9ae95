package fspath

import (
	"errors"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set when the kernel (or a seccomp filter) has no openat2.
var noOpenat2 atomic.Bool

// resolveQuick returns abs cleaned when the kernel finds every element of
// it and not one symlink on the way — the final element included, and
// /proc's magic links with them: openat2 with RESOLVE_NO_SYMLINKS, O_PATH
// (which opens nothing for reading or writing: a FIFO or a device is not
// touched, and nothing blocks). Without a symlink, the path's ".." are
// its parents and cleaning it is what the element-by-element walk
// (capability.ResolvePath) computes, with one system call and a close
// instead of an lstat per element. On any refusal — a symlink, an element
// missing or not a directory, a name too long, a permission — ok is false
// and the walk decides.
func resolveQuick(abs string) (string, bool) {
	if noOpenat2.Load() || !filepath.IsAbs(abs) {
		return "", false
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, abs, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		if errors.Is(err, unix.ENOSYS) {
			noOpenat2.Store(true)
		}
		return "", false
	}
	unix.Close(fd)
	return filepath.Clean(abs), true
}
