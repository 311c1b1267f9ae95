package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/wardenrt/warden/internal/runpatch"
)

// Runs kept in parts. An agent run's record grows with every step; writing
// it whole after each step would cost the square of its length. PatchRun
// writes the record as a head (the document with its lists null, in
// bucketRuns, so the bucket holds JSON documents only) plus the list
// elements that are new or changed, in bucketRunParts:
//
//	id                               uvarint lists, then per list uvarint len(name) | name | uvarint length
//	id | 0 | list (1 byte) | n (4 bytes, big-endian)   element n of the list
//
// Run ids hold no NUL, so one run's keys never fall among another's. Run,
// ListRuns and UpdateRun give back the whole document; PutRun and
// UpdateRun store a whole document again, dropping the parts.

var bucketRunParts = []byte("run_parts")

// ErrConflict means a PatchRun assumed list elements the store does not
// hold (the run was written whole since): send them all.
var ErrConflict = runpatch.ErrConflict

// PatchRun writes run id's record in parts (see runpatch.Patch), in one
// transaction: its cost is that of the head and the elements sent, not of
// the whole record. An element below a list's length that p does not send
// must be held already; if not, nothing is written and the error wraps
// ErrConflict.
func (s *Store) PatchRun(ctx context.Context, id string, p runpatch.Patch) error {
	if err := validName("run", id); err != nil {
		return err
	}
	c, err := runpatch.Check(p)
	if err != nil {
		return fmt.Errorf("%w: run %s: %v", ErrInvalid, id, err)
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		parts := tx.Bucket(bucketRunParts)
		stored, err := runMeta(s.path, parts, id)
		if err != nil {
			return err
		}
		if err := c.Applies(stored); err != nil {
			return fmt.Errorf("run %s: %w", id, err)
		}
		for li := range c.Fields {
			from := 0 // drop what is past the list's new end
			if c.SameLists(stored) {
				from = c.Lens[li]
			}
			if err := deleteItems(parts, id, li, from); err != nil {
				return err
			}
			for i, e := range c.Set[li] {
				if err := parts.Put(itemKey(id, li, i), e); err != nil {
					return err
				}
			}
		}
		if stored != nil && len(stored.Fields) > len(c.Fields) {
			for li := len(c.Fields); li < len(stored.Fields); li++ {
				if err := deleteItems(parts, id, li, 0); err != nil {
					return err
				}
			}
		}
		if err := parts.Put([]byte(id), runpatch.EncodeStored(runpatch.Stored{Fields: c.Fields, Lens: c.Lens})); err != nil {
			return err
		}
		return tx.Bucket(bucketRuns).Put([]byte(id), c.Head)
	})
}

func itemPrefix(id string, list int) []byte {
	k := make([]byte, 0, len(id)+6)
	k = append(k, id...)
	return append(k, 0, byte(list))
}

func itemKey(id string, list, n int) []byte {
	return binary.BigEndian.AppendUint32(itemPrefix(id, list), uint32(n))
}

// deleteItems removes the elements of list from n on.
func deleteItems(parts *bolt.Bucket, id string, list, n int) error {
	prefix := itemPrefix(id, list)
	c := parts.Cursor()
	for k, _ := c.Seek(itemKey(id, list, n)); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(itemKey(id, list, n)) {
		if err := parts.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// runMeta returns the lists of run id kept in parts, or nil if it is not.
func runMeta(path string, parts *bolt.Bucket, id string) (*runpatch.Stored, error) {
	v := parts.Get([]byte(id))
	if v == nil {
		return nil, nil
	}
	st, err := runpatch.DecodeStored(v)
	if err != nil {
		return nil, corruptf(path, "the parts of run %s are malformed", id)
	}
	return st, nil
}

// readRun returns the whole document of run id (a copy), or nil if there
// is no such run.
func readRun(path string, tx *bolt.Tx, id string) ([]byte, error) {
	head := tx.Bucket(bucketRuns).Get([]byte(id))
	if head == nil {
		return nil, nil
	}
	parts := tx.Bucket(bucketRunParts)
	if parts == nil {
		return bytes.Clone(head), nil
	}
	st, err := runMeta(path, parts, id)
	if err != nil || st == nil {
		return bytes.Clone(head), err
	}
	lists := make([][][]byte, len(st.Fields))
	prefix := append([]byte(id), 0)
	c := parts.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		rest := k[len(prefix):]
		if len(rest) != 5 || int(rest[0]) >= len(lists) || int(binary.BigEndian.Uint32(rest[1:])) != len(lists[rest[0]]) {
			return nil, corruptf(path, "the parts of run %s are malformed (key %q)", id, k)
		}
		lists[rest[0]] = append(lists[rest[0]], v)
	}
	for i, l := range lists {
		if len(l) != st.Lens[i] {
			return nil, corruptf(path, "run %s: list %q holds %d elements, not %d", id, st.Fields[i], len(l), st.Lens[i])
		}
	}
	doc, err := runpatch.Assemble(head, st.Fields, lists)
	if err != nil {
		return nil, corruptf(path, "run %s: %v", id, err)
	}
	return doc, nil
}

// dropRunParts removes the parts of run id (its document is now whole).
func dropRunParts(tx *bolt.Tx, id string) error {
	parts := tx.Bucket(bucketRunParts)
	if parts == nil || parts.Get([]byte(id)) == nil {
		return nil
	}
	if err := parts.Delete([]byte(id)); err != nil {
		return err
	}
	prefix := append([]byte(id), 0)
	c := parts.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := parts.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
