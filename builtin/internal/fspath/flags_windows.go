package fspath

import "io/fs"

// Windows has none of these open flags: its opens do not block the way a
// FIFO's does and take no terminal; os.Root refuses a link out of its root
// whatever the flags, but a plain open (git's reads of the repository's
// files) follows a final symbolic link there.
const (
	ONonblock  = 0
	ONoctty    = 0
	ODirectory = 0
	ONofollow  = 0
)

// Nlink: the hard-link count is not in Windows's file information
// (1: as when unknown).
func Nlink(fs.FileInfo) uint64 { return 1 }

// Owner: Windows files have no uid and gid.
func Owner(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }
