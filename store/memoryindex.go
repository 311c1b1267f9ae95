package store

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/wardenrt/warden/store/internal/membolt"
)

// The memory index (store/internal/memindex), kept in bucketMemPostings
// and bucketMemTerms (store/internal/membolt). A put or a delete rewrites
// the one block per term that the entry falls in; a search merges the
// terms' blocks, skipping those that cannot reach the k-th best score.
//
// The meta key memIndexKey holds the number of entries the index holds. A
// store whose index is missing (made before it), or that a warden without
// it has written memory to (its postings in the old bucketMemIndex, which
// is otherwise kept empty so that such a warden can still open the file;
// or an entry count that is not the index's), has the index rebuilt from
// the entries when it is opened; a rebuild cut short (the process killed)
// is carried on by the next open.

var (
	bucketMemPostings = []byte("memory_postings")
	bucketMemTerms    = []byte("memory_terms")
	memIndexKey       = []byte("memory_index")
)

// memRebuildChunk is how many entries one transaction of a rebuild reads.
var memRebuildChunk = 20_000

// applyIndex writes the index changes of ix.
func applyIndex(tx *bolt.Tx, ix *membolt.Batch) error {
	docs, err := ix.Apply(tx.Bucket(bucketMemPostings), tx.Bucket(bucketMemTerms))
	if err != nil {
		return err
	}
	return addIndexedDocs(tx, docs)
}

// addIndexedDocs adds n to the number of entries the index holds.
func addIndexedDocs(tx *bolt.Tx, n int64) error {
	if n == 0 {
		return nil
	}
	meta := tx.Bucket(bucketMeta)
	var docs uint64
	if v := meta.Get(memIndexKey); v != nil {
		var w int
		if docs, w = binary.Uvarint(v); w <= 0 {
			return fmt.Errorf("the memory index's entry count is malformed")
		}
	}
	return meta.Put(memIndexKey, binary.AppendUvarint(nil, uint64(int64(docs)+n)))
}

// memoryIndexStale reports whether the memory index must be rebuilt: it
// was never built (or its rebuild is not finished), a warden without it
// wrote postings of its own, or the entry count is not the index's (such
// a warden removed entries).
func memoryIndexStale(tx *bolt.Tx) (bool, error) {
	v := tx.Bucket(bucketMeta).Get(memIndexKey)
	if v == nil || tx.Bucket(bucketMemPostings) == nil || oldPostings(tx) {
		return true, nil
	}
	indexed, w := binary.Uvarint(v)
	docs, _, err := memStatsSum(tx)
	return w <= 0 || indexed != docs, err
}

// oldPostings reports whether a warden without the index wrote postings.
func oldPostings(tx *bolt.Tx) bool {
	old := tx.Bucket(bucketMemIndex)
	if old == nil {
		return false
	}
	k, _ := old.Cursor().First()
	return k != nil
}

// memStatsSum is the entry count and total length of all namespaces.
func memStatsSum(tx *bolt.Tx) (docs, length uint64, err error) {
	err = tx.Bucket(bucketMemStats).ForEach(func(_, v []byte) error {
		n, w := binary.Uvarint(v)
		l, w2 := uint64(0), 0
		if w > 0 {
			l, w2 = binary.Uvarint(v[w:])
		}
		if w <= 0 || w2 <= 0 {
			return fmt.Errorf("malformed memory statistics")
		}
		docs, length = docs+n, length+l
		return nil
	})
	return docs, length, err
}

// memRebuildKey is in the meta bucket while the memory index is being
// rebuilt: how far, as uvarint entries | uvarint their total length | the
// last entry indexed. A rebuild cut short (the process killed) carries on
// from there, unless the statistics built so far no longer add up to it
// or old postings appeared (a warden without the index wrote memory
// meanwhile): then it starts over.
var memRebuildKey = []byte("memory_rebuild")

// rebuildProgress is how far a rebuild has come.
type rebuildProgress struct {
	docs, length uint64
	after        []byte // the last entry indexed; nil: none yet
}

func (p rebuildProgress) encode() []byte {
	return append(binary.AppendUvarint(binary.AppendUvarint(nil, p.docs), p.length), p.after...)
}

// resumable returns how far an unfinished rebuild came; ok is false if
// there is none to carry on.
func resumable(tx *bolt.Tx) (p rebuildProgress, ok bool) {
	v := tx.Bucket(bucketMeta).Get(memRebuildKey)
	if v == nil || oldPostings(tx) {
		return p, false
	}
	var w, w2 int
	if p.docs, w = binary.Uvarint(v); w > 0 {
		p.length, w2 = binary.Uvarint(v[w:])
	}
	if w <= 0 || w2 <= 0 {
		return p, false
	}
	if rest := v[w+w2:]; len(rest) > 0 {
		p.after = bytes.Clone(rest)
	}
	docs, length, err := memStatsSum(tx)
	return p, err == nil && docs == p.docs && length == p.length
}

// rebuildMemoryIndex builds the index (and the namespaces' statistics)
// from the entries, in transactions of memRebuildChunk entries, carrying
// on from where an earlier rebuild was cut short. Until the last one
// commits the entry count is absent, so the index is not used before it
// is complete.
func rebuildMemoryIndex(h *handle) error {
	var p rebuildProgress
	ok := false
	err := h.run(false, func(tx *bolt.Tx) error {
		p, ok = resumable(tx)
		return nil
	})
	if err == nil && !ok {
		p = rebuildProgress{}
		if err = h.run(true, resetMemoryIndex); err == nil {
			upgraded()
		}
	}
	for done := false; err == nil && !done; {
		err = h.run(true, func(tx *bolt.Tx) (err error) {
			done, err = rebuildChunk(tx, &p)
			return err
		})
		if err == nil {
			upgraded()
		}
	}
	if err != nil {
		return fmt.Errorf("rebuilding the memory index: %w", err)
	}
	return nil
}

// resetMemoryIndex empties the index and the statistics for a rebuild.
func resetMemoryIndex(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketMemPostings, bucketMemTerms, bucketMemStats, bucketMemIndex} {
		if tx.Bucket(name) != nil {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		if _, err := tx.CreateBucket(name); err != nil {
			return err
		}
	}
	meta := tx.Bucket(bucketMeta)
	if err := meta.Delete(memIndexKey); err != nil {
		return err
	}
	return meta.Put(memRebuildKey, rebuildProgress{}.encode())
}

// rebuildChunk indexes the next memRebuildChunk entries after p.after and
// moves p on; done says the index is complete.
func rebuildChunk(tx *bolt.Tx, p *rebuildProgress) (done bool, err error) {
	c := tx.Bucket(bucketMemory).Cursor()
	k, v := c.First()
	if p.after != nil {
		if k, v = c.Seek(p.after); bytes.Equal(k, p.after) {
			k, v = c.Next()
		}
	}
	ix := membolt.NewBatch()
	stats := tx.Bucket(bucketMemStats)
	for n := 0; n < memRebuildChunk && k != nil; k, v = c.Next() {
		ns, _, ok := bytes.Cut(k, []byte{0})
		if !ok || len(v) < 16 {
			return false, fmt.Errorf("malformed memory entry %q", k)
		}
		tf, dl := termFreqs(string(v[16:]))
		ix.Entry(string(ns), bytes.Clone(k), nil, tf, dl)
		if err := addStats(stats, string(ns), 1, int64(dl)); err != nil {
			return false, err
		}
		p.after = append(p.after[:0], k...)
		p.docs, p.length = p.docs+1, p.length+uint64(dl)
		n++
	}
	postings := tx.Bucket(bucketMemPostings)
	postings.FillPercent = 0.9 // appended in order
	if _, err := ix.Apply(postings, tx.Bucket(bucketMemTerms)); err != nil {
		return false, err // the entries are counted once all are in
	}
	meta := tx.Bucket(bucketMeta)
	if k != nil {
		return false, meta.Put(memRebuildKey, p.encode())
	}
	if err := meta.Delete(memRebuildKey); err != nil {
		return false, err
	}
	return true, meta.Put(memIndexKey, binary.AppendUvarint(nil, p.docs))
}
