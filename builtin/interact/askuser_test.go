//go:build linux

package interact

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

const askPolicy = "version: 1\ngrants: [user.ask]\n"

// askPTY is a real pseudo-terminal: the tool gets the tty side, the test
// types on the master side and reads back what the terminal shows.
type askPTY struct {
	master, tty *os.File
	mu          sync.Mutex
	screen      bytes.Buffer
}

func newAskPTY(t *testing.T) *askPTY {
	t.Helper()
	pm, s, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	// pty.Open leaves the master in blocking mode, where Close cannot
	// interrupt a Read; a non-blocking duplicate goes through the runtime
	// poller, so closing it really hangs the terminal up.
	mfd, err := unix.Dup(int(askFd(t, pm)))
	if err != nil {
		t.Fatal(err)
	}
	pm.Close()
	if err := unix.SetNonblock(mfd, true); err != nil {
		t.Fatal(err)
	}
	m := os.NewFile(uintptr(mfd), "ptmx")
	p := &askPTY{master: m, tty: s}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			p.mu.Lock()
			p.screen.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		s.Close()
		m.Close()
		<-done
	})
	return p
}

func (p *askPTY) shown() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.screen.String()
}

// waitFor waits until the terminal has shown s at least n times. The
// deadline only turns a hang into a failure; nothing is timed.
func (p *askPTY) waitFor(t *testing.T, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(p.shown(), s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the terminal never showed %q %d time(s); it shows %q", s, n, p.shown())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (p *askPTY) termios(t *testing.T) unix.Termios {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(askFd(t, p.tty)), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return *tio
}

func askFd(t *testing.T, f *os.File) uintptr {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd uintptr
	rc.Control(func(u uintptr) { fd = u })
	return fd
}

// askStep waits for the terminal to show want (count times), then types send.
type askStep struct {
	want  string
	count int
	send  string
}

type askCallResult struct {
	res tool.Result
	err error
}

func askStart(ctx context.Context, g *gate.Gate, args string) chan askCallResult {
	ch := make(chan askCallResult, 1)
	go func() {
		res, err := g.Call(ctx, gate.Request{Tool: "ask_user", Args: json.RawMessage(args), Principal: []string{"run:test", "model"}})
		ch <- askCallResult{res, err}
	}()
	return ch
}

func askWait(t *testing.T, ch chan askCallResult) tool.Result {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.res
	case <-time.After(30 * time.Second):
		t.Fatal("ask_user did not return")
	}
	return tool.Result{}
}

func askData(t *testing.T, res tool.Result) AskUserResult {
	t.Helper()
	var d AskUserResult
	if err := json.Unmarshal(res.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestAskUserTerminal(t *testing.T) {
	cases := []struct {
		name      string
		args      string
		steps     []askStep
		code      tool.Code
		value     string
		validated bool
		defUsed   bool
		attempts  int
		shown     []string // the terminal must show these
		notShown  []string // and never these
	}{
		{name: "happy path", args: `{"prompt":"Your name?"}`,
			steps: []askStep{{"> ", 1, "Alice\r"}}, value: "Alice", attempts: 1,
			shown: []string{"[warden: run:test → model asks]", "Your name?", "Alice"}},
		{name: "line feed ends the line too", args: `{"prompt":"Your name?"}`,
			steps: []askStep{{"> ", 1, "Bob\n"}}, value: "Bob", attempts: 1},
		{name: "default on empty input", args: `{"prompt":"Port?","default":"3000"}`,
			steps: []askStep{{"> ", 1, "\r"}}, value: "3000", defUsed: true, attempts: 1, shown: []string{"default: 3000"}},
		{name: "typed value beats default", args: `{"prompt":"Port?","default":"3000"}`,
			steps: []askStep{{"> ", 1, "8080\r"}}, value: "8080", attempts: 1},
		{name: "password not echoed", args: `{"prompt":"Password?","password":true}`,
			steps: []askStep{{"(hidden) > ", 1, "hunter2-Secret\r"}}, value: "hunter2-Secret", attempts: 1,
			shown: []string{"input hidden"}, notShown: []string{"hunter2"}},
		{name: "editing keys", args: `{"prompt":"Word?"}`,
			steps: []askStep{{"> ", 1, "helpx\x7fo\r"}}, value: "helpo", attempts: 1},
		{name: "validation failure then success", args: `{"prompt":"Port?","validation":{"pattern":"^[0-9]+$"}}`,
			steps: []askStep{{"> ", 1, "abc\r"}, {"✗", 1, "123\r"}}, value: "123", validated: true, attempts: 2,
			shown: []string{"must match the pattern ^[0-9]+$", "2 attempt(s) left"}},
		{name: "allowed values", args: `{"prompt":"Continue?","validation":{"allowed_values":["yes","no"]}}`,
			steps: []askStep{{"> ", 1, "maybe\r"}, {"✗", 1, "yes\r"}}, value: "yes", validated: true, attempts: 2,
			shown: []string{"one of: yes, no"}},
		{name: "length rules", args: `{"prompt":"Code?","validation":{"min_length":3,"max_length":4}}`,
			steps: []askStep{{"> ", 1, "ab\r"}, {"✗", 1, "abcde\r"}, {"✗", 2, "abcd\r"}}, value: "abcd", validated: true, attempts: 3,
			shown: []string{"at least 3 characters", "at most 4 characters"}},
		{name: "default is validated too", args: `{"prompt":"Port?","default":"x","validation":{"pattern":"^[0-9]+$"}}`,
			steps: []askStep{{"> ", 1, "\r"}, {"✗", 1, "1\r"}}, value: "1", validated: true, attempts: 2},
		{name: "password with validation never shows the value", args: `{"prompt":"PIN?","password":true,"validation":{"pattern":"^[0-9]{4}$"}}`,
			steps: []askStep{{"(hidden) > ", 1, "abcd\r"}, {"✗", 1, "4711\r"}}, value: "4711", validated: true, attempts: 2,
			notShown: []string{"abcd", "4711"}},
		{name: "three failures", args: `{"prompt":"Port?","validation":{"pattern":"^[0-9]+$"}}`,
			steps: []askStep{{"> ", 1, "a\r"}, {"✗", 1, "b\r"}, {"✗", 2, "c\r"}}, code: tool.CodeInvalidInput},
		{name: "ctrl-c", args: `{"prompt":"Name?"}`,
			steps: []askStep{{"> ", 1, "half\x03"}}, code: tool.CodeUserCancelled},
		{name: "ctrl-c after a failed attempt", args: `{"prompt":"Port?","validation":{"pattern":"^[0-9]+$"}}`,
			steps: []askStep{{"> ", 1, "a\r"}, {"✗", 1, "\x03"}}, code: tool.CodeUserCancelled},
		{name: "eof", args: `{"prompt":"Name?"}`,
			steps: []askStep{{"> ", 1, "\x04"}}, code: tool.CodeUserCancelled},
		{name: "eof in password", args: `{"prompt":"Password?","password":true}`,
			steps: []askStep{{"(hidden) > ", 1, "\x04"}}, code: tool.CodeUserCancelled},
		{name: "hostile prompt is shown escaped", args: `{"prompt":"\u001b[2J\u001b[HApprove? [y/N]\u202e","default":"\u001b]0;x\u0007"}`,
			steps: []askStep{{"> ", 1, "y\r"}}, value: "y", attempts: 1,
			shown: []string{`\x1b[2J\x1b[HApprove? [y/N]\u202e`, `\x1b]0;x\x07`}, notShown: []string{"\x1b[2J", "\x1b]0;", "\u202e"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newAskPTY(t)
			before := p.termios(t)
			g, audit := tooltest.Gate(t, askPolicy, t.TempDir(), tool.Adapt[askArgs](&AskUser{Config: Config{TTY: p.tty}}))
			ch := askStart(context.Background(), g, tc.args)
			for _, s := range tc.steps {
				p.waitFor(t, s.want, s.count)
				p.master.Write([]byte(s.send))
			}
			res := askWait(t, ch)
			if after := p.termios(t); after != before {
				t.Errorf("the terminal was left changed: lflag %#x → %#x", before.Lflag, after.Lflag)
			}
			// Everything the tool wrote is on the screen once a sentinel
			// written after it has arrived.
			p.tty.Write([]byte("<<END>>"))
			p.waitFor(t, "<<END>>", 1)
			screen := p.shown()
			for _, s := range tc.shown {
				if !strings.Contains(screen, s) {
					t.Errorf("the terminal does not show %q: %q", s, screen)
				}
			}
			for _, s := range tc.notShown {
				if strings.Contains(screen, s) {
					t.Errorf("the terminal shows %q: %q", s, screen)
				}
			}
			if tc.code != "" {
				tooltest.Expect(t, res, tc.code)
				return
			}
			tooltest.Expect(t, res, "")
			d := askData(t, res)
			if d.Value != tc.value || d.Validated != tc.validated || d.DefaultUsed != tc.defUsed || d.Attempts != tc.attempts {
				t.Errorf("data %+v, want value %q validated %v default %v attempts %d", d, tc.value, tc.validated, tc.defUsed, tc.attempts)
			}
			if strings.Contains(tc.args, `"password":true`) {
				if !d.Sensitive || len(d.DigestSalt) != 32 {
					t.Errorf("password answer not marked: %+v", d)
				}
				if strings.Contains(res.Output, tc.value) {
					t.Errorf("password in the output: %q", res.Output)
				}
				if tooltest.Count(audit, tc.value) > 0 {
					t.Error("password in the audit log")
				}
			} else if !strings.Contains(res.Output, tc.value) {
				t.Errorf("output %q lacks the answer", res.Output)
			}
		})
	}
}

// The salt makes two identical password answers digest differently in the
// audit log, so the digest cannot be used to guess the password.
func TestAskUserPasswordDigest(t *testing.T) {
	var digests []string
	for range 2 {
		p := newAskPTY(t)
		g, audit := tooltest.Gate(t, askPolicy, t.TempDir(), tool.Adapt[askArgs](&AskUser{Config: Config{TTY: p.tty}}))
		ch := askStart(context.Background(), g, `{"prompt":"PIN?","password":true}`)
		p.waitFor(t, "> ", 1)
		p.master.Write([]byte("1234\r"))
		tooltest.Expect(t, askWait(t, ch), "")
		evs := audit.Events()
		digests = append(digests, evs[len(evs)-1].Digest)
	}
	if digests[0] == "" || digests[0] == digests[1] {
		t.Errorf("digests %q", digests)
	}
}

func TestAskUserCancel(t *testing.T) {
	cases := []struct {
		name string
		// blocking hands the tool a blocking descriptor (like os.Stdin),
		// which the runtime poller cannot interrupt.
		blocking bool
		deadline bool
		code     tool.Code
	}{
		{"context cancelled", false, false, tool.CodeUserCancelled},
		{"context cancelled, blocking descriptor", true, false, tool.CodeUserCancelled},
		{"deadline", false, true, tool.CodeTimeout},
		{"deadline, blocking descriptor", true, true, tool.CodeTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newAskPTY(t)
			tty := p.tty
			if tc.blocking {
				fd, err := unix.Dup(int(askFd(t, p.tty)))
				if err != nil {
					t.Fatal(err)
				}
				unix.SetNonblock(fd, false)
				tty = os.NewFile(uintptr(fd), "tty-dup")
				t.Cleanup(func() { tty.Close() })
			}
			before := p.termios(t)
			g, _ := tooltest.Gate(t, askPolicy, t.TempDir(), tool.Adapt[askArgs](&AskUser{Config: Config{TTY: tty}}))
			ctx, cancel := context.WithCancel(context.Background())
			if tc.deadline {
				ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
			}
			defer cancel()
			ch := askStart(ctx, g, `{"prompt":"Name?"}`)
			p.waitFor(t, "> ", 1)
			p.master.Write([]byte("typed but not finished"))
			if !tc.deadline {
				cancel()
			}
			res := askWait(t, ch)
			tooltest.Expect(t, res, tc.code)
			if after := p.termios(t); after != before {
				t.Errorf("the terminal was left in raw mode: lflag %#x → %#x", before.Lflag, after.Lflag)
			}
			// No goroutine is left reading: the next question gets the
			// next keystrokes whole.
			ch = askStart(context.Background(), g, `{"prompt":"Again?"}`)
			p.waitFor(t, "Again?", 1)
			p.waitFor(t, "> ", 2)
			p.master.Write([]byte("ok\r"))
			res = askWait(t, ch)
			tooltest.Expect(t, res, "")
			if d := askData(t, res); !strings.HasSuffix(d.Value, "ok") {
				t.Errorf("second answer %q", d.Value)
			}
		})
	}
}

func TestAskUserTerminalGone(t *testing.T) {
	p := newAskPTY(t)
	g, _ := tooltest.Gate(t, askPolicy, t.TempDir(), tool.Adapt[askArgs](&AskUser{Config: Config{TTY: p.tty}}))
	ch := askStart(context.Background(), g, `{"prompt":"Name?"}`)
	p.waitFor(t, "> ", 1)
	p.master.Close() // hang-up
	tooltest.Expect(t, askWait(t, ch), tool.CodeUserCancelled)
}

func TestAskUserNoTerminal(t *testing.T) {
	regular, err := os.CreateTemp(t.TempDir(), "answers")
	if err != nil {
		t.Fatal(err)
	}
	regular.WriteString("yes\n")
	regular.Seek(0, 0)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close() // never written: reading it would hang
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	for _, tc := range []struct {
		name string
		tty  *os.File
	}{{"nil", nil}, {"regular file", regular}, {"pipe", pr}, {"dev null", devnull}} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := tooltest.Gate(t, askPolicy, t.TempDir(), tool.Adapt[askArgs](&AskUser{Config: Config{TTY: tc.tty}}))
			res := askWait(t, askStart(context.Background(), g, `{"prompt":"Name?"}`))
			tooltest.Expect(t, res, tool.CodeUserCancelled)
			if !strings.Contains(res.Error.Hint, "terminal") {
				t.Errorf("hint %q", res.Error.Hint)
			}
		})
	}
}

func TestAskUserGate(t *testing.T) {
	t.Run("separate output writer", func(t *testing.T) {
		p := newAskPTY(t)
		var out bytes.Buffer
		var mu sync.Mutex
		g, _ := tooltest.Gate(t, askPolicy, t.TempDir(), tool.Adapt[askArgs](&AskUser{Config: Config{TTY: p.tty, Out: askLockedWriter{&mu, &out}}}))
		ch := askStart(context.Background(), g, `{"prompt":"Name?"}`)
		deadline := time.Now().Add(20 * time.Second)
		for {
			mu.Lock()
			ready := strings.Contains(out.String(), "> ")
			mu.Unlock()
			if ready {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no prompt on Out")
			}
			time.Sleep(2 * time.Millisecond)
		}
		p.master.Write([]byte("Carol\r"))
		tooltest.Expect(t, askWait(t, ch), "")
		if strings.Contains(p.shown(), "Name?") {
			t.Error("the prompt went to the tty instead of Out")
		}
	})
	t.Run("no grant", func(t *testing.T) {
		p := newAskPTY(t)
		g, _ := tooltest.Gate(t, "version: 1\n", t.TempDir(), tool.Adapt[askArgs](&AskUser{Config: Config{TTY: p.tty}}))
		res := askWait(t, askStart(context.Background(), g, `{"prompt":"Name?"}`))
		tooltest.Expect(t, res, tool.CodeCapabilityDenied)
		if !slices.Contains(res.Error.Missing, "user.ask") || p.shown() != "" {
			t.Errorf("missing %q, terminal shows %q", res.Error.Missing, p.shown())
		}
	})
	t.Run("invalid input", func(t *testing.T) {
		p := newAskPTY(t)
		g, _ := tooltest.Gate(t, askPolicy, t.TempDir(), tool.Adapt[askArgs](&AskUser{Config: Config{TTY: p.tty}}))
		for _, args := range []string{
			`{}`, `{"prompt":""}`, `{"prompt":"   "}`, `{"prompt":"x","validation":{"pattern":"("}}`,
			`{"prompt":"x","validation":{"min_length":5,"max_length":2}}`, `{"prompt":"x","validation":{"regex":"a"}}`,
			`{"prompt":"x","timeout":5}`, `{"prompt":"x","password":"yes"}`,
		} {
			res := askWait(t, askStart(context.Background(), g, args))
			tooltest.Expect(t, res, tool.CodeInvalidInput)
		}
		if p.shown() != "" {
			t.Errorf("an invalid call prompted: %q", p.shown())
		}
	})
	t.Run("dry run asks nothing", func(t *testing.T) {
		p := newAskPTY(t)
		ws := t.TempDir()
		g, _ := tooltest.Gate(t, askPolicy, ws, tool.Adapt[askArgs](&AskUser{Config: Config{TTY: p.tty}}))
		before := tooltest.TreeChecksum(t, ws)
		res := tooltest.CallReq(t, g, gate.Request{Tool: "ask_user", Args: json.RawMessage(`{"prompt":"Deploy?","default":"no"}`), Principal: []string{"test"}, DryRun: true})
		tooltest.Expect(t, res, "")
		if !res.DryRun || !strings.Contains(res.Output, "would ask") || !strings.Contains(res.Output, "Deploy?") {
			t.Errorf("preview %q", res.Output)
		}
		if p.shown() != "" || tooltest.TreeChecksum(t, ws) != before {
			t.Errorf("dry run prompted %q or changed the workspace", p.shown())
		}
	})
	t.Run("dry run without terminal warns", func(t *testing.T) {
		g, _ := tooltest.Gate(t, askPolicy, t.TempDir(), tool.Adapt[askArgs](&AskUser{}))
		res := tooltest.CallReq(t, g, gate.Request{Tool: "ask_user", Args: json.RawMessage(`{"prompt":"Deploy?"}`), Principal: []string{"test"}, DryRun: true})
		tooltest.Expect(t, res, "")
		if !strings.Contains(strings.Join(res.Warnings, " "), "USER_CANCELLED") {
			t.Errorf("warnings %v", res.Warnings)
		}
	})
	t.Run("secrets in arguments and answer", func(t *testing.T) {
		p := newAskPTY(t)
		g, audit := tooltest.Gate(t, askPolicy, t.TempDir(), tool.Adapt[askArgs](&AskUser{Config: Config{TTY: p.tty}}))
		ch := askStart(context.Background(), g, fmt.Sprintf(`{"prompt":"Is %s your token?","default":"%s"}`, tooltest.Canary, tooltest.Canary))
		p.waitFor(t, "> ", 1)
		p.master.Write([]byte(tooltest.Canary + "\r"))
		res := askWait(t, ch)
		tooltest.Expect(t, res, "")
		tooltest.AssertNoSecret(t, res, audit, tooltest.Canary)
	})
}

type askLockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w askLockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
