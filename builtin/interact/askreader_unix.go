//go:build unix

package interact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"golang.org/x/sys/unix"
)

// errAskWoken is returned by askReader when the call's context ended.
var errAskWoken = errors.New("interrupted")

// askReader reads the terminal without ever blocking in read(2): it polls
// the terminal and a wake-up pipe, and reads only when a byte is ready.
type askReader struct {
	fd         int
	wake       [2]int // read end, write end
	mu         sync.Mutex
	closed     bool
	stopWaking func() bool
}

func newAskReader(ctx context.Context, fd int) (*askReader, error) {
	r := &askReader{fd: fd}
	if err := wakePipe(&r.wake); err != nil {
		return nil, fmt.Errorf("wake-up pipe: %w", err)
	}
	r.stopWaking = context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.closed {
			unix.Write(r.wake[1], []byte{1})
		}
	})
	return r, nil
}

func (r *askReader) Read(p []byte) (int, error) {
	for {
		fds := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}, {Fd: int32(r.wake[0]), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return 0, err
		}
		if fds[1].Revents != 0 {
			return 0, errAskWoken
		}
		if fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) == 0 {
			continue
		}
		if fds[0].Revents&unix.POLLNVAL != 0 {
			return 0, errors.New("the terminal was closed")
		}
		n, err := unix.Read(r.fd, p)
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (r *askReader) close() {
	r.stopWaking()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	unix.Close(r.wake[0])
	unix.Close(r.wake[1])
}
