package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// ExitLaunchFailed is the launcher's exit status when it could not set up
// the sandbox or start the program (as a shell reports 126 for a program
// it cannot run).
const ExitLaunchFailed = 126

// init turns this process into the launcher when warden re-executed itself
// with launcherArg: it never returns then.
func init() {
	if len(os.Args) > 3 && os.Args[1] == launcherArg {
		err := launch(os.Args[2], os.Args[3:])
		fmt.Fprintf(os.Stderr, "warden sandbox: %v\n", err)
		os.Exit(ExitLaunchFailed)
	}
}

// launch applies the Spec from the environment to this process and
// executes path with argv. It returns only on failure.
func launch(path string, argv []string) error {
	raw, ok := os.LookupEnv(specEnv)
	if !ok {
		return errors.New("no sandbox spec")
	}
	var spec Spec
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return fmt.Errorf("sandbox spec: %w", err)
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !isSpecVar(kv) {
			env = append(env, kv)
		}
	}
	lim := spec.Limits.WithDefaults()
	if err := setLimits(lim); err != nil {
		return err
	}
	if os.Getuid() == 0 {
		// Without a pids cgroup the limit is not held; `warden sandbox
		// check` says so.
		_ = joinPidsGroup(lim.Processes)
	}
	// The ABI warden's process decided on (and reports), never above
	// the kernel's.
	s := Detect()
	if spec.ABI < s.ABI {
		s = Support{ABI: spec.ABI, Simulated: true}
	}
	if err := restrict(spec, s); err != nil {
		return err
	}
	return execLimited(path, argv, env, min(lim.AddressSpaceMB<<20, hardLimit(unix.RLIMIT_AS)))
}

// execLimited sets the address-space limit and executes path. The limit
// is set last, and with nothing allocated after it: the launcher is a Go
// program whose reserved address space may well exceed the limit, so any
// new mapping — a heap span for the strings execve needs, an error
// message — would fail and crash it. Everything execve needs is prepared
// first, the collector is stopped, and only raw system calls follow; if
// execve fails, the message is written and the process exits without
// allocating.
func execLimited(path string, argv, env []string, as uint64) error {
	pathp, err := syscall.BytePtrFromString(path)
	if err != nil {
		return err
	}
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return err
	}
	envp, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return err
	}
	prefix := "warden sandbox: " + path + ": "
	debug.SetGCPercent(-1)
	runtime.LockOSThread()
	rl := unix.Rlimit{Cur: as, Max: as}
	if _, _, e := syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_AS, uintptr(unsafe.Pointer(&rl)), 0, 0, 0); e != 0 {
		return fmt.Errorf("setrlimit address space %d: %w", as, e)
	}
	_, _, e := syscall.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(pathp)),
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])))
	msg := e.Error() // from a static table
	rawWrite(prefix)
	rawWrite(msg)
	rawWrite("\n")
	syscall.RawSyscall(unix.SYS_EXIT_GROUP, ExitLaunchFailed, 0, 0)
	return e // not reached
}

// rawWrite writes s to stderr without allocating.
func rawWrite(s string) {
	if len(s) > 0 {
		syscall.RawSyscall(unix.SYS_WRITE, 2, uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(len(s)))
	}
}

// hardLimit is this process's hard limit of resource.
func hardLimit(resource int) uint64 {
	var cur unix.Rlimit
	if unix.Getrlimit(resource, &cur) != nil {
		return 0
	}
	return cur.Max
}

// setLimits sets the resource limits, soft and hard, so the program cannot
// raise them. RLIMIT_NPROC counts every process of the user, so the limit
// is what the user runs now plus Processes; and root's CAP_SYS_RESOURCE
// and CAP_SYS_ADMIN, which ignore it, are dropped from the bounding set so
// the program never has them.
func setLimits(l Limits) error {
	// Root is not bound by RLIMIT_NPROC (its pids cgroup holds the
	// limit): counting its processes would be wasted.
	nproc := uint64(0)
	if os.Getuid() != 0 {
		var err error
		if nproc, err = userProcesses(); err != nil {
			return err
		}
	}
	for _, r := range []struct {
		name     string
		resource int
		value    uint64
	}{
		{"cpu", unix.RLIMIT_CPU, l.CPUSeconds},
		{"open files", unix.RLIMIT_NOFILE, l.OpenFiles},
		{"processes", unix.RLIMIT_NPROC, nproc + l.Processes},
		{"file size", unix.RLIMIT_FSIZE, l.FileSizeMB << 20},
	} {
		var cur unix.Rlimit
		if err := unix.Getrlimit(r.resource, &cur); err != nil {
			return fmt.Errorf("getrlimit %s: %w", r.name, err)
		}
		v := min(r.value, cur.Max) // never above what warden itself may use
		hard := v
		if r.resource == unix.RLIMIT_CPU && v < cur.Max {
			// A second more for the hard limit: at the soft limit the
			// kernel sends SIGXCPU, which says why the program ended;
			// at the hard one, SIGKILL.
			hard = v + 1
		}
		if err := unix.Setrlimit(r.resource, &unix.Rlimit{Cur: v, Max: hard}); err != nil {
			return fmt.Errorf("setrlimit %s %d: %w", r.name, v, err)
		}
	}
	for _, c := range []uintptr{unix.CAP_SYS_RESOURCE, unix.CAP_SYS_ADMIN} {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("dropping capability %d: %w", c, err)
		}
	}
	return nil
}

// userProcesses counts the tasks (threads count, as the kernel counts
// them for RLIMIT_NPROC) of this process's user: one stat of
// /proc/<pid>/task per process, whose owner is the process's user and
// whose link count is 2 + its threads.
func userProcesses() (uint64, error) {
	uid := uint32(os.Getuid())
	d, err := os.Open("/proc")
	if err != nil {
		return 0, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, err
	}
	var n uint64
	var st unix.Stat_t
	for _, name := range names {
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		if unix.Stat("/proc/"+name+"/task", &st) != nil || st.Uid != uid {
			continue // gone meanwhile, or another user's
		}
		n += max(uint64(st.Nlink), 3) - 2
	}
	return n, nil
}

// restrict enforces the Landlock part of spec with what the kernel
// offers (nothing without Landlock: the limits still hold).
func restrict(spec Spec, s Support) error {
	if s.ABI < 1 {
		return nil
	}
	// The highest ABI warden's rules are written for: V8 is V7 (what
	// this project is tested on) plus multithreaded enforcement. Later
	// ABIs restrict pathname unix sockets and UDP, which need rules of
	// their own; see RATIONALE.md.
	target := landlock.V8
	net := target.HandledAccessNet
	if spec.AnyTCP {
		net = 0
	}
	cfg, err := landlock.NewConfig(target.HandledAccessFS, net, target.Scoped)
	if err != nil {
		return err
	}
	c := cfg.BestEffort()
	if s.Simulated {
		c = downTo(s.ABI, spec.AnyTCP)
	}
	rules := []landlock.Rule{
		landlock.RODirs(SystemReadDirs...).IgnoreIfMissing(),
		landlock.ROFiles(SystemReadFiles...).IgnoreIfMissing(),
		landlock.RWFiles(SystemWriteFiles...).IgnoreIfMissing(),
	}
	for _, p := range spec.Read {
		rules = append(rules, pathRule(p, false))
	}
	for _, p := range spec.Write {
		rules = append(rules, pathRule(p, true))
	}
	if !spec.AnyTCP {
		for _, port := range spec.ConnectTCP {
			rules = append(rules, landlock.ConnectTCP(port))
		}
	}
	if err := c.Restrict(rules...); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// downTo is the configuration of an older ABI, for a simulated kernel.
func downTo(abi int, anyTCP bool) landlock.Config {
	cfgs := []landlock.Config{landlock.V1, landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6, landlock.V7}
	if abi >= len(cfgs) {
		abi = len(cfgs) - 1
	}
	c := cfgs[abi]
	if anyTCP {
		c.HandledAccessNet = 0
	}
	return c.BestEffort()
}

// pathRule is a read or read-write rule for a directory or a file (whose
// kind Landlock needs to know); a path that does not exist is skipped.
func pathRule(p string, write bool) landlock.Rule {
	fi, err := os.Stat(p)
	dir := err != nil || fi.IsDir()
	switch {
	case write && dir:
		return landlock.RWDirs(p).WithRefer().IgnoreIfMissing()
	case write:
		return landlock.RWFiles(p).IgnoreIfMissing()
	case dir:
		return landlock.RODirs(p).IgnoreIfMissing()
	}
	return landlock.ROFiles(p).IgnoreIfMissing()
}

// The process limit. RLIMIT_NPROC does not bind root (the kernel exempts
// the initial user), so for root the launcher puts the program in a pids
// cgroup of its own (pids.max), named after the launcher's PID, which
// Cleanup removes after the program ends.
const (
	pidsV1Root = "/sys/fs/cgroup/pids"
	cgroupV2   = "/sys/fs/cgroup"
)

// pidsRoot is a pids cgroup hierarchy warden can create groups in, or "".
func pidsRoot() string {
	if fi, err := os.Stat(filepath.Join(pidsV1Root, "cgroup.procs")); err == nil && fi.Mode().IsRegular() {
		return pidsV1Root
	}
	if b, err := os.ReadFile(filepath.Join(cgroupV2, "cgroup.subtree_control")); err == nil && strings.Contains(" "+string(b)+" ", " pids") {
		return cgroupV2
	}
	return ""
}

// pidsGroup is the cgroup of the program started by launcher pid.
func pidsGroup(root string, pid int) string {
	return filepath.Join(root, "warden-sandbox-"+strconv.Itoa(pid))
}

// joinPidsGroup creates this launcher's pids cgroup with max processes
// and moves the launcher into it.
func joinPidsGroup(max uint64) error {
	root := pidsRoot()
	if root == "" {
		return errors.New("no pids cgroup to hold the process limit (root is not bound by RLIMIT_NPROC)")
	}
	dir := pidsGroup(root, os.Getpid())
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("pids cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.FormatUint(max, 10)), 0); err != nil {
		return fmt.Errorf("pids cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		return fmt.Errorf("pids cgroup: %w", err)
	}
	return nil
}

// Cleanup is called after the program started by launcher pid (and its
// process group) ended: it kills whatever is left in the program's pids
// cgroup — processes that left the group — and removes the cgroup.
func Cleanup(pid int) {
	root := pidsRoot()
	if root == "" {
		return
	}
	dir := pidsGroup(root, pid)
	for range 50 {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return // none was made (not root), or it is gone
		}
		left := strings.Fields(string(b))
		if len(left) == 0 {
			break
		}
		for _, p := range left {
			if n, err := strconv.Atoi(p); err == nil {
				_ = unix.Kill(n, unix.SIGKILL)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = os.Remove(dir)
}

// ProcessLimit says how the process limit is held here.
func ProcessLimit() (how string, ok bool) {
	if os.Getuid() != 0 {
		return "RLIMIT_NPROC (processes of this user, plus the limit)", true
	}
	if r := pidsRoot(); r != "" {
		return "a pids cgroup per program (" + r + ")", true
	}
	return "not held: warden runs as root, which RLIMIT_NPROC does not bind, and no pids cgroup is writable", false
}
