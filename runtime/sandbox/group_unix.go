//go:build unix

package sandbox

import "syscall"

// groupAttr puts a program started directly in a process group of its
// own, which KillGroup can end whole.
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// KillGroup kills process group pgid (a program and what it started).
func KillGroup(pgid int) error { return syscall.Kill(-pgid, syscall.SIGKILL) }
