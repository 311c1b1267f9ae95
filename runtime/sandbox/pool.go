package sandbox

import (
	"os"
	"os/exec"
	"sync"
)

// The pool: launchers started ahead of need. Most of a program's start
// through the launcher is not the program's own — the launcher's Go
// runtime starting, and for root its move into a pids cgroup of its own (a
// cgroup v1 migration waits for an RCU grace period) — and none of it
// depends on the program. So warden keeps a launcher or two started
// ahead, each in the namespaces a program gets and (root) already in a
// fresh pids cgroup, waiting on a control socket with nothing of the
// program yet: no spec, no environment of warden's, no working directory,
// standard descriptors on /dev/null. Taking one (Pooled), warden sets the
// cgroup's pids.max to the call's process limit and sends the spec, the
// program, its working directory and its three standard descriptors;
// the launcher then does everything a launcher started afresh does, in
// the same order (confine) — descriptors, namespaces' set-up, limits,
// capabilities, Landlock, seccomp, address-space limit, execve — and
// another launcher is started behind it.
//
// A pre-started launcher whose warden ends — killed, crashed, or done —
// finds its control socket closed, leaves its pids cgroup, removes it and
// exits: nothing of it outlives warden. ClosePools ends the idle ones at
// once.

// request is what warden sends a pre-started launcher: the spec (as
// Command completes it), the program and its argv, and its working
// directory; the three standard descriptors travel beside it.
type request struct {
	Spec Spec     `json:"spec"`
	Path string   `json:"path"`
	Argv []string `json:"argv"`
	Dir  string   `json:"dir"`
}

// prestarted is one launcher started ahead of need.
type prestarted struct {
	cmd   *exec.Cmd
	ctrl  *os.File // warden's end of its control socket
	group string   // its pids cgroup (root), or ""
	// refill, set when taken from its pool, asks the pool for another
	// (Launch.Close, once its program has ended or it was discarded).
	refill func()
}

// discard ends a launcher that will start no program, and removes its
// pids cgroup. The launcher does both itself on reading end-of-file, so
// that a warden that ends meanwhile leaves nothing behind (killed here
// instead, it would leave its cgroup to a warden that may not live to
// remove it); Cleanup is for what it could not remove.
func (p *prestarted) discard() {
	p.ctrl.Close()
	_ = p.cmd.Wait()
	Cleanup(p.group)
}

var poolOff struct {
	sync.Mutex
	off bool
}

// NoPool makes every program start through a launcher started for it, as
// where there is no pool, until the returned function is called: for
// benchmarks and tests of that path.
func NoPool() (restore func()) {
	poolOff.Lock()
	poolOff.off = true
	poolOff.Unlock()
	ClosePools()
	return func() {
		poolOff.Lock()
		poolOff.off = false
		poolOff.Unlock()
	}
}

func poolDisabled() bool {
	poolOff.Lock()
	defer poolOff.Unlock()
	return poolOff.off
}
