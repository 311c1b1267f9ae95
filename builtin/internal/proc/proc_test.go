//go:build unix

package proc

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/sandbox"
)

func TestRunProcExitCodes(t *testing.T) {
	var out, errb bytes.Buffer
	code, err := Run(context.Background(), Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, Stdout: &out, Stderr: &errb})
	if err != nil || code != 3 || out.String() != "out\n" || errb.String() != "err\n" {
		t.Fatalf("code=%d err=%v out=%q err=%q", code, err, out.String(), errb.String())
	}
	code, err = Run(context.Background(), Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "kill -TERM $$"}})
	if err != nil || code != 128+int(syscall.SIGTERM) {
		t.Fatalf("signalled: code=%d err=%v", code, err)
	}
	if _, err := Run(context.Background(), Spec{Path: "/nonexistent/prog", Args: []string{"prog"}}); err == nil {
		t.Fatal("a missing program must fail to start")
	}
}

// TestRunProcKillsTheGroup: a timed-out program with background children
// returns within the deadline + 1 s and leaves no process behind.
func TestRunProcKillsTheGroup(t *testing.T) {
	dir := t.TempDir()
	pidfile := dir + "/pids"
	script := "sleep 60 & echo $! >> " + pidfile + "; (sleep 60; echo never) & echo $! >> " + pidfile + "; sleep 60"
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	box := sandbox.Spec{Write: []string{dir}, Exec: sandbox.ExecClosure([]string{"/bin/sleep"}, nil)}
	_, err := Run(ctx, Spec{Path: "/bin/sh", Args: []string{"sh", "-c", script}, Stdout: &bytes.Buffer{}, Box: box})
	if !errors.Is(err, ErrKilled) {
		t.Fatalf("want errProcKilled, got %v", err)
	}
	if d := time.Since(start); d > 300*time.Millisecond+time.Second {
		t.Fatalf("returned after %v", d)
	}
	tooltest.AssertGone(t, pidfile)

	// A program that exits normally leaves its background children to be killed too.
	pidfile2 := dir + "/pids2"
	code, err := Run(context.Background(), Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "sleep 60 & echo $! >> " + pidfile2 + "; exit 0"}, Stdout: &bytes.Buffer{}, Box: box})
	if err != nil || code != 0 {
		t.Fatalf("code=%d err=%v", code, err)
	}
	tooltest.AssertGone(t, pidfile2)
}

func TestCappedBuffer(t *testing.T) {
	c := &CappedBuffer{Max: 10}
	for i := 0; i < 100; i++ {
		c.Write([]byte("0123456789"))
	}
	if !c.Truncated() || !strings.HasPrefix(c.String(), "0123456789\n… [truncated: 10 of 1000 bytes kept]") {
		t.Fatalf("%q", c.String())
	}
	var flood bytes.Buffer
	capped := &CappedBuffer{Max: 1 << 10}
	// The flood is ended once it overflowed the cap, not at a deadline:
	// a start slower than the deadline (a loaded machine) left nothing
	// written ("flood not capped: 0 bytes").
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, _ = Run(ctx, Spec{Path: "/usr/bin/yes", Args: []string{"yes"}, Stdout: cancelOnTruncate{capped, cancel}, Stderr: &flood})
	if !capped.Truncated() || len(capped.String()) > 2<<10 {
		t.Fatalf("flood not capped: %d bytes", len(capped.String()))
	}
}

// cancelOnTruncate writes to c and calls cancel once c has dropped output.
type cancelOnTruncate struct {
	c      *CappedBuffer
	cancel func()
}

func (w cancelOnTruncate) Write(p []byte) (int, error) {
	n, err := w.c.Write(p)
	if w.c.Truncated() {
		w.cancel()
	}
	return n, err
}
