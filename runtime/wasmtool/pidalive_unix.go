//go:build unix

package wasmtool

import (
	"errors"
	"syscall"
)

// pidAlive reports whether process pid exists (signal 0; EPERM: it
// exists, another user's).
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
