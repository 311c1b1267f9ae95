//go:build !linux

package sandbox

import (
	"context"
	"errors"
	"os"
	"runtime"
)

// Pooled: outside Linux there is no launcher, so there is no pool either:
// programs start directly (Command).
func Pooled(ctx context.Context, path string, args, env []string, spec Spec) (*Launch, error) {
	return nil, nil
}

// Send fails outside Linux, where no launch comes from the pool.
func (l *Launch) Send(dir string, stdin, stdout, stderr *os.File) error {
	return errors.New("sandbox: no pre-started launchers on " + runtime.GOOS)
}

// ClosePools has nothing to end outside Linux.
func ClosePools() {}
