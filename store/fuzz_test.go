package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// FuzzVerifyAudit replaces the stored bytes of one record, or the anchor,
// of a small valid log, or adds a record under a key that breaks the
// sequence. VerifyAudit must never panic, must pass if and only if the log
// still holds its original content (for the anchor: if it is the exact
// encoding of some record's head, a lagging anchor), and otherwise must
// report ErrTampered with the first bad record.
func FuzzVerifyAudit(f *testing.F) {
	const n = 4
	pristine := buildLog(f, n)
	var records [n + 1][]byte // records[seq]
	editAudit(f, pristine, func(b *bolt.Bucket) error {
		for seq := uint64(1); seq <= n; seq++ {
			records[seq] = get(b, seq)
		}
		return nil
	})
	validAnchors := [][]byte{encodeAnchor(genesis)}
	for seq := uint64(1); seq <= n; seq++ {
		r, err := parseRecord(records[seq])
		if err != nil {
			f.Fatal(err)
		}
		validAnchors = append(validAnchors, encodeAnchor(anchor{seq: seq, hash: r.hash}))
	}
	anchorBytes, err := os.ReadFile(filepath.Join(pristine, "audit.head"))
	if err != nil {
		f.Fatal(err)
	}

	f.Add(uint8(0), uint8(0), records[1])
	f.Add(uint8(0), uint8(2), bytes.Replace(records[3], []byte(`"i":3`), []byte(`"i":4`), 1))
	f.Add(uint8(0), uint8(1), records[3])
	f.Add(uint8(1), uint8(0), anchorBytes)
	f.Add(uint8(1), uint8(0), validAnchors[2])
	f.Add(uint8(1), uint8(0), []byte(`{"seq":4,"hash":"`+zeroHash+`"}`+"\n"))
	f.Add(uint8(2), uint8(0), records[1])
	f.Add(uint8(2), uint8(1), records[4])

	f.Fuzz(func(t *testing.T, op, idx uint8, data []byte) {
		dir := copyDir(t, pristine)
		var wantOK bool
		switch op % 3 {
		case 0: // replace a record's value
			seq := uint64(idx%n) + 1
			editAudit(t, dir, func(b *bolt.Bucket) error { return put(b, seq, bytes.Clone(data)) })
			wantOK = bytes.Equal(data, records[seq])
		case 1: // replace the anchor
			if err := os.WriteFile(filepath.Join(dir, "audit.head"), data, 0o600); err != nil {
				t.Fatal(err)
			}
			wantOK = slices.ContainsFunc(validAnchors, func(a []byte) bool { return bytes.Equal(a, data) })
		case 2: // a record under key 0 or past a gap
			key := []uint64{0, n + 2}[idx%2]
			editAudit(t, dir, func(b *bolt.Bucket) error { return put(b, key, bytes.Clone(data)) })
		}
		rep, err := verifyDir(t, dir)
		if wantOK {
			if err != nil {
				t.Fatalf("VerifyAudit of an untampered log = %+v, %v", rep, err)
			}
			return
		}
		if !errors.Is(err, ErrTampered) || rep.FirstBad == 0 || rep.Reason == "" {
			t.Fatalf("VerifyAudit after tampering = %+v, %v; want ErrTampered with the first bad record", rep, err)
		}
	})
}
