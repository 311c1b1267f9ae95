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
			for i := 0; i < 2000; i++ { // the watcher removes it once its last member is reaped
				if _, err := os.Stat(group); os.IsNotExist(err) {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			Cleanup(group)
			t.Fatalf("the killed warden's pids cgroup %s stayed", group)
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

// TestWatcherNeverBlocksWarden: a watcher that stops reading (stopped by
// a signal: a program below Landlock ABI 6 could send it one) never holds
// warden up — once its pipe is full it is given up, and the next program
// starts another, told every program running; that one, when warden's
// end of its pipe closes, kills them all.
func TestWatcherNeverBlocksWarden(t *testing.T) {
	if !mainCalled.Load() {
		t.Skip("no launcher binary")
	}
	var sleeps []*exec.Cmd
	for range 2 {
		c := exec.Command("/bin/sleep", "1000")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Process.Kill()
		sleeps = append(sleeps, c)
	}
	first, second := sleeps[0].Process.Pid, sleeps[1].Process.Pid
	Started(first, "")
	defer Ended(first)
	live.Lock()
	stopped := watchPid
	running := watchTo >= 0
	live.Unlock()
	if !running {
		t.Fatal("no watcher started with the first program")
	}
	if err := unix.Kill(stopped, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer unix.Kill(stopped, unix.SIGKILL)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20000 { // some 200 KB of records: past a pipe's 64 KiB
			Started(second, "")
			Ended(second)
		}
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("warden blocked writing to a watcher that stopped reading")
	}
	// The last Started found no watcher and started one, told both
	// programs; the last Ended told it the second ended. Tell it again
	// the second runs, and close warden's end: it must kill both.
	Started(second, "")
	live.Lock()
	if watchPid == stopped || watchTo < 0 {
		live.Unlock()
		t.Fatalf("no new watcher after the stopped one was given up (watcher %d, pipe %d)", watchPid, watchTo)
	}
	unix.Close(watchTo)
	watchTo = -1
	live.Unlock()
	Ended(second)
	for i, c := range sleeps {
		if err := c.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("program %d, told to the new watcher, not killed when warden's end closed: %v", i, err)
		}
	}
}
