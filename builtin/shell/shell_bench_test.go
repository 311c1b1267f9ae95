package shell

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/wardenrt/warden/builtin/internal/proc"
	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/tool"
)

// BenchmarkShellTrue compares starting /bin/true directly with running the
// shell command `true` through the gate (decode, schema, policy, static
// analysis, capabilities, audit records in memory, redaction) and the
// interpreter (exec handler, checks, proc.Run with its process group).
func BenchmarkShellTrue(b *testing.B) {
	b.Run("exec.Command", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// proc.Run: /bin/true through the sandbox launcher (warden's binary
	// re-executed: limits, Landlock, execve) with a process group: the
	// launcher's cost is this minus exec.Command.
	b.Run("runProc-sandboxed", func(b *testing.B) {
		box := sandbox.Spec{Read: []string{tooltest.WS(b)}}
		for b.Loop() {
			if code, err := proc.Run(context.Background(), proc.Spec{Path: "/bin/true", Args: []string{"true"}, Box: box}); err != nil || code != 0 {
				b.Fatal(code, err)
			}
		}
	})
	// The same without Landlock (simulated): the launcher and the limits.
	b.Run("runProc-no-landlock", func(b *testing.B) {
		defer sandbox.SimulateABI(0)()
		for b.Loop() {
			if code, err := proc.Run(context.Background(), proc.Spec{Path: "/bin/true", Args: []string{"true"}}); err != nil || code != 0 {
				b.Fatal(code, err)
			}
		}
	})
	// interp: the program true started through the gate, the interpreter,
	// the exec handler and proc.Run. The shell's builtin true starts no
	// program, so the command names the binary by path (allowed: it is the
	// same file as true on warden's PATH).
	b.Run("interp", func(b *testing.B) {
		benchCall(b, `{"command":"/bin/true"}`)
	})
	// interp-builtin: the same call running the builtin true (no process):
	// the gate's and the interpreter's own cost.
	b.Run("interp-builtin", func(b *testing.B) {
		benchCall(b, `{"command":"true"}`)
	})
}

func benchCall(b *testing.B, args string) {
	ws := tooltest.WS(b)
	g, _ := tooltest.ShellGate(b, tool.Adapt[Args](&Shell{}), ws, "fs.read:**", "exec:true")
	req := gate.Request{Tool: "shell", Args: json.RawMessage(args), Principal: []string{"bench"}}
	for b.Loop() {
		res, err := g.Call(context.Background(), req)
		if err != nil || !res.Success {
			b.Fatal(err, res.Error)
		}
	}
}
