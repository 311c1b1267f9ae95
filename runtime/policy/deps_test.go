package policy

import (
	"testing"

	"github.com/wardenrt/warden/internal/archtest"
)

// TestDependencyDirection: the policy is below the gate that applies it,
// and below everything built on the gate.
func TestDependencyDirection(t *testing.T) {
	archtest.Forbid(t, "github.com/wardenrt/warden/runtime/policy",
		"github.com/wardenrt/warden/runtime/gate", "github.com/wardenrt/warden/runtime/agent",
		"github.com/wardenrt/warden/runtime/workflow", "github.com/wardenrt/warden/runtime/wasmtool",
		"github.com/wardenrt/warden/store", "github.com/wardenrt/warden/cmd", "github.com/wardenrt/warden/builtin",
		"github.com/wardenrt/warden/hostfuncs", "go.etcd.io/bbolt", "github.com/urfave/cli")
}
