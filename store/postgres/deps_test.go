package postgres_test

import (
	"testing"

	"github.com/wardenrt/warden/internal/archtest"
)

// The PostgreSQL store is a store: it knows the store contract and pgx,
// nothing of the runtime or the commands above it.
func TestDependencyDirection(t *testing.T) {
	archtest.Forbid(t, "github.com/wardenrt/warden/store/postgres",
		"github.com/wardenrt/warden/runtime", "github.com/wardenrt/warden/cmd", "github.com/wardenrt/warden/builtin",
		"github.com/wardenrt/warden/hostfuncs", "github.com/urfave/cli")
}
