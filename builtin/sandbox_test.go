//go:build unix

package builtin

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenrt/warden/builtin/git"
	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/builtin/shell"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/tool"
)

// needLandlock skips a test that needs Landlock ABI abi, saying why.
func needLandlock(t *testing.T, abi int) {
	t.Helper()
	if s := sandbox.Detect(); s.ABI < abi {
		t.Skipf("this kernel offers Landlock ABI %d (%s); the test needs ABI %d", s.ABI, s.Why, abi)
	}
}

// sandboxWorld is a workspace with inside/a.txt, and a directory outside
// it with secret.txt.
func sandboxWorld(t *testing.T) (ws, outside string) {
	ws = tooltest.WS(t)
	outside = tooltest.WS(t)
	tooltest.WriteFile(t, filepath.Join(ws, "inside", "a.txt"), "inside text\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(outside, "secret.txt"), "TOP-SECRET\n", 0o644)
	return ws, outside
}

// wantDenied: the command failed as a program does when the kernel says no.
func wantDenied(t *testing.T, res tool.Result, what string) {
	t.Helper()
	d := tooltest.Decode[shell.Result](t, res)
	if tooltest.Code(res) != tool.CodeCommandFailed || !strings.Contains(d.Stderr, "Permission denied") || strings.Contains(d.Stdout, "TOP-SECRET") {
		t.Errorf("%s: %+v stdout %q stderr %q", what, res.Error, d.Stdout, d.Stderr)
	}
}

// TestSandboxFilesystem: with exec:cat, reading inside the fs.read scopes
// works and outside them fails with permission denied; with exec:sh, a
// shell script is confined the same way, for reads and writes; writing
// outside the fs.write scopes fails. The result and the audit record name
// the sandbox.
func TestSandboxFilesystem(t *testing.T) {
	needLandlock(t, 1)
	ws, outside := sandboxWorld(t)
	secret, target := filepath.Join(outside, "secret.txt"), filepath.Join(outside, "written")

	g, audit := tooltest.ShellGate(t, tool.Adapt[shell.Args](&shell.Shell{}), ws, "fs.read:**", "fs.write:inside/**", "exec:cat", "exec:sh", "exec:cp")
	res := tooltest.ShellDo(t, g, map[string]any{"command": "cat inside/a.txt"})
	if !res.Success || tooltest.Decode[shell.Result](t, res).Stdout != "inside text\n" {
		t.Fatalf("cat inside: %+v", res.Error)
	}
	level := sandbox.Detect().Level()
	if res.Sandbox != level || tooltest.Count(audit, `"sandbox":"`+level+`"`) != 1 {
		t.Errorf("sandbox %q in the result, %d audit records say %s", res.Sandbox, tooltest.Count(audit, `"sandbox":"`+level+`"`), level)
	}
	wantDenied(t, tooltest.ShellDo(t, g, map[string]any{"command": "cat " + secret}), "cat outside")
	wantDenied(t, tooltest.ShellDo(t, g, map[string]any{"command": "sh -c 'cat " + secret + "'"}), "sh -c cat outside")
	wantDenied(t, tooltest.ShellDo(t, g, map[string]any{"command": "sh -c 'echo x > " + target + "'"}), "sh -c write outside")
	wantDenied(t, tooltest.ShellDo(t, g, map[string]any{"command": "cp inside/a.txt " + target}), "cp outside")
	if _, err := os.Stat(target); err == nil {
		t.Fatal("a write outside the fs.write scopes happened")
	}
	// Inside, the same script works.
	res = tooltest.ShellDo(t, g, map[string]any{"command": "sh -c 'cat inside/a.txt; echo new > inside/b.txt'"})
	if !res.Success {
		t.Fatalf("sh -c inside: %+v", res.Error)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "inside", "b.txt")); err != nil || string(b) != "new\n" {
		t.Fatalf("inside/b.txt: %q %v", b, err)
	}
	// Read-only scopes stay read-only; the home directory is not reached.
	g, _ = tooltest.ShellGate(t, tool.Adapt[shell.Args](&shell.Shell{}), ws, "fs.read:**", "exec:sh", "exec:ls")
	wantDenied(t, tooltest.ShellDo(t, g, map[string]any{"command": "sh -c 'echo x > inside/c.txt'"}), "write under fs.read only")
	if home, err := os.UserHomeDir(); err == nil {
		d := tooltest.Decode[shell.Result](t, tooltest.ShellDo(t, g, map[string]any{"command": "sh -c 'ls " + home + "; echo HOME=$HOME'"}))
		if !strings.Contains(d.Stderr, "Permission denied") || !strings.Contains(d.Stdout, "HOME="+sandbox.NoHome) {
			t.Errorf("home: %+v", d)
		}
	}
}

// TestSandboxTCP: a TCP connection to a local listener fails without a
// net grant and with a grant for another port, and succeeds with one for
// its address and port — with namespaces through the bridge warden makes
// for it (nothing reaches the listener otherwise: the connection is
// refused inside the program's network namespace); without, Landlock
// refuses every port but the granted ones (as it does, with namespaces,
// for a call without net grants, whose programs need no network
// namespace).
func TestSandboxTCP(t *testing.T) {
	needLandlock(t, 4)
	for _, ns := range []bool{true, false} {
		t.Run(fmt.Sprintf("namespaces=%v", ns), func(t *testing.T) {
			if ns && !sandbox.Detect().Namespaces {
				t.Skipf("no namespaces here: %s", sandbox.Detect().NamespacesWhy)
			}
			if !ns {
				defer sandbox.SimulateNoNamespaces()()
			}
			rec := newRecordingListener(t, "tcp", "127.0.0.1:0")
			port := rec.port()
			ws := tooltest.WS(t)
			cmd := fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && echo connected'", port)
			refused := func(res tool.Result, what string, netNS bool) {
				t.Helper()
				d := tooltest.Decode[shell.Result](t, res)
				want := "Permission denied"
				if netNS {
					want = "Connection refused"
				}
				if tooltest.Code(res) != tool.CodeCommandFailed || !strings.Contains(d.Stderr, want) {
					t.Errorf("%s: %+v %+v", what, res.Error, d)
				}
			}
			g, _ := tooltest.ShellGate(t, tool.Adapt[shell.Args](&shell.Shell{}), ws, "fs.read:**", "exec:bash")
			// Without a net grant no network namespace is needed: Landlock
			// refuses every TCP connect, seccomp every other socket.
			refused(tooltest.ShellDo(t, g, map[string]any{"command": cmd}), "connect without a net grant", false)
			g, _ = tooltest.ShellGate(t, tool.Adapt[shell.Args](&shell.Shell{}), ws, "fs.read:**", "exec:bash", fmt.Sprintf("net:127.0.0.1:%d", port+1))
			refused(tooltest.ShellDo(t, g, map[string]any{"command": cmd}), "connect with a grant for another port", ns)
			if n := rec.count(); n != 0 {
				t.Fatalf("%d connections arrived", n)
			}
			g, _ = tooltest.ShellGate(t, tool.Adapt[shell.Args](&shell.Shell{}), ws, "fs.read:**", "exec:bash", fmt.Sprintf("net:127.0.0.1:%d", port))
			if res := tooltest.ShellDo(t, g, map[string]any{"command": cmd}); !res.Success || !strings.Contains(tooltest.Decode[shell.Result](t, res).Stdout, "connected") {
				t.Fatalf("connect with the grant: %+v %+v", res.Error, tooltest.Decode[shell.Result](t, res))
			}
		})
	}
}

// TestSandboxGitStatus: git_status still works on the workspace's
// repository, under the sandbox.
func TestSandboxGitStatus(t *testing.T) {
	needLandlock(t, 1)
	ws := tooltest.GitFixture(t)
	runtimetest.WriteFile(t, ws, "a.txt", "changed\n")
	g, _ := tooltest.Gate(t, "version: 1\ngrants: [\"git.read\"]\n", ws, git.Tools(git.Config{})...)
	res := tooltest.Call(t, g, "git_status", `{}`)
	if !res.Success || !strings.Contains(res.Output, "a.txt") || res.Sandbox != sandbox.Detect().Level() {
		t.Fatalf("git_status: %+v %q sandbox %q", res.Error, res.Output, res.Sandbox)
	}
}

// limitsGate is a shell gate whose rule sets resource limits.
func limitsGate(t *testing.T, ws, limits string, grants ...string) *gate.Gate {
	t.Helper()
	policy := "version: 1\ngrants: [" + `"fs.read:**"`
	for _, g := range grants {
		policy += fmt.Sprintf(", %q", g)
	}
	policy += "]\nrules:\n  - { tool: shell, action: allow, limits: " + limits + " }\n"
	g, _ := tooltest.Gate(t, policy, ws, tool.Adapt[shell.Args](&shell.Shell{}))
	return g
}

// TestSandboxLimits: a CPU-bound program stops at its CPU limit, a fork
// loop at its process limit, a memory hog at its address-space limit —
// each with RESOURCE_LIMIT naming the limit, and no process left.
func TestSandboxLimits(t *testing.T) {
	if how, ok := sandbox.ProcessLimit(); !ok {
		t.Skipf("the process limit is not held on this machine: %s", how)
	}
	ws := tooltest.WS(t)
	marker := fmt.Sprintf("200.%09d", time.Now().UnixNano()%1_000_000_000)
	for _, tc := range []struct {
		name, limits, command, want string
		grants                      []string
	}{
		{"cpu", "{cpu_seconds: 1}", "sh -c 'while :; do :; done'", "CPU time limit (1 s)", []string{"exec:sh"}},
		{"fork loop in a program", "{processes: 16}", "sh -c 'while :; do sleep " + marker + " & done'", "process limit (16)", []string{"exec:sh", "exec:sleep"}},
		{"fork loop in the command", "{processes: 16}", "while :; do sleep " + marker + " & done", "process limit", []string{"exec:sleep"}},
		{"memory", "{address_space_mb: 256}", `perl -e '$x = "a" x (2**31); print length $x'`, "address space limit (256 MiB)", []string{"exec:perl"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := limitsGate(t, ws, tc.limits, tc.grants...)
			start := time.Now()
			res := tooltest.ShellDo(t, g, map[string]any{"command": tc.command, "timeout_ms": 20000})
			if tooltest.Code(res) != tool.CodeResourceLimit || !strings.Contains(res.Error.Message, tc.want) {
				t.Fatalf("after %v: %+v %+v", time.Since(start), res.Error, tooltest.Decode[shell.Result](t, res))
			}
			if left := tooltest.ProcsWith(marker); len(left) > 0 {
				t.Errorf("processes left: %q", left)
			}
		})
	}
}

// TestSandboxUnavailable: on a kernel without Landlock (simulated), a
// program still runs, its result and audit record say "none"; with
// require_sandbox in the policy it does not run, and the refusal says why.
func TestSandboxUnavailable(t *testing.T) {
	defer sandbox.SimulateABI(0)()
	ws, outside := sandboxWorld(t)
	g, audit := tooltest.ShellGate(t, tool.Adapt[shell.Args](&shell.Shell{}), ws, "fs.read:**", "exec:cat")
	res := tooltest.ShellDo(t, g, map[string]any{"command": "cat " + filepath.Join(outside, "secret.txt")})
	if !res.Success || res.Sandbox != sandbox.LevelOff || tooltest.Count(audit, `"sandbox":"off"`) != 1 {
		t.Fatalf("without Landlock: %+v sandbox %q", res.Error, res.Sandbox)
	}
	p := "version: 1\nrequire_sandbox: true\ngrants: [\"fs.read:**\", \"exec:sh\"]\nrules:\n  - { tool: shell, action: allow }\n"
	g, _ = tooltest.Gate(t, p, ws, tool.Adapt[shell.Args](&shell.Shell{}))
	res = tooltest.ShellDo(t, g, map[string]any{"command": "sh -c 'echo ran > inside/ran.txt'"})
	if tooltest.Code(res) != tool.CodePolicyDenied || !strings.Contains(res.Error.Message, "requires a sandbox") || !strings.Contains(res.Error.Message, "off") {
		t.Fatalf("require_sandbox: %+v", res.Error)
	}
	if _, err := os.Stat(filepath.Join(ws, "inside", "ran.txt")); err == nil {
		t.Fatal("the program ran")
	}
	// git under require_sandbox too.
	gws := tooltest.GitFixture(t)
	gp := "version: 1\nrequire_sandbox: true\ngrants: [\"fs.read:**\", \"git.read\"]\n"
	gg, _ := tooltest.Gate(t, gp, gws, git.Tools(git.Config{})...)
	if res := tooltest.Call(t, gg, "git_status", `{}`); tooltest.Code(res) != tool.CodePolicyDenied {
		t.Fatalf("git_status under require_sandbox: %+v", res.Error)
	}
}

// listen serves network addr until the test ends: each connection gets
// reply, then is closed.
func listen(t *testing.T, network, addr, reply string) net.Listener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(reply))
			c.Close()
		}
	}()
	return ln
}

// recordingListener accepts connections (TCP) or datagrams (UDP) and
// counts them and the bytes that arrive.
type recordingListener struct {
	mu    sync.Mutex
	n     int
	bytes []byte
	addr  net.Addr
}

func newRecordingListener(t *testing.T, network, addr string) *recordingListener {
	t.Helper()
	r := &recordingListener{}
	switch network {
	case "udp", "udp4", "udp6":
		pc, err := net.ListenPacket(network, addr)
		if err != nil {
			t.Skipf("listen %s %s: %v", network, addr, err)
		}
		t.Cleanup(func() { pc.Close() })
		r.addr = pc.LocalAddr()
		go func() {
			buf := make([]byte, 65536)
			for {
				n, _, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				r.mu.Lock()
				r.n++
				r.bytes = append(r.bytes, buf[:n]...)
				r.mu.Unlock()
			}
		}()
	default:
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Skipf("listen %s %s: %v", network, addr, err)
		}
		t.Cleanup(func() { ln.Close() })
		r.addr = ln.Addr()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				r.mu.Lock()
				r.n++
				r.mu.Unlock()
				go func() {
					defer c.Close()
					c.SetReadDeadline(time.Now().Add(2 * time.Second))
					b, _ := io.ReadAll(c)
					r.mu.Lock()
					r.bytes = append(r.bytes, b...)
					r.mu.Unlock()
				}()
			}
		}()
	}
	return r
}

func (r *recordingListener) port() int {
	switch a := r.addr.(type) {
	case *net.TCPAddr:
		return a.Port
	case *net.UDPAddr:
		return a.Port
	}
	return 0
}

func (r *recordingListener) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}
