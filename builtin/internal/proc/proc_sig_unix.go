//go:build unix && !linux

package proc

import "syscall"

// The signals sent at the CPU and file size limits.
const sigXCPU, sigXFSZ = syscall.SIGXCPU, syscall.SIGXFSZ
