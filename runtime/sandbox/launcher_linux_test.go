package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/wardenrt/warden/runtime/sandbox/sandboxtest"
)

// TestSmallLauncher: programs started through the small launcher
// (cmd/warden-sandbox) get the same sandbox — a file outside the grants is
// neither read nor written — and the launcher refuses a spec of another
// shape (another version's) without starting the program.
func TestSmallLauncher(t *testing.T) {
	if Detect().ABI == 0 {
		t.Skip("no Landlock here")
	}
	p, done, err := sandboxtest.Launcher()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	defer UseLauncher(p)()
	ws, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(argv ...string) (string, error) {
		l, err := Command(argv[0], argv, []string{"PATH=/usr/bin:/bin"}, Spec{Read: []string{ws}, Write: []string{ws}, Exec: ExecClosure([]string{argv[0]}, nil)})
		if err != nil {
			t.Fatal(err)
		}
		if l.Path != p {
			t.Fatalf("launcher %s, want %s", l.Path, p)
		}
		cmd := exec.CommandContext(context.Background(), l.Path)
		cmd.Args, cmd.Env, cmd.SysProcAttr, cmd.ExtraFiles = l.Args, l.Env, l.SysProcAttr, l.ExtraFiles
		out, err := cmd.CombinedOutput()
		l.Close()
		return string(out), err
	}
	if out, err := run("/bin/cat", secret); err == nil || strings.Contains(out, "s3cret") {
		t.Fatalf("read outside the grants: %v %q", err, out)
	}
	if out, err := run("/bin/cp", filepath.Join(ws, "nothing"), filepath.Join(outside, "x")); err == nil {
		t.Fatalf("wrote outside the grants: %q", out)
	}
	if err := os.WriteFile(filepath.Join(ws, "in"), []byte("in\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run("/bin/cat", filepath.Join(ws, "in")); err != nil || out != "in\n" {
		t.Fatalf("granted read: %v %q", err, out)
	}
	// A spec written for another layout.
	mark := filepath.Join(ws, "ran")
	cmd := exec.Command(p)
	cmd.Args = []string{"touch", launcherArg, "/usr/bin/touch", "touch", mark}
	cmd.Env = []string{specEnv + `={"abi":0,"limits":{},"env":[],"shape":"0123456789abcdef"}`}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != ExitLaunchFailed || !strings.Contains(string(out), "this launcher reads") {
		t.Fatalf("another shape: %v %s", err, out)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the program ran under a spec of another shape")
	}
}

// TestSmallLauncherChosen: warden uses the launcher beside its binary only
// when it is from the same build and only its owner can change it.
func TestSmallLauncherChosen(t *testing.T) {
	own := &debug.BuildInfo{GoVersion: "go1.26", Main: debug.Module{Path: "github.com/wardenrt/warden", Version: "v1.0.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "GOOS", Value: "linux"}},
		Deps:     []*debug.Module{{Path: "golang.org/x/sys", Version: "v0.1.0", Sum: "h1:x"}}}
	same := *own
	if !sameBuild(own, &same) {
		t.Fatal("same build refused")
	}
	for name, change := range map[string]func(b *debug.BuildInfo){
		"version": func(b *debug.BuildInfo) { b.Main.Version = "v1.0.1" },
		"revision": func(b *debug.BuildInfo) {
			b.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: "abd"}, {Key: "GOOS", Value: "linux"}}
		},
		"go":     func(b *debug.BuildInfo) { b.GoVersion = "go1.25" },
		"module": func(b *debug.BuildInfo) { b.Main.Path = "example.com/other" },
		"dep": func(b *debug.BuildInfo) {
			b.Deps = []*debug.Module{{Path: "golang.org/x/sys", Version: "v0.2.0", Sum: "h1:y"}}
		},
		"new dep": func(b *debug.BuildInfo) {
			b.Deps = append(b.Deps, &debug.Module{Path: "example.com/evil", Version: "v1"})
		},
	} {
		other := *own
		change(&other)
		if sameBuild(own, &other) {
			t.Errorf("%s: another build accepted", name)
		}
	}
	// A test binary has no launcher beside it: warden's own binary is
	// the launcher.
	if smallLauncher() != "" {
		t.Fatal("a launcher was found beside the test binary")
	}
}

// TestUseLauncherRestoresTheOuter: ending a UseLauncher gives back the
// launcher used before it, so that a test that builds its own launcher
// does not leave the tests after it in a WARDEN_TEST_LAUNCHER=small run
// on this binary re-executed (and, in proc's, off the pool).
func TestUseLauncherRestoresTheOuter(t *testing.T) {
	before := Launcher()
	outer := UseLauncher("/outer/" + LauncherName)
	inner := UseLauncher("/inner/" + LauncherName)
	inner()
	got := Launcher()
	outer()
	after := Launcher()
	if got != "/outer/"+LauncherName || after != before {
		t.Fatalf("after the inner UseLauncher ended: %q, want the outer's; after both: %q, want %q", got, after, before)
	}
}
