//go:build unix && !linux

package pgtest

import (
	"os"
	"syscall"
)

// procAttr runs initdb or the server as r (nil: ourselves); the server in
// a process group of its own (there is no parent-death signal here).
func procAttr(r *runAs, server bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{}
	if r != nil {
		a.Credential = &syscall.Credential{Uid: uint32(r.uid), Gid: uint32(r.gid)}
	}
	a.Setpgid = server
	return a
}

// killGroup kills p's process group.
func killGroup(p *os.Process) { syscall.Kill(-p.Pid, syscall.SIGKILL) }
