package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// editDB edits a closed store file directly.
func editDB(t testing.TB, dir string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, "warden.db"), 0o600, &bolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func seqs(recs []AuditRecord) []uint64 {
	out := []uint64{}
	for _, r := range recs {
		out = append(out, r.Seq)
	}
	return out
}

// scanList is ListAudit by reading every record: what the index must
// agree with.
func scanList(t testing.TB, s *Store, f AuditFilter) []uint64 {
	t.Helper()
	l := &auditList{f: f, path: s.path}
	if err := s.listScan(bg, l, f.AfterSeq); err != nil {
		t.Fatal(err)
	}
	return seqs(l.result())
}

// oddEvents are events whose run and tool fields are hard to read: escaped
// names and values, duplicates (the last one counts), values that are not
// strings, names that differ only in case, fields nested deeper.
var oddEvents = []string{
	`{"run_id":"r1","tool":"fs_read"}`,
	`{"run\u005fid":"r1","tool":"fs_read"}`,
	`{"run_id":"r\u0031","tool":"fs\u005fread"}`,
	`{"run_id":"r2","run_id":"r1","tool":"fs_read"}`,
	`{"run_id":"r1","run_id":"r2","tool":"shell"}`,
	`{"run_id":1,"tool":["fs_read"]}`,
	`{"run_id":null,"tool":"fs_read"}`,
	`{"RUN_ID":"r1","Tool":"fs_read"}`,
	`{"args":{"run_id":"r1","tool":"fs_read"},"tool":"shell"}`,
	`{"tool":"","run_id":""}`,
	`{"tool":"fs_read","x":"a\"b\\","run_id":"r1"}`,
	`{"tool":"\u00e9t\u00e9","run_id":"r\ud83d\ude00"}`,
	`{"tool":"été","run_id":"r😀"}`,
	`{"tool":"\ud800","run_id":"r1"}`,
	`{"tool":"nul\u0000byte","run_id":"r1"}`,
	`{"tool":"fs_read","run_id":{"id":"r1"}}`,
	`{}`,
}

func TestAuditIndexListsLikeAScan(t *testing.T) {
	s := openTest(t, t.TempDir())
	rng := rand.New(rand.NewPCG(7, 8))
	tools := []string{"fs_read", "shell", "http_get", "été", "\uFFFD", "nul\x00byte"}
	for i := range 600 {
		ev := oddEvents[rng.IntN(len(oddEvents))]
		if rng.IntN(2) == 0 {
			ev = fmt.Sprintf(`{"run_id":"r%d","tool":%q,"i":%d}`, rng.IntN(4), tools[rng.IntN(len(tools)-1)], i)
		}
		if _, err := s.AppendAudit(bg, json.RawMessage(ev)); err != nil {
			t.Fatal(err)
		}
	}
	runs := []string{"", "r0", "r1", "r2", "r3", "r😀", "none"}
	for _, run := range runs {
		for _, tool := range append(tools, "", "none") {
			for _, f := range []AuditFilter{
				{RunID: run, Tool: tool},
				{RunID: run, Tool: tool, Limit: 3},
				{RunID: run, Tool: tool, Limit: 3, Newest: true},
				{RunID: run, Tool: tool, AfterSeq: 250, Limit: 20, Newest: true},
				{RunID: run, Tool: tool, AfterSeq: 250, Limit: 7},
				{RunID: run, Tool: tool, Newest: true},
			} {
				got, err := s.ListAudit(bg, f)
				if err != nil {
					t.Fatal(err)
				}
				if want := scanList(t, s, f); !slices.Equal(seqs(got), want) {
					t.Fatalf("ListAudit(%+v) = %v, a scan finds %v", f, seqs(got), want)
				}
			}
		}
	}
	if rep, err := s.VerifyAudit(bg); err != nil {
		t.Fatal(rep, err)
	}
}

// TestAuditIndexOldStore opens a store an older warden made (no index) and
// lists from it what that warden listed; the first listing by run or tool
// builds the index, and appends keep it complete from then on.
func TestAuditIndexOldStore(t *testing.T) {
	dir := oldStore(t)
	golden := readGolden(t)
	s := openTest(t, dir)
	for _, f := range []AuditFilter{{Tool: "shell"}, {RunID: "run-3"}, {RunID: "run-3", Tool: "fs_read", AfterSeq: 100, Limit: 5}} {
		recs, err := s.ListAudit(bg, f)
		if err != nil {
			t.Fatal(err)
		}
		var want []uint64
		key := fmt.Sprintf("audit run=%s tool=%s after=%d limit=%d", f.RunID, f.Tool, f.AfterSeq, f.Limit)
		if err := json.Unmarshal(golden[key], &want); err != nil || len(want) == 0 {
			t.Fatalf("golden %q: %v", key, err)
		}
		if !slices.Equal(seqs(recs), want) {
			t.Errorf("ListAudit(%+v) = %v; the warden that made the store listed %v", f, seqs(recs), want)
		}
	}
	marker := func() (m uint64) {
		if err := s.view(bg, func(tx *bolt.Tx) error { m, _ = auditIndexed(tx); return nil }); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := marker(); m != 300 {
		t.Fatalf("after the first listing the index holds records up to %d, want 300", m)
	}
	if _, err := s.AppendAudit(bg, json.RawMessage(`{"tool":"shell","run_id":"run-3"}`)); err != nil {
		t.Fatal(err)
	}
	if m := marker(); m != 301 {
		t.Errorf("an append to a complete index leaves it at %d, want 301", m)
	}
	if rep, err := s.VerifyAudit(bg); err != nil || rep.Records != 301 {
		t.Fatal(rep, err)
	}
	recs, err := s.ListAudit(bg, AuditFilter{Tool: "shell", Limit: 2, Newest: true})
	if err != nil || !slices.Equal(seqs(recs), []uint64{298, 301}) {
		t.Errorf("newest shell records: %v, %v", seqs(recs), err)
	}
}

// TestAuditIndexAfterOlderWarden: records an older warden appends (without
// the index) are found, and indexed by the next listing.
func TestAuditIndexAfterOlderWarden(t *testing.T) {
	dir := buildLog(t, 5)
	editDB(t, dir, func(tx *bolt.Tx) error {
		_, err := appendWithoutIndex(tx, `{"tool":"t","run_id":"late"}`, `{"tool":"u"}`)
		return err
	})
	os.Remove(filepath.Join(dir, "audit.head")) // the older warden's anchor
	s := openTest(t, dir)
	if _, err := s.Reanchor(bg); err != nil {
		t.Fatal(err)
	}
	recs, err := s.ListAudit(bg, AuditFilter{Tool: "t"})
	if err != nil || !slices.Equal(seqs(recs), []uint64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("ListAudit after an older warden's appends: %v, %v", seqs(recs), err)
	}
	editDB(t, dir, func(tx *bolt.Tx) error {
		_, err := appendWithoutIndex(tx, `{"tool":"t"}`)
		return err
	})
	os.Remove(filepath.Join(dir, "audit.head"))
	if _, err := s.Reanchor(bg); err != nil {
		t.Fatal(err)
	}
	if recs, err := s.ListAudit(bg, AuditFilter{Tool: "t", Newest: true, Limit: 1}); err != nil || !slices.Equal(seqs(recs), []uint64{8}) {
		t.Fatalf("the newest record of an older warden: %v, %v", seqs(recs), err)
	}
	if rep, err := s.VerifyAudit(bg); err != nil {
		t.Fatal(rep, err)
	}
}

// appendWithoutIndex appends records as a warden without the index does.
func appendWithoutIndex(tx *bolt.Tx, events ...string) (anchor, error) {
	b := tx.Bucket(bucketAudit)
	head, err := auditHead(b)
	if err != nil {
		return head, err
	}
	for _, ev := range events {
		head.seq++
		v, hash := encodeRecord(head.seq, "2024-05-01T12:00:00Z", head.hash, []byte(ev))
		if err := b.Put(seqKey(head.seq), v); err != nil {
			return head, err
		}
		head.hash = hash
	}
	return head, nil
}

func readGolden(t testing.TB) map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "v1", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g map[string]json.RawMessage
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestAuditIndexHostile: the index is outside the hash chain, so whoever
// can write the file can change it. A changed index must not make
// "audit ls" show a record under a tool or run that is not its own, must
// not stop a listing short, and VerifyAudit must report every change
// (naming the record), which Reanchor repairs.
func TestAuditIndexHostile(t *testing.T) {
	pristine := t.TempDir()
	s := openTest(t, pristine)
	for i := 1; i <= 40; i++ {
		tool := []string{"fs_read", "shell"}[i%2]
		if _, err := s.AppendAudit(bg, json.RawMessage(fmt.Sprintf(`{"tool":%q,"run_id":"r%d","i":%d}`, tool, i%3, i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	shell := []uint64{} // the odd records
	for i := uint64(1); i <= 40; i += 2 {
		shell = append(shell, i)
	}
	tests := []struct {
		name string
		edit func(ix *bolt.Bucket, meta *bolt.Bucket) error
		bad  uint64   // the record VerifyAudit names
		list []uint64 // what ListAudit(Tool: shell) still shows
	}{
		{"entry added: a record under another tool", func(ix, _ *bolt.Bucket) error {
			return ix.Put(indexKey(indexTool, "shell", 8), nil) // record 8 is fs_read
		}, 8, shell},
		{"entry removed: a record hidden", func(ix, _ *bolt.Bucket) error {
			return ix.Delete(indexKey(indexTool, "shell", 13))
		}, 13, slices.DeleteFunc(slices.Clone(shell), func(s uint64) bool { return s == 13 })},
		{"entry moved to another record", func(ix, _ *bolt.Bucket) error {
			if err := ix.Delete(indexKey(indexRun, "r1", 10)); err != nil {
				return err
			}
			return ix.Put(indexKey(indexRun, "r1", 11), nil)
		}, 10, shell},
		{"marker past the head: later appends not indexed", func(_, meta *bolt.Bucket) error {
			return meta.Put(auditIndexedKey, seqKey(1000))
		}, 42, shell},
		{"marker malformed", func(_, meta *bolt.Bucket) error {
			return meta.Put(auditIndexedKey, []byte("x"))
		}, 42, shell},
		{"malformed entry under the tool's prefix", func(ix, _ *bolt.Bucket) error {
			return ix.Put(append(indexPrefix(indexTool, "shell"), 0, 0, 0, 0, 0, 0, 0, 9, 9), nil)
		}, 42, shell},
		{"entry past the index's records", func(ix, _ *bolt.Bucket) error {
			return ix.Put(indexKey(indexTool, "shell", 99), nil)
		}, 99, shell},
		{"the index removed (the next open makes it again, empty)", func(ix, _ *bolt.Bucket) error {
			return ix.Tx().DeleteBucket(bucketAuditIndex)
		}, 1, []uint64{}},
		{"an entry that is a bucket", func(ix, _ *bolt.Bucket) error {
			_, err := ix.CreateBucket(indexKey(indexTool, "shell", 8))
			return err
		}, 8, shell},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, pristine)
			editDB(t, dir, func(tx *bolt.Tx) error { return tc.edit(tx.Bucket(bucketAuditIndex), tx.Bucket(bucketMeta)) })
			s := openTest(t, dir)
			recs, err := s.ListAudit(bg, AuditFilter{Tool: "shell"})
			if err != nil || !slices.Equal(seqs(recs), tc.list) {
				t.Fatalf("ListAudit = %v, %v; want %v", seqs(recs), err, tc.list)
			}
			for _, r := range recs {
				if !strings.Contains(string(r.Event), `"tool":"shell"`) {
					t.Errorf("ListAudit(shell) shows %s", r.Event)
				}
			}
			if _, err := s.AppendAudit(bg, json.RawMessage(`{"tool":"shell","run_id":"r1"}`)); err != nil {
				t.Fatal(err)
			}
			recs, err = s.ListAudit(bg, AuditFilter{Tool: "shell"})
			if want := append(slices.Clone(tc.list), 41); err != nil || !slices.Equal(seqs(recs), want) {
				t.Fatalf("ListAudit after an append = %v, %v; want %v", seqs(recs), err, want)
			}
			rep, err := s.VerifyAudit(bg)
			if !errors.Is(err, ErrTampered) || rep.FirstBad != tc.bad || !strings.Contains(rep.Reason, "reanchor") {
				t.Fatalf("VerifyAudit = %+v, %v; want ErrTampered naming record %d", rep, err, tc.bad)
			}
			if rep.Records != 41 {
				t.Errorf("VerifyAudit verified %d records, want 41 (the records are intact)", rep.Records)
			}
			if _, err := s.Reanchor(bg); err != nil {
				t.Fatal(err)
			}
			if rep, err := s.VerifyAudit(bg); err != nil {
				t.Fatalf("VerifyAudit after Reanchor = %+v, %v", rep, err)
			}
			recs, err = s.ListAudit(bg, AuditFilter{Tool: "shell"})
			if want := append(slices.Clone(shell), 41); err != nil || !slices.Equal(seqs(recs), want) {
				t.Errorf("ListAudit after Reanchor = %v, %v; want %v", seqs(recs), err, want)
			}
		})
	}
}

// TestAuditIndexMissingRecord: a record removed from the log while the
// index still lists it makes the listing fail rather than skip it quietly.
func TestAuditIndexMissingRecord(t *testing.T) {
	dir := buildLog(t, 6)
	editAudit(t, dir, func(b *bolt.Bucket) error { return b.Delete(seqKey(4)) })
	s := openTest(t, dir)
	if recs, err := s.ListAudit(bg, AuditFilter{Tool: "t"}); !errors.Is(err, ErrTampered) {
		t.Errorf("ListAudit = %v, %v; want ErrTampered", seqs(recs), err)
	}
	if rep, err := s.VerifyAudit(bg); !errors.Is(err, ErrTampered) || rep.FirstBad != 4 {
		t.Errorf("VerifyAudit = %+v, %v", rep, err)
	}
}

// TestAuditIndexCatchUpReadsWhatItMarks: the catch-up of an index that
// is behind marks as indexed only the records it read. A key that is not
// a record's, or a record it cannot parse, stops it there (the listing
// scans the rest, and reports what is wrong as it did before the index);
// marking the records past it indexed would hide them from "audit ls
// --tool" for good once the damage is undone (a key planted for one
// listing and taken away again).
func TestAuditIndexCatchUpReadsWhatItMarks(t *testing.T) {
	all := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	var record6 []byte
	for name, damage := range map[string]struct{ do, undo func(b *bolt.Bucket) error }{
		"a key that is not a record's": {
			func(b *bolt.Bucket) error { return b.Put(append(seqKey(5), 'x'), []byte("{}")) },
			func(b *bolt.Bucket) error { return b.Delete(append(seqKey(5), 'x')) },
		},
		"a record it cannot parse": {
			func(b *bolt.Bucket) error { record6 = get(b, 6); return b.Put(seqKey(6), []byte("garbled")) },
			func(b *bolt.Bucket) error { return b.Put(seqKey(6), record6) },
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := buildLog(t, 10)
			editDB(t, dir, func(tx *bolt.Tx) error { // as a store made before the index
				if err := tx.DeleteBucket(bucketAuditIndex); err != nil {
					return err
				}
				if _, err := tx.CreateBucket(bucketAuditIndex); err != nil {
					return err
				}
				if err := tx.Bucket(bucketMeta).Delete(auditIndexedKey); err != nil {
					return err
				}
				return damage.do(tx.Bucket(bucketAudit))
			})
			s := openTest(t, dir)
			if recs, err := s.ListAudit(bg, AuditFilter{Tool: "t"}); err == nil && len(recs) < 10 {
				t.Errorf("ListAudit of the damaged log = %v and no error", seqs(recs))
			}
			editAudit(t, dir, damage.undo)
			if recs, err := s.ListAudit(bg, AuditFilter{Tool: "t"}); err != nil || !slices.Equal(seqs(recs), all) {
				t.Errorf("ListAudit once the damage is undone = %v, %v; want %v", seqs(recs), err, all)
			}
			if rep, err := s.VerifyAudit(bg); err != nil {
				t.Errorf("VerifyAudit = %+v, %v", rep, err)
			}
		})
	}
}

// eventKeysSlow is eventKeys by encoding/json: the reference.
func eventKeysSlow(event []byte) (runID, tool string) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(event, &fields) != nil {
		return "", ""
	}
	str := func(name string) string {
		var s string
		if json.Unmarshal(fields[name], &s) != nil {
			return ""
		}
		return s
	}
	return str("run_id"), str("tool")
}

// FuzzEventKeys: the fast reader of an event's run and tool agrees with
// encoding/json on every valid JSON document.
func FuzzEventKeys(f *testing.F) {
	for _, ev := range oddEvents {
		f.Add([]byte(ev))
	}
	f.Add([]byte(`{"tool":"a" ,"run_id":"b"}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte("{\"tool\":\"\xff\xfe\"}"))
	f.Fuzz(func(t *testing.T, ev []byte) {
		if !json.Valid(ev) {
			return
		}
		r1, t1 := eventKeys(ev)
		r2, t2 := eventKeysSlow(ev)
		if r1 != r2 || t1 != t2 {
			t.Fatalf("eventKeys(%q) = %q, %q; encoding/json reads %q, %q", ev, r1, t1, r2, t2)
		}
	})
}

func TestParseIndexKey(t *testing.T) {
	for _, v := range []string{"a", "fs_read", strings.Repeat("x", 300), "nul\x00"} {
		k := indexKey(indexTool, v, 42)
		kind, value, seq, ok := parseIndexKey(k)
		if !ok || kind != indexTool || value != v || seq != 42 {
			t.Errorf("parseIndexKey(indexKey(%q)) = %c %q %d %v", v, kind, value, seq, ok)
		}
		if _, _, _, ok := parseIndexKey(append(k, 0)); ok {
			t.Errorf("a key with a byte too many parses")
		}
	}
	bad := binary.AppendUvarint([]byte{indexRun}, 0)
	if _, _, _, ok := parseIndexKey(append(bad, make([]byte, 8)...)); ok {
		t.Errorf("an empty value parses")
	}
	if !bytes.HasPrefix(indexKey(indexRun, "ab", 1), indexPrefix(indexRun, "ab")) || bytes.HasPrefix(indexKey(indexRun, "abc", 1), indexPrefix(indexRun, "ab")) {
		t.Errorf("prefixes are not exact")
	}
}
