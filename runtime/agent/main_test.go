package agent_test

import (
	"os"
	"testing"

	"github.com/wardenrt/warden/runtime/sandbox"
)

// TestMain: the agent's shell tool starts programs through this test
// binary, which is their sandbox launcher.
func TestMain(m *testing.M) {
	if sandbox.Main() {
		return
	}
	os.Exit(m.Run())
}
