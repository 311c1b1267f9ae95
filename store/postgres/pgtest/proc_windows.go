package pgtest

import (
	"os"
	"syscall"
)

// procAttr: on Windows the server runs as ourselves, in no group.
func procAttr(*runAs, bool) *syscall.SysProcAttr { return nil }

// killGroup kills the server's process.
func killGroup(p *os.Process) { p.Kill() }
