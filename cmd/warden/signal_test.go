//go:build unix

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wardenrt/warden/internal/wasmfixture"
)

// lockedBuffer is a bytes.Buffer safe to read while a process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stopped is what became of a warden process sent signals.
type stopped struct {
	code     int
	stderr   string
	took     time.Duration // from the first signal to the end of the process
	children []int         // its descendants when the signal was sent
}

// signalWarden starts warden, waits until ready says it is where the test
// wants it (polled; given the process and its stderr so far), sends the
// signals (a second one 20 ms after the first when there are two) and
// waits for the process to end.
func signalWarden(t *testing.T, home, ws string, ready func(pid int, stderr string) bool, sigs []syscall.Signal, args ...string) stopped {
	t.Helper()
	bin, err := exec.LookPath("warden") // this test binary as warden (TestMain)
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd := exec.Command(bin, append([]string{"--home", home, "--workspace", ws}, args...)...)
	cmd.Env = append(os.Environ(), "WARDEN_POLICY=", "WARDEN_APPROVE=", "WARDEN_LOG_LEVEL=debug")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	for !ready(cmd.Process.Pid, stderr.String()) {
		select {
		case <-exited:
			t.Fatalf("warden ended before the signal: %s", stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	s := stopped{children: descendants(cmd.Process.Pid)}
	start := time.Now()
	for i, sig := range sigs {
		if i > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("warden did not stop in 30 s: %s", stderr.String())
	}
	s.took, s.code, s.stderr = time.Since(start), cmd.ProcessState.ExitCode(), stderr.String()
	return s
}

// descendants lists pid's descendants, from /proc.
func descendants(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, _, ok := procStat(p); ok {
			parent[p] = pp
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// procStat is a process's parent and state, from /proc/PID/stat.
func procStat(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, 0, false
	}
	pp, _ := strconv.Atoi(f[1])
	return pp, f[0][0], true
}

// alive reports whether pid runs (a zombie has ended).
func alive(pid int) bool {
	_, state, ok := procStat(pid)
	return ok && state != 'Z' && state != 'X'
}

// checkStopped: warden ended with 128+signal within a second of the
// first signal, left no process behind, and the audit log verifies.
func checkStopped(t *testing.T, s stopped, sig syscall.Signal, home, ws string) {
	t.Helper()
	t.Logf("stopped %v after the signal, exit %d; %s", s.took.Round(time.Millisecond), s.code, lastLine(s.stderr))
	if s.code != 128+int(sig) {
		t.Errorf("exit %d, want %d\nstderr: %s", s.code, 128+int(sig), s.stderr)
	}
	if s.took >= time.Second {
		t.Errorf("took %v to stop", s.took)
	}
	deadline := time.Now().Add(2 * time.Second)
	for _, p := range s.children {
		for alive(p) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(p) {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
			t.Errorf("process %d (%q) outlived warden", p, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
	if r := runWarden(t, home, ws, nil, "audit", "verify"); r.code != 0 {
		t.Errorf("audit verify after the signal: %s%s", r.stdout, r.stderr)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestSignalsEndWardenAtOnce: SIGTERM (or SIGINT) ends warden within a
// second whatever it is doing — running a program, waiting for another
// process's store lock, installing
// a 60 MB module — with no process left behind and an audit log that
// verifies; a second signal ends it at once. (Parsing is no longer a slow
// path to signal: every file warden did not write is refused past its
// budget before it is parsed — TestHostileCorpus — and a workflow with
// all it includes is held to 40,000 YAML tokens, some 0.1 s of CPU.)
func TestSignalsEndWardenAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts long-running warden processes")
	}
	t.Run("a shell program", func(t *testing.T) {
		home, ws := t.TempDir(), t.TempDir()
		writeFile(t, filepath.Join(home, "policy.yaml"), "version: 1\ngrants: [\"exec:sleep\", \"fs.read:**\"]\nrules:\n  - {tool: shell, action: allow}\n")
		marker := "3600.25"
		ready := func(pid int, _ string) bool {
			for _, p := range descendants(pid) {
				if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); bytes.Contains(b, []byte(marker)) && bytes.HasPrefix(b, []byte("sleep")) {
					return true
				}
			}
			return false
		}
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
			s := signalWarden(t, home, ws, ready, []syscall.Signal{sig}, "call", "shell", "--args", `{"command":"sleep `+marker+`"}`)
			if len(s.children) == 0 {
				t.Fatal("no program was running")
			}
			checkStopped(t, s, sig, home, ws)
		}
		// The call is on record: its intent, and its result (cancelled).
		r := runWarden(t, home, ws, nil, "audit", "ls", "--tool", "shell")
		if strings.Count(r.stdout, "shell") < 2 {
			t.Errorf("audit ls: %s", r.stdout)
		}
	})
	t.Run("waiting for the store lock", func(t *testing.T) {
		home, ws := t.TempDir(), t.TempDir()
		if r := runWarden(t, home, ws, nil, "audit", "verify"); r.code != 0 {
			t.Fatal(r.stderr)
		}
		f, err := os.OpenFile(filepath.Join(home, "warden.db"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		ready := func(_ int, stderr string) bool { return strings.Contains(stderr, "opening the store") }
		s := signalWarden(t, home, ws, ready, []syscall.Signal{syscall.SIGTERM}, "--lock-timeout", "10m", "call", "system", "--args", `{"operation":"get_info"}`)
		f.Close() // releases the lock
		checkStopped(t, s, syscall.SIGTERM, home, ws)
	})
	t.Run("installing a 60 MB module", func(t *testing.T) {
		mod := sixtyMB(t)
		for _, sigs := range [][]syscall.Signal{{syscall.SIGTERM}, {syscall.SIGTERM, syscall.SIGTERM}} {
			home, ws := t.TempDir(), t.TempDir()
			// Once the module is staged in <home>/tools, it is being
			// checked and compiled.
			ready := func(int, string) bool {
				staged, _ := filepath.Glob(filepath.Join(home, "tools", ".install.*.big.wasm.tmp"))
				return len(staged) > 0
			}
			s := signalWarden(t, home, ws, ready, sigs, "tool", "install", mod, "--name", "big")
			checkStopped(t, s, syscall.SIGTERM, home, ws)
			// Stopped by itself, the install removes what it staged;
			// ended, it may leave it, and the next start removes it.
			// Either way no module is there.
			left, _ := filepath.Glob(filepath.Join(home, "tools", "*big.*"))
			if strings.HasSuffix(strings.TrimSpace(s.stderr), "USER_CANCELLED: cancelled") && len(left) > 0 {
				t.Errorf("a cancelled install left %v", left)
			}
			if r := runWarden(t, home, ws, nil, "tool", "ls"); r.code != 0 || strings.Contains(r.stdout, "big") {
				t.Errorf("tool ls after the signal: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if left, _ := filepath.Glob(filepath.Join(home, "tools", "*big.*")); len(left) > 0 {
				t.Errorf("the next start left %v", left)
			}
		}
	})
}

// sixtyMB is a valid module of 60 MB: the textstats example with a custom
// section making up the rest.
func sixtyMB(t *testing.T) string {
	p := wasmfixture.Stage(t, "examples/textstats", "big", false)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	const size = 60 << 20
	payload := size - len(b) - 16
	name := "padding"
	b = append(b, 0) // a custom section
	for n := uint64(1 + len(name) + payload); ; {
		c := byte(n & 0x7f)
		if n >>= 7; n != 0 {
			b = append(b, c|0x80)
			continue
		}
		b = append(b, c)
		break
	}
	b = append(b, byte(len(name)))
	b = append(b, name...)
	b = append(b, make([]byte, payload)...)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
