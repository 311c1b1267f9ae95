package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// orphanScript is the program the killed warden leaves running: it starts
// a child that leaves its session (which no signal to the program
// reaches), says both pids, and waits.
const orphanScript = `setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo "$$ $!"; exec sleep 999`

// TestHostileKilledWardenEndsItsPrograms: a program under the sandbox does not
// outlive the warden that started it. Killed (SIGKILL: no deferred
// cleanup runs), warden takes its programs with it — started afresh or
// through a pre-started launcher — so that no program runs on past the
// time limit warden was there to hold. The program's child that left its
// session is no child of warden's: for root it stays in the program's
// pids cgroup, which the next warden to make one finds its owner gone
// and empties (kills what is in it) and removes.
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
			var prog, bg int
			var group string
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "program" {
					prog, _ = strconv.Atoi(f[1])
					bg, _ = strconv.Atoi(f[2])
					if len(f) == 4 {
						group = f[3]
					}
					break
				}
			}
			if prog == 0 || bg == 0 {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatal("the helper warden started no program")
			}
			defer unix.Kill(bg, unix.SIGKILL)
			defer unix.Kill(prog, unix.SIGKILL)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			// Orphaned, the program is this process's child now: it must
			// end by itself, killed.
			if ws, err := waitFor(prog, 20*time.Second); err != nil {
				t.Fatalf("the program (pid %d) outlived its killed warden: %v", prog, err)
			} else if !ws.Signaled() || ws.Signal() != unix.SIGKILL {
				t.Fatalf("the program ended, but not killed: %v", ws)
			}
			if group == "" {
				return // not root: no pids cgroup holds the child that left
			}
			if unix.Kill(bg, 0) != nil {
				t.Fatalf("the program's child that left its session ended by itself; the test shows nothing")
			}
			sweepGroups(pidsRoot())
			if _, err := waitFor(bg, 20*time.Second); err != nil {
				t.Fatalf("the sweep left the killed warden's program's child (pid %d) running: %v", bg, err)
			}
			if _, err := os.Stat(group); !os.IsNotExist(err) {
				Cleanup(group)
				t.Fatalf("the sweep left the killed warden's pids cgroup %s: %v", group, err)
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
	if mode == "pool" {
		l := pooled(t, argv, nil, spec)
		group = l.Group
		null, _ := os.Open(os.DevNull)
		if err := l.Send(ws, null, w, os.Stderr); err != nil {
			t.Fatal(err)
		}
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
	}
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
// namespace's, or named before owners were) is removed only when empty
// and older than sweepAge.
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
	reused := filepath.Join(root, groupPrefix+f[0]+"."+f[1]+"."+f[2]+"1-00000000000000aa")
	foreign := filepath.Join(root, groupPrefix+"1."+f[1]+"."+f[2]+"-00000000000000bb")
	old := filepath.Join(root, groupPrefix+"00000000000000cc")
	for _, g := range []string{reused, foreign, old} {
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
	for _, g := range []string{mine, foreign, old} {
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
