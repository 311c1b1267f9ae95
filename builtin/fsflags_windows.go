package builtin

import "io/fs"

// Windows has none of these open flags: its opens do not block the way a
// FIFO's does and take no terminal; os.Root refuses a link out of its root
// whatever the flags, but a plain open (git's reads of the repository's
// files) follows a final symbolic link there.
const (
	oNonblock  = 0
	oNoctty    = 0
	oDirectory = 0
	oNofollow  = 0
)

// fsNlink: the hard-link count is not in Windows's file information
// (1: as when unknown).
func fsNlink(fs.FileInfo) uint64 { return 1 }

// fsOwner: Windows files have no uid and gid.
func fsOwner(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }
