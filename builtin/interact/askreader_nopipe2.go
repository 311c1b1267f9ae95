//go:build unix && !linux

package interact

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// wakePipe makes askReader's wake-up pipe, non-blocking and closed on
// exec (there is no pipe2 here: the descriptors are marked under the fork
// lock, so no program started meanwhile inherits them).
func wakePipe(p *[2]int) error {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	if err := unix.Pipe(p[:]); err != nil {
		return err
	}
	for _, fd := range p {
		unix.CloseOnExec(fd)
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return err
		}
	}
	return nil
}
