package proc

import (
	"os"
	"testing"

	"github.com/wardenrt/warden/runtime/sandbox"
)

// TestMain: the programs the tests start (through proc.Run) are started
// through this test binary, which is their sandbox launcher.
func TestMain(m *testing.M) {
	if sandbox.Main() {
		return
	}
	os.Exit(m.Run())
}
