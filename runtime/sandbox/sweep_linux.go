package sandbox

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// What a warden killed leaves when its watcher (watch_linux.go) could not
// clean up after it — the watcher killed too, or never started, or warden
// killed between starting a program and telling the watcher — is, for
// root, a pids cgroup nobody removes, holding whatever still runs of the
// program. So each pids cgroup is named for the warden that makes it (its
// pid and time namespaces, pid and start time), and the first time a
// warden makes one it sweeps the hierarchy: a cgroup whose warden is gone
// is emptied (every member killed) and removed; one whose warden runs is
// left alone; one whose owner it cannot tell (another namespace's, named
// before owners were, or /proc unreadable now) is removed only when it is
// empty — the kernel refuses to remove one that is not — and older than
// sweepAge, past the moment its warden moves a launcher in.

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
// "PIDNS.TIMENS.PID.START" — the inodes of its pid and time namespaces
// (a start time read through /proc is shifted by the reader's time
// namespace), its pid, its start time in clock ticks since boot — or ""
// when /proc does not show them for this process.
func ownerTag() string {
	ownerOnce.Do(func() {
		pidns, ok := nsInode("pid")
		if !ok {
			return
		}
		timens, ok := nsInode("time")
		if !ok {
			timens = "0" // a kernel without time namespaces
		}
		pid, start, err := procStart("self")
		if err != nil || pid != os.Getpid() {
			return // a /proc of another pid namespace
		}
		owner = pidns + "." + timens + "." + strconv.Itoa(pid) + "." + start
	})
	return owner
}

// nsInode is the inode of this process's namespace of kind, from
// /proc/self/ns.
func nsInode(kind string) (string, bool) {
	link, err := os.Readlink("/proc/self/ns/" + kind)
	if err != nil {
		return "", false
	}
	ino, ok := strings.CutPrefix(link, kind+":[")
	ino, ok2 := strings.CutSuffix(ino, "]")
	if !ok || !ok2 {
		return "", false
	}
	return ino, true
}

// errNoStat is procStart's error for a stat it cannot read.
var errNoStat = errors.New("unreadable stat")

// procStart reads the pid and start time of /proc/P; the error wraps
// fs.ErrNotExist when there is no such process.
func procStart(p string) (pid int, start string, err error) {
	b, err := os.ReadFile("/proc/" + p + "/stat")
	if err != nil {
		return 0, "", err
	}
	// pid (comm) state ppid … : comm may hold anything but its last ')'.
	i := bytes.LastIndexByte(b, ')')
	j := bytes.IndexByte(b, ' ')
	if i < 0 || j < 0 || j > i {
		return 0, "", errNoStat
	}
	pid, err = strconv.Atoi(string(b[:j]))
	f := strings.Fields(string(b[i+1:]))
	if err != nil || len(f) < 20 {
		return 0, "", errNoStat
	}
	return pid, f[19], nil // field 22 of stat, the 20th after comm
}

// ownerState says of a pids cgroup's name whether its warden runs
// (alive), is gone (ended), or cannot be told (neither): only a process
// that is not there, or one of the same pid with another start time, both
// seen from the same pid and time namespaces, is a warden gone.
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
	if len(f) != 4 || len(mine) != 4 || f[0] != mine[0] || f[1] != mine[1] {
		return false, false // another pid or time namespace's
	}
	if _, err := strconv.Atoi(f[2]); err != nil {
		return false, false
	}
	_, start, err := procStart(f[2])
	switch {
	case err == nil && start == f[3]:
		return true, false
	case err == nil, errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ESRCH):
		return false, true // the pid taken again, or no such process
	default:
		return false, false // out of descriptors, memory: cannot tell
	}
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
