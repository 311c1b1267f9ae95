package shell

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wardenrt/warden/builtin/internal/proc"
	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/sandbox/sandboxtest"
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
	// The same through the small launcher (cmd/warden-sandbox), which an
	// installed warden finds beside its binary, and so through the pool of
	// launchers it starts ahead of need (sandbox.Pooled). A tight loop
	// like this one is bound by how fast the pool refills (a launcher's
	// start, and for root its pids cgroup, behind each program).
	smallLauncher := func(b *testing.B, pause time.Duration) {
		p, done, err := sandboxtest.Launcher()
		if err != nil {
			b.Fatal(err)
		}
		defer done()
		defer sandbox.UseLauncher(p)()
		box := sandbox.Spec{Read: []string{tooltest.WS(b)}}
		run := func() {
			if code, err := proc.Run(context.Background(), proc.Spec{Path: "/bin/true", Args: []string{"true"}, Box: box}); err != nil || code != 0 {
				b.Fatal(code, err)
			}
		}
		run() // the pool starts with the first program
		var took []time.Duration
		for b.Loop() {
			if pause > 0 {
				// A script's own work between its programs, not timed.
				b.StopTimer()
				time.Sleep(pause)
				b.StartTimer()
			}
			t0 := time.Now()
			run()
			took = append(took, time.Since(t0))
		}
		// The median start, beside the mean: on a shared machine a few
		// starts that wait for the CPU weigh on the mean.
		slices.Sort(took)
		b.Logf("median start %v of %d", took[len(took)/2], len(took))
	}
	b.Run("runProc-small-launcher", func(b *testing.B) { smallLauncher(b, 0) })
	// The same with 5 ms between programs (a script's work), in which the
	// pool refills.
	b.Run("runProc-small-launcher-paced", func(b *testing.B) { smallLauncher(b, 5*time.Millisecond) })
	// Each iteration starts /bin/true with exec.Command and then through
	// the pool, 5 ms apart, and logs the median of each and their ratio:
	// on a machine shared with other work the two sides then meet the
	// same moments, where separate sub-benchmarks do not.
	b.Run("runProc-small-launcher-interleaved", func(b *testing.B) {
		p, done, err := sandboxtest.Launcher()
		if err != nil {
			b.Fatal(err)
		}
		defer done()
		defer sandbox.UseLauncher(p)()
		box := sandbox.Spec{Read: []string{tooltest.WS(b)}}
		run := func() {
			if code, err := proc.Run(context.Background(), proc.Spec{Path: "/bin/true", Args: []string{"true"}, Box: box}); err != nil || code != 0 {
				b.Fatal(code, err)
			}
		}
		run()
		var direct, pooled []time.Duration
		for b.Loop() {
			b.StopTimer()
			time.Sleep(5 * time.Millisecond)
			t0 := time.Now()
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
			direct = append(direct, time.Since(t0))
			time.Sleep(5 * time.Millisecond)
			b.StartTimer()
			t0 = time.Now()
			run()
			pooled = append(pooled, time.Since(t0))
		}
		slices.Sort(direct)
		slices.Sort(pooled)
		d, q := direct[len(direct)/2], pooled[len(pooled)/2]
		b.Logf("interleaved medians of %d: exec.Command %v, through the pool %v (%.1f×)", len(direct), d, q, float64(q)/float64(d))
	})
	// The same without the pool: a launcher started for each program.
	b.Run("runProc-small-launcher-nopool", func(b *testing.B) {
		defer sandbox.NoPool()()
		smallLauncher(b, 0)
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
	benchCallIn(b, tooltest.WS(b), args, "fs.read:**", "exec:true")
}

// BenchmarkShellGitConfig: what listing the repository's git configuration
// costs a call whose programs may run git (exec:git granted), in one run:
// the same call in a workspace without .git, in a repository, and in a
// repository with no git granted (not listed).
func BenchmarkShellGitConfig(b *testing.B) {
	tooltest.GitBinary(b)
	repo := tooltest.GitFixture(b)
	tooltest.WriteFile(b, filepath.Join(repo, ".git", "config.extra"), "[filter \"x\"]\n\tclean = c\n", 0o644)
	tooltest.GitPlain(b, repo, "config", "include.path", "config.extra")
	b.Run("no-repo", func(b *testing.B) {
		benchCallIn(b, tooltest.WS(b), `{"command":"/bin/true"}`, "fs.read:**", "fs.write:**", "exec:true", "exec:git")
	})
	b.Run("repo", func(b *testing.B) {
		benchCallIn(b, repo, `{"command":"/bin/true"}`, "fs.read:**", "fs.write:**", "exec:true", "exec:git")
	})
	b.Run("repo-git-not-granted", func(b *testing.B) {
		benchCallIn(b, repo, `{"command":"/bin/true"}`, "fs.read:**", "fs.write:**", "exec:true")
	})
}

func benchCallIn(b *testing.B, ws, args string, grants ...string) {
	g, _ := tooltest.ShellGate(b, tool.Adapt[Args](&Shell{}), ws, grants...)
	req := gate.Request{Tool: "shell", Args: json.RawMessage(args), Principal: []string{"bench"}}
	for b.Loop() {
		res, err := g.Call(context.Background(), req)
		if err != nil || !res.Success {
			b.Fatal(err, res.Error)
		}
	}
}
