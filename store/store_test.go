package store

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestOpenCreatesPrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home", "warden")
	path := filepath.Join(dir, "warden.db")
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	for name, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, path: 0o600, filepath.Join(dir, "audit.head"): 0o600} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s has mode %v, want %v", name, fi.Mode(), want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("store directory holds %v; want just warden.db and audit.head", names)
	}
	if _, err := Open(path, &Options{Timeout: -time.Second}); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative timeout: %v, want ErrInvalid", err)
	}
}

// TestEmptyFileBecomesAStore: a zero-length file (touch warden.db) is
// initialised like a missing one.
func TestEmptyFileBecomesAStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "warden.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if seq, err := s.AppendAudit(bg, json.RawMessage(`{}`)); err != nil || seq != 1 {
		t.Errorf("AppendAudit = %d, %v", seq, err)
	}
}

// TestLingerKeepsTheFileThenReleasesIt: the file stays locked while the
// Store lingers, and is free once it stops (Close, or Linger < 0).
func TestLingerKeepsTheFileThenReleasesIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "warden.db")
	holder, err := Open(path, &Options{Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.PutMemory(bg, "n", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, &Options{Timeout: 20 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Fatalf("Open while another Store lingers: %v, want ErrLocked", err)
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	// Generous timeouts from here on: nothing is timed. With Linger < 0
	// each Store releases the file as soon as an operation (and its
	// anchor write) ends, so the two take turns.
	s1, err := Open(path, &Options{Timeout: 10 * time.Second, Linger: -1})
	if err != nil {
		t.Fatalf("Open after the holder closed: %v", err)
	}
	defer s1.Close()
	s2, err := Open(path, &Options{Timeout: 10 * time.Second, Linger: -1})
	if err != nil {
		t.Fatalf("Open beside a Store with Linger < 0: %v", err)
	}
	defer s2.Close()
	for i := range 10 {
		s := []*Store{s1, s2}[i%2]
		if _, err := s.AppendAudit(bg, json.RawMessage(`{}`)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	// With the default linger the file is released soon after the last
	// operation: a generous timeout, nothing measured.
	s3, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if err := s3.PutMemory(bg, "n", "k", "v2"); err != nil {
		t.Fatal(err)
	}
	s4, err := Open(path, &Options{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s4.Close()
	if e, err := s4.GetMemory(bg, "n", "k"); err != nil || e.Value != "v2" {
		t.Errorf("GetMemory after the lingering Store = %+v, %v", e, err)
	}
}

// TestContextEndsTheWait: waiting for the lock obeys the context.
func TestContextEndsTheWait(t *testing.T) {
	path := filepath.Join(t.TempDir(), "warden.db")
	s, err := Open(path, &Options{Linger: -1, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	holder, err := Open(path, &Options{Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	ctx, cancel := context.WithTimeout(bg, 30*time.Millisecond)
	defer cancel()
	if _, err := s.GetMemory(ctx, "n", "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GetMemory with a context ending during the wait: %v, want DeadlineExceeded", err)
	}
	ctx, cancel = context.WithTimeout(bg, 30*time.Millisecond)
	defer cancel()
	if _, err := s.AppendAudit(ctx, json.RawMessage(`{}`)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("AppendAudit with a context ending during the wait: %v, want DeadlineExceeded", err)
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	// The withdrawn record was not written later.
	if rep, err := s.VerifyAudit(bg); err != nil || rep.Records != 0 {
		t.Errorf("VerifyAudit = %+v, %v; want an empty log", rep, err)
	}
}

func TestClosedStore(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "warden.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.AppendAudit(bg, json.RawMessage(`{}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("AppendAudit after Close: %v", err)
	}
	if _, err := s.GetMemory(bg, "n", "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("GetMemory after Close: %v", err)
	}
}

// TestCloseWaitsForAppends: appends in flight when Close is called are
// committed, not lost.
func TestCloseWaitsForAppends(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, "warden.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	results := make(chan error, n)
	for range n {
		go func() {
			_, err := s.AppendAudit(bg, json.RawMessage(`{}`))
			results <- err
		}()
	}
	closeErr := s.Close()
	ok := 0
	for range n {
		switch err := <-results; {
		case err == nil:
			ok++
		case !errors.Is(err, ErrClosed):
			t.Errorf("AppendAudit racing Close: %v", err)
		}
	}
	if closeErr != nil {
		t.Fatal(closeErr)
	}
	s = openTest(t, dir)
	rep, err := s.VerifyAudit(bg)
	if err != nil || rep.Records != uint64(ok) {
		t.Errorf("after Close: %+v, %v; want the %d acknowledged records", rep, err, ok)
	}
}

// populated returns the bytes of a store file with some of everything.
func populated(t *testing.T) []byte {
	dir := t.TempDir()
	s := openTest(t, dir)
	for i := range 300 {
		if _, err := s.AppendAudit(bg, json.RawMessage(`{"tool":"x","i":`+strconv.Itoa(i)+`}`)); err != nil {
			t.Fatal(err)
		}
	}
	entries := make([]MemoryEntry, 500)
	c := newCorpus(7, 300)
	for i := range entries {
		entries[i] = MemoryEntry{Namespace: "ns", Key: "k" + strconv.Itoa(i), Value: c.text()}
	}
	if err := s.putMemoryBatch(bg, entries); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutArtifact(bg, make([]byte, 20000)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	b, err := os.ReadFile(filepath.Join(dir, "warden.db"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDamagedFilesAreErrCorrupt damages store files in various ways: every
// outcome is an error wrapping ErrCorrupt (or, for the audit log,
// ErrTampered), never a panic or a hang.
func TestDamagedFilesAreErrCorrupt(t *testing.T) {
	good := populated(t)
	const page = 4096
	if len(good) < 20*page {
		t.Fatalf("fixture is only %d bytes", len(good))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	withBolt := func(fn func(tx *bolt.Tx) error) []byte {
		path := filepath.Join(t.TempDir(), "x.db")
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(fn); err != nil {
			t.Fatal(err)
		}
		db.Close()
		b, _ := os.ReadFile(path)
		return b
	}
	tests := []struct {
		name       string
		file       []byte
		openFails  bool // else some operation must fail
		allowEmpty bool
	}{
		{"random bytes", random(16 * page), true, false},
		{"meta pages zeroed", append(make([]byte, 2*page), good[2*page:]...), true, false},
		{"truncated inside the meta pages", good[:3000], true, false},
		{"truncated after the meta pages", good[:2*page+100], false, false},
		{"truncated to half", good[:len(good)/2], false, false},
		{"data pages garbled", append(append([]byte{}, good[:2*page]...), random(len(good)-2*page)...), false, false},
		{"pages garbled in the middle", func() []byte {
			b := append([]byte{}, good...)
			copy(b[len(b)/3:], random(len(b)/3))
			return b
		}(), false, false},
		{"a bbolt file of something else", withBolt(func(tx *bolt.Tx) error {
			_, err := tx.CreateBucket([]byte("other"))
			return err
		}), true, false},
		{"an unknown format", withBolt(func(tx *bolt.Tx) error {
			if err := initBuckets(tx); err != nil {
				return err
			}
			return tx.Bucket(bucketMeta).Put(formatKey, []byte("warden.store/v99"))
		}), true, false},
		{"a missing bucket", withBolt(func(tx *bolt.Tx) error {
			if err := initBuckets(tx); err != nil {
				return err
			}
			return tx.DeleteBucket(bucketMemIndex)
		}), true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "warden.db")
			if err := os.WriteFile(path, tc.file, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(path, &Options{Linger: -1})
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Open: %v, want ErrCorrupt", err)
				}
				if !strings.Contains(err.Error(), "backup") {
					t.Errorf("the error %q does not say what to do", err)
				}
				return
			}
			defer s.Close()
			if tc.openFails {
				t.Fatalf("Open of a file that is not a store succeeded")
			}
			errs := exercise(s)
			corrupt := 0
			for what, err := range errs {
				switch {
				case err == nil:
				case errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTampered):
					corrupt++
				default:
					t.Errorf("%s: %v, want nil, ErrCorrupt or ErrTampered", what, err)
				}
			}
			if corrupt == 0 {
				t.Errorf("no operation noticed the damage: %v", errs)
			}
			t.Logf("%d of %d operations reported the damage; VerifyAudit: %v", corrupt, len(errs), errs["VerifyAudit"])
			// The file is not left locked by a panicking bbolt.
			s2, err := Open(path, &Options{Timeout: time.Second, Linger: -1})
			if errors.Is(err, ErrLocked) {
				t.Errorf("the damaged file is still locked after the errors")
			}
			if err == nil {
				s2.Close()
			}
		})
	}
}

// exercise runs every read and a few writes, returning their errors.
func exercise(s *Store) map[string]error {
	errs := make(map[string]error)
	_, errs["VerifyAudit"] = s.VerifyAudit(bg)
	_, errs["ListAudit"] = s.ListAudit(bg, AuditFilter{})
	_, errs["ListMemory"] = s.ListMemory(bg, "", 0)
	_, errs["SearchMemory"] = s.SearchMemory(bg, MemoryQuery{Text: "ba be bi bo bu ka ke"})
	_, errs["Stats"] = s.Stats(bg)
	_, errs["ListRuns"] = s.ListRuns(bg, 0)
	_, errs["ListPins"] = s.ListPins(bg)
	errs["PutMemory"] = s.PutMemory(bg, "ns", "new", "some new text")
	_, errs["AppendAudit"] = s.AppendAudit(bg, json.RawMessage(`{"tool":"after"}`))
	_, errs["PutArtifact"] = s.PutArtifact(bg, []byte("after"))
	return errs
}

// TestArtifactContentVerified: an artifact whose bytes changed in the file
// is reported, not returned.
func TestArtifactContentVerified(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	d, err := s.PutArtifact(bg, []byte("original"))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := parseDigest(d)
	db, err := bolt.Open(filepath.Join(dir, "warden.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketArtifacts).Put(key, []byte("modified")) })
	db.Close()
	if _, err := s.Artifact(bg, d); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Artifact with changed bytes: %v, want ErrCorrupt", err)
	}
}

func TestStats(t *testing.T) {
	s := openTest(t, t.TempDir())
	for range 3 {
		s.AppendAudit(bg, json.RawMessage(`{}`))
	}
	s.PutMemory(bg, "a", "1", "x")
	s.PutMemory(bg, "b", "1", "y")
	s.PutRun(bg, "r1", json.RawMessage(`{}`))
	s.PutArtifact(bg, []byte("a"))
	s.PutArtifact(bg, []byte("a"))
	s.PutArtifact(bg, []byte("b"))
	st, err := s.Stats(bg)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := s.AuditRecord(bg, 3)
	if st.Path != s.Path() || st.SizeBytes <= 0 || st.AuditRecords != 3 || st.AuditHeadSeq != 3 || st.AuditHeadHash != rec.Hash ||
		st.MemoryEntries != 2 || st.Runs != 1 || st.Artifacts != 2 {
		t.Errorf("Stats = %+v", st)
	}
}

// TestOlderStoreGainsLaterBuckets: a store made before the grants and trust
// buckets existed opens, gets them, and keeps what it held.
func TestOlderStoreGainsLaterBuckets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "warden.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := initBuckets(tx); err != nil {
			return err
		}
		for _, b := range laterBuckets {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketPins).Put([]byte("p"), []byte(`{"a":1}`))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, &Options{Linger: -1})
	if err != nil {
		t.Fatalf("Open of an older store: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.PutGrant(ctx, "g", json.RawMessage(`{}`)); err != nil {
		t.Fatalf("PutGrant on an upgraded store: %v", err)
	}
	if _, err := s.Trust(ctx, "/x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Trust on an upgraded store: %v", err)
	}
	if doc, err := s.Pin(ctx, "p"); err != nil || string(doc) != `{"a":1}` {
		t.Fatalf("pin after the upgrade: %s, %v", doc, err)
	}
}
