//go:build unix

package env

import (
	"errors"
	"syscall"
)

// pidAlive reports whether a process pid exists (signal 0; EPERM: it
// exists, another user's).
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// markOpenFlags open a run mark without following a symlink or waiting on
// a FIFO planted in its place.
const markOpenFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
