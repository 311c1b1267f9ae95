package fspath

import (
	"os"
	"strconv"
	"sync"
)

var (
	procOnce sync.Once
	procOK   bool
)

// RealPath returns the kernel's name for the open file f, from
// /proc/self/fd. It returns "" with no error where /proc is not mounted;
// each caller decides what that means for it (fs trusts os.Root alone, ops
// compares device and inode, memory refuses).
func RealPath(f *os.File) (string, error) {
	procOnce.Do(func() {
		fi, err := os.Stat("/proc/self/fd")
		procOK = err == nil && fi.IsDir()
	})
	if !procOK {
		return "", nil
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return "", err
	}
	var p string
	var rerr error
	if err := sc.Control(func(fd uintptr) {
		p, rerr = os.Readlink("/proc/self/fd/" + strconv.FormatUint(uint64(fd), 10))
	}); err != nil {
		return "", err
	}
	return p, rerr
}
