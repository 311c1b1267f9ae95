package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

var bg = context.Background()

// fakeClock returns a clock that advances 1ms per reading.
func fakeClock() func() time.Time {
	var n atomic.Int64
	base := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	return func() time.Time { return base.Add(time.Duration(n.Add(1)) * time.Millisecond) }
}

// openTest opens a store in a new directory; the file is released after
// each operation so tests can edit it between operations.
func openTest(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(filepath.Join(dir, "warden.db"), &Options{Linger: -1, Now: fakeClock()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// buildLog makes a store with n audit records in a new directory and
// closes it.
func buildLog(t testing.TB, n int) string {
	t.Helper()
	dir := t.TempDir()
	s := openTest(t, dir)
	for i := 1; i <= n; i++ {
		if _, err := s.AppendAudit(bg, json.RawMessage(fmt.Sprintf(`{"tool":"t","i":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// copyDir copies the store file and anchor of src into a new directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	for _, name := range []string{"warden.db", "audit.head"} {
		copyFile(t, filepath.Join(src, name), filepath.Join(dst, name))
	}
	return dst
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// editAudit edits the audit bucket of a closed store file directly.
func editAudit(t testing.TB, dir string, fn func(b *bolt.Bucket) error) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, "warden.db"), 0o600, &bolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { return fn(tx.Bucket(bucketAudit)) }); err != nil {
		t.Fatal(err)
	}
}

func get(b *bolt.Bucket, seq uint64) []byte { return bytes.Clone(b.Get(seqKey(seq))) }

func put(b *bolt.Bucket, seq uint64, v []byte) error { return b.Put(seqKey(seq), v) }

// rewrite replaces record seq with a well-formed record whose hash is
// recomputed, as an attacker who knows the format would.
func rewrite(b *bolt.Bucket, seq uint64, event string) error {
	r, err := parseRecord(b.Get(seqKey(seq)))
	if err != nil {
		return err
	}
	v, _ := encodeRecord(seq, r.ts, r.prev, []byte(event))
	return b.Put(seqKey(seq), v)
}

// rechain recomputes prev and hash of every record from seq on.
func rechain(b *bolt.Bucket, from uint64) error {
	prev := zeroHash
	if from > 1 {
		r, err := parseRecord(b.Get(seqKey(from - 1)))
		if err != nil {
			return err
		}
		prev = r.hash
	}
	c := b.Cursor()
	for k, v := c.Seek(seqKey(from)); k != nil; k, v = c.Next() {
		r, err := parseRecord(v)
		if err != nil {
			return err
		}
		nv, hash := encodeRecord(r.seq, r.ts, prev, r.event)
		if err := b.Put(bytes.Clone(k), nv); err != nil {
			return err
		}
		prev = hash
	}
	return nil
}

func verifyDir(t *testing.T, dir string) (VerifyReport, error) {
	t.Helper()
	s := openTest(t, dir)
	defer s.Close()
	return s.VerifyAudit(bg)
}

// TestVerifyDetectsTampering edits the bbolt file (and copies files) the
// ways an attacker could, and checks that VerifyAudit names the first bad
// record.
func TestVerifyDetectsTampering(t *testing.T) {
	const n = 10
	pristine := buildLog(t, n)
	// A copy of the store taken when it had 6 records, for rollbacks.
	old := buildLog(t, 6)

	tests := []struct {
		name     string
		tamper   func(t *testing.T, dir string)
		firstBad uint64
		reason   string
	}{
		{"edited event byte", func(t *testing.T, dir string) {
			editAudit(t, dir, func(b *bolt.Bucket) error {
				return put(b, 4, bytes.Replace(get(b, 4), []byte(`"i":4`), []byte(`"i":5`), 1))
			})
		}, 4, "record 4 has been modified"},
		{"edited time", func(t *testing.T, dir string) {
			editAudit(t, dir, func(b *bolt.Bucket) error {
				return put(b, 4, bytes.Replace(get(b, 4), []byte("2024-05-01"), []byte("2024-05-02"), 1))
			})
		}, 4, "record 4 has been modified"},
		{"edited hash field", func(t *testing.T, dir string) {
			editAudit(t, dir, func(b *bolt.Bucket) error {
				v := get(b, 4)
				i := bytes.Index(v, []byte(`"hash":"`)) + len(`"hash":"`)
				v[i] ^= 1
				return put(b, 4, v)
			})
		}, 4, "record 4 has been modified"},
		{"whitespace added", func(t *testing.T, dir string) {
			editAudit(t, dir, func(b *bolt.Bucket) error {
				return put(b, 4, bytes.Replace(get(b, 4), []byte(`"event":`), []byte(`"event": `), 1))
			})
		}, 4, "record 4 has been modified"},
		{"event rewritten with a recomputed hash", func(t *testing.T, dir string) {
			editAudit(t, dir, func(b *bolt.Bucket) error { return rewrite(b, 4, `{"tool":"t","i":"forged"}`) })
		}, 5, "record 5 does not follow record 4"},
		{"chain rewritten to the end", func(t *testing.T, dir string) {
			editAudit(t, dir, func(b *bolt.Bucket) error {
				if err := rewrite(b, 4, `{"tool":"t","i":"forged"}`); err != nil {
					return err
				}
				return rechain(b, 5)
			})
		}, n, "hash differs"},
		{"deleted record", func(t *testing.T, dir string) {
			editAudit(t, dir, func(b *bolt.Bucket) error { return b.Delete(seqKey(4)) })
		}, 4, "record 4 is missing"},
		{"deleted record, later keys renumbered", func(t *testing.T, dir string) {
			editAudit(t, dir, func(b *bolt.Bucket) error {
				for seq := uint64(4); seq < n; seq++ {
					if err := put(b, seq, get(b, seq+1)); err != nil {
						return err
					}
				}
				return b.Delete(seqKey(n))
			})
		}, 4, "record 4 holds record 5"},
		{"two records swapped", func(t *testing.T, dir string) {
			editAudit(t, dir, func(b *bolt.Bucket) error {
				r3, r6 := get(b, 3), get(b, 6)
				if err := put(b, 3, r6); err != nil {
					return err
				}
				return put(b, 6, r3)
			})
		}, 3, "record 3 holds record 6"},
		{"seq duplicating its predecessor's", func(t *testing.T, dir string) {
			editAudit(t, dir, func(b *bolt.Bucket) error { return put(b, 5, get(b, 4)) })
		}, 5, "record 5 holds record 4"},
		{"seq field edited to its predecessor's", func(t *testing.T, dir string) {
			editAudit(t, dir, func(b *bolt.Bucket) error {
				return put(b, 5, bytes.Replace(get(b, 5), []byte(`{"seq":5,`), []byte(`{"seq":4,`), 1))
			})
		}, 5, "record 5 holds record 4"},
		{"record copied under a new key", func(t *testing.T, dir string) {
			editAudit(t, dir, func(b *bolt.Bucket) error { return put(b, n+1, get(b, 2)) })
		}, n + 1, "record 11 holds record 2"},
		{"record under key 0", func(t *testing.T, dir string) {
			editAudit(t, dir, func(b *bolt.Bucket) error { return put(b, 0, get(b, 1)) })
		}, 1, "unexpected record under key 0"},
		{"key of the wrong size", func(t *testing.T, dir string) {
			editAudit(t, dir, func(b *bolt.Bucket) error { return b.Put(append(seqKey(3), 0), get(b, 3)) })
		}, 4, "unexpected key"},
		{"truncated tail", func(t *testing.T, dir string) {
			editAudit(t, dir, func(b *bolt.Bucket) error {
				if err := b.Delete(seqKey(n)); err != nil {
					return err
				}
				return b.Delete(seqKey(n - 1))
			})
		}, n - 1, "the anchor names record 10 but the log ends at record 8"},
		{"everything deleted", func(t *testing.T, dir string) {
			editAudit(t, dir, func(b *bolt.Bucket) error {
				for seq := uint64(1); seq <= n; seq++ {
					if err := b.Delete(seqKey(seq)); err != nil {
						return err
					}
				}
				return nil
			})
		}, 1, "the log ends at record 0"},
		{"database rolled back to an older copy", func(t *testing.T, dir string) {
			copyFile(t, filepath.Join(old, "warden.db"), filepath.Join(dir, "warden.db"))
		}, 7, "rolled back"},
		{"database replaced by another store's with as many records", func(t *testing.T, dir string) {
			other := buildLog(t, n+2)
			editAudit(t, other, func(b *bolt.Bucket) error { return rewrite(b, 1, `{"tool":"other"}`) })
			editAudit(t, other, func(b *bolt.Bucket) error { return rechain(b, 2) })
			copyFile(t, filepath.Join(other, "warden.db"), filepath.Join(dir, "warden.db"))
		}, n, "record 10 is not the record the anchor names"},
		{"anchor missing", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "audit.head"))
		}, n + 1, "anchor"},
		{"anchor garbled", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "audit.head"), []byte(`{"seq":10,"hash":"nope"}`), 0o600)
		}, n + 1, "garbled"},
		{"anchor emptied", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "audit.head"), nil, 0o600)
		}, n + 1, "garbled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, pristine)
			if rep, err := verifyDir(t, dir); err != nil {
				t.Fatalf("before tampering: %v (%+v)", err, rep)
			}
			tc.tamper(t, dir)
			rep, err := verifyDir(t, dir)
			if !errors.Is(err, ErrTampered) {
				t.Fatalf("VerifyAudit = %+v, %v; want ErrTampered", rep, err)
			}
			if rep.FirstBad != tc.firstBad || !strings.Contains(rep.Reason, tc.reason) {
				t.Errorf("FirstBad %d, Reason %q; want %d, a reason containing %q", rep.FirstBad, rep.Reason, tc.firstBad, tc.reason)
			}
			if !strings.Contains(err.Error(), rep.Reason) {
				t.Errorf("error %q does not carry the reason", err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(pristine, "audit.head")); err != nil {
		t.Fatal(err)
	}
}

// TestAnchorLagVerifies: an anchor behind the log (a crash between the
// commit and the anchor write) verifies, as does an empty log without one.
func TestAnchorLagVerifies(t *testing.T) {
	pristine := buildLog(t, 10)
	old := buildLog(t, 6)
	// Copy a lagging anchor from a log with the same first records: the
	// fake clock makes the two logs' first six records identical.
	dir := copyDir(t, pristine)
	copyFile(t, filepath.Join(old, "audit.head"), filepath.Join(dir, "audit.head"))
	rep, err := verifyDir(t, dir)
	if err != nil || rep.AnchorSeq != 6 || rep.HeadSeq != 10 {
		t.Errorf("lagging anchor: %+v, %v; want OK with anchor 6, head 10", rep, err)
	}
	os.WriteFile(filepath.Join(dir, "audit.head"), encodeAnchor(genesis), 0o600)
	if rep, err := verifyDir(t, dir); err != nil || rep.AnchorSeq != 0 {
		t.Errorf("genesis anchor before the first record: %+v, %v", rep, err)
	}

	empty := t.TempDir()
	s, err := Open(filepath.Join(empty, "warden.db"), &Options{Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if b, err := os.ReadFile(filepath.Join(empty, "audit.head")); err != nil || !bytes.Equal(b, encodeAnchor(genesis)) {
		t.Errorf("a new store's anchor = %q, %v; want the genesis anchor", b, err)
	}
	// The file stays open (Linger), so no reopen writes the genesis
	// anchor again: this checks the verifier on an empty log without one.
	os.Remove(filepath.Join(empty, "audit.head"))
	if rep, err := s.VerifyAudit(bg); err != nil {
		t.Errorf("empty log without an anchor: %+v, %v; want OK", rep, err)
	}
}

// TestAppendRefusedWhileAnchorDisagrees: after a rollback, appending would
// overwrite the evidence, so AppendAudit refuses until Reanchor.
func TestAppendRefusedWhileAnchorDisagrees(t *testing.T) {
	pristine := buildLog(t, 10)
	old := buildLog(t, 6)
	dir := copyDir(t, pristine)
	copyFile(t, filepath.Join(old, "warden.db"), filepath.Join(dir, "warden.db"))
	anchorBefore, _ := os.ReadFile(filepath.Join(dir, "audit.head"))

	s := openTest(t, dir)
	if _, err := s.AppendAudit(bg, json.RawMessage(`{"a":1}`)); !errors.Is(err, ErrTampered) {
		t.Fatalf("AppendAudit after a rollback: %v, want ErrTampered", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "audit.head")); !bytes.Equal(b, anchorBefore) {
		t.Errorf("the refused append changed the anchor")
	}
	// Other operations still work.
	if err := s.PutMemory(bg, "n", "k", "v"); err != nil {
		t.Errorf("PutMemory: %v", err)
	}
	rep, err := s.Reanchor(bg)
	if err != nil || rep.AnchorSeq != 6 || rep.HeadSeq != 6 {
		t.Fatalf("Reanchor = %+v, %v", rep, err)
	}
	if seq, err := s.AppendAudit(bg, json.RawMessage(`{"a":1}`)); err != nil || seq != 7 {
		t.Fatalf("AppendAudit after Reanchor = %d, %v", seq, err)
	}
	if rep, err := s.VerifyAudit(bg); err != nil || rep.AnchorSeq != 7 {
		t.Errorf("VerifyAudit after Reanchor and an append = %+v, %v", rep, err)
	}

	// Reanchor does not bless a broken chain.
	editAudit(t, dir, func(b *bolt.Bucket) error { return b.Delete(seqKey(3)) })
	anchorBefore, _ = os.ReadFile(filepath.Join(dir, "audit.head"))
	if rep, err := s.Reanchor(bg); !errors.Is(err, ErrTampered) || rep.FirstBad != 3 {
		t.Errorf("Reanchor of a broken chain = %+v, %v; want ErrTampered at 3", rep, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "audit.head")); !bytes.Equal(b, anchorBefore) {
		t.Errorf("Reanchor of a broken chain changed the anchor")
	}
}

// TestAnchorFile: the anchor sits beside the database (or at AnchorPath),
// mode 0600, always names the head after appends return, and no temporary
// files are left behind.
func TestAnchorFile(t *testing.T) {
	dir := t.TempDir()
	anchorPath := filepath.Join(dir, "elsewhere", "head")
	s, err := Open(filepath.Join(dir, "db", "warden.db"), &Options{AnchorPath: anchorPath})
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	for range 20 {
		if seq, err = s.AppendAudit(bg, json.RawMessage(`{"x":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := s.AuditRecord(bg, seq)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(anchorPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("{\"seq\":%d,\"hash\":%q}\n", seq, rec.Hash); string(b) != want {
		t.Errorf("anchor = %q, want %q", b, want)
	}
	fi, err := os.Stat(anchorPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("anchor mode = %v, %v; want 0600", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(filepath.Dir(anchorPath))
	if len(entries) != 1 {
		t.Errorf("anchor directory holds %d files, want just the anchor", len(entries))
	}
	if _, err := os.Stat(filepath.Join(dir, "db", "audit.head")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an anchor was written beside the database although AnchorPath is set: %v", err)
	}
	// A stale temporary file from a process that died is removed on open.
	stale := anchorPath + anchorTempInfix + "123"
	os.WriteFile(stale, []byte("x"), 0o600)
	s, err = Open(filepath.Join(dir, "db", "warden.db"), &Options{AnchorPath: anchorPath})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale anchor temp file not removed: %v", err)
	}
}

func TestParseRecordRoundTrip(t *testing.T) {
	v, hash := encodeRecord(42, "2024-05-01T12:00:00.123Z", zeroHash, []byte(`{"a":"x\"}y","b":[1,{}]}`))
	r, err := parseRecord(v)
	if err != nil {
		t.Fatal(err)
	}
	if r.seq != 42 || r.ts != "2024-05-01T12:00:00.123Z" || r.prev != zeroHash || r.hash != hash || string(r.event) != `{"a":"x\"}y","b":[1,{}]}` {
		t.Errorf("parseRecord = %+v", r)
	}
	var generic map[string]any
	if err := json.Unmarshal(v, &generic); err != nil {
		t.Errorf("stored record is not JSON: %v", err)
	}
	for _, bad := range []string{``, `{}`, `{"seq":1}`, string(v[:len(v)-1]), `{"seq":,"time":"","prev":"` + zeroHash + `","hash":"` + zeroHash + `","event":{}}`} {
		if _, err := parseRecord([]byte(bad)); err == nil {
			t.Errorf("parseRecord(%q) succeeded", bad)
		}
	}
}

// TestExportMatchesStoredBytes: the export is the stored records, so a
// verifier outside warden can recompute the chain from it.
func TestExportMatchesStoredBytes(t *testing.T) {
	dir := buildLog(t, 5)
	s := openTest(t, dir)
	var buf bytes.Buffer
	if err := s.ExportAudit(bg, &buf); err != nil {
		t.Fatal(err)
	}
	var stored []string
	editAudit(t, dir, func(b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error { stored = append(stored, string(v)); return nil })
	})
	if want := strings.Join(stored, "\n") + "\n"; buf.String() != want {
		t.Errorf("export = %q, want %q", buf.String(), want)
	}
	if err := s.ExportAudit(bg, failingWriter{}); err == nil {
		t.Errorf("ExportAudit to a failing writer succeeded")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrShortWrite }

// TestLongLogVerifiesInChunks: a log longer than one read transaction's
// chunk verifies, and tampering past the first chunk is found.
func TestLongLogVerifiesInChunks(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	n := auditChunk*2 + 10
	// Many concurrent appends: the committer takes them in large batches.
	done := make(chan error, n)
	for i := range n {
		go func() {
			_, err := s.AppendAudit(bg, json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)))
			done <- err
		}()
	}
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	rep, err := s.VerifyAudit(bg)
	if err != nil || rep.Records != uint64(n) {
		t.Fatalf("VerifyAudit = %+v, %v", rep, err)
	}
	recs, err := s.ListAudit(bg, AuditFilter{AfterSeq: auditChunk - 5, Limit: 10})
	if err != nil || len(recs) != 10 || recs[0].Seq != auditChunk-4 {
		t.Errorf("ListAudit across a chunk boundary: %d records, %v", len(recs), err)
	}
	bad := uint64(auditChunk + 100)
	editAudit(t, dir, func(b *bolt.Bucket) error { return put(b, bad, get(b, bad-1)) })
	if rep, err := s.VerifyAudit(bg); !errors.Is(err, ErrTampered) || rep.FirstBad != bad || rep.Records != bad-1 {
		t.Errorf("VerifyAudit = %+v, %v; want ErrTampered at %d", rep, err, bad)
	}
}

// TestAnchorWriteFailureStopsAppends: when the anchor cannot be written,
// the committed record stands, later appends fail until it can be written
// again, and then everything carries on.
func TestAnchorWriteFailureStopsAppends(t *testing.T) {
	dir := t.TempDir()
	anchorDir := filepath.Join(dir, "anchor")
	s, err := Open(filepath.Join(dir, "warden.db"), &Options{Linger: time.Hour, AnchorPath: filepath.Join(anchorDir, "head")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appendOne := func() (uint64, error) { return s.AppendAudit(bg, json.RawMessage(`{"a":1}`)) }
	if seq, err := appendOne(); err != nil || seq != 1 {
		t.Fatalf("append = %d, %v", seq, err)
	}
	if err := s.anchors.wait(); err != nil {
		t.Fatal(err)
	}
	// Make the anchor's directory unusable (root ignores permissions, so
	// replace it with a file).
	if err := os.RemoveAll(anchorDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(anchorDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if seq, err := appendOne(); err != nil || seq != 2 {
		t.Fatalf("append whose anchor write fails = %d, %v; want the record committed", seq, err)
	}
	if err := s.anchors.wait(); err == nil {
		t.Fatalf("the anchor write did not fail")
	}
	if _, err := appendOne(); err == nil || !strings.Contains(err.Error(), "cannot be written") {
		t.Fatalf("append while the anchor cannot be written: %v", err)
	}
	os.Remove(anchorDir)
	if err := os.Mkdir(anchorDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if seq, err := appendOne(); err != nil || seq != 3 {
		t.Fatalf("append after the anchor is writable again = %d, %v", seq, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(anchorDir, "head"))
	if a, ok := parseAnchor(b); !ok || a.seq != 3 {
		t.Errorf("anchor = %q", b)
	}
}
