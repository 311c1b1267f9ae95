package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/wardenrt/warden/internal/wasmfixture"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/store/postgres/pgtest"
)

var update = flag.Bool("update", false, "rewrite the golden files of the scripts under testdata/script")

func TestMain(m *testing.M) {
	// The programs the tests start (and those of `warden` in the scripts)
	// are started through this binary: it is their sandbox launcher.
	if sandbox.Main() {
		return
	}
	// The scripts' (and the wasm tests') `warden` is this binary running
	// main: the same start-up as the real command.
	// The PostgreSQL servers the fleet tests start are stopped after the
	// tests.
	testscript.Main(pgM{m}, map[string]func(){"warden": main, "peakrss": peakRSSMain})
}

type pgM struct{ m *testing.M }

func (p pgM) Run() int { return pgtest.Run(p.m) }

// TestScripts runs the CLI scripts under testdata/script. Each script gets
// its own home and workspace.
func TestScripts(t *testing.T) {
	goEnv := goEnvironment(t)
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Cmds: map[string]func(*testscript.TestScript, bool, []string){
			"tamper": cmdTamper, "serve": cmdServe, "buildwasm": cmdBuildWasm(t), "wasmsection": cmdWasmSection,
			"setenvfrom": cmdSetenvFrom,
		},
		// [landlock6]: Landlock ABI 6 or later here; [namespaces]: programs
		// can get namespaces of their own (both as warden detects them).
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "landlock6":
				return sandbox.Detect().ABI >= 6, nil
			case "namespaces":
				return sandbox.Detect().Namespaces, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Setup: func(env *testscript.Env) error {
			env.Setenv("WARDEN_HOME", filepath.Join(env.WorkDir, ".home"))
			env.Setenv("WARDEN_WORKSPACE", env.WorkDir)
			env.Setenv("WARDEN_LOCK_TIMEOUT", "2s")
			// For `warden tool build`: the go command with the caches of
			// the go test that runs the scripts (testscript sets HOME to
			// /no-home), and the wasm-tools sources.
			for k, v := range goEnv {
				env.Setenv(k, v)
			}
			env.Setenv("WASMTOOLS", wasmfixture.Root(t))
			return nil
		},
	})
}

// goEnvironment is the go command's cache and proxy settings, so that `go
// build` works in a script as it does for the test.
func goEnvironment(t *testing.T) map[string]string {
	out := map[string]string{}
	keys := []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOPROXY", "GOFLAGS", "GOTOOLCHAIN", "GONOSUMDB", "GOSUMDB", "GOPRIVATE"}
	b, err := exec.Command("go", append([]string{"env"}, keys...)...).Output()
	if err != nil {
		t.Logf("go env: %v (tool build scripts may fail)", err)
		return out
	}
	for i, v := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if i < len(keys) && v != "" {
			out[keys[i]] = v
		}
	}
	return out
}

// cmdBuildWasm is `buildwasm DIR OUT [command]`: it builds the guest in
// wasm-tools/DIR (e.g. examples/textstats) from source — cached across test
// binaries by internal/wasmfixture — and copies it to OUT in the script's
// work directory, with the sidecar wasm-tools/DIR/*.tool.yaml copied beside
// it as OUT's base name + .tool.yaml. Scripts using it start with
// `[short] skip`.
func cmdBuildWasm(t *testing.T) func(*testscript.TestScript, bool, []string) {
	return func(ts *testscript.TestScript, neg bool, args []string) {
		if neg {
			ts.Fatalf("unsupported: ! buildwasm")
		}
		if len(args) < 2 || len(args) > 3 || (len(args) == 3 && args[2] != "command") {
			ts.Fatalf("usage: buildwasm DIR OUT [command]")
		}
		tb := &scriptTB{TB: t, ts: ts}
		src := wasmfixture.Path(tb, args[0], len(args) == 3)
		b, err := os.ReadFile(src)
		ts.Check(err)
		out := ts.MkAbs(args[1])
		ts.Check(os.MkdirAll(filepath.Dir(out), 0o755))
		ts.Check(os.WriteFile(out, b, 0o644))
		sidecars, err := filepath.Glob(filepath.Join(wasmfixture.Root(tb), filepath.FromSlash(args[0]), "*.tool.yaml"))
		ts.Check(err)
		for _, sc := range sidecars {
			b, err := os.ReadFile(sc)
			ts.Check(err)
			ts.Check(os.WriteFile(strings.TrimSuffix(out, ".wasm")+".tool.yaml", b, 0o644))
		}
	}
}

// scriptTB lets internal/wasmfixture, which reports through a testing.TB,
// fail the script rather than the test from the script's goroutine.
type scriptTB struct {
	testing.TB
	ts *testscript.TestScript
}

func (s *scriptTB) Helper()                           {}
func (s *scriptTB) Fatal(args ...any)                 { s.ts.Fatalf("%s", strings.TrimSpace(fmt.Sprintln(args...))) }
func (s *scriptTB) Fatalf(format string, args ...any) { s.ts.Fatalf(format, args...) }
func (s *scriptTB) Skip(args ...any) {
	s.ts.Fatalf("skipped: %s (start the script with `[short] skip`)", strings.TrimSpace(fmt.Sprintln(args...)))
}
func (s *scriptTB) Skipf(format string, args ...any) { s.ts.Fatalf("skipped: "+format, args...) }

// cmdWasmSection is `wasmsection FILE`: it appends a custom section
// to a wasm module — still a valid module that does the same, but not the
// bytes that were approved.
func cmdWasmSection(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: wasmsection FILE")
	}
	f, err := os.OpenFile(ts.MkAbs(args[0]), os.O_APPEND|os.O_WRONLY, 0)
	ts.Check(err)
	defer f.Close()
	// Section id 0 (custom), size 3, name "x" (length 1), one byte of
	// content (wazero refuses an empty one).
	_, err = f.Write([]byte{0, 3, 1, 'x', 'y'})
	ts.Check(err)
}

// cmdSetenvFrom is `setenvfrom VAR stdout|stderr REGEXP`: it sets VAR to
// the first submatch of REGEXP in the last command's stdout or stderr (a
// run id a later command needs).
func cmdSetenvFrom(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 || (args[1] != "stdout" && args[1] != "stderr") {
		ts.Fatalf("usage: setenvfrom VAR stdout|stderr REGEXP")
	}
	m := regexp.MustCompile(args[2]).FindStringSubmatch(ts.ReadFile(args[1]))
	if len(m) < 2 {
		ts.Fatalf("setenvfrom: %q not found in %s", args[2], args[1])
	}
	ts.Setenv(args[0], m[1])
}
