// Package sandbox runs a program confined to what one tool call was
// granted: a Landlock domain (filesystem reads and writes, TCP connect
// ports, IPC scopes) and resource limits (CPU seconds, address space, open
// files, processes, file size).
//
// Warden's own process is never restricted. A program is started through a
// launcher: warden's binary re-executed (/proc/self/exe) with a hidden first
// argument; the launcher reads the Spec from its environment, sets the
// limits, restricts itself with Landlock and then execve(2)s the program,
// which inherits both. The launcher is this package's init function, so
// every binary that imports the package (warden, and the test binaries of
// the packages that start programs) can act as one.
//
// Landlock needs no privilege. Where the kernel lacks it, or lacks part of
// what a call needs (TCP rules need ABI 4, IPC scopes ABI 6), Detect says
// so and the Level a result reports is "partial" or "none"; a policy with
// require_sandbox refuses to run programs then.
package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Levels a result and an audit record report.
const (
	// LevelNone: no Landlock; resource limits only.
	LevelNone = "none"
	// LevelPartial: Landlock without some of TCP rules (ABI 4) or IPC
	// scopes (ABI 6).
	LevelPartial = "partial"
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
}

// Level is "landlock-vN" when every protection is in force, "partial" when
// Landlock lacks TCP rules or IPC scopes, and "none" without Landlock.
func (s Support) Level() string {
	switch {
	case s.ABI >= fullABI:
		return "landlock-v" + strconv.Itoa(s.ABI)
	case s.ABI > 0:
		return LevelPartial
	}
	return LevelNone
}

// Full reports whether every protection is in force.
func (s Support) Full() bool { return s.ABI >= fullABI }

// Features lists what is and is not enforced, for `warden sandbox check`.
func (s Support) Features() []Feature {
	return []Feature{
		{"filesystem reads and writes limited to the call's fs grants", s.ABI >= 1, 1},
		{"renaming and linking files across directories (refer)", s.ABI >= 2, 2},
		{"truncating files", s.ABI >= 3, 3},
		{"TCP connect and bind limited to the ports of the call's net grants", s.ABI >= 4, 4},
		{"ioctl on devices", s.ABI >= 5, 5},
		{"abstract unix sockets and signals to processes outside the sandbox", s.ABI >= 6, 6},
		{"resource limits (CPU, address space, open files, processes, file size)", true, 0},
		{"no capabilities, no unix sockets or io_uring (seccomp), no inherited descriptors, no terminal", true, 0},
	}
}

// Feature is one protection and whether it is in force.
type Feature struct {
	What   string `json:"what"`
	On     bool   `json:"on"`
	MinABI int    `json:"min_abi,omitempty"`
}

// EnvSimulateABI, when set to a number, lowers the Landlock ABI warden
// uses to it (0 simulates a kernel without Landlock). It can only lower
// what the kernel offers: it is for tests.
const EnvSimulateABI = "WARDEN_SANDBOX_SIMULATE_ABI"

var (
	detectOnce sync.Once
	detected   Support
)

// Detect returns what the kernel offers (once per process), lowered by
// EnvSimulateABI.
func Detect() Support {
	detectOnce.Do(func() { detected = detect() })
	simMu.Lock()
	defer simMu.Unlock()
	if simulated != nil {
		return *simulated
	}
	return detected
}

var (
	simMu     sync.Mutex
	simulated *Support
)

// SimulateABI makes Detect report at most abi (0: no Landlock) until the
// returned function is called: for tests that check what happens on an
// older kernel. It can only lower what the kernel offers.
func SimulateABI(abi int) (restore func()) {
	s := Detect()
	if abi < s.ABI {
		s = Support{ABI: abi, Simulated: true}
		if abi == 0 {
			s.Why = "simulated (sandbox.SimulateABI(0))"
		}
	}
	simMu.Lock()
	simulated = &s
	simMu.Unlock()
	return func() {
		simMu.Lock()
		simulated = nil
		simMu.Unlock()
	}
}

func detect() Support {
	var s Support
	v, err := llsys.LandlockGetABIVersion()
	if err != nil || v < 1 {
		s.Why = "this kernel does not offer Landlock (or it is not enabled at boot: lsm=landlock)"
		if err != nil {
			s.Why += ": " + err.Error()
		}
	} else {
		s.ABI = v
	}
	if sim, ok := os.LookupEnv(EnvSimulateABI); ok {
		if n, err := strconv.Atoi(sim); err == nil && n >= 0 && n < s.ABI {
			s.ABI, s.Simulated = n, true
			if n == 0 {
				s.Why = "simulated by " + EnvSimulateABI + "=0"
			}
		}
	}
	return s
}

// Limits are the resource limits of one program (and, for processes, of
// what it starts). Zero means the default; see DefaultLimits.
type Limits struct {
	CPUSeconds     uint64 `json:"cpu_seconds,omitempty" yaml:"cpu_seconds"`
	AddressSpaceMB uint64 `json:"address_space_mb,omitempty" yaml:"address_space_mb"`
	OpenFiles      uint64 `json:"open_files,omitempty" yaml:"open_files"`
	Processes      uint64 `json:"processes,omitempty" yaml:"processes"`
	FileSizeMB     uint64 `json:"file_size_mb,omitempty" yaml:"file_size_mb"`
}

// DefaultLimits apply where a policy rule says nothing: generous for
// builds and tests, tight enough to stop a runaway.
var DefaultLimits = Limits{
	CPUSeconds:     300,
	AddressSpaceMB: 16 << 10,
	OpenFiles:      4096,
	Processes:      512,
	FileSizeMB:     4 << 10,
}

// WithDefaults fills the zero fields from DefaultLimits.
func (l Limits) WithDefaults() Limits { return l.Over(DefaultLimits) }

// Over returns l with its zero fields taken from base.
func (l Limits) Over(base Limits) Limits {
	pick := func(v, b uint64) uint64 {
		if v != 0 {
			return v
		}
		return b
	}
	return Limits{
		CPUSeconds:     pick(l.CPUSeconds, base.CPUSeconds),
		AddressSpaceMB: pick(l.AddressSpaceMB, base.AddressSpaceMB),
		OpenFiles:      pick(l.OpenFiles, base.OpenFiles),
		Processes:      pick(l.Processes, base.Processes),
		FileSizeMB:     pick(l.FileSizeMB, base.FileSizeMB),
	}
}

// Spec is what one program may do. Paths are absolute; a path that does
// not exist is left out.
type Spec struct {
	// Read are files and directories readable (and executable) besides
	// the system's (SystemReadDirs, SystemReadFiles).
	Read []string `json:"read,omitempty"`
	// Write are files and directories readable and writable.
	Write []string `json:"write,omitempty"`
	// ConnectTCP are the TCP ports the program may connect to; AnyTCP
	// leaves TCP unrestricted (a net grant without a port).
	ConnectTCP []uint16 `json:"connect_tcp,omitempty"`
	AnyTCP     bool     `json:"any_tcp,omitempty"`
	Limits     Limits   `json:"limits"`
	// UnixSockets allows the program to create unix sockets (systemctl
	// talks to systemd over one); otherwise seccomp refuses them.
	UnixSockets bool `json:"unix_sockets,omitempty"`
	// Group is the pids cgroup the launcher joins (NewGroup; root only).
	Group string `json:"group,omitempty"`
	// ABI is the Landlock ABI the launcher applies: what Detect says in
	// warden's process (set by Command), so the program runs under what
	// the result reports.
	ABI int `json:"abi"`
	// Env is the program's environment (set by Command). The launcher
	// itself runs with none but the spec: a variable such as LD_PRELOAD
	// must not reach it, unconfined as it starts.
	Env []string `json:"env"`
}

// SystemReadDirs are readable (and executable) by every sandboxed program:
// what programs need to run. Never the home directory, never /.
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

// Launcher arguments: argv[1] of warden re-executed as a launcher, and the
// variable that carries the Spec (removed before the program starts).
const (
	launcherArg = "__warden-sandbox-exec"
	specEnv     = "WARDEN_SANDBOX_SPEC"
)

// Command returns how to start program path with argv args and environment
// env under spec: the launcher's path, argv and environment. The launcher's
// environment is the spec alone; the program's (env, without warden's own
// sandbox variables, and with HOME replaced when the sandbox does not reach
// it) travels inside it.
func Command(path string, args, env []string, spec Spec) (string, []string, []string, error) {
	if !filepath.IsAbs(path) {
		return "", nil, nil, fmt.Errorf("sandbox: %q is not an absolute path", path)
	}
	spec.Limits = spec.Limits.WithDefaults()
	spec.ABI = Detect().ABI
	spec.Env = make([]string, 0, len(env))
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "WARDEN_SANDBOX_"):
			continue
		case strings.HasPrefix(kv, "HOME="):
			if !spec.reaches(strings.TrimPrefix(kv, "HOME=")) {
				// A home the program may not read would make programs
				// that read their settings from it fail (git stops at
				// an unreadable ~/.gitconfig); one that does not exist
				// is what they expect when there are none.
				kv = "HOME=" + NoHome
			}
		}
		spec.Env = append(spec.Env, kv)
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return "", nil, nil, err
	}
	argv0 := "warden-sandbox"
	if len(args) > 0 {
		argv0 = args[0]
	}
	argv := append([]string{argv0, launcherArg, path}, args...)
	return "/proc/self/exe", argv, []string{specEnv + "=" + string(b)}, nil
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
