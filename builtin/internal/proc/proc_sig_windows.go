package proc

import "syscall"

// Windows has no signals for the CPU and file size limits (and warden
// sets no limit there): values no program ends with.
const sigXCPU, sigXFSZ = syscall.Signal(-1), syscall.Signal(-2)
