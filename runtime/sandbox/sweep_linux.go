package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What a warden killed leaves. A program it started is killed with it
// (the launcher asks for SIGKILL at its parent's death before executing
// it); a process the program started that left its session is not — for
// root it is still in the program's pids cgroup, which nobody removes. So
// each pids cgroup is named for the warden that makes it — its pid
// namespace, pid and start time — and the first time a warden makes one
// it sweeps the hierarchy: a cgroup whose warden is gone is emptied
// (every member killed) and removed; one whose warden runs is left
// alone; one whose owner it cannot tell (another pid namespace's, or
// named before owners were) is removed only when it is empty — the kernel
// refuses to remove one that is not — and older than sweepAge, past the
// moment its warden moves a launcher in.

// groupPrefix begins the name of every pids cgroup warden makes.
const groupPrefix = "warden-sandbox-"

// sweepAge is how old an empty pids cgroup of no known owner must be for
// the sweep to remove it.
var sweepAge = time.Minute

var (
	sweepOnce sync.Once
	ownerOnce sync.Once
	owner     string
)

// ownerTag is this process's part of its pids cgroups' names:
// "PIDNS.PID.START" (the pid namespace's inode, the pid, the start time in
// clock ticks since boot), or "" when /proc does not show them for this
// process.
func ownerTag() string {
	ownerOnce.Do(func() {
		ns, err := os.Readlink("/proc/self/ns/pid")
		if err != nil {
			return
		}
		ino, ok := strings.CutPrefix(ns, "pid:[")
		ino, ok2 := strings.CutSuffix(ino, "]")
		if !ok || !ok2 {
			return
		}
		pid, start, ok := procStart("self")
		if !ok || pid != os.Getpid() {
			return // a /proc of another pid namespace
		}
		owner = ino + "." + strconv.Itoa(pid) + "." + start
	})
	return owner
}

// procStart reads the pid and start time of /proc/P.
func procStart(p string) (pid int, start string, ok bool) {
	b, err := os.ReadFile("/proc/" + p + "/stat")
	if err != nil {
		return 0, "", false
	}
	// pid (comm) state ppid … : comm may hold anything but its last ')'.
	i := bytes.LastIndexByte(b, ')')
	j := bytes.IndexByte(b, ' ')
	if i < 0 || j < 0 || j > i {
		return 0, "", false
	}
	pid, err = strconv.Atoi(string(b[:j]))
	f := strings.Fields(string(b[i+1:]))
	if err != nil || len(f) < 20 {
		return 0, "", false
	}
	return pid, f[19], true // field 22 of stat, the 20th after comm
}

// ownerState says of a pids cgroup's name whether its warden runs
// (alive), is gone (ended), or cannot be told (neither).
func ownerState(name string) (alive, ended bool) {
	rest, ok := strings.CutPrefix(name, groupPrefix)
	if !ok {
		return false, false
	}
	tag, _, ok := strings.Cut(rest, "-")
	if !ok {
		return false, false // named before owners were
	}
	f := strings.Split(tag, ".")
	mine := strings.Split(ownerTag(), ".")
	if len(f) != 3 || len(mine) != 3 || f[0] != mine[0] {
		return false, false // another pid namespace's: its pids are not ours
	}
	if _, err := strconv.Atoi(f[1]); err != nil {
		return false, false
	}
	_, start, ok := procStart(f[1])
	if ok && start == f[2] {
		return true, false
	}
	return false, true // no such process, or the pid taken again
}

// sweepGroups empties and removes the pids cgroups under root whose
// warden is gone, and the empty ones older than sweepAge whose warden it
// cannot tell.
func sweepGroups(root string) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), groupPrefix) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		alive, ended := ownerState(e.Name())
		switch {
		case alive:
		case ended:
			Cleanup(dir)
		default:
			if info, err := os.Stat(dir); err == nil && time.Since(info.ModTime()) >= sweepAge {
				_ = os.Remove(dir) // refused while a task is in it
			}
		}
	}
}
