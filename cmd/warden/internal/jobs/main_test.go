package jobs

import (
	"os"
	"testing"

	"github.com/wardenrt/warden/store/postgres/pgtest"
)

// TestMain stops the PostgreSQL server BenchmarkJobClaim starts.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
