//go:build unix

package main

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/wardenrt/warden/internal/llmtest"
)

// TestRunOnATerminal runs `warden run` with a real pseudo-terminal as its
// stdin and stderr: a spinner shows while the model takes its time, the
// shell call the default policy requires approval for is asked about, the
// answer "a" approves it, and the next shell call of the run is approved
// without asking again. The model's text goes to stdout.
func TestRunOnATerminal(t *testing.T) {
	pm, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	// A non-blocking duplicate of the master goes through the runtime
	// poller, so closing it ends the reader below.
	mfd, err := unix.Dup(int(pm.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	pm.Close()
	if err := unix.SetNonblock(mfd, true); err != nil {
		t.Fatal(err)
	}
	master := os.NewFile(uintptr(mfd), "ptmx")
	var mu sync.Mutex
	var screen bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	shown := func() string {
		mu.Lock()
		defer mu.Unlock()
		return screen.String()
	}
	t.Cleanup(func() {
		tty.Close()
		master.Close()
		<-done
	})

	srv := llmtest.New(t,
		llmtest.Step{Delay: 800 * time.Millisecond, Content: "Checking.", ToolCalls: []llmtest.ToolCall{{Name: "shell", Arguments: `{"command":"sleep 0"}`}}},
		llmtest.Step{ToolCalls: []llmtest.ToolCall{{Name: "shell", Arguments: `{"command":"sleep 0"}`}}},
		llmtest.Step{Content: "Both ran."},
	)
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("WARDEN_MODEL", "scripted")
	t.Setenv("WARDEN_APPROVE", "")

	// Answer the approval prompt when it shows.
	go func() {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if strings.Contains(shown(), "[a]lways for the rest of this run") {
				master.Write([]byte("a\n"))
				return
			}
		}
	}()
	var out bytes.Buffer
	home, ws := t.TempDir(), t.TempDir()
	code := run([]string{"warden", "--home", home, "--workspace", ws, "--grant", "exec:sleep", "run", "run sleep twice"}, tty, &out, tty)
	if code != 0 {
		t.Fatalf("exit %d; the terminal showed:\n%s", code, shown())
	}
	if out.String() != "Checking.\nBoth ran.\n" {
		t.Errorf("stdout %q", out.String())
	}
	// What warden wrote last may still be on its way through the
	// terminal: wait for it (the deadline only turns a hang into a
	// failure; nothing is timed).
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !strings.Contains(shown(), " succeeded after "); {
		time.Sleep(10 * time.Millisecond)
	}
	scr := shown()
	for _, want := range []string{"waiting for the model", "wants to call shell", "approved for the rest of this run", " succeeded after 3 step(s), 2 tool call(s)"} {
		if !strings.Contains(scr, want) {
			t.Errorf("the terminal did not show %q:\n%s", want, scr)
		}
	}
	if n := strings.Count(scr, "Approve?"); n != 1 {
		t.Errorf("asked %d times:\n%s", n, scr)
	}
}
