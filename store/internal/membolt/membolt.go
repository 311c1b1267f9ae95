// Package membolt keeps the memory index (store/internal/memindex) in two
// bbolt buckets. In the postings bucket, each term's postings in blocks
// of up to 128 under term\x00<first doc>; in the terms bucket, under
// term\x00 the number of entries holding the term with a bound on its
// postings' scores, and under term\x00ns the number of entries of
// namespace ns holding it. A Batch turns memory writes into block changes,
// applied term by term (a put or a delete rewrites the one block per term
// that the entry falls in); a search reads a term's statistics
// (TermStats) and its blocks (Blocks).
package membolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/wardenrt/warden/store/internal/memindex"
)

// Batch collects the index changes of memory writes, to apply them term
// by term.
type Batch struct {
	changes map[string][]memindex.Change
	df      map[string]map[string]int64 // term -> namespace -> entries gained
	pairs   map[string][]memindex.Pair  // term -> frontier of the new postings
	docs    int64                       // entries gained
}

// NewBatch returns an empty batch.
func NewBatch() *Batch {
	return &Batch{changes: map[string][]memindex.Change{}, df: map[string]map[string]int64{}, pairs: map[string][]memindex.Pair{}}
}

// Entry records that doc (of namespace ns) had the terms oldTF (nil: it did
// not exist) and now has newTF, of length newDL (nil: it is deleted).
func (ix *Batch) Entry(ns string, doc []byte, oldTF, newTF map[string]uint32, newDL uint32) {
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

// Apply writes the batch's changes to the index, term by term in order,
// and returns how many entries the index gained.
func (ix *Batch) Apply(postings, terms *bolt.Bucket) (docs int64, err error) {
	for _, term := range slices.Sorted(maps.Keys(ix.changes)) {
		changes := ix.changes[term]
		slices.SortFunc(changes, func(a, b memindex.Change) int { return bytes.Compare(a.Doc, b.Doc) })
		added, err := memindex.Apply(NewBlocks(postings, term), changes)
		if err != nil {
			return 0, fmt.Errorf("the memory index of %q: %w", term, err)
		}
		var want int64
		for _, n := range ix.df[term] {
			want += n
		}
		if int64(added) != want {
			return 0, fmt.Errorf("the memory index of %q disagrees with the entries (%d postings changed, %d expected); reopen the store to rebuild it", term, added, want)
		}
		if err := addTermStats(terms, term, want, ix.pairs[term], ix.df[term]); err != nil {
			return 0, err
		}
	}
	return ix.docs, nil
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

// TermStats returns how many entries of the allowed namespaces (nil: all)
// hold term, and a bound on its postings.
func TermStats(terms *bolt.Bucket, term string, allowed map[string]bool) (uint64, []memindex.Pair, error) {
	v := terms.Get(termKey(term, ""))
	if v == nil {
		return 0, nil, nil
	}
	df, pairs, err := memindex.DecodeTermStats(v)
	if err != nil {
		return 0, nil, fmt.Errorf("the statistics of term %q are malformed", term)
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
				return 0, nil, fmt.Errorf("the statistics of term %q are malformed", term)
			}
			df += n
		}
	}
	return df, pairs, nil
}

// Blocks is memindex.Blocks over one term's keys of the postings bucket.
type Blocks struct {
	b      *bolt.Bucket
	c      *bolt.Cursor
	prefix []byte // term\x00
	key    []byte
}

// NewBlocks returns the blocks of term in the postings bucket b.
func NewBlocks(b *bolt.Bucket, term string) *Blocks {
	return &Blocks{b: b, c: b.Cursor(), prefix: termKey(term, "")}
}

func (t *Blocks) own(k, v []byte) ([]byte, []byte) {
	if k == nil || !bytes.HasPrefix(k, t.prefix) {
		return nil, nil
	}
	return k[len(t.prefix):], v
}

func (t *Blocks) Seek(doc []byte) ([]byte, []byte) {
	t.key = append(append(t.key[:0], t.prefix...), doc...)
	return t.own(t.c.Seek(t.key))
}

func (t *Blocks) Last() ([]byte, []byte) {
	// Past the term's keys: term\x01 (terms are letters and digits).
	t.key = append(append(t.key[:0], t.prefix[:len(t.prefix)-1]...), 1)
	if k, _ := t.c.Seek(t.key); k == nil {
		return t.own(t.c.Last())
	}
	return t.own(t.c.Prev())
}

func (t *Blocks) Next() ([]byte, []byte) { return t.own(t.c.Next()) }
func (t *Blocks) Prev() ([]byte, []byte) { return t.own(t.c.Prev()) }

func (t *Blocks) Put(first, v []byte) error {
	return t.b.Put(append(bytes.Clone(t.prefix), first...), v)
}

func (t *Blocks) Delete(first []byte) error {
	return t.b.Delete(append(bytes.Clone(t.prefix), first...))
}
