//go:build windows || plan9 || solaris || aix || android

package store

import "os"

// unlockFile does nothing here: these systems' locks end when the file is
// closed, or bbolt does not lock.
func unlockFile(*os.File) {}
