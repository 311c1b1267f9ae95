package sandbox

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The watcher: a program warden started must not outlive warden. A
// warden killed (SIGKILL, a crash, the out-of-memory killer) runs no
// cleanup of its own, so each warden process that starts programs starts,
// before its first, a small process of its own — the launcher binary with
// watchArg, in a session of its own, with nothing of warden's but the
// read end of a pipe only warden writes. Warden tells it each program's
// process group and pids cgroup as the program starts ([Started]) and
// forgets it as it ends ([Ended]); when the pipe reaches its end — warden
// ended, however it did — the watcher kills each program still listed,
// its process group and what is in its pids cgroup, removes the cgroup,
// and exits.
//
// A watcher that ends, or stops reading for watchWait, is given up:
// killed first (so that it can never read the end of its pipe as warden's
// end and kill a live warden's programs, or a stranger that took a
// forgotten program's process group), then its pipe closed, and another
// started at once, told every program running. Warden waits for none
// longer than that.

// watchWait is how long warden waits for room in a watcher's pipe before
// it gives the watcher up.
const watchWait = 1000 // milliseconds

// watcher is the running watcher (to < 0: none), held under live's lock.
var watcher = struct {
	to   int         // warden's end of the pipe: non-blocking, close-on-exec
	proc *os.Process // the watcher, killed when given up
}{to: -1}

// ensureWatcherLocked starts a watcher, told every program running, when
// none runs. live is locked.
func ensureWatcherLocked() {
	if watcher.to >= 0 || !mainCalled.Load() {
		return // running, or no launcher binary to run it with
	}
	fd, proc, err := startWatcher()
	if err != nil {
		return // the programs run unwatched; the next start tries again
	}
	watcher.to, watcher.proc = fd, proc
	var b strings.Builder
	for pgid, group := range live.groups {
		b.WriteString(watchRecord(pgid, group, true))
	}
	if !sendWatcher(b.String()) {
		giveUpWatcher()
	}
}

// EnsureWatcher starts the watcher before a program starts, so that the
// program is told to a watcher already running.
func EnsureWatcher() {
	live.Lock()
	ensureWatcherLocked()
	live.Unlock()
}

// watchLocked tells the watcher line; live.groups holds what it says
// already. Where no watcher runs, or the one running is given up, it
// starts one (told every program in live.groups) when restart is set and
// a program runs. live is locked.
func watchLocked(line string, restart bool) {
	if watcher.to >= 0 && sendWatcher(line) {
		return
	}
	if watcher.to >= 0 {
		giveUpWatcher()
	}
	if restart && len(live.groups) > 0 {
		ensureWatcherLocked()
	}
}

// sendWatcher writes s to the watcher's pipe, waiting up to watchWait for
// room, and reports whether all of it went.
func sendWatcher(s string) bool {
	for len(s) > 0 {
		n, err := unix.Write(watcher.to, []byte(s))
		switch {
		case err == nil && n > 0:
			s = s[n:]
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.EAGAIN):
			fds := []unix.PollFd{{Fd: int32(watcher.to), Events: unix.POLLOUT}}
			if k, err := unix.Poll(fds, watchWait); (err != nil && !errors.Is(err, unix.EINTR)) || k == 0 {
				return false // it stopped reading
			}
		default:
			return false // EPIPE: it ended
		}
	}
	return true
}

// giveUpWatcher kills the running watcher, then closes its pipe. live is
// locked.
func giveUpWatcher() {
	if watcher.proc != nil {
		_ = watcher.proc.Kill() // by pidfd where there is one: never a stranger
	}
	unix.Close(watcher.to)
	watcher.to, watcher.proc = -1, nil
}

// watchRecord is one line to the watcher: "+PGID GROUP" or "-PGID".
func watchRecord(pgid int, group string, started bool) string {
	if !started {
		return "-" + strconv.Itoa(pgid) + "\n"
	}
	return "+" + strconv.Itoa(pgid) + " " + group + "\n"
}

// startWatcher starts a watcher and returns warden's end of its pipe,
// non-blocking and closed on exec, and the watcher's process.
func startWatcher() (int, *os.Process, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, nil, err
	}
	theirs := os.NewFile(uintptr(p[0]), "warden-sandbox-watch")
	defer theirs.Close()
	if err := unix.SetNonblock(p[1], true); err != nil {
		unix.Close(p[1])
		return -1, nil, err
	}
	cmd := exec.Command(launcherPath())
	cmd.Args = []string{LauncherName, watchArg}
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		unix.Close(p[1])
		return -1, nil, err
	}
	go cmd.Wait() // reaped when it ends
	return p[1], cmd.Process, nil
}

// serveWatch is the watcher's work (argv: watchArg; descriptor 3 the
// pipe's read end). It never returns.
func serveWatch() {
	closeInherited()
	// Its own session keeps a terminal's signals away; these it ignores
	// besides, as it ends by itself once warden has.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGPIPE)
	running := map[int]string{}
	r := bufio.NewReader(os.NewFile(3, "warden-sandbox-watch"))
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break // the end, and any line it cut short (never acted on)
		}
		line = strings.TrimSuffix(line, "\n")
		if len(line) < 2 {
			continue
		}
		id, group, _ := strings.Cut(line[1:], " ")
		pgid, err := strconv.Atoi(id)
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			running[pgid] = group
		case '-':
			delete(running, pgid)
		}
	}
	// Warden's end is closed: it ended (a watcher given up is killed
	// before its pipe closes).
	for pgid, group := range running {
		_ = KillGroup(pgid)
		if strings.HasPrefix(group, pidsV1Root+"/"+groupPrefix) && !strings.Contains(group[len(pidsV1Root)+1:], "/") {
			Cleanup(group)
		}
	}
	os.Exit(0)
}

// closeInherited closes the descriptors above the pipe that came through
// execve — those warden inherited without close-on-exec —, leaving the
// ones Go's runtime opened in this process (all close-on-exec): the
// watcher holds nothing of warden's but its pipe.
func closeInherited() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 3 {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			unix.Close(fd)
		}
	}
}
