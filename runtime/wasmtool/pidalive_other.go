//go:build !unix

package wasmtool

import "os"

// pidAlive reports whether process pid exists (Windows: it can be
// opened).
func pidAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}
