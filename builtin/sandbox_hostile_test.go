//go:build linux

package builtin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/builtin/shell"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/tool"
)

// TestSandboxHostile: what a command could try to get out of its
// sandbox. Each case must fail the way a denied program fails, with the
// secret nowhere in the result.
func TestSandboxHostile(t *testing.T) {
	needLandlock(t, 6)
	ws, outside := sandboxWorld(t)
	secret := filepath.Join(outside, "secret.txt")

	t.Run("the simulation switch from the command", func(t *testing.T) {
		g, _ := tooltest.ShellGate(t, tool.Adapt[shell.Args](&shell.Shell{}), ws, "fs.read:**", "exec:cat", "env:*")
		wantDenied(t, tooltest.ShellDo(t, g, map[string]any{"command": "cat " + secret, "env": map[string]any{sandbox.EnvSimulateABI: "0"}}), "env argument")
		wantDenied(t, tooltest.ShellDo(t, g, map[string]any{"command": "export " + sandbox.EnvSimulateABI + "=0; cat " + secret}), "export")
	})
	t.Run("a descriptor warden inherited", func(t *testing.T) {
		f, err := os.Open(secret)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := unix.Dup3(int(f.Fd()), 97, 0); err != nil { // without O_CLOEXEC, as a parent might leave it
			t.Fatal(err)
		}
		defer unix.Close(97)
		g, _ := tooltest.ShellGate(t, tool.Adapt[shell.Args](&shell.Shell{}), ws, "fs.read:**", "exec:perl")
		res := tooltest.ShellDo(t, g, map[string]any{"command": `perl -e 'open(my $f, "<&=97") or die "fd 97: $!\n"; print <$f>'`})
		if d := tooltest.Decode[shell.Result](t, res); res.Success || strings.Contains(d.Stdout, "TOP-SECRET") {
			t.Fatalf("%+v %+v", res.Error, d)
		}
	})
	t.Run("no capabilities, even for root", func(t *testing.T) {
		g, _ := tooltest.ShellGate(t, tool.Adapt[shell.Args](&shell.Shell{}), ws, "fs.read:**", "fs.read:/proc/**", "fs.write:inside/**", "exec:sh", "exec:grep", "exec:mknod")
		// Capabilities belong to a thread: a launcher that dropped them
		// on one thread and executed the program from another (its
		// goroutine moved) left them all, now and then — so, many times.
		for i := 0; i < 12; i++ {
			res := tooltest.ShellDo(t, g, map[string]any{"command": "sh -c 'grep -E \"^Cap(Eff|Prm|Bnd|Amb)\" /proc/self/status'"})
			d := tooltest.Decode[shell.Result](t, res)
			if !res.Success || strings.Count(d.Stdout, "0000000000000000") != 4 {
				t.Fatalf("start %d: %+v %q", i+1, res.Error, d.Stdout)
			}
		}
		if res := tooltest.ShellDo(t, g, map[string]any{"command": "sh -c 'mknod inside/dev c 1 3'"}); res.Success {
			t.Fatal("mknod worked")
		}
	})
	t.Run("a unix socket outside", func(t *testing.T) {
		sock := filepath.Join(outside, "s.sock")
		listen(t, "unix", sock, "TOP-SECRET\n")
		g, _ := tooltest.ShellGate(t, tool.Adapt[shell.Args](&shell.Shell{}), ws, "fs.read:**", "exec:perl", "net:*")
		cmd := `perl -MIO::Socket::UNIX -e '$s = IO::Socket::UNIX->new(Peer => "` + sock + `") or die "connect: $!\n"; print <$s>'`
		wantDenied(t, tooltest.ShellDo(t, g, map[string]any{"command": cmd}), "connect to a unix socket")
	})
	t.Run("a pattern grant opens only what it matches", func(t *testing.T) {
		tooltest.WriteFile(t, filepath.Join(ws, "notes.md"), "notes\n", 0o644)
		tooltest.WriteFile(t, filepath.Join(ws, ".warden", "policy.yaml"), "version: 1\n", 0o644)
		g, _ := tooltest.ShellGate(t, tool.Adapt[shell.Args](&shell.Shell{}), ws, "fs.read:**", "fs.write:*.md", "fs.write:new.txt", "exec:sh")
		if res := tooltest.ShellDo(t, g, map[string]any{"command": "sh -c 'echo more >> notes.md'"}); !res.Success {
			t.Fatalf("writing a matching file: %+v", res.Error)
		}
		wantDenied(t, tooltest.ShellDo(t, g, map[string]any{"command": "sh -c 'echo x > .warden/policy.yaml'"}), "the policy under fs.write:*.md")
		wantDenied(t, tooltest.ShellDo(t, g, map[string]any{"command": "sh -c 'echo x > sibling.txt'"}), "a sibling of a missing exact path")
	})
	t.Run("a symlink swapped in during the call", func(t *testing.T) {
		tooltest.WriteFile(t, filepath.Join(ws, "work", "sub", "f.txt"), "f\n", 0o644)
		g, _ := tooltest.ShellGate(t, tool.Adapt[shell.Args](&shell.Shell{}), ws, "fs.read:work/sub/**", "fs.read:.", "fs.write:work/**", "exec:sh", "exec:cat", "exec:rm", "exec:ln")
		cmd := "sh -c 'rm -r work/sub && ln -s " + outside + " work/sub'; cat work/sub/secret.txt"
		wantDenied(t, tooltest.ShellDo(t, g, map[string]any{"command": cmd}), "through the swapped symlink")
	})
	t.Run("an exit status is not a signal", func(t *testing.T) {
		g, _ := tooltest.ShellGate(t, tool.Adapt[shell.Args](&shell.Shell{}), ws, "fs.read:**", "exec:sh")
		for _, code := range []string{"152", "153"} {
			if res := tooltest.ShellDo(t, g, map[string]any{"command": "sh -c 'exit " + code + "'"}); tooltest.Code(res) != tool.CodeCommandFailed {
				t.Errorf("exit %s: %+v", code, res.Error)
			}
		}
	})
}

// TestSandboxOldKernel: on Landlock ABI 1 (simulated), a call with a
// write scope is still confined (the refer right, which ABI 1 lacks, is
// not asked for), and the result says partial.
func TestSandboxOldKernel(t *testing.T) {
	needLandlock(t, 2)
	defer sandbox.SimulateABI(1)()
	ws, outside := sandboxWorld(t)
	g, _ := tooltest.ShellGate(t, tool.Adapt[shell.Args](&shell.Shell{}), ws, "fs.read:**", "fs.write:inside/**", "exec:cat", "exec:sh")
	res := tooltest.ShellDo(t, g, map[string]any{"command": "cat " + filepath.Join(outside, "secret.txt")})
	wantDenied(t, res, "read outside on ABI 1")
	if res.Sandbox != sandbox.LevelPartial {
		t.Errorf("level %q", res.Sandbox)
	}
	if res := tooltest.ShellDo(t, g, map[string]any{"command": "sh -c 'echo x > inside/b.txt'"}); !res.Success {
		t.Fatalf("write inside on ABI 1: %+v", res.Error)
	}
}
