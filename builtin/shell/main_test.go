package shell

import (
	"os"
	"testing"

	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/sandbox/sandboxtest"
)

// TestMain: the programs the tests start (through the shell tool) are started
// through this test binary, which is their sandbox launcher (or, with
// WARDEN_TEST_LAUNCHER=small, the small launcher: sandboxtest).
func TestMain(m *testing.M) {
	if sandbox.Main() {
		return
	}
	os.Exit(sandboxtest.Run(m, sandbox.UseLauncher))
}
