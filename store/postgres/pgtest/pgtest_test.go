package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

func TestServer(t *testing.T) {
	s := Shared(t, Config{})
	db := s.Database(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.URL(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var fsync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil || fsync != "off" {
		t.Errorf("fsync = %q, %v; want off", fsync, err)
	}
}
