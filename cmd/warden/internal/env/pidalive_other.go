//go:build !unix

package env

import "os"

// pidAlive reports whether a process pid exists (Windows: it can be
// opened).
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}

// markOpenFlags: readMark checks the file's type after opening it.
const markOpenFlags = 0
