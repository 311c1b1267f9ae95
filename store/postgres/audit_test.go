package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/wardenrt/warden/store"
	"github.com/wardenrt/warden/store/postgres"
	"github.com/wardenrt/warden/store/postgres/pgtest"
)

// appRole creates a login role for warden and grants it what warden needs
// (Migrate's GrantTo); it returns the role's URL of db.
func appRole(t *testing.T, srv *pgtest.Server, db string) string {
	t.Helper()
	role := "warden_" + db
	if err := srv.Exec(ctx, "postgres", "CREATE ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
		srv.Exec(ctx, "postgres", "DROP ROLE IF EXISTS "+role)
	})
	if _, err := postgres.Migrate(ctx, srv.URL(db), &postgres.MigrateOptions{GrantTo: role}); err != nil {
		t.Fatal(err)
	}
	return srv.URLAs(role, "", db)
}

func exec(t *testing.T, url, sql string, args ...any) error {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func appendN(t *testing.T, s store.Backend, n int, format string) {
	t.Helper()
	for i := range n {
		if _, err := s.AppendAudit(ctx, json.RawMessage(fmt.Sprintf(format, i))); err != nil {
			t.Fatal(err)
		}
	}
}

// The role warden connects as can append but cannot change or remove a
// record; the superuser is stopped by the trigger; a superuser who turns
// the trigger off is caught by verify.
func TestAuditAppendOnly(t *testing.T) {
	srv, db, admin := newDB(t)
	app := appRole(t, srv, db)
	dir := t.TempDir()
	s := openStore(t, app, dir, &postgres.Options{Host: "host-a"})
	appendN(t, s, 10, `{"tool":"fs.read","i":%d}`)

	for _, sql := range []string{
		`UPDATE warden.audit SET event = '{"tool":"nothing"}' WHERE seq = 3`,
		`DELETE FROM warden.audit WHERE seq = 10`,
		`TRUNCATE warden.audit`,
		`UPDATE warden.audit_anchors SET seq = 0`, // allowed: its own row is the role's to move…
	} {
		err := exec(t, app, sql)
		if strings.HasPrefix(sql, "UPDATE warden.audit_anchors") {
			if err != nil {
				t.Errorf("the warden role moving an anchor row: %v", err)
			}
			continue
		}
		if pgCode(err) != "42501" {
			t.Errorf("as the warden role, %s: %v; want permission denied (42501)", sql, err)
		}
	}
	// …but a row moved back is still checked: verify walks every row
	// against the chain, and an anchor behind the head verifies.
	for _, sql := range []string{
		`UPDATE warden.audit SET event = '{"tool":"nothing"}' WHERE seq = 3`,
		`DELETE FROM warden.audit WHERE seq = 10`,
		`TRUNCATE warden.audit`,
	} {
		err := exec(t, admin, sql)
		if err == nil || !strings.Contains(err.Error(), "cannot be changed or removed") {
			t.Errorf("as the superuser, %s: %v; want the trigger's refusal", sql, err)
		}
	}
	// Inserting around the head is refused: no gap, no fork.
	for _, sql := range []string{
		`INSERT INTO warden.audit VALUES (12, '2024-01-01T00:00:00Z', repeat('a', 64), repeat('b', 64), '{}')`,
		`INSERT INTO warden.audit SELECT 11, ts, prev_hash, hash, event FROM warden.audit WHERE seq = 5`,
	} {
		if err := exec(t, admin, sql); err == nil {
			t.Errorf("%s succeeded", sql)
		}
	}
	if rep, err := s.VerifyAudit(ctx); err != nil || rep.Records != 10 || rep.AnchorSeq != 10 {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}

	// A superuser rewrites record 4 with the trigger off.
	if err := exec(t, admin, `BEGIN; SET LOCAL session_replication_role = replica;
		UPDATE warden.audit SET event = convert_to('{"tool":"fs.read","i":99}', 'UTF8') WHERE seq = 4; COMMIT`); err != nil {
		t.Fatal(err)
	}
	rep, err := s.VerifyAudit(ctx)
	if !errors.Is(err, store.ErrTampered) || rep.FirstBad != 4 {
		t.Errorf("after a superuser's edit: VerifyAudit = %+v, %v; want ErrTampered at record 4", rep, err)
	}
	// Put it back (the hash proves it is the same record), then cut the
	// tail off and move the head back: the anchors catch it.
	if err := exec(t, admin, `BEGIN; SET LOCAL session_replication_role = replica;
		UPDATE warden.audit SET event = convert_to('{"tool":"fs.read","i":3}', 'UTF8') WHERE seq = 4;
		DELETE FROM warden.audit WHERE seq > 7;
		UPDATE warden.audit_head SET seq = 7, hash = (SELECT hash FROM warden.audit WHERE seq = 7); COMMIT`); err != nil {
		t.Fatal(err)
	}
	rep, err = s.VerifyAudit(ctx)
	if !errors.Is(err, store.ErrTampered) || rep.FirstBad != 8 || !strings.Contains(rep.Reason, "names record 10") {
		t.Errorf("after the tail was cut: VerifyAudit = %+v, %v; want ErrTampered at 8 (the anchor names 10)", rep, err)
	}
	// A store opened now refuses to append (this host's anchor is ahead).
	s2, err := postgres.Open(ctx, app, &postgres.Options{AnchorDir: dir, Host: "host-a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.AppendAudit(ctx, json.RawMessage(`{"a":1}`)); !errors.Is(err, store.ErrTampered) {
		t.Errorf("append to a cut log: %v, want ErrTampered", err)
	}
	// The owner looks, accepts the log as it is, and appends again.
	if rep, err := s2.Reanchor(ctx); err != nil || rep.AnchorSeq != 7 {
		t.Fatalf("Reanchor = %+v, %v", rep, err)
	}
	if seq, err := s2.AppendAudit(ctx, json.RawMessage(`{"a":1}`)); err != nil || seq != 8 {
		t.Errorf("append after Reanchor = %d, %v", seq, err)
	}
	s2.Close()
	s.Reanchor(ctx)
}

// A host whose anchor row is ahead of the log (the database was restored
// from an older copy) is caught by verify on any other host.
func TestAuditEveryHostsAnchorIsChecked(t *testing.T) {
	_, _, url := newDB(t)
	a := openStore(t, url, t.TempDir(), &postgres.Options{Host: "host-a"})
	b := openStore(t, url, t.TempDir(), &postgres.Options{Host: "host-b"})
	appendN(t, a, 5, `{"i":%d}`)
	appendN(t, b, 5, `{"i":%d}`)
	if _, err := b.VerifyAudit(ctx); err != nil { // waits for b's anchor
		t.Fatal(err)
	}
	if rep, err := a.VerifyAudit(ctx); err != nil || rep.Records != 10 {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}
	hosts, err := a.HostAnchors(ctx)
	if err != nil || len(hosts) != 2 || hosts[0].Host != "host-a" || hosts[0].Seq != 5 || hosts[1].Host != "host-b" || hosts[1].Seq != 10 {
		t.Fatalf("HostAnchors = %+v, %v", hosts, err)
	}
	// host-b's anchor names a record with another hash.
	if err := exec(t, url, `UPDATE warden.audit_anchors SET hash = repeat('c', 64) WHERE host = 'host-b'`); err != nil {
		t.Fatal(err)
	}
	rep, err := a.VerifyAudit(ctx)
	if !errors.Is(err, store.ErrTampered) || rep.FirstBad != 10 || !strings.Contains(rep.Reason, "host host-b") {
		t.Errorf("VerifyAudit on host-a = %+v, %v; want host-b's anchor reported", rep, err)
	}
	if _, err := b.Reanchor(ctx); err != nil {
		t.Fatal(err)
	}
}

// Many writers on many "hosts" (stores with their own anchors) append to
// one chain at once: gapless, no fork, each host's anchor at its last
// record.
func TestAuditManyHosts(t *testing.T) {
	_, _, url := newDB(t)
	const hosts, writers, each = 4, 4, 25
	stores := make([]*postgres.Store, hosts)
	for h := range hosts {
		stores[h] = openStore(t, url, t.TempDir(), &postgres.Options{Host: fmt.Sprintf("h%d", h)})
	}
	var wg sync.WaitGroup
	got := make([][]uint64, hosts*writers)
	for h, s := range stores {
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					seq, err := s.AppendAudit(ctx, json.RawMessage(fmt.Sprintf(`{"h":%d,"w":%d,"i":%d}`, h, w, i)))
					if err != nil {
						t.Error(err)
						return
					}
					got[h*writers+w] = append(got[h*writers+w], seq)
				}
			})
		}
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, ss := range got {
		for _, seq := range ss {
			if seen[seq] {
				t.Errorf("seq %d given twice", seq)
			}
			seen[seq] = true
		}
	}
	const total = hosts * writers * each
	if len(seen) != total {
		t.Errorf("%d distinct seqs, want %d", len(seen), total)
	}
	rep, err := stores[0].VerifyAudit(ctx)
	if err != nil || rep.Records != total || rep.HeadSeq != total {
		t.Errorf("VerifyAudit = %+v, %v", rep, err)
	}
}

func TestOpenErrors(t *testing.T) {
	srv := pgtest.Shared(t, pgtest.Config{})
	db := srv.Database(t)
	_, err := postgres.Open(ctx, srv.URL(db), &postgres.Options{AnchorDir: t.TempDir()})
	if !errors.Is(err, postgres.ErrSchema) || !strings.Contains(err.Error(), "warden store migrate") {
		t.Errorf("Open of a database without the schema: %v; want ErrSchema naming migrate", err)
	}
	// Migrating is idempotent and safe from several hosts at once.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := postgres.Migrate(ctx, srv.URL(db), nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	res, err := postgres.Migrate(ctx, srv.URL(db), nil)
	if err != nil || res.From != postgres.SchemaVersion || res.To != postgres.SchemaVersion || len(res.Applied) != 0 || res.StoreID == "" {
		t.Errorf("Migrate again = %+v, %v", res, err)
	}

	// Nobody listens: unavailable, quickly, and the password never shows.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	t0 := time.Now()
	_, err = postgres.Open(ctx, "postgres://warden:s3cret-pw@"+addr+"/warden?connect_timeout=1", &postgres.Options{AnchorDir: t.TempDir(), Timeout: time.Second})
	if !errors.Is(err, store.ErrUnavailable) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open with nobody listening: %v; want ErrUnavailable without the password", err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("Open with nobody listening took %v", d)
	}
	// A server that accepts and never answers: bounded by the timeout.
	l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = postgres.Open(c, "postgres://warden@"+l.Addr().String()+"/warden?connect_timeout=1", &postgres.Options{AnchorDir: t.TempDir(), Timeout: time.Second})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Open against a silent server: %v; want ErrUnavailable", err)
	}
	if _, err := postgres.Open(ctx, "mysql://nope", &postgres.Options{AnchorDir: t.TempDir()}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Open of a bad URL: %v", err)
	}
}
