package interact

import "golang.org/x/sys/unix"

// wakePipe makes askReader's wake-up pipe, non-blocking and closed on
// exec.
func wakePipe(p *[2]int) error { return unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK) }
