//go:build linux

package proc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/sandbox/sandboxtest"
)

// TestRunPooled: a program started through a pre-started launcher gets
// what the call gives it and nothing of the launcher's start: its input
// (from a reader), its working directory (chosen at use, not at the
// launcher's start), and a working directory that does not exist fails
// the start as exec.Cmd's does, without running it.
func TestRunPooled(t *testing.T) {
	p, done, err := sandboxtest.Launcher()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	defer sandbox.UseLauncher(p)()
	ws := t.TempDir()
	box := sandbox.Spec{Read: []string{ws}, Write: []string{ws}, Exec: sandbox.ExecClosure([]string{"/bin/sh", "/bin/cat", "/bin/pwd"}, nil)}
	for i := range 3 { // the first starts the pool; the others come from it
		var out bytes.Buffer
		code, err := Run(context.Background(), Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "cat; pwd"}, Dir: ws,
			Stdin: strings.NewReader("in\n"), Stdout: &out, Box: box})
		if err != nil || code != 0 || out.String() != "in\n"+ws+"\n" {
			t.Fatalf("%d: %d %v %q", i, code, err, out.String())
		}
	}
	mark := filepath.Join(ws, "ran")
	_, err = Run(context.Background(), Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "touch " + mark}, Dir: filepath.Join(ws, "missing"), Box: box})
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Op != "chdir" {
		t.Fatalf("a missing working directory: %v", err)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the program ran")
	}
}

// signalWriter closes started at the first write.
type signalWriter struct {
	once    sync.Once
	started chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.started) })
	return len(p), nil
}

// TestRunPooledConcurrent: more programs started together than the pool
// holds (a command's background jobs) all start while the others still
// run: none waits for another to end to get its launcher.
func TestRunPooledConcurrent(t *testing.T) {
	p, done, err := sandboxtest.Launcher()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	defer sandbox.UseLauncher(p)()
	ws := t.TempDir()
	box := sandbox.Spec{Read: []string{ws}, Exec: sandbox.ExecClosure([]string{"/bin/sh", "/bin/sleep"}, nil)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	const n = 5
	ws0 := make([]*signalWriter, n)
	for i := range n {
		w := &signalWriter{started: make(chan struct{})}
		ws0[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = Run(ctx, Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "echo started; exec sleep 60"}, Stdout: w, Box: box})
		}()
	}
	giveUp := time.After(60 * time.Second) // not a measure: a bound on a hang
	for i, w := range ws0 {
		select {
		case <-w.started:
		case <-giveUp:
			cancel()
			wg.Wait()
			t.Fatalf("program %d of %d never started while the others ran", i, n)
		}
	}
	cancel()
	wg.Wait()
}

// TestRunPooledRelativeDir: a relative working directory is warden's
// working directory joined with it — what Run checked (os.Stat) and what
// exec.Cmd enters — for a program started through a pre-started launcher
// too, whose own working directory is /: not /tmp for "tmp".
func TestRunPooledRelativeDir(t *testing.T) {
	p, done, err := sandboxtest.Launcher()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	defer sandbox.UseLauncher(p)()
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(ws)
	box := sandbox.Spec{Read: []string{ws, "/tmp"}, Exec: sandbox.ExecClosure([]string{"/bin/sh"}, nil)}
	for i := range 3 { // the first starts the pool; the others come from it
		var out bytes.Buffer
		code, err := Run(context.Background(), Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "pwd -P"}, Dir: "tmp", Stdout: &out, Box: box})
		if want := filepath.Join(ws, "tmp") + "\n"; err != nil || code != 0 || out.String() != want {
			t.Fatalf("%d: %d %v: ran in %q, not %q", i, code, err, out.String(), want)
		}
	}
}
