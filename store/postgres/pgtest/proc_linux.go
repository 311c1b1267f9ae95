package pgtest

import (
	"os"
	"syscall"
)

// procAttr runs initdb or the server as r (nil: ourselves); the server in
// a process group of its own, which goes too if the test binary dies
// (SIGQUIT: immediate shutdown).
func procAttr(r *runAs, server bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{}
	if r != nil {
		a.Credential = &syscall.Credential{Uid: uint32(r.uid), Gid: uint32(r.gid)}
	}
	if server {
		a.Pdeathsig, a.Setpgid = syscall.SIGQUIT, true
	}
	return a
}

// killGroup kills p's process group.
func killGroup(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGKILL) }
