//go:build !unix

package wasmtool

import "io/fs"

// oNoFollow: O_EXCL alone refuses a final symlink here (CREATE_NEW).
const oNoFollow = 0

// ownedByUs: a file's owner is not checked here; the tools directory is
// the user's own.
func ownedByUs(fs.FileInfo) bool { return true }
