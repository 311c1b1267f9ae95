package gate

import (
	"testing"

	"github.com/wardenrt/warden/internal/archtest"
)

// TestDependencyDirection: the gate and the tool contract below it never
// import what is built on them; the contract never imports the gate.
func TestDependencyDirection(t *testing.T) {
	for _, pkg := range []string{"github.com/wardenrt/warden/runtime/gate", "github.com/wardenrt/warden/runtime/tool"} {
		archtest.Forbid(t, pkg,
			"github.com/wardenrt/warden/store", "github.com/wardenrt/warden/cmd", "github.com/wardenrt/warden/builtin",
			"github.com/wardenrt/warden/hostfuncs", "go.etcd.io/bbolt", "github.com/urfave/cli")
	}
	archtest.Forbid(t, "github.com/wardenrt/warden/runtime/tool", "github.com/wardenrt/warden/runtime/gate",
		"github.com/wardenrt/warden/runtime/agent", "github.com/wardenrt/warden/runtime/workflow", "github.com/wardenrt/warden/runtime/wasmtool",
		"github.com/wardenrt/warden/runtime/sandbox") // the contract names resource limits, not the sandbox
}

// TestNoCLIFlags: no string or comment under runtime/ or builtin/ names a
// flag of warden's command line; errors carry the missing grants and the
// approval needed, and each front end words the hint for its reader.
func TestNoCLIFlags(t *testing.T) {
	archtest.NoWords(t, archtest.CLIFlags, "..", "../../builtin")
}

// TestGateStateStaysInGate: the gate's side of a call (its arguments as
// the policy judges them, the run-time rule checker, the reported
// programs, the run's vault) and the originals the vault keeps are set and
// read by the gate alone. A tool that called these could switch off the
// policy's run-time checks or unmask a secret; only runtime/gate (and the
// contract that declares them) may name them.
func TestGateStateStaysInGate(t *testing.T) {
	archtest.NoWordsOutside(t, []string{".SetChecker(", ".SetArgs(", ".SetVault(", ".Reported()", ".Decoded()",
		".Admit(", ".Original()", ".Literal()", ".FilesOf("}, "../..", "runtime/gate", "runtime/tool")
}
