package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	bolt "go.etcd.io/bbolt"
)

// cmdTamper edits the audit log inside warden.db behind warden's back, the
// way an attacker with write access to the file would:
//
//	tamper edit SEQ        change one byte of record SEQ's event
//	tamper delete SEQ      remove record SEQ
//	tamper swap A B        exchange records A and B
//	tamper dup SEQ         store record SEQ-1 again under key SEQ (two records claim one sequence number)
//	tamper truncate N      remove the last N records
//	tamper unindex SEQ     remove record SEQ from the audit index (hide it from `audit ls --tool/--run`)
func cmdTamper(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: tamper edit|delete|dup|unindex SEQ | swap A B | truncate N")
	}
	nums := make([]uint64, len(args)-1)
	for i, a := range args[1:] {
		n, err := strconv.ParseUint(a, 10, 64)
		ts.Check(err)
		nums[i] = n
	}
	key := func(n uint64) []byte {
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], n)
		return k[:]
	}
	db, err := bolt.Open(filepath.Join(ts.Getenv("WARDEN_HOME"), "warden.db"), 0o600, &bolt.Options{Timeout: time.Second})
	ts.Check(err)
	defer db.Close()
	ts.Check(db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("audit"))
		if b == nil {
			return fmt.Errorf("no audit bucket")
		}
		get := func(n uint64) []byte {
			v := b.Get(key(n))
			if v == nil {
				ts.Fatalf("no record %d", n)
			}
			return append([]byte(nil), v...)
		}
		switch args[0] {
		case "edit":
			var rec map[string]json.RawMessage
			ts.Check(json.Unmarshal(get(nums[0]), &rec))
			var ev map[string]any
			ts.Check(json.Unmarshal(rec["event"], &ev))
			ev["outcome"] = "ok (edited)"
			rec["event"], _ = json.Marshal(ev)
			v, _ := json.Marshal(rec)
			return b.Put(key(nums[0]), v)
		case "delete":
			get(nums[0])
			return b.Delete(key(nums[0]))
		case "swap":
			a, c := get(nums[0]), get(nums[1])
			if err := b.Put(key(nums[0]), c); err != nil {
				return err
			}
			return b.Put(key(nums[1]), a)
		case "dup":
			return b.Put(key(nums[0]), get(nums[0]-1))
		case "truncate":
			k, _ := b.Cursor().Last()
			last := binary.BigEndian.Uint64(k)
			for i := uint64(0); i < nums[0]; i++ {
				if err := b.Delete(key(last - i)); err != nil {
					return err
				}
			}
			return nil
		case "unindex":
			ix := tx.Bucket([]byte("audit_index"))
			var hit [][]byte
			c := ix.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				if len(k) >= 8 && binary.BigEndian.Uint64(k[len(k)-8:]) == nums[0] {
					hit = append(hit, append([]byte(nil), k...))
				}
			}
			if len(hit) == 0 {
				ts.Fatalf("record %d is not in the audit index", nums[0])
			}
			for _, k := range hit {
				if err := ix.Delete(k); err != nil {
					return err
				}
			}
			return nil
		}
		return fmt.Errorf("unknown tampering %q", args[0])
	}))
}
