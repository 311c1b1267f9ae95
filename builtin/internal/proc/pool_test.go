//go:build linux

package proc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
