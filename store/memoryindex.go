package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/wardenrt/warden/store/internal/memindex"
)

// The memory index (store/internal/memindex): each term's postings in
// blocks of up to 128, in bucketMemPostings under term\x00<first doc>, and
// in bucketMemTerms under term\x00 the number of entries holding the term
// with a bound on its postings' scores, under term\x00ns the number of
// entries of namespace ns holding it. A put or a delete rewrites the one
// block per term that the entry falls in; a search merges the terms'
// blocks, skipping those that cannot reach the k-th best score.
//
// The meta key memIndexKey holds the number of entries the index holds. A
// store whose index is missing (made before it), or that a warden without
// it has written memory to (its postings in the old bucketMemIndex, which
// is otherwise kept empty so that such a warden can still open the file;
// or an entry count that is not the index's), has the index rebuilt from
// the entries when it is opened.

var (
	bucketMemPostings = []byte("memory_postings")
	bucketMemTerms    = []byte("memory_terms")
	memIndexKey       = []byte("memory_index")
)

// memRebuildChunk is how many entries one transaction of a rebuild reads.
const memRebuildChunk = 20_000

// indexBatch collects the index changes of memory writes, to apply them
// term by term.
type indexBatch struct {
	changes map[string][]memindex.Change
	df      map[string]map[string]int64 // term -> namespace -> entries gained
	pairs   map[string][]memindex.Pair  // term -> frontier of the new postings
	docs    int64                       // entries gained
}

func newIndexBatch() *indexBatch {
	return &indexBatch{changes: map[string][]memindex.Change{}, df: map[string]map[string]int64{}, pairs: map[string][]memindex.Pair{}}
}

// entry records that doc (of namespace ns) had the terms oldTF (nil: it did
// not exist) and now has newTF, of length newDL (nil: it is deleted).
func (ix *indexBatch) entry(ns string, doc []byte, oldTF, newTF map[string]uint32, newDL uint32) {
	dfAdd := func(term string, n int64) {
		m := ix.df[term]
		if m == nil {
			m = map[string]int64{}
			ix.df[term] = m
		}
		m[ns] += n
	}
	for term, tf := range newTF {
		p := memindex.Posting{Doc: doc, TF: tf, DL: newDL}
		ix.changes[term] = append(ix.changes[term], memindex.Change{Posting: p})
		ix.pairs[term] = memindex.MergePairs(ix.pairs[term], []memindex.Pair{{TF: tf, DL: newDL}})
		if _, had := oldTF[term]; !had {
			dfAdd(term, 1)
		}
	}
	for term := range oldTF {
		if _, has := newTF[term]; !has {
			ix.changes[term] = append(ix.changes[term], memindex.Change{Posting: memindex.Posting{Doc: doc}, Delete: true})
			dfAdd(term, -1)
		}
	}
	switch {
	case oldTF == nil && newTF != nil:
		ix.docs++
	case oldTF != nil && newTF == nil:
		ix.docs--
	}
}

// apply writes the batch's changes to the index, term by term in order.
func (ix *indexBatch) apply(tx *bolt.Tx) error {
	postings, terms := tx.Bucket(bucketMemPostings), tx.Bucket(bucketMemTerms)
	for _, term := range slices.Sorted(maps.Keys(ix.changes)) {
		changes := ix.changes[term]
		slices.SortFunc(changes, func(a, b memindex.Change) int { return bytes.Compare(a.Doc, b.Doc) })
		added, err := memindex.Apply(newTermBlocks(postings, term), changes)
		if err != nil {
			return fmt.Errorf("the memory index of %q: %w", term, err)
		}
		var want int64
		for _, n := range ix.df[term] {
			want += n
		}
		if int64(added) != want {
			return fmt.Errorf("the memory index of %q disagrees with the entries (%d postings changed, %d expected); reopen the store to rebuild it", term, added, want)
		}
		if err := addTermStats(terms, term, want, ix.pairs[term], ix.df[term]); err != nil {
			return err
		}
	}
	return addIndexedDocs(tx, ix.docs)
}

// termKey is the key of a term's statistics in namespace ns ("": all).
func termKey(term, ns string) []byte {
	k := make([]byte, 0, len(term)+1+len(ns))
	k = append(k, term...)
	k = append(k, 0)
	return append(k, ns...)
}

// addTermStats adds df entries (by namespace: byNS) and the frontier pairs
// to term's statistics.
func addTermStats(terms *bolt.Bucket, term string, df int64, pairs []memindex.Pair, byNS map[string]int64) error {
	var total uint64
	var old []memindex.Pair
	if v := terms.Get(termKey(term, "")); v != nil {
		var err error
		if total, old, err = memindex.DecodeTermStats(v); err != nil {
			return fmt.Errorf("the statistics of term %q: %w", term, err)
		}
	}
	if total = uint64(int64(total) + df); total == 0 {
		if err := terms.Delete(termKey(term, "")); err != nil {
			return err
		}
	} else if err := terms.Put(termKey(term, ""), memindex.EncodeTermStats(total, memindex.MergePairs(old, pairs))); err != nil {
		return err
	}
	for _, ns := range slices.Sorted(maps.Keys(byNS)) {
		k := termKey(term, ns)
		var n uint64
		if v := terms.Get(k); v != nil {
			var w int
			if n, w = binary.Uvarint(v); w <= 0 {
				return fmt.Errorf("the statistics of term %q in namespace %q are malformed", term, ns)
			}
		}
		var err error
		if n = uint64(int64(n) + byNS[ns]); n == 0 {
			err = terms.Delete(k)
		} else {
			err = terms.Put(k, binary.AppendUvarint(nil, n))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// termStats returns how many entries of the allowed namespaces (nil: all)
// hold term, and a bound on its postings.
func (s *Store) termStats(terms *bolt.Bucket, term string, allowed map[string]bool) (uint64, []memindex.Pair, error) {
	v := terms.Get(termKey(term, ""))
	if v == nil {
		return 0, nil, nil
	}
	df, pairs, err := memindex.DecodeTermStats(v)
	if err != nil {
		return 0, nil, corruptf(s.path, "the statistics of term %q are malformed", term)
	}
	if allowed == nil {
		return df, pairs, nil
	}
	df = 0
	prefix := termKey(term, "")
	c := terms.Cursor()
	k, v := c.Seek(prefix)
	for k, v = c.Next(); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if allowed[string(k[len(prefix):])] {
			n, w := binary.Uvarint(v)
			if w <= 0 {
				return 0, nil, corruptf(s.path, "the statistics of term %q are malformed", term)
			}
			df += n
		}
	}
	return df, pairs, nil
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

// termBlocks is memindex.Blocks over one term's keys of bucketMemPostings.
type termBlocks struct {
	b      *bolt.Bucket
	c      *bolt.Cursor
	prefix []byte // term\x00
	key    []byte
}

func newTermBlocks(b *bolt.Bucket, term string) *termBlocks {
	return &termBlocks{b: b, c: b.Cursor(), prefix: termKey(term, "")}
}

func (t *termBlocks) own(k, v []byte) ([]byte, []byte) {
	if k == nil || !bytes.HasPrefix(k, t.prefix) {
		return nil, nil
	}
	return k[len(t.prefix):], v
}

func (t *termBlocks) Seek(doc []byte) ([]byte, []byte) {
	t.key = append(append(t.key[:0], t.prefix...), doc...)
	return t.own(t.c.Seek(t.key))
}

func (t *termBlocks) Last() ([]byte, []byte) {
	// Past the term's keys: term\x01 (terms are letters and digits).
	t.key = append(append(t.key[:0], t.prefix[:len(t.prefix)-1]...), 1)
	if k, _ := t.c.Seek(t.key); k == nil {
		return t.own(t.c.Last())
	}
	return t.own(t.c.Prev())
}

func (t *termBlocks) Next() ([]byte, []byte) { return t.own(t.c.Next()) }
func (t *termBlocks) Prev() ([]byte, []byte) { return t.own(t.c.Prev()) }

func (t *termBlocks) Put(first, v []byte) error {
	return t.b.Put(append(bytes.Clone(t.prefix), first...), v)
}

func (t *termBlocks) Delete(first []byte) error {
	return t.b.Delete(append(bytes.Clone(t.prefix), first...))
}

// memoryIndexStale reports whether the memory index must be rebuilt: it
// was never built, a warden without it wrote postings of its own, or the
// entry count is not the index's (such a warden removed entries).
func memoryIndexStale(tx *bolt.Tx) (bool, error) {
	v := tx.Bucket(bucketMeta).Get(memIndexKey)
	if v == nil || tx.Bucket(bucketMemPostings) == nil {
		return true, nil
	}
	if old := tx.Bucket(bucketMemIndex); old != nil {
		if k, _ := old.Cursor().First(); k != nil {
			return true, nil
		}
	}
	indexed, w := binary.Uvarint(v)
	var docs uint64
	err := tx.Bucket(bucketMemStats).ForEach(func(_, v []byte) error {
		n, w := binary.Uvarint(v)
		if w <= 0 {
			return fmt.Errorf("malformed memory statistics")
		}
		docs += n
		return nil
	})
	return w <= 0 || indexed != docs, err
}

// rebuildMemoryIndex builds the index (and the namespaces' statistics)
// from the entries, in transactions of memRebuildChunk entries. Until the
// last one commits the entry count is absent, so a rebuild cut short
// starts over at the next open.
func rebuildMemoryIndex(h *handle) error {
	err := h.run(true, func(tx *bolt.Tx) error {
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
		return tx.Bucket(bucketMeta).Delete(memIndexKey)
	})
	var after []byte // the last entry indexed
	var total uint64
	for done := false; err == nil && !done; {
		err = h.run(true, func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketMemory).Cursor()
			k, v := c.First()
			if after != nil {
				c.Seek(after)
				k, v = c.Next()
			}
			ix := newIndexBatch()
			stats := tx.Bucket(bucketMemStats)
			for n := 0; n < memRebuildChunk && k != nil; k, v = c.Next() {
				ns, _, ok := bytes.Cut(k, []byte{0})
				if !ok || len(v) < 16 {
					return fmt.Errorf("malformed memory entry %q", k)
				}
				tf, dl := termFreqs(string(v[16:]))
				ix.entry(string(ns), bytes.Clone(k), nil, tf, dl)
				if err := addStats(stats, string(ns), 1, int64(dl)); err != nil {
					return err
				}
				after = append(after[:0], k...)
				n++
			}
			done = k == nil
			total += uint64(ix.docs)
			ix.docs = 0                                    // counted once complete
			tx.Bucket(bucketMemPostings).FillPercent = 0.9 // appended in order
			if err := ix.apply(tx); err != nil || !done {
				return err
			}
			return tx.Bucket(bucketMeta).Put(memIndexKey, binary.AppendUvarint(nil, total))
		})
	}
	if err != nil {
		return fmt.Errorf("rebuilding the memory index: %w", err)
	}
	return nil
}
