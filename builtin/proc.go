package builtin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// procSpec is one program start. Every program a core tool starts (shell,
// git, ops) goes through runProc, so they all get the same process-group
// handling, and later the same sandbox.
type procSpec struct {
	Path   string   // absolute path of the program
	Args   []string // argv; Args[0] is the program's name
	Dir    string
	Env    []string
	Stdin  io.Reader // nil = /dev/null
	Stdout io.Writer // nil = discarded
	Stderr io.Writer // nil = discarded
}

// errProcKilled reports that the context ended (deadline or cancellation)
// and the process group was killed.
var errProcKilled = errors.New("killed: the call's deadline passed or it was cancelled")

// pipeDrainWait bounds how long runProc waits for output still in flight
// after the process group has been killed.
const pipeDrainWait = time.Second

// runProc starts the program in a new process group and waits for it. When it
// exits, the rest of its group (background children) is killed, so a call
// never leaves processes behind; when ctx ends first, the whole group is
// killed at once. It returns the exit status (128+signal when killed by a
// signal), errProcKilled (wrapped) when ctx ended, or an error if the program
// could not start.
func runProc(ctx context.Context, p procSpec) (int, error) {
	if err := ctx.Err(); err != nil {
		return -1, fmt.Errorf("%w: %v", errProcKilled, err)
	}
	cmd := exec.Command(p.Path)
	cmd.Args = p.Args
	cmd.Dir = p.Dir
	cmd.Env = p.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Stdin = p.Stdin
	cmd.WaitDelay = pipeDrainWait
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

	// Our own pipes: exec.Cmd.Wait would otherwise wait for every holder of
	// the pipe (a background grandchild) before returning.
	outR, outW, err := os.Pipe()
	if err != nil {
		return -1, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return -1, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return -1, err
	}
	outW.Close()
	errW.Close()
	pgid := cmd.Process.Pid

	var copies sync.WaitGroup
	drain := func(r *os.File, w io.Writer) {
		defer copies.Done()
		if w == nil {
			w = io.Discard
		}
		_, _ = io.Copy(w, r)
	}
	copies.Add(2)
	go drain(outR, p.Stdout)
	go drain(errR, p.Stderr)

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	var werr error
	killed := false
	select {
	case werr = <-waited:
	case <-ctx.Done():
		killed = true
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		werr = <-waited
	}
	// Whatever is left of the group goes too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)

	done := make(chan struct{})
	go func() { copies.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(pipeDrainWait):
		// A process that left the group (setsid) still holds a pipe.
		outR.Close()
		errR.Close()
		<-done
	}
	outR.Close()
	errR.Close()

	if killed {
		return -1, fmt.Errorf("%w: %v", errProcKilled, ctx.Err())
	}
	code := cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return code, werr
	}
	return code, nil
}

// cappedBuffer keeps the first Max bytes written to it and counts the rest.
// It never blocks or fails a writer, so a flooding program is drained, not
// stalled.
type cappedBuffer struct {
	mu    sync.Mutex
	Max   int
	buf   bytes.Buffer
	total int64
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	if room := c.Max - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
		} else {
			c.buf.Write(p)
		}
	}
	return len(p), nil
}

// Truncated reports whether more was written than kept.
func (c *cappedBuffer) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total > int64(c.buf.Len())
}

// String returns what was kept, with a marker saying how much was cut.
func (c *cappedBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.buf.String()
	if c.total > int64(len(s)) {
		s = fmt.Sprintf("%s\n… [truncated: %d of %d bytes kept]", s, len(s), c.total)
	}
	return s
}
