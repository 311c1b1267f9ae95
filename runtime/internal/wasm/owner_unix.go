//go:build unix

package wasm

import (
	"fmt"
	"os"
	"syscall"
)

func checkOwner(dir string, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%w: cannot read the owner of %s", ErrUnsafeCacheDir, dir)
	}
	if uid := os.Getuid(); int(st.Uid) != uid {
		return fmt.Errorf("%w: %s is owned by uid %d, not %d", ErrUnsafeCacheDir, dir, st.Uid, uid)
	}
	return nil
}
