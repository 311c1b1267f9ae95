package sandbox

import (
	"sync"
)

// The programs running now, for a warden that must end at once — a
// second signal, or a command that did not stop within its grace after
// the first. Each call's own watcher kills its program when the call's
// context ends; this is for when there is no time left to wait for it.
// A warden killed outright has no time at all: the watcher process
// (watch_linux.go) holds the same list and ends them then.
var live = struct {
	sync.Mutex
	groups map[int]string // process group → pids cgroup ("" for none)
}{groups: map[int]string{}}

// Started records a program running in its own process group pgid (and
// pids cgroup, "" for none), until [Ended].
func Started(pgid int, group string) {
	live.Lock()
	live.groups[pgid] = group
	watchLocked(watchRecord(pgid, group, true), true)
	live.Unlock()
}

// Ended forgets a program. Call it before the program's process is
// reaped: until then its group's ID cannot be reused, so [KillAll] never
// reaches a stranger.
func Ended(pgid int) {
	live.Lock()
	delete(live.groups, pgid)
	watchLocked(watchRecord(pgid, "", false), true)
	live.Unlock()
}

// KillAll kills every program recorded as running — its process group,
// and what is left in its pids cgroup, which it then removes — and the
// launchers started ahead of need (ClosePools). It returns how many
// programs it found.
func KillAll() int {
	ClosePools()
	live.Lock()
	defer live.Unlock()
	n := len(live.groups)
	for pgid, group := range live.groups {
		_ = KillGroup(pgid)
		Cleanup(group)
		delete(live.groups, pgid)
		watchLocked(watchRecord(pgid, "", false), false)
	}
	return n
}
