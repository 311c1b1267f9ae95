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
// with its first, a small process of its own — the launcher binary with
// watchArg, in a session of its own, with nothing of warden's but the
// read end of a pipe only warden writes. Warden tells it each program's
// process group and pids cgroup as the program starts ([Started]) and
// forgets it as it ends ([Ended]); when the pipe reaches its end — warden
// ended, however it did — the watcher kills each program still listed,
// its process group and what is in its pids cgroup, removes the cgroup,
// and exits. A watcher that cannot be started, or that stops reading, is
// given up (the programs still run; the next program starts another,
// which is told every program running); warden never waits for one.

// watchTo is warden's end of the watcher's pipe (-1: none running), and
// watchPid the watcher's process. Held under live's lock.
var watchTo, watchPid = -1, 0

// watchLocked tells the watcher line, starting one (told every program
// in live.groups, line's included) when none runs. live is locked.
func watchLocked(line string) {
	if watchTo < 0 {
		if !mainCalled.Load() || strings.HasPrefix(line, "-") {
			return // no launcher binary to run it with, or nothing to tell
		}
		fd, err := startWatcher()
		if err != nil {
			return
		}
		watchTo = fd
		var b strings.Builder
		for pgid, group := range live.groups {
			b.WriteString(watchRecord(pgid, group, true))
		}
		line = b.String()
	}
	for len(line) > 0 {
		n, err := unix.Write(watchTo, []byte(line))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 { // EAGAIN: it stopped reading; EPIPE: it ended
			unix.Close(watchTo)
			watchTo = -1
			return
		}
		line = line[n:]
	}
}

// watchRecord is one line to the watcher: "+PGID GROUP" or "-PGID".
func watchRecord(pgid int, group string, started bool) string {
	if !started {
		return "-" + strconv.Itoa(pgid) + "\n"
	}
	return "+" + strconv.Itoa(pgid) + " " + group + "\n"
}

// startWatcher starts a watcher and returns warden's end of its pipe,
// non-blocking and closed on exec.
func startWatcher() (int, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return -1, err
	}
	theirs := os.NewFile(uintptr(p[0]), "warden-sandbox-watch")
	defer theirs.Close()
	cmd := exec.Command(launcherPath())
	cmd.Args = []string{LauncherName, watchArg}
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		unix.Close(p[1])
		return -1, err
	}
	watchPid = cmd.Process.Pid
	go cmd.Wait() // reaped when it ends, after warden's end of the pipe closes
	if err := unix.SetNonblock(p[1], true); err != nil {
		unix.Close(p[1])
		return -1, err
	}
	return p[1], nil
}

// serveWatch is the watcher's work (argv: watchArg; descriptor 3 the
// pipe's read end). It never returns.
func serveWatch() {
	// Its own session keeps a terminal's signals away; these it ignores
	// besides, as it ends by itself once warden has.
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGPIPE)
	running := map[int]string{}
	sc := bufio.NewScanner(os.NewFile(3, "warden-sandbox-watch"))
	for sc.Scan() {
		line := sc.Text()
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
	// Warden's end is closed: it ended.
	for pgid, group := range running {
		_ = KillGroup(pgid)
		if strings.HasPrefix(group, pidsV1Root+"/"+groupPrefix) && !strings.Contains(group[len(pidsV1Root)+1:], "/") {
			Cleanup(group)
		}
	}
	os.Exit(0)
}
