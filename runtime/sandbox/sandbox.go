// Package sandbox runs a program confined to what one tool call was
// granted: namespaces of its own (a network with only loopback, reached
// from outside only through warden's egress proxy and bridges; a mount
// table where .git, .warden and the policy's protect: paths are read-only
// and its hide: paths masked), a Landlock domain (filesystem reads and
// writes, execution of the granted programs only, TCP connect ports where
// there is no network namespace, IPC scopes), a seccomp filter (no UDP,
// raw, packet or netlink sockets) and resource limits (CPU seconds,
// address space, open files, processes, file size).
//
// Warden's own process is never restricted. A program is started through a
// launcher: warden's binary re-executed (/proc/self/exe) with a hidden first
// argument, in new namespaces where the machine allows them; the launcher
// reads the Spec from its environment, sets up the namespaces, sets the
// limits, restricts itself with Landlock and seccomp and then execve(2)s
// the program, which inherits all of it. The launcher is Main, which
// warden's main and the TestMain of every test package that starts
// programs call first: importing the package has no effect of its own.
//
// All of that is Linux's. On other systems (macOS, Windows) warden still
// builds and runs programs, but directly, in a process group of their own
// and unconfined: the level is off, no limit is set, and a policy with
// require_sandbox refuses to run them.
//
// Detect says what the machine gives, as a level: full (namespaces and
// Landlock ABI 6 or later), fallback (Landlock without namespaces: TCP
// ports instead of hosts, no protected paths, and a program whose grants
// reach a hidden path is not started), partial (an older Landlock) or
// off (no Landlock). A policy with require_sandbox refuses to run
// programs below full.
package sandbox

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/wardenrt/warden/runtime/resource"
)

// Levels a result and an audit record report.
const (
	// LevelFull: every protection — network and mount namespaces, and
	// Landlock ABI 6 or later.
	LevelFull = "full"
	// LevelFallback: Landlock (ABI 6 or later) and seccomp without
	// namespaces: TCP is held to the granted ports (any host on them),
	// protected paths are not held for programs, and a program whose
	// grants reach a hidden path is refused rather than started.
	LevelFallback = "fallback"
	// LevelPartial: a Landlock without TCP rules (ABI 4) or IPC scopes
	// (ABI 6).
	LevelPartial = "partial"
	// LevelOff: no Landlock; resource limits and seccomp only.
	LevelOff = "off"
)

// fullABI is the Landlock ABI that gives every protection a Spec asks for:
// filesystem rules, TCP connect rules (4) and IPC scopes (6).
const fullABI = 6

// Support is what this machine's kernel offers.
type Support struct {
	// ABI is the Landlock ABI version (0: none).
	ABI int `json:"abi"`
	// Why is set when ABI is 0: why Landlock is unavailable.
	Why string `json:"why,omitempty"`
	// Simulated is true when EnvSimulateABI lowered the ABI (tests).
	Simulated bool `json:"simulated,omitempty"`
	// Namespaces: programs can get network and mount namespaces of their
	// own (for a user other than root, through a user namespace).
	Namespaces bool `json:"namespaces"`
	// NamespacesWhy says why they cannot, when Namespaces is false.
	NamespacesWhy string `json:"namespaces_why,omitempty"`
	// NamespacesSimulated: EnvSimulateNoNamespaces took them away (tests).
	NamespacesSimulated bool `json:"namespaces_simulated,omitempty"`
}

// Level is full, fallback, partial or off (see the constants).
func (s Support) Level() string {
	switch {
	case s.ABI >= fullABI && s.Namespaces:
		return LevelFull
	case s.ABI >= fullABI:
		return LevelFallback
	case s.ABI > 0:
		return LevelPartial
	}
	return LevelOff
}

// Full reports whether every protection is in force.
func (s Support) Full() bool { return s.Level() == LevelFull }

// Feature is one protection and whether it is in force here, with the
// reason.
type Feature struct {
	What string `json:"what"`
	On   bool   `json:"on"`
	Why  string `json:"why"`
}

// Points are the five promises of the sandbox about what a program can
// reach, each on or off here with the reason (warden sandbox check).
func (s Support) Points() []Feature {
	ns := s.Namespaces
	nsWhy := "no namespaces here: " + s.NamespacesWhy
	ll := s.ABI >= 1
	var p []Feature
	switch {
	case ns:
		p = append(p, Feature{"1. hosts, not ports: a program reaches only the hosts and addresses its net grants name", true,
			"a program of a call with net grants has a network namespace with only loopback; its connections go through warden's egress proxy (HTTP CONNECT and plain HTTP) and bridges, which check every host and resolved address as the http tool does; without net grants Landlock refuses every TCP connection"})
	case s.ABI >= 4:
		p = append(p, Feature{"1. hosts, not ports: a program reaches only the hosts and addresses its net grants name", false,
			nsWhy + "; TCP is held to the granted ports only (Landlock), any host on them"})
	default:
		p = append(p, Feature{"1. hosts, not ports: a program reaches only the hosts and addresses its net grants name", false,
			nsWhy + "; and this Landlock (ABI " + strconv.Itoa(s.ABI) + ") has no TCP rules: TCP is not held"})
	}
	side := "UDP, raw, packet and netlink sockets are refused (seccomp), so no DNS query leaves but through the proxy"
	switch {
	case !LimitsHeld():
		side = launcherWhy("")
	case ns:
	case s.ABI >= 4:
		side += "; DNS over TCP only with a grant for port 53"
	default:
		side += "; but TCP is not held here, so DNS over TCP is open"
	}
	p = append(p, Feature{"2. no side doors: no UDP, raw, packet or netlink sockets, no DNS of ungranted names", ns || s.ABI >= 4, side})
	if ns {
		p = append(p, Feature{"3. protected paths: .git, .warden and protect: entries are read-only to programs inside write grants", true,
			"read-only bind mounts in the program's mount namespace; the protected directory itself cannot be renamed or removed"})
		p = append(p, Feature{"4. hidden paths: hide: entries are unreadable to programs inside read grants", true,
			"masked in the program's mount namespace (and refused by warden's own tools)"})
	} else {
		p = append(p, Feature{"3. protected paths: .git, .warden and protect: entries are read-only to programs inside write grants", false,
			nsWhy + "; warden's own tools and the shell's redirections still refuse them"})
		p = append(p, Feature{"4. hidden paths: hide: entries are unreadable to programs inside read grants", false,
			nsWhy + "; a program whose grants reach a hide: path is refused (CAPABILITY_DENIED), not started, as nothing can mask the path; warden's own tools still refuse them"})
	}
	switch {
	case ll && ns:
		p = append(p, Feature{"5. exec grants held by the kernel: a program can start only the programs exec: grants name", true,
			"Landlock's execute right per granted file (and the loader and listed helpers); program directories and writable grants are mounted noexec, so the loader run directly cannot load another program"})
	case ll:
		p = append(p, Feature{"5. exec grants held by the kernel: a program can start only the programs exec: grants name", true,
			"Landlock's execute right per granted file (and the loader and listed helpers); " + nsWhy + ", so the dynamic loader run directly (ld.so PROGRAM) can still load a readable program"})
	default:
		p = append(p, Feature{"5. exec grants held by the kernel: a program can start only the programs exec: grants name", false,
			"no Landlock: " + s.Why})
	}
	return p
}

// Features lists the other protections (Landlock's parts by ABI, limits,
// seccomp), for warden sandbox check.
func (s Support) Features() []Feature {
	abi := func(n int, what string) Feature {
		f := Feature{What: what, On: s.ABI >= n}
		if f.On {
			f.Why = "Landlock ABI " + strconv.Itoa(n)
		} else {
			f.Why = "needs Landlock ABI " + strconv.Itoa(n)
		}
		return f
	}
	return []Feature{
		abi(1, "filesystem reads and writes limited to the call's fs grants"),
		abi(2, "renaming and linking files across directories (refer)"),
		abi(3, "truncating files"),
		abi(4, "TCP connect and bind limited to the ports of the call's net grants (where there is no network namespace)"),
		abi(5, "ioctl on devices"),
		abi(6, "abstract unix sockets and signals to processes outside the sandbox"),
		{"resource limits (CPU, address space, open files, processes, file size)", LimitsHeld(), launcherWhy("setrlimit, and a pids cgroup for root")},
		{"no capabilities, no unix sockets or io_uring, no UDP, raw, packet or netlink sockets (seccomp), no inherited descriptors, no terminal", LimitsHeld(), launcherWhy("the launcher")},
	}
}

// LimitsHeld reports whether programs run under the launcher, which sets
// their resource limits, drops their capabilities and installs the
// seccomp filter: on Linux (whatever its Landlock), and nowhere else —
// there programs start directly, in a process group of their own.
func LimitsHeld() bool { return goruntime.GOOS == "linux" }

// launcherWhy is why, or why not, the launcher's part holds.
func launcherWhy(how string) string {
	if LimitsHeld() {
		return how
	}
	return "no launcher on " + goruntime.GOOS + ": programs start directly, unconfined"
}

// EnvSimulateABI, when set to a number, lowers the Landlock ABI warden
// uses to it (0 simulates a kernel without Landlock). It can only lower
// what the kernel offers: it is for tests.
const EnvSimulateABI = "WARDEN_SANDBOX_SIMULATE_ABI"

// EnvSimulateNoNamespaces, when set to 1, makes warden act as on a machine
// where programs cannot get namespaces of their own (user namespaces
// restricted): for tests of the fallback level.
const EnvSimulateNoNamespaces = "WARDEN_SANDBOX_SIMULATE_NO_NAMESPACES"

var (
	detectOnce sync.Once
	detected   Support
)

// Detect returns what the kernel offers (once per process: the namespaces
// are probed by starting the launcher once), lowered by EnvSimulateABI and
// EnvSimulateNoNamespaces, or by SimulateABI and SimulateNoNamespaces.
func Detect() Support {
	detectOnce.Do(func() { detected = detect() })
	simMu.Lock()
	defer simMu.Unlock()
	s := detected
	if simABI != nil && *simABI < s.ABI {
		s.ABI, s.Simulated = *simABI, true
		s.Why = ""
		if s.ABI == 0 {
			s.Why = "simulated (sandbox.SimulateABI(0))"
		}
	}
	if simNoNS && s.Namespaces {
		s.Namespaces, s.NamespacesSimulated = false, true
		s.NamespacesWhy = "simulated (sandbox.SimulateNoNamespaces)"
	}
	return s
}

var (
	simMu   sync.Mutex
	simABI  *int
	simNoNS bool
)

// SimulateABI makes Detect report at most abi (0: no Landlock) until the
// returned function is called: for tests that check what happens on an
// older kernel. It can only lower what the kernel offers.
func SimulateABI(abi int) (restore func()) {
	simMu.Lock()
	simABI = &abi
	simMu.Unlock()
	return func() {
		simMu.Lock()
		simABI = nil
		simMu.Unlock()
	}
}

// SimulateNoNamespaces makes Detect report no namespaces until the
// returned function is called: for tests of the fallback level.
func SimulateNoNamespaces() (restore func()) {
	simMu.Lock()
	simNoNS = true
	simMu.Unlock()
	return func() {
		simMu.Lock()
		simNoNS = false
		simMu.Unlock()
	}
}

// Spec is what one program may do. Paths are absolute; a path that does
// not exist is left out.
type Spec struct {
	// Read are files and directories readable besides the system's
	// (SystemReadDirs, SystemReadFiles).
	Read []string `json:"read,omitempty"`
	// Write are files and directories readable and writable.
	Write []string `json:"write,omitempty"`
	// Exec are the files the program (and what it starts) may execute —
	// the granted programs, resolved, with their interpreters, loader and
	// helpers (ExecClosure) — and directories all of whose files may be.
	// ExecAny lets it execute any file it can read (exec:*).
	Exec    []string `json:"exec,omitempty"`
	ExecAny bool     `json:"exec_any,omitempty"`
	// Protect are paths read-only to the program whatever Write says (the
	// workspace's .git and .warden, the policy's protect: entries), and
	// Hide paths it cannot read at all (the policy's hide: entries): both
	// held in its mount namespace, so only where there is one.
	Protect []string `json:"protect,omitempty"`
	Hide    []string `json:"hide,omitempty"`
	// ConnectTCP are the TCP ports the program may connect to where it has
	// no network namespace of its own (Landlock); AnyTCP leaves TCP
	// unrestricted there (a net grant without a port).
	ConnectTCP []uint16 `json:"connect_tcp,omitempty"`
	AnyTCP     bool     `json:"any_tcp,omitempty"`
	// Listen are the addresses the launcher listens on inside the
	// program's network namespace (the proxy, bridges to granted local
	// addresses); Launch.Listeners hands the listeners to warden, which
	// serves them. Addresses outside 127.0.0.0/8 and ::1 are added to the
	// namespace's loopback first.
	Listen []netip.AddrPort `json:"listen,omitempty"`
	// Proxy is the URL programs get in HTTP_PROXY, HTTPS_PROXY and
	// ALL_PROXY (and the lowercase forms); the proxy variables of the
	// environment are dropped either way.
	Proxy  string          `json:"-"`
	Limits resource.Limits `json:"limits"`
	// UnixSockets allows the program to create unix sockets (systemctl
	// talks to systemd over one); otherwise seccomp refuses them.
	UnixSockets bool `json:"unix_sockets,omitempty"`
	// Group is the pids cgroup the launcher joins (NewGroup; root only).
	Group string `json:"group,omitempty"`
	// ABI is the Landlock ABI the launcher applies and Namespaces whether
	// it runs in namespaces of its own: what Detect says in warden's
	// process (set by Command), so the program runs under what the result
	// reports.
	ABI        int  `json:"abi"`
	Namespaces bool `json:"namespaces,omitempty"`
	// NetNS: the program gets a network namespace of its own (set by
	// Command, with Namespaces, when it has a way out: Listen). Without a
	// way out it needs none: Landlock refuses every TCP connect and bind,
	// seccomp every other socket — the same nothing, a namespace cheaper.
	NetNS bool `json:"netns,omitempty"`
	// NoExec are the directories mounted noexec in the namespace (set by
	// Command unless ExecAny): the program directories and the writable
	// grants, so the loader run directly cannot map a program the exec
	// grants do not name.
	NoExec []string `json:"noexec,omitempty"`
	// Pin are the directories between a protected or hidden path and the
	// writable grant it lies in (set by Command): each is mounted over
	// itself, so that it cannot be renamed — moving a protected or hidden
	// path away by moving its parent, and putting another in its place.
	Pin []string `json:"pin,omitempty"`
	// Env is the program's environment (set by Command). The launcher
	// itself runs with none but the spec: a variable such as LD_PRELOAD
	// must not reach it, unconfined as it starts.
	Env []string `json:"env"`
	// Shape names this struct's layout (specShape, set by Command): a
	// launcher built from other sources — the small launcher installed
	// beside warden from another version — refuses a spec it would read
	// differently, instead of running the program under less.
	Shape string `json:"shape"`
}

// SystemReadDirs are readable by every sandboxed program: what programs
// need to run. Never the home directory, never /. Their files are
// executable only as Spec.Exec says.
var SystemReadDirs = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc/alternatives", "/etc/ld.so.conf.d", "/etc/ssl/certs", "/etc/ca-certificates",
	"/usr/share/zoneinfo", "/usr/lib/locale",
}

// SystemReadFiles are readable single files: the loader's cache, locale,
// time zone, name service and terminal settings.
var SystemReadFiles = []string{
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.preload", "/etc/locale.alias", "/etc/locale.conf",
	"/etc/default/locale", "/etc/localtime", "/etc/timezone", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group",
	"/etc/hosts", "/etc/resolv.conf", "/etc/host.conf", "/etc/gai.conf", "/etc/services", "/etc/protocols",
	"/etc/inputrc", "/etc/mime.types", "/etc/gitconfig", "/etc/ssl/openssl.cnf",
	"/dev/zero", "/dev/urandom", "/dev/random", "/dev/full",
}

// SystemWriteFiles are writable devices every program may use.
var SystemWriteFiles = []string{"/dev/null"}

// ProgramDirs are where programs live (and no libraries): mounted noexec
// in a program's namespace, but for the programs it may execute, unless
// it may execute anything.
var ProgramDirs = []string{
	"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin",
	"/usr/games", "/usr/local/games", "/usr/libexec", "/usr/local/libexec",
}

// systemTops are directories a noexec mount must never cover: the
// libraries and the loader live under them.
var systemTops = []string{"/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/opt"}

// Launcher arguments: argv[1] of warden re-executed as a launcher (or as
// the namespace probe), and the variable that carries the Spec.
const (
	launcherArg = "__warden-sandbox-exec"
	probeArg    = "__warden-sandbox-probe"
	poolArg     = "__warden-sandbox-pool"
	watchArg    = "__warden-sandbox-watch"
	specEnv     = "WARDEN_SANDBOX_SPEC"
)

// listenFD is the launcher's descriptor on which it hands the listeners
// it made in the namespace to warden; a pre-started launcher's control
// socket (see the pool) is the same descriptor, and carries them too.
const listenFD = 3

// proxyVars are the variables that point programs at a proxy: warden's
// alone.
var proxyVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY",
	"http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy"}

// Launch is how to start one program under its sandbox: exec.Cmd's Path,
// Args, Env, SysProcAttr and ExtraFiles. After the start, call Started;
// Listeners then returns the listeners the launcher made in the
// program's network namespace; Close releases what is left.
type Launch struct {
	Path        string
	Args        []string
	Env         []string
	SysProcAttr *syscall.SysProcAttr
	ExtraFiles  []*os.File
	// Level is what the program runs under (Support.Level).
	Level string

	// Cmd, for a launch through a pre-started launcher (Pooled), is that
	// launcher, running; Send starts the program. Group is its pids
	// cgroup ("" but for root).
	Cmd   *exec.Cmd
	Group string

	listen []netip.AddrPort
	parent *os.File // warden's end of the socket pair the listeners come on
	pre    *prestarted
	req    request
	refill func() // see prestarted.refill
}

// Command returns how to start program path with argv args and environment
// env under spec. The launcher's environment is the spec alone; the
// program's (env, without warden's own sandbox variables and the proxy
// variables, with spec.Proxy's, and with HOME replaced when the sandbox
// does not reach it) travels inside it. Outside Linux the program is
// started directly (see directCommand). It fails on Linux in a binary
// that does not call Main.
func Command(path string, args, env []string, spec Spec) (*Launch, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("sandbox: %q is not an absolute path", path)
	}
	spec, level := prepare(spec, env)
	EnsureWatcher() // running before the program is
	return command(path, args, spec, level)
}

// prepare completes spec for one program (Command): the limits' defaults,
// what Detect says, the mounts, the program's environment and the shape.
func prepare(spec Spec, env []string) (Spec, string) {
	sup := Detect()
	spec.Limits = spec.Limits.WithDefaults()
	spec.ABI = sup.ABI
	spec.Namespaces = sup.Namespaces
	if !spec.Namespaces {
		spec.Listen, spec.Protect, spec.Hide, spec.NoExec = nil, nil, nil, nil
	} else {
		if !spec.ExecAny {
			spec.NoExec = noExecDirs(spec.Write)
		}
		spec.Pin = pinDirs(append(slices.Clone(spec.Protect), spec.Hide...), spec.Write, spec.NoExec)
		spec.NetNS = len(spec.Listen) > 0
	}
	spec.Env = programEnv(env, spec, LimitsHeld())
	spec.Shape = specShape()
	return spec, sup.Level()
}

// programEnv is the program's environment: env without warden's sandbox
// variables and the proxy variables, with spec.Proxy's, and (hideHome)
// with HOME replaced when the sandbox does not reach it — only where a
// sandbox holds reads at all (Linux).
func programEnv(env []string, spec Spec, hideHome bool) []string {
	out := make([]string, 0, len(env)+6)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(kv, "WARDEN_SANDBOX_"), slices.Contains(proxyVars, k):
			continue
		case k == "HOME" && hideHome:
			if !spec.reaches(strings.TrimPrefix(kv, "HOME=")) {
				// A home the program may not read would make programs
				// that read their settings from it fail (git stops at
				// an unreadable ~/.gitconfig); one that does not exist
				// is what they expect when there are none.
				kv = "HOME=" + NoHome
			}
		}
		out = append(out, kv)
	}
	if spec.Proxy != "" {
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
			out = append(out, k+"="+spec.Proxy)
		}
	}
	return out
}

// directCommand starts the program itself, without a launcher (outside
// Linux, where there is none): in a process group of its own where the
// system has them, with the program's environment, and nothing else of
// the spec held — the level is off.
func directCommand(path string, args []string, spec Spec, level string) *Launch {
	if len(args) == 0 {
		args = []string{path}
	}
	return &Launch{Path: path, Args: slices.Clone(args), Env: spec.Env, SysProcAttr: groupAttr(), Level: level}
}

// noExecDirs are the directories a program's namespace mounts noexec: the
// program directories and the writable directories, each resolved, and
// never one that holds the system's libraries.
func noExecDirs(write []string) []string {
	out := slices.Clone(programDirs())
	for _, d := range write {
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(real); err != nil || !fi.IsDir() || slices.Contains(out, real) {
			continue
		}
		if slices.ContainsFunc(systemTops, func(top string) bool {
			return within(real, top) || top != "/opt" && within(top, real)
		}) {
			continue // a writable grant over or inside the system's own directories
		}
		out = append(out, real)
	}
	return out
}

// programDirs are the ProgramDirs that exist here, resolved (once).
var programDirs = sync.OnceValue(func() []string {
	var out []string
	for _, d := range ProgramDirs {
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(real); err == nil && fi.IsDir() && !slices.Contains(out, real) {
			out = append(out, real)
		}
	}
	return out
})

// pinDirs are the directories above each path that lie in a writable
// grant (the grant's own directory included), top-down, but those already
// mount points (mounted noexec).
func pinDirs(paths, write, mounted []string) []string {
	var out []string
	for _, p := range paths {
		for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
			if !slices.ContainsFunc(write, func(w string) bool { return within(w, d) }) {
				break
			}
			if !slices.Contains(out, d) && !slices.Contains(mounted, d) {
				out = append(out, d)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	return out
}

// within reports whether dir is p or an ancestor of p.
func within(dir, p string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}

// Started closes warden's copy of the launcher's end of the listener
// socket pair; call it once the launcher has started (or failed to).
func (l *Launch) Started() {
	for _, f := range l.ExtraFiles {
		f.Close()
	}
	l.ExtraFiles = nil
}

// Close releases what Listeners did not take.
func (l *Launch) Close() {
	l.Started()
	if l.pre != nil { // taken from the pool, and never sent a program
		l.pre.discard()
		l.pre = nil
	}
	if l.refill != nil { // its program has ended: the pool may start another
		l.refill()
		l.refill = nil
	}
	if l.parent != nil {
		l.parent.Close()
		l.parent = nil
	}
}

// NoHome is HOME for programs whose sandbox does not reach the home
// directory.
const NoHome = "/nonexistent"

// reaches reports whether the spec opens dir or anything inside it.
func (s Spec) reaches(dir string) bool {
	dir = filepath.Clean(dir)
	for _, p := range append(slices.Clone(s.Read), s.Write...) {
		p = filepath.Clean(p)
		if p == dir || strings.HasPrefix(p, dir+"/") || strings.HasPrefix(dir, p+"/") {
			return true
		}
	}
	return false
}
