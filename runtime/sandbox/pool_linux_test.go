package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/wardenrt/warden/runtime/sandbox/sandboxtest"
	"golang.org/x/sys/unix"
)

// smallLauncherForPool builds the small launcher and makes it the one
// programs start through (the pool's launcher), for the test.
func smallLauncherForPool(t *testing.T) string {
	t.Helper()
	if Detect().ABI == 0 {
		t.Skip("no Landlock here")
	}
	p, done, err := sandboxtest.Launcher()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(done)
	t.Cleanup(UseLauncher(p))
	return p
}

// runPooled starts argv through a pre-started launcher under spec, with
// dir as its working directory, and returns its output and exit status.
func runPooled(t *testing.T, l *Launch, dir string) (stdout, stderr string, code int) {
	t.Helper()
	stdout, stderr, code, _ = runPooledHit(t, l, dir)
	return stdout, stderr, code
}

// runPooledHit is runPooled, and whether the program's pids cgroup
// refused a fork at its limit.
func runPooledHit(t *testing.T, l *Launch, dir string) (stdout, stderr string, code int, limitHit bool) {
	t.Helper()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	err = l.Send(dir, null, outW, errW)
	null.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		t.Fatal(err)
	}
	var ob, eb bytes.Buffer
	done := make(chan struct{})
	go func() { ob.ReadFrom(outR); close(done) }()
	eb.ReadFrom(errR)
	<-done
	_ = l.Cmd.Wait()
	limitHit = Cleanup(l.Group)
	l.Close()
	return ob.String(), eb.String(), l.Cmd.ProcessState.ExitCode(), limitHit
}

func pooled(t *testing.T, argv []string, env []string, spec Spec) *Launch {
	t.Helper()
	l, err := Pooled(context.Background(), argv[0], argv, env, spec)
	if err != nil || l == nil || l.Cmd == nil {
		t.Fatalf("no pre-started launcher: %v %v", l, err)
	}
	return l
}

// TestPoolInheritsNothing: a program started through a pre-started
// launcher has warden's descriptors no more than one started afresh
// (one warden left open without close-on-exec before the launcher was
// started), and the launcher itself runs with no environment of warden's
// (a variable such as LD_PRELOAD must not reach it): the program's is
// the one the call gives, and only that.
func TestPoolInheritsNothing(t *testing.T) {
	smallLauncherForPool(t)
	t.Setenv("WARDEN_POOL_TEST_SECRET", "s3cret")
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const leak = 77
	if err := unix.Dup2(int(f.Fd()), leak); err != nil { // no close-on-exec
		t.Fatal(err)
	}
	defer unix.Close(leak)
	defer ClosePools()
	ClosePools() // launchers started from here on inherit the descriptor
	ws := t.TempDir()
	spec := Spec{Read: []string{ws, "/proc"}, Exec: ExecClosure([]string{"/bin/ls", "/usr/bin/env"}, nil)}
	l := pooled(t, []string{"/bin/ls", "-1", "/proc/self/fd"}, []string{"PATH=/usr/bin:/bin"}, spec)
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", l.Cmd.Process.Pid))
	if err != nil || len(environ) != 0 {
		t.Fatalf("the pre-started launcher's environment: %q %v", environ, err)
	}
	inherited, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", l.Cmd.Process.Pid, leak))
	if err != nil {
		t.Fatalf("the launcher did not inherit the descriptor, so the test shows nothing: %v", err)
	}
	_ = inherited
	out, errs, code := runPooled(t, l, ws)
	if code != 0 {
		t.Fatalf("ls: %d %s", code, errs)
	}
	fds := strings.Fields(out)
	for _, fd := range fds {
		if n, _ := strconv.Atoi(fd); n > 3 { // 3: ls's own directory
			t.Fatalf("the program has descriptor %s of warden's: %q", fd, fds)
		}
	}
	l = pooled(t, []string{"/usr/bin/env"}, []string{"PATH=/usr/bin:/bin", "A=b"}, spec)
	out, errs, code = runPooled(t, l, ws)
	if code != 0 || out != "PATH=/usr/bin:/bin\nA=b\n" {
		t.Fatalf("the program's environment: %d %q %s", code, out, errs)
	}
}

// TestPoolRefusesAnotherShape: a pre-started launcher refuses a request
// whose spec is laid out otherwise than it reads it, without starting the
// program, and a working directory it cannot enter fails the program
// rather than leaving it where the launcher was.
func TestPoolRefusesAnotherShape(t *testing.T) {
	smallLauncherForPool(t)
	defer ClosePools()
	ws := t.TempDir()
	mark := filepath.Join(ws, "ran")
	spec := Spec{Read: []string{ws}, Write: []string{ws}, Exec: ExecClosure([]string{"/usr/bin/touch"}, nil)}
	l := pooled(t, []string{"/usr/bin/touch", mark}, nil, spec)
	l.req.Spec.Shape = "0123456789abcdef"
	_, errs, code := runPooled(t, l, ws)
	if code != ExitLaunchFailed || !strings.Contains(errs, "this launcher reads") {
		t.Fatalf("another shape: %d %s", code, errs)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the program ran under a spec of another shape")
	}
	l = pooled(t, []string{"/usr/bin/touch", mark}, nil, spec)
	_, errs, code = runPooled(t, l, filepath.Join(ws, "missing"))
	if code != ExitLaunchFailed {
		t.Fatalf("a missing working directory: %d %s", code, errs)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the program ran outside its working directory")
	}
	l = pooled(t, []string{"/usr/bin/touch", mark}, nil, spec)
	if _, errs, code = runPooled(t, l, ws); code != 0 {
		t.Fatalf("touch: %d %s", code, errs)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatal("the program did not run")
	}
}

// TestPoolPidsLimit: for root, a program from the pool is held to its own
// process limit (its launcher's pids cgroup, set to the call's limit when
// it is taken), not the one the launcher was started with.
func TestPoolPidsLimit(t *testing.T) {
	if !NeedsGroup() {
		t.Skip("not root: RLIMIT_NPROC holds the process limit")
	}
	smallLauncherForPool(t)
	defer ClosePools()
	ws := t.TempDir()
	spec := Spec{Read: []string{ws}, Exec: ExecClosure([]string{"/bin/sh", "/bin/sleep"}, nil)}
	spec.Limits.Processes = 4
	l := pooled(t, []string{"/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8; do sleep 1 & done; wait"}, nil, spec)
	if b, err := os.ReadFile(filepath.Join(l.Group, "pids.max")); err != nil || strings.TrimSpace(string(b)) != "4" {
		t.Fatalf("pids.max of the pre-started launcher's cgroup: %q %v", b, err)
	}
	group := l.Group
	if _, errs, _, limitHit := runPooledHit(t, l, ws); !limitHit {
		t.Fatalf("the pids cgroup refused no fork at the limit of 4: %s", errs)
	}
	// Cleanup returns once the cgroup is gone, its last members (the
	// background sleeps, exiting as the program's output closed) too.
	if _, err := os.Stat(group); !os.IsNotExist(err) {
		t.Fatalf("Cleanup left the pids cgroup %s behind: %v", group, err)
	}
}

// TestPoolKilledWarden: when warden's process is killed, its pre-started
// launchers end (the control socket's other end is gone) and each removes
// its pids cgroup: nothing is left behind.
func TestPoolKilledWarden(t *testing.T) {
	p := smallLauncherForPool(t)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skip("cannot become a subreaper:", err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	cmd := exec.Command(os.Args[0], "-test.run=^TestPoolHelperWarden$")
	cmd.Env = append(os.Environ(), "WARDEN_POOL_HELPER="+p)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type started struct {
		pid   int
		group string
	}
	var launchers []started
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && f[0] == "ready" {
			break
		}
		if len(f) >= 2 && f[0] == "launcher" {
			pid, _ := strconv.Atoi(f[1])
			s := started{pid: pid}
			if len(f) == 3 {
				s.group = f[2]
			}
			launchers = append(launchers, s)
		}
	}
	if len(launchers) == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the helper started no launcher")
	}
	for _, l := range launchers {
		if l.group != "" {
			if b, err := os.ReadFile(filepath.Join(l.group, "cgroup.procs")); err != nil || !slices.Contains(strings.Fields(string(b)), strconv.Itoa(l.pid)) {
				t.Fatalf("launcher %d not in its cgroup %s: %q %v", l.pid, l.group, b, err)
			}
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	for _, l := range launchers {
		// Orphaned, the launcher is this process's child now.
		var ws unix.WaitStatus
		if _, err := unix.Wait4(l.pid, &ws, 0, nil); err != nil {
			t.Fatalf("waiting for launcher %d: %v", l.pid, err)
		}
		if l.group != "" {
			if _, err := os.Stat(l.group); !os.IsNotExist(err) {
				Cleanup(l.group)
				t.Fatalf("launcher %d left its pids cgroup %s behind (%v)", l.pid, l.group, err)
			}
		}
	}
}

// TestPoolHelperWarden is the warden TestPoolKilledWarden kills: it starts
// pre-started launchers, says which, and waits to be killed.
func TestPoolHelperWarden(t *testing.T) {
	p := os.Getenv("WARDEN_POOL_HELPER")
	if p == "" {
		t.Skip("run by TestPoolKilledWarden")
	}
	defer UseLauncher(p)()
	k := poolKey{path: p, ns: Detect().Namespaces}
	for range 2 {
		pl, err := startPrestarted(k)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("launcher %d %s\n", pl.cmd.Process.Pid, pl.group)
	}
	fmt.Println("ready")
	select {}
}

// TestPoolUnprivileged: for a user other than root, a launcher started
// ahead — in a user namespace of its own, with no pids cgroup — confines
// its program as one started afresh does: a granted file is read, one
// outside the grants is not.
func TestPoolUnprivileged(t *testing.T) {
	if p := os.Getenv("WARDEN_POOL_AS_NOBODY"); p != "" {
		defer UseLauncher(p)()
		defer ClosePools()
		if !Detect().Namespaces {
			t.Skip("no namespaces for this user here")
		}
		ws, outside := t.TempDir(), t.TempDir()
		for _, f := range []string{filepath.Join(ws, "in"), filepath.Join(outside, "secret")} {
			if err := os.WriteFile(f, []byte("x\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		spec := Spec{Read: []string{ws}, Exec: ExecClosure([]string{"/bin/cat"}, nil)}
		l := pooled(t, []string{"/bin/cat", filepath.Join(ws, "in")}, nil, spec)
		if l.Group != "" {
			t.Fatalf("a pids cgroup for a user other than root: %s", l.Group)
		}
		if out, errs, code := runPooled(t, l, ws); code != 0 || out != "x\n" {
			t.Fatalf("granted read: %d %q %s", code, out, errs)
		}
		l = pooled(t, []string{"/bin/cat", filepath.Join(outside, "secret")}, nil, spec)
		if out, _, code := runPooled(t, l, ws); code == 0 || out != "" {
			t.Fatalf("read outside the grants: %d %q", code, out)
		}
		return
	}
	if os.Getuid() != 0 {
		t.Skip("run as root, which runs it again as nobody")
	}
	launcher := smallLauncherForPool(t)
	self, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	dir, err := os.MkdirTemp("", "warden-pool-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for _, f := range []struct{ from, to string }{{self, "sandbox.test"}, {launcher, LauncherName}} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.to), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const nobody = 65534
	cmd := exec.Command(filepath.Join(dir, "sandbox.test"), "-test.run", "^TestPoolUnprivileged$", "-test.v")
	cmd.Env = []string{"WARDEN_POOL_AS_NOBODY=" + filepath.Join(dir, LauncherName)}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	switch {
	case err != nil && strings.Contains(err.Error(), "permission denied"):
		t.Skipf("nobody cannot run the test binary: %v", err)
	case err != nil:
		t.Fatalf("as nobody: %v\n%s", err, out)
	case !strings.Contains(string(out), "--- PASS"):
		t.Skipf("as nobody:\n%s", out)
	}
	t.Logf("as nobody:\n%s", out)
}

// TestPoolRefusesOtherNamespaces: a pre-started launcher refuses a
// request for other namespaces than those it was started in — set up in
// the machine's own, the mounts would be the machine's and the listeners
// on its loopback, with Landlock's TCP rules left to a namespace that is
// not there — without starting the program.
func TestPoolRefusesOtherNamespaces(t *testing.T) {
	smallLauncherForPool(t)
	defer ClosePools()
	if !Detect().Namespaces {
		t.Skip("no namespaces here")
	}
	ws := t.TempDir()
	mark := filepath.Join(ws, "ran")
	spec := Spec{Read: []string{ws}, Write: []string{ws}, Exec: ExecClosure([]string{"/usr/bin/touch"}, nil)}
	for _, tc := range []struct {
		name  string
		apply func(s *Spec)
		want  string
	}{
		{"no namespaces asked of one in a mount namespace", func(s *Spec) { s.Namespaces, s.NoExec, s.Pin = false, nil, nil }, "namespaces"},
		{"a network namespace asked of one without", func(s *Spec) { s.NetNS = true }, "namespaces"},
	} {
		l := pooled(t, []string{"/usr/bin/touch", mark}, nil, spec)
		tc.apply(&l.req.Spec)
		_, errs, code := runPooled(t, l, ws)
		if code != ExitLaunchFailed || !strings.Contains(errs, tc.want) {
			t.Fatalf("%s: %d %s", tc.name, code, errs)
		}
		if _, err := os.Stat(mark); err == nil {
			t.Fatalf("%s: the program ran", tc.name)
		}
	}
}
