package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// orphanScript is the program the killed warden leaves running: it starts
// a child in its process group and one that leaves its session (which no
// signal to the group reaches), says the three pids, and waits.
const orphanScript = `sleep 1000 </dev/null >/dev/null 2>&1 & a=$!; setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo "$$ $a $!"; exec sleep 999`

// TestHostileKilledWardenEndsItsPrograms: a program under the sandbox does
// not outlive the warden that started it. Killed (SIGKILL: no cleanup of
// its own runs), warden takes its programs with it — started afresh or
// through a pre-started launcher —, the children they started in their
// process group too, and, for root, what is left in their pids cgroups
// (the child that left its session): its watcher ends them. No program
// runs on past the time limit warden was there to hold.
func TestHostileKilledWardenEndsItsPrograms(t *testing.T) {
	for _, mode := range []string{"fresh", "pool"} {
		t.Run(mode, func(t *testing.T) {
			p := smallLauncherForPool(t)
			if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
				t.Skip("cannot become a subreaper:", err)
			}
			defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
			cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWardenHelper$")
			cmd.Env = append(os.Environ(), "WARDEN_ORPHAN_HELPER="+mode, "WARDEN_ORPHAN_LAUNCHER="+p)
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var pids []int
			var group string
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) >= 4 && f[0] == "program" {
					for _, s := range f[1:4] {
						n, _ := strconv.Atoi(s)
						pids = append(pids, n)
					}
					if len(f) == 5 {
						group = f[4]
					}
					break
				}
			}
			if len(pids) != 3 || slices.Contains(pids, 0) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatal("the helper warden started no program")
			}
			for _, pid := range pids {
				defer unix.Kill(pid, unix.SIGKILL)
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			// Orphaned, the three are this process's children now: each
			// must end, killed.
			names := []string{"the program", "its child in its process group", "its child that left its session"}
			for i, pid := range pids {
				if i == 2 && group == "" {
					// Not root: no pids cgroup holds it; it runs on under
					// its limits (docs/sandbox.md).
					continue
				}
				if ws, err := waitFor(pid, 20*time.Second); err != nil {
					t.Errorf("%s (pid %d) outlived its killed warden: %v", names[i], pid, err)
				} else if !ws.Signaled() || ws.Signal() != unix.SIGKILL {
					t.Errorf("%s ended, but not killed: %v", names[i], ws)
				}
			}
			if group == "" {
				return
			}
			// The watcher removes it once its last member is reaped.
			if !within20s(func() bool { _, err := os.Stat(group); return os.IsNotExist(err) }) {
				Cleanup(group)
				t.Fatalf("the killed warden's pids cgroup %s stayed", group)
			}
		})
	}
}

// waitFor reaps pid, this process's child, or kills it after limit.
func waitFor(pid int, limit time.Duration) (unix.WaitStatus, error) {
	done := make(chan struct{})
	timer := time.AfterFunc(limit, func() {
		select {
		case <-done:
		default:
			_ = unix.Kill(pid, unix.SIGTERM) // a distinct end: not the SIGKILL asked for
		}
	})
	defer timer.Stop()
	defer close(done)
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return ws, err
		}
		if ws.Signaled() && ws.Signal() == unix.SIGTERM {
			return ws, fmt.Errorf("still running after %v", limit)
		}
		return ws, nil
	}
}

// TestKilledWardenHelper is the warden TestHostileKilledWardenEndsItsPrograms
// kills: it starts orphanScript under the sandbox, says its pids and
// cgroup, and waits to be killed.
func TestKilledWardenHelper(t *testing.T) {
	mode := os.Getenv("WARDEN_ORPHAN_HELPER")
	if mode == "" {
		t.Skip("run by TestHostileKilledWardenEndsItsPrograms")
	}
	defer UseLauncher(os.Getenv("WARDEN_ORPHAN_LAUNCHER"))()
	ws := t.TempDir()
	spec := Spec{Read: []string{ws}, Exec: ExecClosure([]string{"/bin/sh", "/bin/sleep", "/usr/bin/setsid"}, nil)}
	argv := []string{"/bin/sh", "-c", orphanScript}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var group string
	var pid int
	if mode == "pool" {
		l := pooled(t, argv, nil, spec)
		group = l.Group
		null, _ := os.Open(os.DevNull)
		if err := l.Send(ws, null, w, os.Stderr); err != nil {
			t.Fatal(err)
		}
		pid = l.Cmd.Process.Pid
	} else {
		if NeedsGroup() {
			if spec.Group, err = NewGroup(16); err != nil {
				t.Fatal(err)
			}
			group = spec.Group
		}
		cmd := launcherCmd(t, argv[0], argv, nil, spec)
		cmd.Dir, cmd.Stdout, cmd.Stderr = ws, w, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pid = cmd.Process.Pid
	}
	Started(pid, group) // as builtin/internal/proc does
	w.Close()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("the program said nothing: %v", err)
	}
	fmt.Printf("program %s %s\n", strings.TrimSpace(line), group)
	select {}
}

// TestSweepLeavesTheLiving: the sweep touches no pids cgroup of a warden
// still running — its program runs on, its cgroup stays — and removes
// what a warden whose process is gone left: a cgroup named for this
// process's pid with another start time (the pid taken again) is emptied
// and removed. A cgroup whose owner it cannot tell (another pid
// or time namespace's — a start time read through /proc is shifted by
// the reader's time namespace —, or named before owners were) is removed
// only when empty and older than sweepAge.
func TestSweepLeavesTheLiving(t *testing.T) {
	if !NeedsGroup() || pidsRoot() == "" {
		t.Skip("pids cgroups are made for root")
	}
	tag := ownerTag()
	if tag == "" {
		t.Skip("no owner tag here (/proc)")
	}
	root := pidsRoot()
	mine, err := NewGroup(8)
	if err != nil {
		t.Fatal(err)
	}
	defer Cleanup(mine)
	f := strings.Split(tag, ".")
	reused := filepath.Join(root, groupPrefix+f[0]+"."+f[1]+"."+f[2]+"."+f[3]+"1-00000000000000aa")
	foreign := filepath.Join(root, groupPrefix+"1."+f[1]+"."+f[2]+"."+f[3]+"-00000000000000bb")
	otherTime := filepath.Join(root, groupPrefix+f[0]+".1."+f[2]+"."+f[3]+"1-00000000000000dd")
	old := filepath.Join(root, groupPrefix+"00000000000000cc")
	for _, g := range []string{reused, foreign, old, otherTime} {
		if err := makeGroup(g, 8); err != nil {
			t.Fatal(err)
		}
		defer Cleanup(g)
	}
	var sleeps []*exec.Cmd
	for _, g := range []string{mine, reused} {
		c := exec.Command("/bin/sleep", "1000")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Process.Kill()
		if err := os.WriteFile(filepath.Join(g, "cgroup.procs"), []byte(strconv.Itoa(c.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
		sleeps = append(sleeps, c)
	}
	defer func(a time.Duration) { sweepAge = a }(sweepAge)
	sweepAge = time.Hour
	sweepGroups(root)
	if unix.Kill(sleeps[0].Process.Pid, 0) != nil {
		t.Fatal("the sweep killed a running warden's program")
	}
	for _, g := range []string{mine, foreign, old, otherTime} {
		if _, err := os.Stat(g); err != nil {
			t.Fatalf("the sweep removed %s: %v", g, err)
		}
	}
	if _, err := os.Stat(reused); !os.IsNotExist(err) {
		t.Fatalf("the sweep left %s, whose owner's pid another process took: %v", reused, err)
	}
	if err := sleeps[1].Wait(); err == nil {
		t.Fatal("the program in the cgroup of a warden that is gone was not killed")
	}
	sweepAge = 0
	sweepGroups(root)
	for _, g := range []string{foreign, old} {
		if _, err := os.Stat(g); !os.IsNotExist(err) {
			t.Fatalf("the sweep left the empty cgroup %s of no known owner, older than sweepAge: %v", g, err)
		}
	}
	if _, err := os.Stat(mine); err != nil {
		t.Fatalf("the sweep removed this warden's cgroup: %v", err)
	}
}

// sleeper starts a process in a process group of its own, as a program
// is, killed and reaped when the test ends.
func sleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	c := exec.Command("/bin/sleep", "1000")
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	return c
}

// running reports whether pid is a process that has not ended.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z'
}

// currentWatcher is the running watcher's pid (0: none).
func currentWatcher() int {
	live.Lock()
	defer live.Unlock()
	if watcher.to < 0 || watcher.proc == nil {
		return 0
	}
	return watcher.proc.Pid
}

// endWatcherPipe closes warden's end of the running watcher's pipe, as
// warden's end does: the watcher must kill what it was told runs.
func endWatcherPipe() {
	live.Lock()
	defer live.Unlock()
	if watcher.to >= 0 {
		unix.Close(watcher.to)
		watcher.to, watcher.proc = -1, nil
	}
}

// within20s reports whether cond held within 20 seconds, asked every
// 10 ms: what a watcher does, it does a moment after it is told.
func within20s(cond func() bool) bool {
	for range 2000 {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

// killedWhenPipeEnds closes warden's end of the watcher's pipe, as
// warden's ending does, with the last program (of progs) told started:
// the watcher must kill every one of them.
func killedWhenPipeEnds(t *testing.T, progs ...*exec.Cmd) {
	t.Helper()
	endWatcherPipe()
	Ended(progs[len(progs)-1].Process.Pid)
	for i, c := range progs {
		if err := c.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("program %d, told to the watcher, not killed when warden's end of its pipe closed: %v", i, err)
		}
	}
}

// TestHostileWatcherGivenUp: a watcher that stops reading (stopped by a
// signal: a program below Landlock ABI 6 could send it one) never holds
// warden up, and giving it up harms nothing: it is killed before its pipe
// closes — resumed, it would read the end of its pipe as warden's and
// kill a live warden's programs, or a stranger that took a forgotten
// program's process group —, and another starts at once, told every
// program running, which it kills when warden's end of its pipe closes.
func TestHostileWatcherGivenUp(t *testing.T) {
	if !mainCalled.Load() {
		t.Skip("no launcher binary")
	}
	a, b := sleeper(t), sleeper(t)
	Started(a.Process.Pid, "")
	defer Ended(a.Process.Pid)
	stopped := currentWatcher()
	if stopped == 0 {
		t.Fatal("no watcher started with the first program")
	}
	if err := unix.Kill(stopped, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer unix.Kill(stopped, unix.SIGKILL)
	done := make(chan int)
	go func() {
		i := 0
		for ; i < 100000 && currentWatcher() == stopped; i++ { // past a pipe's 64 KiB
			Started(b.Process.Pid, "")
			Ended(b.Process.Pid)
		}
		done <- i
	}()
	select {
	case i := <-done:
		t.Logf("the stopped watcher given up after %d programs", i)
	case <-time.After(2 * time.Minute):
		t.Fatal("warden blocked writing to a watcher that stopped reading")
	}
	if w := currentWatcher(); w == 0 || w == stopped {
		t.Fatalf("no new watcher at once after the stopped one was given up (now %d)", w)
	}
	if !within20s(func() bool { return !running(stopped) }) {
		unix.Kill(stopped, unix.SIGCONT)
		t.Fatalf("the watcher given up (%d) was not killed", stopped)
	}
	if !running(a.Process.Pid) {
		t.Fatal("giving up a watcher killed a live warden's program")
	}
	Started(b.Process.Pid, "")
	killedWhenPipeEnds(t, a, b)
}

// TestWatcherEndedIsReplaced: a watcher that ended (killed) is replaced
// by the next program's start, at once: no program runs unwatched.
func TestWatcherEndedIsReplaced(t *testing.T) {
	if !mainCalled.Load() {
		t.Skip("no launcher binary")
	}
	a, b := sleeper(t), sleeper(t)
	Started(a.Process.Pid, "")
	defer Ended(a.Process.Pid)
	w := currentWatcher()
	if w == 0 {
		t.Fatal("no watcher")
	}
	unix.Kill(w, unix.SIGKILL)
	// Gone, reaped: a leader is a zombie while its other threads, which
	// hold its descriptors (the pipe's read end), are still ending.
	if !within20s(func() bool { _, err := os.Stat("/proc/" + strconv.Itoa(w)); return os.IsNotExist(err) }) {
		t.Fatalf("the killed watcher %d was not reaped", w)
	}
	Started(b.Process.Pid, "")
	if n := currentWatcher(); n == 0 || n == w {
		Ended(b.Process.Pid)
		t.Fatalf("after the watcher ended, a program started and none watches it (now %d)", n)
	}
	killedWhenPipeEnds(t, a, b)
}

// TestWatcherToldManyAtOnce: a new watcher told more programs than a pipe
// holds gets every line (warden waits for room): it does not read a cut
// end as warden's and kill a live warden's programs.
func TestWatcherToldManyAtOnce(t *testing.T) {
	if !mainCalled.Load() {
		t.Skip("no launcher binary")
	}
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Skip(err)
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Skip(err)
	}
	a := sleeper(t)
	endWatcherPipe() // a watcher with nothing to kill: ends quietly
	// Process groups that cannot exist (above pid_max), with long cgroup
	// names: some 100 KB of lines.
	long := pidsV1Root + "/" + groupPrefix + "none-" + strings.Repeat("x", 40)
	live.Lock()
	for i := range 1200 {
		live.groups[max+1+i] = long
	}
	live.Unlock()
	defer func() {
		live.Lock()
		for i := range 1200 {
			delete(live.groups, max+1+i)
		}
		live.Unlock()
	}()
	Started(a.Process.Pid, "")
	defer Ended(a.Process.Pid)
	w := currentWatcher()
	if w == 0 {
		t.Fatal("no watcher")
	}
	time.Sleep(500 * time.Millisecond) // time to misread a cut end, as it did
	if !running(a.Process.Pid) {
		t.Fatal("a watcher told many programs at once killed a live warden's program")
	}
	if currentWatcher() != w {
		t.Fatal("the watcher told many programs at once was given up")
	}
}

// TestWatcherHoldsNothingOfWardens: a descriptor warden inherited without
// close-on-exec (a parent's pipe, a socket) does not stay open in its
// watcher, which outlives warden for a moment.
func TestWatcherHoldsNothingOfWardens(t *testing.T) {
	if !mainCalled.Load() {
		t.Skip("no launcher binary")
	}
	f, err := os.CreateTemp(t.TempDir(), "inherited")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFD, 0); err != nil { // as if inherited
		t.Fatal(err)
	}
	endWatcherPipe()
	a := sleeper(t)
	Started(a.Process.Pid, "")
	defer Ended(a.Process.Pid)
	w := currentWatcher()
	if w == 0 {
		t.Fatal("no watcher")
	}
	holds := func() bool {
		ents, _ := os.ReadDir("/proc/" + strconv.Itoa(w) + "/fd")
		for _, e := range ents {
			if l, _ := os.Readlink("/proc/" + strconv.Itoa(w) + "/fd/" + e.Name()); l == f.Name() {
				return true
			}
		}
		return false
	}
	// The watcher closes it as it starts: wait for its pipe to be read.
	if !within20s(func() bool { return !holds() }) {
		t.Fatalf("the watcher %d still holds %s, a descriptor of warden's", w, f.Name())
	}
	if !running(w) {
		t.Fatal("the watcher ended")
	}
}
