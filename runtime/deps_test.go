package runtime

import (
	"testing"

	"github.com/wardenrt/warden/internal/archtest"
)

func TestDependencyDirection(t *testing.T) {
	archtest.Forbid(t, "github.com/wardenrt/warden/runtime",
		"github.com/wardenrt/warden/store", "github.com/wardenrt/warden/cmd", "github.com/wardenrt/warden/builtin",
		"github.com/wardenrt/warden/hostfuncs", "go.etcd.io/bbolt", "github.com/urfave/cli")
}

// TestNoCLIFlags: no string or comment under runtime/ or builtin/ names a
// flag of warden's command line; errors carry the missing grants and the
// approval needed, and each front end words the hint for its reader.
func TestNoCLIFlags(t *testing.T) {
	archtest.NoWords(t, archtest.CLIFlags, ".", "../builtin")
}
