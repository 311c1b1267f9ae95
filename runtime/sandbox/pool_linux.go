package sandbox

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"github.com/wardenrt/warden/runtime/resource"
	"golang.org/x/sys/unix"
)

// poolFD is a pre-started launcher's control socket (the listeners, where
// the spec has a network namespace, go back on it: listenFD).
const poolFD = listenFD

// maxRequest bounds a request's size (the spec, argv and environment).
const maxRequest = 64 << 20

// Status bytes a pre-started launcher sends when it is ready, or not.
const (
	poolReady  = 0
	poolFailed = 1
)

// poolKey tells pools apart: the launcher binary, and the namespaces its
// launchers are started in (Spec.Namespaces, Spec.NetNS).
type poolKey struct {
	path      string
	ns, netns bool
}

// namespaces names the namespaces of k's launchers, for the launcher to
// check each request against (servePool).
func (k poolKey) namespaces() string {
	return nsName(k.ns, k.netns)
}

func nsName(ns, netns bool) string {
	switch {
	case ns && netns:
		return "mount+network"
	case ns:
		return "mount"
	}
	return "none"
}

// poolDepth is how many launchers a pool keeps started ahead.
const poolDepth = 2

// pool keeps launchers started ahead for one key: a filler goroutine
// starts one for each one asked for (wanted) — poolDepth at first, then
// one for each taken. A launcher taken from those waiting is replaced
// once its program has ended (Launch.Close): starting the next launcher
// while a program starts would take the machine from it (a Go runtime
// starting, a cgroup migration; measured, a start beside a refill took
// some 3 ms more than one alone), so the pool refills between a caller's
// programs, in the room a script's own work leaves. The last one waiting
// is replaced at once, so a loop of programs finds the next one started;
// a caller that finds none waiting asks for its own at once, so programs
// started together (a command's background jobs) never wait for others
// to end.
type pool struct {
	ready chan *prestarted // closed when the filler stops
	wake  chan struct{}    // wanted grew
	done  chan struct{}    // closed by ClosePools

	mu     sync.Mutex
	wanted int // launchers to start
}

// refill asks for a launcher to replace one taken.
func (p *pool) refill() {
	p.mu.Lock()
	p.wanted++
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default: // the filler has been woken already
	}
}

// next waits until a launcher is wanted (true) or the pool is closed.
func (p *pool) next() bool {
	for {
		select {
		case <-p.done:
			return false
		default:
		}
		p.mu.Lock()
		n := p.wanted
		if n > 0 {
			p.wanted--
		}
		p.mu.Unlock()
		if n > 0 {
			return true
		}
		select {
		case <-p.wake:
		case <-p.done:
			return false
		}
	}
}

var pools = struct {
	sync.Mutex
	m map[poolKey]*pool
}{m: map[poolKey]*pool{}}

// Pooled returns how to start program path (argv args, environment env)
// under spec through a launcher started ahead of need, or nil when there
// is none to take — the launcher is warden's own binary re-executed
// (pre-starting it would keep a copy of warden idle), NoPool, or starting
// one failed — and the program must start through Command. The spec is
// completed as Command completes it; for root the launcher's pids cgroup
// is set to the spec's process limit and is Launch.Group. Send then starts
// the program; Close ends the launcher if it was not sent one.
func Pooled(ctx context.Context, path string, args, env []string, spec Spec) (*Launch, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("sandbox: %q is not an absolute path", path)
	}
	lp := launcherPath()
	if !mainCalled.Load() || lp == "/proc/self/exe" || poolDisabled() {
		return nil, nil
	}
	spec, level := prepare(spec, env)
	EnsureWatcher() // running before the program is
	pl, err := takePool(ctx, poolKey{path: lp, ns: spec.Namespaces, netns: spec.NetNS})
	if pl == nil || err != nil {
		return nil, err
	}
	if pl.group != "" {
		if err := os.WriteFile(filepath.Join(pl.group, "pids.max"), []byte(strconv.FormatUint(spec.Limits.Processes, 10)), 0); err != nil {
			pl.discard()
			if pl.refill != nil {
				pl.refill()
			}
			return nil, fmt.Errorf("pids cgroup: %w", err)
		}
		spec.Group = pl.group
	}
	l := &Launch{Path: lp, Level: level, Cmd: pl.cmd, Group: pl.group, pre: pl, refill: pl.refill,
		req: request{Spec: spec, Path: path, Argv: slices.Clone(args)}}
	if len(spec.Listen) > 0 {
		l.listen = slices.Clone(spec.Listen)
	}
	return l, nil
}

// takePool takes a launcher from the key's pool, starting the pool if
// there is none, and waits for one to be ready, or for ctx to end; nil
// when the pool could not start one.
func takePool(ctx context.Context, k poolKey) (*prestarted, error) {
	pools.Lock()
	p := pools.m[k]
	if p == nil {
		p = &pool{ready: make(chan *prestarted, poolDepth), wake: make(chan struct{}, 1), done: make(chan struct{}), wanted: poolDepth}
		pools.m[k] = p
		go p.fill(k)
	}
	pools.Unlock()
	select {
	case pl := <-p.ready: // nil once closed
		switch {
		case pl == nil:
		case len(p.ready) == 0:
			p.refill() // the last one: its replacement now
		default:
			pl.refill = p.refill // once its program has ended
		}
		return pl, nil
	default:
	}
	p.refill() // none waiting: one for this call, now
	select {
	case pl := <-p.ready:
		return pl, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fill starts launchers for the pool as they are asked for (wanted), until
// the pool is closed or a start fails (then the programs start through
// Command).
func (p *pool) fill(k poolKey) {
	defer close(p.ready)
	for p.next() {
		pl, err := startPrestarted(k)
		if err != nil {
			return
		}
		select {
		case p.ready <- pl:
		case <-p.done:
			pl.discard()
			return
		}
	}
}

// ClosePools ends every idle pre-started launcher, which removes its pids
// cgroup as it ends, and one still starting as its start does, without
// waiting for them here: ClosePools runs when warden must end at once.
// The pools start anew when next taken from.
func ClosePools() {
	pools.Lock()
	closing := pools.m
	pools.m = map[poolKey]*pool{}
	pools.Unlock()
	for _, p := range closing {
		close(p.done)
		go func() {
			for pl := range p.ready {
				pl.discard()
			}
		}()
	}
}

// startPrestarted starts one launcher for k and waits until it is ready:
// its runtime up, in its namespaces, in its pids cgroup (root; named
// here, made by the launcher with the default process limit). Its environment is empty, its working
// directory /, its standard descriptors /dev/null; descriptor 3 is its
// end of the control socket.
func startPrestarted(k poolKey) (*prestarted, error) {
	// The launcher makes its pids cgroup itself, as it removes it: no
	// moment where warden ending would leave one behind.
	var group string
	if NeedsGroup() {
		g, err := groupName()
		if err != nil {
			return nil, err
		}
		group = g
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		Cleanup(group)
		return nil, fmt.Errorf("sandbox: socketpair: %w", err)
	}
	ctrl := os.NewFile(uintptr(fds[0]), "warden-sandbox-pool")
	theirs := os.NewFile(uintptr(fds[1]), "warden-sandbox-launcher")
	cmd := exec.Command(k.path)
	cmd.Args = []string{LauncherName, poolArg, group, k.namespaces()}
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{theirs}
	if k.ns {
		cmd.SysProcAttr = nsAttr()
		if !k.netns {
			cmd.SysProcAttr.Cloneflags &^= syscall.CLONE_NEWNET
		}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		ctrl.Close()
		Cleanup(group)
		return nil, err
	}
	pl := &prestarted{cmd: cmd, ctrl: ctrl, group: group}
	buf := make([]byte, 4096)
	n, _ := ctrl.Read(buf)
	if n == 1 && buf[0] == poolReady {
		return pl, nil
	}
	pl.discard()
	msg := "it ended"
	if n > 1 && buf[0] == poolFailed {
		msg = string(buf[1:n])
	}
	return nil, fmt.Errorf("sandbox: starting a launcher ahead: %s", msg)
}

// Send starts the program of a launch from the pool: it hands the
// launcher the request, with dir (warden's own working directory when "",
// relative to it when relative) and the program's standard input, output
// and error, which the caller may close once Send returns. The program
// then runs as Launch.Cmd, whose Wait reaps it.
func (l *Launch) Send(dir string, stdin, stdout, stderr *os.File) error {
	pl := l.pre
	if pl == nil {
		return errors.New("sandbox: Send of a launch that is not from the pool, or sent already")
	}
	if !filepath.IsAbs(dir) {
		// Warden's working directory, or one relative to it, as exec.Cmd
		// has it: the launcher's own is /.
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		dir = filepath.Join(wd, dir)
	}
	l.req.Dir = dir
	body, err := json.Marshal(l.req)
	if err != nil {
		return err
	}
	msg := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	msg = append(msg, body...)
	rights := unix.UnixRights(int(stdin.Fd()), int(stdout.Fd()), int(stderr.Fd()))
	fd := int(pl.ctrl.Fd())
	for sent := 0; sent < len(msg); {
		n, err := unix.SendmsgN(fd, msg[sent:], rights, nil, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("sandbox: sending the program to its launcher: %w", err)
		}
		sent, rights = sent+n, nil
	}
	l.pre = nil // the caller has the launcher now: Cmd
	if len(l.listen) > 0 {
		l.parent = pl.ctrl // the listeners come on it
	} else {
		pl.ctrl.Close()
	}
	return nil
}

// servePool is a pre-started launcher's work (argv: poolArg, group, the
// namespaces it was started in): make and join its pids cgroup, say it
// is ready, wait for the request and confine and execute its program — or, when
// warden closes the control socket first, leave the cgroup, remove it and
// exit. A request for other namespaces than its own is refused: set up
// where they are not, the mounts would be the machine's, and the
// listeners on its loopback.
func servePool(group, namespaces string) error {
	runtime.LockOSThread() // see launch
	status := []byte{poolReady}
	if group != "" {
		if err := makeGroup(group, resource.Limits{}.WithDefaults().Processes); err != nil {
			status = append([]byte{poolFailed}, err.Error()...)
			group = "" // not made: nothing to remove
		} else if err := os.WriteFile(filepath.Join(group, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			status = append([]byte{poolFailed}, "joining the pids cgroup: "+err.Error()...)
		}
	}
	if _, err := unix.Write(poolFD, status); err != nil || status[0] != poolReady {
		leaveGroup(group)
		os.Exit(ExitLaunchFailed)
	}
	req, err := readRequest(poolFD)
	if err != nil {
		leaveGroup(group)
		if errors.Is(err, io.EOF) {
			os.Exit(0) // warden ended, or closed the pool
		}
		return err
	}
	if got := nsName(req.Spec.Namespaces, req.Spec.NetNS); got != namespaces {
		return fmt.Errorf("a request for namespaces %s of a launcher started in %s", got, namespaces)
	}
	return confine(req.Spec, req.Path, req.Argv, req.Dir, group)
}

// leaveGroup moves this process out of its pids cgroup (to the parent)
// and removes it.
func leaveGroup(group string) {
	if group == "" {
		return
	}
	_ = os.WriteFile(filepath.Join(filepath.Dir(group), "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
	_ = os.Remove(group)
}

// readRequest reads warden's request from the control socket fd, with the
// program's three standard descriptors, which it puts in place (0, 1, 2).
// io.EOF: warden closed the socket without one.
func readRequest(fd int) (request, error) {
	var req request
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(3*4))
	var n, oobn, flags int
	var err error
	for {
		n, oobn, flags, _, err = unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return req, fmt.Errorf("reading the request: %w", err)
	}
	if n == 0 {
		return req, io.EOF
	}
	if err := takeStdio(oob[:oobn], flags); err != nil {
		return req, err
	}
	if n < 4 {
		return req, errors.New("a request without its length")
	}
	size := int(binary.LittleEndian.Uint32(buf))
	if size > maxRequest {
		return req, fmt.Errorf("a request of %d bytes", size)
	}
	body := append(make([]byte, 0, size), buf[4:n]...)
	for len(body) < size {
		m, err := unix.Read(fd, buf[:min(len(buf), size-len(body))])
		if err == unix.EINTR {
			continue
		}
		if err != nil || m == 0 {
			return req, fmt.Errorf("reading the request: %d of %d bytes: %v", len(body), size, err)
		}
		body = append(body, buf[:m]...)
	}
	if len(body) > size {
		return req, errors.New("a request longer than it says")
	}
	if err := decodeStrict(body, &req); err != nil {
		return req, fmt.Errorf("sandbox request: %w (is the launcher from another version of warden than the one running?)", err)
	}
	return req, nil
}

// takeStdio puts the three descriptors of the control message in place
// as standard input, output and error. Anything but exactly three, or a
// truncated message, is refused.
func takeStdio(oob []byte, flags int) error {
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob); err == nil {
		for _, m := range msgs {
			if got, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if len(fds) != 3 || flags&unix.MSG_CTRUNC != 0 {
		return fmt.Errorf("a request with %d descriptors (truncated: %v), not the program's three", len(fds), flags&unix.MSG_CTRUNC != 0)
	}
	for i, fd := range fds {
		if err := unix.Dup3(fd, i, 0); err != nil {
			return fmt.Errorf("standard descriptor %d: %w", i, err)
		}
	}
	return nil
}
