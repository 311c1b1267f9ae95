package proc

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// The signals the kernel sends at the CPU and file size limits.
const sigXCPU, sigXFSZ = syscall.SIGXCPU, syscall.SIGXFSZ

// waitExit reports when the started program has exited without reaping
// it (waitid with WNOWAIT): until reap, its PID — and so its process
// group's ID — cannot be reused.
func waitExit(cmd *exec.Cmd) (exited <-chan struct{}, reap func() error) {
	pid := cmd.Process.Pid
	ch := make(chan struct{})
	go func() {
		var info unix.Siginfo
		for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
		}
		close(ch)
	}()
	return ch, cmd.Wait
}
