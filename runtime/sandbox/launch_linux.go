package sandbox

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
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
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/wardenrt/warden/runtime/resource"
	"golang.org/x/sys/unix"
)

// runLauncher is the launcher's work (Main): the namespace probe, or
// the sandbox of one program. It never returns.
func runLauncher() {
	if len(os.Args) == 2 && os.Args[1] == probeArg {
		probe()
	}
	if len(os.Args) == 2 && os.Args[1] == watchArg {
		serveWatch()
	}
	if len(os.Args) == 4 && os.Args[1] == poolArg {
		err := servePool(os.Args[2], os.Args[3])
		fmt.Fprintf(os.Stderr, "warden sandbox: %v\n", err)
	} else if len(os.Args) > 3 && os.Args[1] == launcherArg {
		err := launch(os.Args[2], os.Args[3:])
		fmt.Fprintf(os.Stderr, "warden sandbox: %v\n", err)
	} else {
		fmt.Fprintf(os.Stderr, "warden sandbox: the launcher was started without a program\n")
	}
	os.Exit(ExitLaunchFailed)
}

// launch applies the Spec from the environment to this process and
// executes path with argv. It returns only on failure: it never starts the
// program with less than the spec says.
func launch(path string, argv []string) error {
	// Capabilities (the bounding set, capset), namespaces (unshare), no_new_privs
	// and seccomp belong to a thread, not the process: every step runs on
	// the thread that executes the program. Unlocked, the goroutine may
	// move between OS threads — as it does now that the launcher runs from
	// main, after every package's init, with several threads up — and the
	// program was started from a thread that still held every capability.
	runtime.LockOSThread()
	raw, ok := os.LookupEnv(specEnv)
	if !ok {
		return errors.New("no sandbox spec")
	}
	var spec Spec
	if err := decodeStrict([]byte(raw), &spec); err != nil {
		return fmt.Errorf("sandbox spec: %w (is the launcher from another version of warden than the one running?)", err)
	}
	return confine(spec, path, argv, "", "")
}

// decodeStrict decodes JSON into v, refusing fields v does not have.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// confine applies spec to this process (on this locked thread) and
// executes path with argv; it returns only on failure. dir, when set, is
// the working directory, entered once the mounts are in place (a
// pre-started launcher's: see the pool); joined is the pids cgroup the
// launcher already joined, which must then be the spec's.
//
// The order: descriptors above stderr are closed on exec (whatever warden
// inherited stays out of the sandbox); the namespaces (loopback and the
// listeners, the mounts); the working directory; the limits; the pids
// cgroup; every capability dropped; Landlock; then, on one locked thread
// with nothing allocated in between, no_new_privs, the seccomp filter,
// the address-space limit and execve.
func confine(spec Spec, path string, argv []string, dir, joined string) error {
	if spec.Shape != specShape() {
		return fmt.Errorf("sandbox spec of shape %q, and this launcher reads %q: install warden and %s from one version", spec.Shape, specShape(), LauncherName)
	}
	// The ABI warden's process decided on and reports. Only the spec says
	// it — never the environment, which the caller's program shares — and
	// a kernel that offers less than that is an error, not a downgrade.
	kernel, _ := llsys.LandlockGetABIVersion()
	if spec.ABI > max(kernel, 0) {
		return fmt.Errorf("the spec asks for Landlock ABI %d and this kernel offers %d", spec.ABI, kernel)
	}
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("close_range: %w", err)
	}
	if spec.Namespaces {
		if spec.NetNS {
			if err := setupNetwork(spec); err != nil {
				return err
			}
		}
		if err := setupMounts(spec); err != nil {
			return err
		}
	}
	if dir != "" {
		if err := unix.Chdir(dir); err != nil {
			return fmt.Errorf("working directory %s: %w", dir, err)
		}
	}
	lim := spec.Limits.WithDefaults()
	if err := setLimits(lim); err != nil {
		return err
	}
	switch {
	case spec.Group != joined && joined != "":
		return fmt.Errorf("the spec's pids cgroup %q is not the one this launcher joined (%s)", spec.Group, joined)
	case spec.Group != "" && joined == "":
		if err := os.WriteFile(filepath.Join(spec.Group, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return fmt.Errorf("joining the pids cgroup: %w", err)
		}
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if err := restrict(spec, spec.ABI); err != nil {
		return err
	}
	filter, err := seccompFilter(spec.UnixSockets)
	if err != nil {
		return err
	}
	return execLimited(path, argv, spec.Env, min(lim.AddressSpaceMB<<20, hardLimit(unix.RLIMIT_AS)), filter)
}

// execLimited installs the seccomp filter, sets the address-space limit and
// executes path. The limit is set last, and with nothing allocated after
// it: the launcher is a Go program whose reserved address space may well
// exceed the limit, so any new mapping — a heap span for the strings
// execve needs, an error message — would fail and crash it. Everything is
// prepared first, the collector is stopped, and only raw system calls on
// this (locked) thread follow — the filter binds the thread that installs
// it, which is the one that executes the program; if execve fails, the
// message is written and the process exits without allocating.
func execLimited(path string, argv, env []string, as uint64, filter []unix.SockFilter) error {
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
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	prefix := "warden sandbox: " + path + ": "
	debug.SetGCPercent(-1)
	runtime.LockOSThread()
	if _, _, e := syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("no_new_privs: %w", e)
	}
	if _, _, e := syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0, 0); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	rl := unix.Rlimit{Cur: as, Max: as}
	if _, _, e := syscall.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_AS, uintptr(unsafe.Pointer(&rl)), 0, 0, 0); e != 0 {
		rawFail(prefix, e)
	}
	_, _, e := syscall.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(pathp)),
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])))
	rawFail(prefix, e)
	return e // not reached
}

// rawFail writes prefix and the error, and exits, without allocating.
func rawFail(prefix string, e syscall.Errno) {
	for _, s := range []string{prefix, e.Error(), "\n"} { // Error: a static table
		syscall.RawSyscall(unix.SYS_WRITE, 2, uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(len(s)))
	}
	syscall.RawSyscall(unix.SYS_EXIT_GROUP, ExitLaunchFailed, 0, 0)
}

// hardLimit is this process's hard limit of resource.
func hardLimit(resource int) uint64 {
	var cur unix.Rlimit
	if unix.Getrlimit(resource, &cur) != nil {
		return 0
	}
	return cur.Max
}

// setLimits sets the resource limits but the address space (execLimited
// sets that), soft and hard, so the program cannot raise them.
// RLIMIT_NPROC counts every process of the user, so the limit is what the
// user runs now plus Processes; root is not bound by it (its pids cgroup
// holds the limit), so its processes are not counted.
func setLimits(l resource.Limits) error {
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
		max := hardLimit(r.resource)
		v := min(r.value, max) // never above what warden itself may use
		hard := v
		if r.resource == unix.RLIMIT_CPU && v < max {
			// A second more for the hard limit: at the soft limit the
			// kernel sends SIGXCPU, which says why the program ended;
			// at the hard one, SIGKILL.
			hard = v + 1
		}
		if err := unix.Setrlimit(r.resource, &unix.Rlimit{Cur: v, Max: hard}); err != nil {
			return fmt.Errorf("setrlimit %s %d: %w", r.name, v, err)
		}
	}
	return nil
}

// dropCapabilities leaves the program no capability: the bounding set is
// emptied (root's execve then grants none), and the inheritable and
// ambient sets are cleared. A program run by root keeps root's files, not
// root's powers: no raw sockets, device nodes, modules or DAC override.
// Without CAP_SETPCAP (not root) there is nothing to drop.
func dropCapabilities() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		switch {
		case err == nil, errors.Is(err, unix.EINVAL): // EINVAL: the kernel knows fewer
		case errors.Is(err, unix.EPERM):
			if os.Geteuid() == 0 {
				return fmt.Errorf("dropping capability %d: %w", c, err)
			}
		default:
			return fmt.Errorf("dropping capability %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
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

// restrict enforces the Landlock part of spec at ABI abi (nothing at 0:
// the limits, the capabilities and seccomp still hold) on this thread —
// the one that executes the program, which inherits its domain; the
// launcher's other threads end at execve.
//
// Reading and writing follow the spec's paths; executing, only the files
// (and directories of files) in spec.Exec — every other file, system
// directories included, can be read but not executed — unless ExecAny.
// TCP is handled only where there is no network namespace.
func restrict(spec Spec, abi int) error {
	if abi < 1 {
		return nil
	}
	// Exactly ABI abi's rights: the kernel's own ABI (Detect), or an
	// older one simulated, as a kernel of that ABI would enforce them.
	// V8 is the highest ABI warden's rules are written for (V7, what this
	// project is tested on, plus multithreaded enforcement, which a
	// domain set on the executing thread does not need). Later ABIs
	// restrict pathname unix sockets and UDP, which need rules of their
	// own (seccomp covers both); see RATIONALE.md.
	cfgs := []landlock.Config{landlock.V1, landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6, landlock.V7, landlock.V8}
	c := cfgs[min(abi, len(cfgs)-1)]
	if spec.AnyTCP || spec.NetNS {
		// A network namespace holds the network: the program reaches
		// nothing but its loopback, where warden's listeners are.
		c.HandledAccessNet = 0
	}
	attr := llsys.RulesetAttr{HandledAccessFS: uint64(c.HandledAccessFS), HandledAccessNet: uint64(c.HandledAccessNet), Scoped: uint64(c.Scoped)}
	ruleset, err := llsys.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return fmt.Errorf("landlock_create_ruleset: %w", err)
	}
	defer unix.Close(ruleset)
	// Each rule goes in as its path is opened, and the path is closed
	// then: the open-files limit, set already, may be far below the
	// number of paths (as go-landlock, one path open at a time).
	err = landlockRules(spec, abi, uint64(c.HandledAccessFS), func(r llRule) error {
		if err := llsys.LandlockAddPathBeneathRule(ruleset, &llsys.PathBeneathAttr{AllowedAccess: r.access, ParentFd: r.fd}, 0); err != nil {
			return fmt.Errorf("landlock_add_rule %s: %w", r.path, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if c.HandledAccessNet&llsys.AccessNetConnectTCP != 0 && abi >= 4 {
		for _, port := range spec.ConnectTCP {
			if err := llsys.LandlockAddNetPortRule(ruleset, &llsys.NetPortAttr{AllowedAccess: llsys.AccessNetConnectTCP, Port: uint64(port)}, 0); err != nil {
				return fmt.Errorf("landlock_add_rule port %d: %w", port, err)
			}
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := llsys.LandlockRestrictSelf(ruleset, 0); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}

// llRule is one Landlock rule: access (within the handled rights) to the
// file, or the hierarchy under the directory, that fd is open on (while
// addRule runs: see landlockRules).
type llRule struct {
	access uint64
	fd     int
	path   string
}

// landlockRules opens, one at a time, what spec's Landlock rules are
// about and hands each rule to addRule while its path is open.
func landlockRules(spec Spec, abi int, handled uint64, addRule func(llRule) error) error {
	const (
		read     = llsys.AccessFSReadFile | llsys.AccessFSReadDir
		exec     = llsys.AccessFSExecute
		fileOnly = llsys.AccessFSExecute | llsys.AccessFSWriteFile | llsys.AccessFSTruncate | llsys.AccessFSReadFile | llsys.AccessFSIoctlDev
		write    = llsys.AccessFSWriteFile | llsys.AccessFSRemoveDir | llsys.AccessFSRemoveFile | llsys.AccessFSMakeChar |
			llsys.AccessFSMakeDir | llsys.AccessFSMakeReg | llsys.AccessFSMakeSock | llsys.AccessFSMakeFifo |
			llsys.AccessFSMakeBlock | llsys.AccessFSMakeSym | llsys.AccessFSTruncate
	)
	anyExec := uint64(0)
	if spec.ExecAny {
		anyExec = exec
	}
	// refer only from ABI 2, which handles it.
	refer := uint64(0)
	if abi >= 2 {
		refer = llsys.AccessFSRefer
	}
	add := func(a uint64, dir bool, fd int, p string) error {
		if !dir {
			a &= fileOnly
		}
		if a &= handled; a != 0 {
			return addRule(llRule{access: a, fd: fd, path: p})
		}
		return nil
	}
	// The system's paths, where they exist (symlinks followed: /bin,
	// /lib64).
	for _, set := range []struct {
		paths  []string
		access uint64
		dir    bool
	}{
		{SystemReadDirs, read | anyExec, true},
		{SystemReadFiles, read | anyExec, false},
		{SystemWriteFiles, read | write, false},
	} {
		for _, p := range set.paths {
			fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			err = add(set.access, set.dir, fd, p)
			unix.Close(fd)
			if err != nil {
				return err
			}
		}
	}
	// The spec's own paths are opened without following any symlink, so
	// what is allowed is the file warden checked, not whatever a symlink
	// swapped in since points to. A path that cannot be opened so is left
	// out.
	for _, set := range []struct {
		paths  []string
		access uint64
	}{
		{spec.Read, read | refer | anyExec},
		{spec.Write, read | write | refer | anyExec},
		{spec.Exec, read | exec},
	} {
		for _, p := range set.paths {
			fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
				Flags:   unix.O_PATH | unix.O_CLOEXEC,
				Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
			})
			if err != nil {
				continue
			}
			var st unix.Stat_t
			if unix.Fstat(fd, &st) == nil { // else left out too
				err = add(set.access, st.Mode&unix.S_IFMT == unix.S_IFDIR, fd, p)
			}
			unix.Close(fd)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// seccompFilter refuses, with EACCES, the system calls the other layers do
// not cover:
//
//   - socket(): TCP (AF_INET and AF_INET6 stream sockets of protocol 0 or
//     TCP) only — no UDP, so no DNS query of the program's own; no raw,
//     packet, netlink or other families — and unix sockets only where the
//     spec allows them (connecting to a pathname unix socket is not
//     Landlock's before ABI 9, and /run holds sockets that act as root:
//     systemd's, D-Bus's, Docker's);
//   - memfd_create() unless MFD_NOEXEC_SEAL: a memfd is on no path
//     Landlock governs, so an executable one would let a program execute
//     any bytes it can read (a copy of /usr/bin/touch); memfd_secret();
//   - io_uring_setup (io_uring can open sockets without the socket call).
//
// A call from another architecture's ABI (32-bit compat, x32) is refused
// whole.
func seccompFilter(unixSockets bool) ([]unix.SockFilter, error) {
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = unix.AUDIT_ARCH_X86_64
	case "arm64":
		arch = unix.AUDIT_ARCH_AARCH64
	default:
		return nil, fmt.Errorf("no seccomp filter for %s", runtime.GOARCH)
	}
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	deny := uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.EACCES)
	nosys := uint32(unix.SECCOMP_RET_ERRNO) | uint32(unix.ENOSYS)
	unixVerdict := deny
	if unixSockets {
		unixVerdict = allow
	}
	// The arguments are ints: the kernel reads the low word of each
	// (little-endian: the first four bytes of args[i], at 16 + 8i).
	const nr, archOff, arg0, arg1, arg2 = 0, 4, 16, 24, 32
	var a bpfAsm
	a.ld(archOff)
	a.jeq(arch, "", "nosys")
	a.ld(nr)
	a.jset(x32Mask(), "nosys", "")
	a.jeq(uint32(unix.SYS_SOCKET), "socket", "")
	a.jeq(uint32(unix.SYS_MEMFD_CREATE), "memfd", "")
	a.jeq(uint32(unix.SYS_MEMFD_SECRET), "deny", "")
	a.jeq(uint32(unix.SYS_IO_URING_SETUP), "nosys", "")
	a.ret(allow)
	a.label("socket")
	a.ld(arg0)
	a.jeq(unix.AF_INET, "inet", "")
	a.jeq(unix.AF_INET6, "inet", "")
	a.jeq(unix.AF_UNIX, "unix", "deny")
	a.label("inet")
	a.ld(arg1)
	a.and(0xf) // the type, without SOCK_NONBLOCK and SOCK_CLOEXEC
	a.jeq(unix.SOCK_STREAM, "", "deny")
	a.ld(arg2)
	a.jeq(0, "allow", "")
	a.jeq(unix.IPPROTO_TCP, "allow", "deny")
	a.label("memfd")
	a.ld(arg1)
	a.jset(unix.MFD_NOEXEC_SEAL, "allow", "deny")
	a.label("unix")
	a.ret(unixVerdict)
	a.label("allow")
	a.ret(allow)
	a.label("deny")
	a.ret(deny)
	a.label("nosys")
	a.ret(nosys)
	return a.assemble()
}

// bpfAsm assembles a classic BPF program with named jump targets ("" is
// the next instruction).
type bpfAsm struct {
	ins    []unix.SockFilter
	jt, jf []string
	labels map[string]int
}

func (a *bpfAsm) emit(f unix.SockFilter, jt, jf string) {
	a.ins, a.jt, a.jf = append(a.ins, f), append(a.jt, jt), append(a.jf, jf)
}
func (a *bpfAsm) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.ins)
}
func (a *bpfAsm) ld(off uint32) {
	a.emit(unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}, "", "")
}
func (a *bpfAsm) and(k uint32) {
	a.emit(unix.SockFilter{Code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, K: k}, "", "")
}
func (a *bpfAsm) ret(k uint32) {
	a.emit(unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k}, "", "")
}
func (a *bpfAsm) jeq(k uint32, jt, jf string) {
	a.emit(unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k}, jt, jf)
}
func (a *bpfAsm) jset(k uint32, jt, jf string) {
	a.emit(unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: k}, jt, jf)
}

func (a *bpfAsm) assemble() ([]unix.SockFilter, error) {
	out := make([]unix.SockFilter, len(a.ins))
	for i, f := range a.ins {
		for _, j := range []struct {
			name string
			dst  *uint8
		}{{a.jt[i], &f.Jt}, {a.jf[i], &f.Jf}} {
			if j.name == "" {
				continue
			}
			to, ok := a.labels[j.name]
			if !ok || to <= i || to-i-1 > 255 {
				return nil, fmt.Errorf("seccomp filter: bad jump to %q at %d", j.name, i)
			}
			*j.dst = uint8(to - i - 1)
		}
		out[i] = f
	}
	return out, nil
}

// x32Mask marks x32 system call numbers on amd64 (none elsewhere).
func x32Mask() uint32 {
	if runtime.GOARCH == "amd64" {
		return 0x40000000
	}
	return 0
}

// The process limit. RLIMIT_NPROC does not bind root (the kernel exempts
// the initial user), so for root warden puts each program in a pids cgroup
// of its own (pids.max): NewGroup makes it, with a random name, before the
// program starts; the launcher joins it, or does not start the program;
// Cleanup kills what is left in it and removes it.
const pidsV1Root = "/sys/fs/cgroup/pids"

// pidsRoot is a pids cgroup (v1) hierarchy warden can create groups in,
// or "".
func pidsRoot() string {
	if unix.Access(filepath.Join(pidsV1Root, "cgroup.procs"), unix.W_OK) == nil {
		return pidsV1Root
	}
	return ""
}

// NeedsGroup reports whether programs need a pids cgroup for their process
// limit (warden runs as root).
func NeedsGroup() bool { return os.Getuid() == 0 }

// NewGroup creates a pids cgroup allowing max tasks, for one program.
func NewGroup(max uint64) (string, error) {
	dir, err := groupName()
	if err != nil {
		return "", err
	}
	if err := makeGroup(dir, max); err != nil {
		return "", err
	}
	return dir, nil
}

// groupName is a new pids cgroup's path under pidsRoot: named for this
// warden (ownerTag) and random. The first call sweeps what wardens that
// are gone left behind (sweepGroups).
func groupName() (string, error) {
	root := pidsRoot()
	if root == "" {
		return "", errors.New("no writable pids cgroup (" + pidsV1Root + ") to hold the process limit, and root is not bound by RLIMIT_NPROC")
	}
	sweepOnce.Do(func() { sweepGroups(root) })
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	name := groupPrefix + hex.EncodeToString(b)
	if tag := ownerTag(); tag != "" {
		name = groupPrefix + tag + "-" + hex.EncodeToString(b)
	}
	return filepath.Join(root, name), nil
}

// makeGroup creates the pids cgroup dir allowing max tasks.
func makeGroup(dir string, max uint64) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("pids cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.FormatUint(max, 10)), 0); err != nil {
		_ = os.Remove(dir)
		return fmt.Errorf("pids cgroup: %w", err)
	}
	return nil
}

// Cleanup kills whatever is left in a program's pids cgroup (processes
// that left its process group) and removes the cgroup. It reports whether
// the cgroup ever refused a fork at its limit.
func Cleanup(dir string) (limitHit bool) {
	if dir == "" {
		return false
	}
	if b, err := os.ReadFile(filepath.Join(dir, "pids.events")); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 && f[0] == "max" && f[1] != "0" {
			limitHit = true
		}
	}
	// No new task can join (pids.max 0), then the members are killed
	// until none is left and the cgroup can be removed: a killed task is
	// listed until its exit is through (a program's background child
	// whose end closed its output may still be), and removing the cgroup
	// before fails (EBUSY) — and left it behind.
	_ = os.WriteFile(filepath.Join(dir, "pids.max"), []byte("0"), 0)
	for i := 0; i < 200; i++ {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return limitHit // gone
		}
		left := strings.Fields(string(b))
		for _, p := range left {
			if n, err := strconv.Atoi(p); err == nil {
				_ = unix.Kill(n, unix.SIGKILL)
			}
		}
		if len(left) == 0 {
			if err := os.Remove(dir); err == nil || !errors.Is(err, unix.EBUSY) {
				return limitHit
			}
		}
		if i < 20 {
			runtime.Gosched()
		} else {
			time.Sleep(time.Millisecond) // a task stuck in its exit: some 0.2 s at most
		}
	}
	_ = os.Remove(dir)
	return limitHit
}

// ProcessLimit says how the process limit is held here; for root it
// creates and removes a pids cgroup to find out.
func ProcessLimit() (how string, ok bool) {
	if !NeedsGroup() {
		return "RLIMIT_NPROC (processes of this user, plus the limit)", true
	}
	dir, err := NewGroup(1)
	if err != nil {
		return "not held: " + err.Error(), false
	}
	Cleanup(dir)
	return "a pids cgroup per program (" + pidsV1Root + ")", true
}
