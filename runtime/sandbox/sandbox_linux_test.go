package sandbox

import (
	"encoding/json"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/wardenrt/warden/runtime/resource"
)

// TestCommand: the launcher is warden's own binary (or the small
// launcher) with the hidden argument; the program's argv follows; the launcher's environment is the
// spec alone, and the program's (inside it) loses warden's sandbox
// variables, and HOME when the sandbox does not reach it.
func TestCommand(t *testing.T) {
	home := t.TempDir()
	env := []string{"PATH=/usr/bin", "HOME=" + home, specEnv + "=stale", EnvSimulateABI + "=0", "LD_PRELOAD=/x.so"}
	l, err := Command("/bin/echo", []string{"echo", "hi"}, env, Spec{Read: []string{"/srv"}})
	if err != nil {
		t.Fatal(err)
	}
	path, argv, out := l.Path, l.Args, l.Env
	if path != launcherPath() || !slices.Equal(argv, []string{"echo", launcherArg, "/bin/echo", "echo", "hi"}) {
		t.Fatalf("%s %q", path, argv)
	}
	if len(out) != 1 || !strings.HasPrefix(out[0], specEnv+"=") {
		t.Fatalf("launcher env %q", out)
	}
	var s Spec
	if err := json.Unmarshal([]byte(strings.TrimPrefix(out[0], specEnv+"=")), &s); err != nil || s.Limits != resource.Default || s.ABI != Detect().ABI {
		t.Fatalf("spec %+v %v", s, err)
	}
	if want := []string{"PATH=/usr/bin", "HOME=" + NoHome, "LD_PRELOAD=/x.so"}; !slices.Equal(s.Env, want) {
		t.Fatalf("program env %q, want %q", s.Env, want)
	}
	// A sandbox that reaches the home directory keeps it.
	l, _ = Command("/bin/echo", []string{"echo"}, env, Spec{Read: []string{filepath.Join(home, ".config")}})
	if out = l.Env; !strings.Contains(out[0], `"HOME=`+home+`"`) {
		t.Fatalf("env %q", out)
	}
	if _, err := Command("echo", nil, nil, Spec{}); err == nil {
		t.Fatal("a relative program path was accepted")
	}
}

// TestLauncher runs the launcher (this test binary, through Main) and
// checks what the program gets: its argv and environment without the spec,
// the limits, and (with Landlock) a file outside the spec refused.
func TestLauncher(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.txt"), filepath.Join(t.TempDir(), "out.txt")
	os.WriteFile(in, []byte("in\n"), 0o644)
	os.WriteFile(out, []byte("out\n"), 0o644)
	progs := ExecClosure([]string{"/bin/sh", "/usr/bin/env", "/usr/bin/cat"}, []string{"/usr/bin"})
	run := func(spec Spec, args ...string) (string, error) {
		spec.Exec = progs
		cmd := launcherCmd(t, "/bin/sh", append([]string{"sh", "-c"}, args...), []string{"PATH=/usr/bin:/bin"}, spec)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	got, err := run(Spec{Read: []string{in}, Limits: resource.Limits{OpenFiles: 77, CPUSeconds: 9}}, `echo "$0"; env; ulimit -n; ulimit -t; cat `+in)
	if err != nil || !strings.HasPrefix(got, "sh\n") || strings.Contains(got, specEnv) || !strings.Contains(got, "PATH=/usr/bin:/bin") || !strings.Contains(got, "77\n9\nin\n") {
		t.Fatalf("%v\n%s", err, got)
	}
	got, err = run(Spec{Read: []string{in}}, "cat "+out)
	switch {
	case Detect().ABI == 0:
		t.Logf("no Landlock here: the file outside was readable (%v)", err)
	case err == nil || !strings.Contains(got, "Permission denied"):
		t.Fatalf("read outside the spec: %v %s", err, got)
	}
}

// TestLauncherExecFails: a program the sandbox may not execute is
// reported by the launcher (without allocating: the address-space limit is
// already set) with exit status 126.
func TestLauncherExecFails(t *testing.T) {
	if Detect().ABI == 0 {
		t.Skip("this kernel offers no Landlock: nothing stops the program")
	}
	b, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip(err)
	}
	prog := filepath.Join(t.TempDir(), "true")
	if err := os.WriteFile(prog, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := launcherCmd(t, prog, []string{"true"}, nil, Spec{Limits: resource.Limits{AddressSpaceMB: 64}})
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != ExitLaunchFailed || string(out) != "warden sandbox: "+prog+": permission denied\n" {
		t.Fatalf("%v %q", err, out)
	}
}

func TestUserProcesses(t *testing.T) {
	n, err := userProcesses()
	if err != nil || n < 1 {
		t.Fatalf("%d %v", n, err)
	}
}

// launcherCmd is the exec.Cmd that starts path under spec through the
// launcher (this test binary); launchOf returns its Launch.
func launcherCmd(t testing.TB, path string, args, env []string, spec Spec) *exec.Cmd {
	t.Helper()
	l, err := Command(path, args, env, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	cmd := exec.Command(l.Path)
	cmd.Args, cmd.Env, cmd.SysProcAttr, cmd.ExtraFiles = l.Args, l.Env, l.SysProcAttr, l.ExtraFiles
	launches.Store(cmd, l)
	return cmd
}

var launches sync.Map

func launchOf(t testing.TB, cmd *exec.Cmd) *Launch {
	l, ok := launches.Load(cmd)
	if !ok {
		t.Fatal("not a launcher command")
	}
	return l.(*Launch)
}

// TestLauncherNamespaces: with namespaces, the launcher listens inside the
// program's network namespace (loopback, another loopback address, a
// private address it adds) and hands the listeners over; the program's
// connections arrive on them and nowhere else; a protected path is
// read-only, a hidden file unreadable, a program directory noexec.
func TestLauncherNamespaces(t *testing.T) {
	if s := Detect(); !s.Namespaces || s.ABI < 1 {
		t.Skipf("namespaces %v (%s), Landlock ABI %d", s.Namespaces, s.NamespacesWhy, s.ABI)
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "p"), 0o755)
	os.WriteFile(filepath.Join(dir, "p", "f"), []byte("kept\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "hidden.txt"), []byte("SECRET\n"), 0o644)
	listen := []netip.AddrPort{
		netip.MustParseAddrPort("127.0.0.1:3128"),
		netip.MustParseAddrPort("127.0.0.5:9000"),
		netip.MustParseAddrPort("10.77.0.1:5432"),
	}
	script := `import socket, subprocess
for a, p in (("127.0.0.1", 3128), ("127.0.0.5", 9000), ("10.77.0.1", 5432)):
    socket.create_connection((a, p), timeout=5).sendall(("to %s:%d" % (a, p)).encode())
for path in ("hidden.txt",):
    try:
        open(path).read(); print("read", path)
    except OSError as e:
        print("hidden:", e.strerror)
try:
    open("p/f", "w").write("x")
except OSError as e:
    print("protected:", e.strerror)
try:
    subprocess.run(["/lib64/ld-linux-x86-64.so.2", "/usr/bin/true"], check=True); print("loader ran true")
except Exception as e:
    print("loader:", type(e).__name__)
`
	cmd := launcherCmd(t, "/usr/bin/python3", []string{"python3", "-c", script}, []string{"PATH=/usr/bin"}, Spec{
		Write:   []string{dir},
		Exec:    ExecClosure([]string{"/usr/bin/python3", "/lib64/ld-linux-x86-64.so.2"}, nil),
		Protect: []string{filepath.Join(dir, "p")},
		Hide:    []string{filepath.Join(dir, "hidden.txt")},
		Listen:  listen,
	})
	cmd.Dir = dir
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	l := launchOf(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l.Started()
	files, err := l.Listeners()
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var got []string
	for _, f := range files {
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(c)
		c.Close()
		ln.Close()
		got = append(got, string(b))
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if want := []string{"to 127.0.0.1:3128", "to 127.0.0.5:9000", "to 10.77.0.1:5432"}; !slices.Equal(got, want) {
		t.Errorf("received %q", got)
	}
	o := out.String()
	for _, want := range []string{"hidden: Permission denied", "protected: Read-only file system", "loader: CalledProcessError"} {
		if !strings.Contains(o, want) {
			t.Errorf("output lacks %q:\n%s", want, o)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "p", "f")); string(b) != "kept\n" {
		t.Errorf("protected file: %q", b)
	}
}

// TestExecClosure: a granted program brings its #! interpreter (through
// env, found on the PATH given), its ELF loader and its helpers; nothing
// else.
func TestExecClosure(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "tool")
	os.WriteFile(script, []byte("#!/usr/bin/env sh\necho hi\n"), 0o755)
	got := ExecClosure([]string{script}, []string{"/usr/bin", "/bin"})
	real := func(p string) string {
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Skipf("%s: %v", p, err)
		}
		return r
	}
	for _, want := range []string{script, real("/usr/bin/env"), real("/usr/bin/sh")} {
		if !slices.Contains(got, real(want)) {
			t.Errorf("closure of a script lacks %s: %q", want, got)
		}
	}
	if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(filepath.Base(p), "ld-") }) {
		t.Errorf("no loader in %q", got)
	}
	if slices.Contains(got, real("/usr/bin/touch")) {
		t.Errorf("touch in %q", got)
	}
	if _, err := os.Stat("/usr/lib/git-core"); err == nil {
		if g := ExecClosure([]string{"/usr/bin/git"}, nil); !slices.Contains(g, "/usr/lib/git-core") {
			t.Errorf("git's helpers missing: %q", g)
		}
	}
}

// TestNamespacesUnprivileged: for a user other than root the launcher gets
// its namespaces through a user namespace. Run as root, the test runs
// itself again as nobody, where the probe must succeed (or the machine
// must say why not).
func TestNamespacesUnprivileged(t *testing.T) {
	if os.Getuid() != 0 {
		err := probeNamespaces()
		if os.Getenv("WARDEN_TEST_AS_NOBODY") == "1" && err != nil && !strings.Contains(err.Error(), "restricted") {
			t.Fatal(err)
		}
		if err != nil {
			t.Skipf("no namespaces for this user here: %v", err)
		}
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	// A copy nobody can run (the build directory is root's alone).
	dir, err := os.MkdirTemp("", "warden-sandbox-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "sandbox.test")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const nobody = 65534
	cmd := exec.Command(exe, "-test.run", "^TestNamespacesUnprivileged$", "-test.v")
	cmd.Env = []string{"WARDEN_TEST_AS_NOBODY=1"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	switch {
	case err != nil && strings.Contains(err.Error(), "permission denied"):
		t.Skipf("nobody cannot run the test binary (%s): %v", exe, err)
	case err != nil:
		t.Fatalf("as nobody: %v\n%s", err, out)
	case !strings.Contains(string(out), "--- PASS"):
		t.Skipf("as nobody:\n%s", out)
	}
}

// TestLauncherFewOpenFiles: a small open_files limit — the launcher sets
// it before it builds the Landlock ruleset — still starts the program
// under the whole ruleset: the launcher must not need a descriptor for
// every system path at once (some 40 here), which failed every program
// with "too many open files" below that, where go-landlock (one path
// open at a time) did not.
func TestLauncherFewOpenFiles(t *testing.T) {
	if Detect().ABI == 0 {
		t.Skip("no Landlock here")
	}
	ws, outside := t.TempDir(), t.TempDir()
	in, secret := filepath.Join(ws, "in"), filepath.Join(outside, "secret")
	for _, f := range []string{in, secret} {
		if err := os.WriteFile(f, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec := Spec{Read: []string{ws}, Exec: ExecClosure([]string{"/usr/bin/cat"}, nil), Limits: resource.Limits{OpenFiles: 16}}
	out, err := launcherCmd(t, "/usr/bin/cat", []string{"cat", in}, nil, spec).CombinedOutput()
	if err != nil || string(out) != "x\n" {
		t.Fatalf("with open_files 16: %v %s", err, out)
	}
	out, err = launcherCmd(t, "/usr/bin/cat", []string{"cat", secret}, nil, spec).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "Permission denied") {
		t.Fatalf("read outside the spec with open_files 16: %v %s", err, out)
	}
}
