package sandbox

import (
	"os"
	"syscall"
)

// groupAttr starts a program in a process group of its own (for console
// signals); Windows has no process group to kill whole.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// KillGroup kills process pgid. On Windows that is the program alone:
// what it started itself is not reached (a job object would be needed).
func KillGroup(pgid int) error {
	p, err := os.FindProcess(pgid)
	if err != nil {
		return err
	}
	return p.Kill()
}
