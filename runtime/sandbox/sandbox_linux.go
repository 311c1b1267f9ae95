package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// detect asks the kernel for its Landlock ABI and probes the namespaces.
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
	if os.Getenv(EnvSimulateNoNamespaces) == "1" {
		s.NamespacesSimulated = true
		s.NamespacesWhy = "simulated by " + EnvSimulateNoNamespaces + "=1"
	} else if err := probeNamespaces(); err != nil {
		s.NamespacesWhy = err.Error()
	} else {
		s.Namespaces = true
	}
	return s
}

// probeNamespaces starts the launcher once in the namespaces programs get,
// where it sets up what a program's would need (loopback up, a private
// mount table, a read-only clone of a mount) and exits.
func probeNamespaces() error {
	if !mainCalled.Load() {
		return errNoMain
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"warden-sandbox-probe", probeArg}
	cmd.Env = []string{}
	cmd.SysProcAttr = nsAttr()
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = err.Error()
		}
		if strings.Contains(msg, "operation not permitted") || strings.Contains(msg, "permission denied") || strings.Contains(msg, "no space left") {
			msg += " (user namespaces may be restricted: kernel.unprivileged_userns_clone, user.max_user_namespaces, or an AppArmor/SELinux rule)"
		}
		return fmt.Errorf("a program cannot get network and mount namespaces of its own: %s", msg)
	}
	return nil
}

// nsAttr is how the launcher is started into new namespaces: a network
// and a mount namespace; for a user other than root also a user namespace
// in which the launcher is root (uid and gid 0 mapped to the caller's), so
// it may set up the other two — the program it then starts has no
// capability left.
func nsAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setsid: true, Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS}
	if os.Getuid() != 0 {
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		a.GidMappingsEnableSetgroups = false
	}
	return a
}

// command is how Command starts the program on Linux: through the
// launcher — the small one beside warden (launcherPath), or warden's own
// binary re-executed — which applies spec.
func command(path string, args []string, spec Spec, level string) (*Launch, error) {
	if !mainCalled.Load() {
		return nil, errNoMain
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	argv0 := "warden-sandbox"
	if len(args) > 0 {
		argv0 = args[0]
	}
	l := &Launch{
		Path:  launcherPath(),
		Args:  append([]string{argv0, launcherArg, path}, args...),
		Env:   []string{specEnv + "=" + string(b)},
		Level: level,
	}
	if spec.Namespaces {
		l.SysProcAttr = nsAttr()
		if !spec.NetNS {
			l.SysProcAttr.Cloneflags &^= syscall.CLONE_NEWNET
		}
	} else {
		l.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if len(spec.Listen) > 0 {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("sandbox: socketpair: %w", err)
		}
		l.parent = os.NewFile(uintptr(fds[0]), "warden-sandbox-listeners")
		l.ExtraFiles = []*os.File{os.NewFile(uintptr(fds[1]), "warden-sandbox-launcher")}
		l.listen = slices.Clone(spec.Listen)
	}
	return l, nil
}

// Listeners returns the listeners the launcher made in the program's
// network namespace, in the order of Spec.Listen (none without a
// namespace). It waits until the launcher sends them, or exits without.
func (l *Launch) Listeners() ([]*os.File, error) {
	if l.parent == nil {
		return nil, nil
	}
	defer func() { l.parent.Close(); l.parent = nil }()
	buf := make([]byte, 16)
	oob := make([]byte, syscall.CmsgSpace(4*len(l.listen)))
	n, oobn, _, _, err := syscall.Recvmsg(int(l.parent.Fd()), buf, oob, syscall.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("sandbox: receiving the listeners: %w", err)
	}
	if n == 0 {
		return nil, fmt.Errorf("sandbox: the launcher ended without making its listeners")
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, err
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "warden-sandbox-listener"))
		}
	}
	if len(files) != len(l.listen) {
		for _, f := range files {
			f.Close()
		}
		return nil, fmt.Errorf("sandbox: the launcher sent %d listeners for %d addresses", len(files), len(l.listen))
	}
	return files, nil
}
