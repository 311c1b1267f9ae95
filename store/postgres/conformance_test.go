package postgres_test

import (
	"context"
	"os"
	"testing"

	"github.com/wardenrt/warden/store/postgres"
	"github.com/wardenrt/warden/store/postgres/pgtest"
	"github.com/wardenrt/warden/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

var ctx = context.Background()

// newDB makes a migrated database on the shared server and returns its
// superuser URL.
func newDB(t testing.TB) (*pgtest.Server, string, string) {
	t.Helper()
	srv := pgtest.Shared(t, pgtest.Config{})
	db := srv.Database(t)
	url := srv.URL(db)
	if _, err := postgres.Migrate(ctx, url, nil); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return srv, db, url
}

// openStore opens a store on url with its anchors in dir; on cleanup it
// closes it, reopens it and verifies the audit log.
func openStore(t testing.TB, url, dir string, opts *postgres.Options) *postgres.Store {
	t.Helper()
	var o postgres.Options
	if opts != nil {
		o = *opts
	}
	o.AnchorDir = dir
	s, err := postgres.Open(ctx, url, &o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		s, err := postgres.Open(ctx, url, &o)
		if err != nil {
			t.Errorf("reopening: %v", err)
			return
		}
		defer s.Close()
		if rep, err := s.VerifyAudit(ctx); err != nil {
			t.Errorf("audit log does not verify on cleanup: %v (%+v)", err, rep)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Backend {
		_, _, url := newDB(t)
		return openStore(t, url, t.TempDir(), nil)
	})
}
