package decode

import (
	"testing"

	"github.com/wardenrt/warden/internal/archtest"
)

// TestDependencyDirection: decode is a leaf — every loader can use it,
// and it knows none of them.
func TestDependencyDirection(t *testing.T) {
	archtest.Forbid(t, "github.com/wardenrt/warden/runtime/decode",
		"github.com/wardenrt/warden/runtime", "github.com/wardenrt/warden/store", "github.com/wardenrt/warden/cmd",
		"github.com/wardenrt/warden/builtin", "github.com/wardenrt/warden/hostfuncs")
}
