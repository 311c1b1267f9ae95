// Package sandboxtest builds the small sandbox launcher (cmd/warden-sandbox)
// for tests, which otherwise start their programs through the test binary
// re-executed. With WARDEN_TEST_LAUNCHER=small a test package's TestMain
// runs all its tests through the small launcher (sandbox.UseLauncher), as
// an installed warden does; CI runs the sandbox's and the shell's suites
// both ways.
package sandboxtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Launcher builds cmd/warden-sandbox into a new temporary directory and
// returns its path and how to remove it.
func Launcher() (string, func(), error) {
	dir, err := os.MkdirTemp("", "warden-launcher-")
	if err != nil {
		return "", nil, err
	}
	done := func() { os.RemoveAll(dir) }
	p := filepath.Join(dir, "warden-sandbox")
	cmd := exec.Command("go", "build", "-o", p, "github.com/wardenrt/warden/cmd/warden-sandbox")
	if out, err := cmd.CombinedOutput(); err != nil {
		done()
		return "", nil, fmt.Errorf("building the launcher: %v\n%s", err, out)
	}
	return p, done, nil
}

// FromEnv builds the launcher when WARDEN_TEST_LAUNCHER is "small" and
// returns its path ("" otherwise) and how to remove it.
func FromEnv() (string, func(), error) {
	switch v := os.Getenv("WARDEN_TEST_LAUNCHER"); v {
	case "":
		return "", func() {}, nil
	case "small":
		return Launcher()
	default:
		return "", nil, fmt.Errorf("WARDEN_TEST_LAUNCHER=%q: want small or nothing", v)
	}
}

// Run runs a test binary's tests (m.Run), through the small launcher
// when WARDEN_TEST_LAUNCHER=small; use is sandbox.UseLauncher. Call it
// from TestMain after sandbox.Main.
func Run(m interface{ Run() int }, use func(path string) (restore func())) int {
	p, done, err := FromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer done()
	if p != "" {
		defer use(p)()
	}
	return m.Run()
}
