package sandbox

import (
	"errors"

	"github.com/wardenrt/warden/runtime/sandbox/sandboxtest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestMain: the tests start programs through this binary, which acts as
// the launcher only because it calls Main first (or, with
// WARDEN_TEST_LAUNCHER=small, through the small launcher: sandboxtest).
func TestMain(m *testing.M) {
	if Main() {
		return
	}
	os.Exit(sandboxtest.Run(m, UseLauncher))
}

func TestLevels(t *testing.T) {
	for _, tc := range []struct {
		abi  int
		ns   bool
		want string
	}{{0, true, LevelOff}, {0, false, LevelOff}, {3, true, LevelPartial}, {5, false, LevelPartial}, {6, false, LevelFallback}, {7, false, LevelFallback}, {6, true, LevelFull}, {7, true, LevelFull}} {
		if got := (Support{ABI: tc.abi, Namespaces: tc.ns}).Level(); got != tc.want {
			t.Errorf("ABI %d namespaces %v: %s, want %s", tc.abi, tc.ns, got, tc.want)
		}
	}
	real := Detect()
	restore := SimulateABI(0)
	if s := Detect(); s.ABI != 0 || s.Level() != LevelOff || (real.ABI > 0 && !s.Simulated) {
		t.Errorf("simulated: %+v", s)
	}
	restore()
	if Detect() != real {
		t.Errorf("not restored: %+v", Detect())
	}
}

// TestNoMain: in a binary that did not call Main, Command refuses rather
// than re-executing a binary that would not act as the launcher (a test
// binary would run its tests again). Outside Linux there is no launcher
// and nothing to refuse.
func TestNoMain(t *testing.T) {
	mainCalled.Store(false)
	defer mainCalled.Store(true)
	_, err := Command("/bin/true", []string{"true"}, nil, Spec{})
	if LimitsHeld() != errors.Is(err, errNoMain) {
		t.Fatalf("launcher %v: %v", LimitsHeld(), err)
	}
}

// TestDirectCommand: where there is no launcher (every system but
// Linux), the program is started itself, in a process group of its own,
// with the program's environment (warden's sandbox variables and the
// proxy variables dropped), and the level it reports is off. The path
// runs here too, on a Linux, to be tested.
func TestDirectCommand(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip(err)
	}
	restore := SimulateABI(0)
	defer restore()
	sup := Detect()
	spec := Spec{Proxy: "http://127.0.0.1:9"}
	spec.Env = programEnv([]string{"A=1", "HOME=/home/x", EnvSimulateABI + "=0", "HTTPS_PROXY=http://elsewhere"}, spec, false)
	l := directCommand(sh, []string{"sh", "-c", "echo $0 $A $HTTPS_PROXY $" + EnvSimulateABI}, spec, sup.Level())
	if l.Level != LevelOff || l.Path != sh || l.ExtraFiles != nil {
		t.Fatalf("%+v", l)
	}
	if ls, err := l.Listeners(); ls != nil || err != nil {
		t.Fatalf("listeners %v %v", ls, err)
	}
	cmd := exec.Command(l.Path)
	cmd.Args, cmd.Env, cmd.SysProcAttr = l.Args, l.Env, l.SysProcAttr
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "sh 1 http://127.0.0.1:9" {
		t.Fatalf("%v %q", err, out)
	}
	if !slices.Contains(l.Env, "A=1") || !slices.Contains(l.Env, "HOME=/home/x") || slices.ContainsFunc(l.Env, func(kv string) bool { return strings.HasPrefix(kv, "WARDEN_SANDBOX_") }) {
		t.Fatalf("env %q", l.Env)
	}
}
