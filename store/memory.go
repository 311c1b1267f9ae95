package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"
	"unicode"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// MemoryEntry is one memory entry.
type MemoryEntry struct {
	Namespace string    `json:"namespace"`
	Key       string    `json:"key"`
	Value     string    `json:"value"`
	Created   time.Time `json:"created"`
	Updated   time.Time `json:"updated"`
}

// MemoryHit is a search result.
type MemoryHit struct {
	MemoryEntry
	Score float64 `json:"score"`
}

// MemoryQuery is a SearchMemory query.
type MemoryQuery struct {
	// Text is tokenized like entry values; entries matching any of its
	// terms are candidates.
	Text string
	// Namespace selects the namespaces searched; nil means all. Ranking
	// statistics (document frequencies, average length) are computed over
	// the selected namespaces only.
	Namespace func(ns string) bool
	// Limit is the maximum number of hits; 0 (or less) means 10.
	Limit int
}

// BM25 parameters.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Limits on names and terms.
const (
	maxNameLen   = 256 // namespaces, keys, run ids, pin names
	maxTermLen   = 64  // longer tokens are cut to their first 64 bytes
	maxQueryTerm = 32  // distinct query terms used; the rest are ignored
)

// The memory index. Entries live in bucketMemory under ns\x00key, as
// created (8 bytes) | updated (8 bytes) | value. Each distinct term of an
// entry has one posting in bucketMemIndex, term\x00ns\x00key -> uvarint term
// frequency, uvarint entry length (in terms), so a put writes one small key
// per term and a search prefix-scans one term at a time. bucketMemStats holds
// per namespace: uvarint entry count, uvarint total length. Namespaces, keys
// and terms never contain NUL, so the keys split unambiguously and sort by
// (term, namespace, key).

// validName checks a namespace, key, run id or pin name.
func validName(kind, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty %s", ErrInvalid, kind)
	case len(s) > maxNameLen:
		return fmt.Errorf("%w: %s longer than %d bytes", ErrInvalid, kind, maxNameLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, kind)
	case bytes.IndexByte([]byte(s), 0) >= 0:
		return fmt.Errorf("%w: %s contains NUL", ErrInvalid, kind)
	}
	return nil
}

func validEntryName(ns, key string) error {
	if err := validName("memory namespace", ns); err != nil {
		return err
	}
	return validName("memory key", key)
}

func memKey(ns, key string) []byte {
	k := make([]byte, 0, len(ns)+1+len(key))
	k = append(k, ns...)
	k = append(k, 0)
	return append(k, key...)
}

func postingKey(term string, doc []byte) []byte {
	k := make([]byte, 0, len(term)+1+len(doc))
	k = append(k, term...)
	k = append(k, 0)
	return append(k, doc...)
}

func encodeEntry(created, updated time.Time, value string) []byte {
	b := make([]byte, 16, 16+len(value))
	binary.BigEndian.PutUint64(b[0:], uint64(created.UnixNano()))
	binary.BigEndian.PutUint64(b[8:], uint64(updated.UnixNano()))
	return append(b, value...)
}

// decodeEntry decodes a stored entry, copying it out of the transaction.
func decodeEntry(path string, k, v []byte) (MemoryEntry, error) {
	ns, key, ok := bytes.Cut(k, []byte{0})
	if !ok || len(v) < 16 {
		return MemoryEntry{}, corruptf(path, "malformed memory entry %q", k)
	}
	return MemoryEntry{
		Namespace: string(ns),
		Key:       string(key),
		Value:     string(v[16:]),
		Created:   time.Unix(0, int64(binary.BigEndian.Uint64(v[0:]))).UTC(),
		Updated:   time.Unix(0, int64(binary.BigEndian.Uint64(v[8:]))).UTC(),
	}, nil
}

// stopWords are dropped by the tokenizer (Lucene's English stop set).
var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "but": true,
	"by": true, "for": true, "if": true, "in": true, "into": true, "is": true, "it": true, "no": true,
	"not": true, "of": true, "on": true, "or": true, "such": true, "that": true, "the": true,
	"their": true, "then": true, "there": true, "these": true, "they": true, "this": true, "to": true,
	"was": true, "will": true, "with": true,
}

// tokenize calls fn with each term of text: maximal runs of Unicode letters
// and digits, lowercased, cut to maxTermLen bytes, stop words dropped. The
// slice passed to fn is reused.
func tokenize(text string, fn func(term []byte)) {
	var buf [maxTermLen]byte
	n := 0
	full := false
	emit := func() {
		if n > 0 && !stopWords[string(buf[:n])] {
			fn(buf[:n])
		}
		n, full = 0, false
	}
	for _, r := range text {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			emit()
			continue
		}
		if full {
			continue
		}
		if r < utf8.RuneSelf {
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
		} else {
			r = unicode.ToLower(r)
		}
		if n+utf8.RuneLen(r) > maxTermLen {
			full = true
			continue
		}
		n += utf8.EncodeRune(buf[n:], r)
	}
	emit()
}

// termFreqs returns the distinct terms of text with their frequencies, and
// the number of terms.
func termFreqs(text string) (map[string]uint32, uint32) {
	tf := make(map[string]uint32)
	var dl uint32
	tokenize(text, func(t []byte) {
		tf[string(t)]++
		dl++
	})
	return tf, dl
}

// memoryBuckets are the buckets a memory write touches.
type memoryBuckets struct{ entries, index, stats *bolt.Bucket }

func memBuckets(tx *bolt.Tx) memoryBuckets {
	return memoryBuckets{tx.Bucket(bucketMemory), tx.Bucket(bucketMemIndex), tx.Bucket(bucketMemStats)}
}

// addStats adds docs entries of total length length to ns's statistics.
func (mb memoryBuckets) addStats(ns string, docs, length int64) error {
	var count, total uint64
	if v := mb.stats.Get([]byte(ns)); v != nil {
		var n1, n2 int
		count, n1 = binary.Uvarint(v)
		if n1 > 0 {
			total, n2 = binary.Uvarint(v[n1:])
		}
		if n1 <= 0 || n2 <= 0 {
			return fmt.Errorf("malformed statistics for namespace %q", ns)
		}
	}
	count = uint64(int64(count) + docs)
	total = uint64(int64(total) + length)
	if count == 0 {
		return mb.stats.Delete([]byte(ns))
	}
	v := binary.AppendUvarint(nil, count)
	return mb.stats.Put([]byte(ns), binary.AppendUvarint(v, total))
}

// unindex removes the postings and statistics of the stored entry doc.
func (mb memoryBuckets) unindex(ns string, doc, old []byte) error {
	if len(old) < 16 {
		return fmt.Errorf("malformed memory entry %q", doc)
	}
	tf, dl := termFreqs(string(old[16:]))
	for term := range tf {
		if err := mb.index.Delete(postingKey(term, doc)); err != nil {
			return err
		}
	}
	return mb.addStats(ns, -1, -int64(dl))
}

// putMemoryTx is the whole of a memory upsert; PutMemory and bulk loads
// both use it, so both build the same index.
func putMemoryTx(tx *bolt.Tx, ns, key, value string, now time.Time) error {
	mb := memBuckets(tx)
	doc := memKey(ns, key)
	created := now
	if old := mb.entries.Get(doc); old != nil {
		old = bytes.Clone(old) // the page may change under the deletes below
		if len(old) >= 16 {
			created = time.Unix(0, int64(binary.BigEndian.Uint64(old)))
		}
		if err := mb.unindex(ns, doc, old); err != nil {
			return err
		}
	}
	tf, dl := termFreqs(value)
	var pv [2 * binary.MaxVarintLen32]byte
	for term, n := range tf {
		v := binary.AppendUvarint(pv[:0], uint64(n))
		v = binary.AppendUvarint(v, uint64(dl))
		if err := mb.index.Put(postingKey(term, doc), bytes.Clone(v)); err != nil {
			return err
		}
	}
	if err := mb.addStats(ns, 1, int64(dl)); err != nil {
		return err
	}
	return mb.entries.Put(doc, encodeEntry(created, now, value))
}

// PutMemory creates or replaces the entry ns/key. Namespaces and keys must
// be non-empty, at most 256 bytes of valid UTF-8, without NUL.
func (s *Store) PutMemory(ctx context.Context, ns, key, value string) error {
	if err := validEntryName(ns, key); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		return putMemoryTx(tx, ns, key, value, s.now())
	})
}

// putMemoryBatch upserts entries in one transaction (bulk loads). The
// result is exactly what PutMemory for each entry in turn would store (with
// the same clock reading); when every entry is new, the postings of the whole
// batch are written in key order, which keeps bbolt's pages small and is
// many times faster than inserting them entry by entry.
func (s *Store) putMemoryBatch(ctx context.Context, entries []MemoryEntry) error {
	docs := make(map[string]bool, len(entries))
	for _, e := range entries {
		if err := validEntryName(e.Namespace, e.Key); err != nil {
			return err
		}
		docs[string(memKey(e.Namespace, e.Key))] = true
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		now := s.now()
		mb := memBuckets(tx)
		fresh := len(docs) == len(entries)
		for doc := range docs {
			if fresh && mb.entries.Get([]byte(doc)) != nil {
				fresh = false
			}
		}
		if !fresh {
			for _, e := range entries {
				if err := putMemoryTx(tx, e.Namespace, e.Key, e.Value, now); err != nil {
					return err
				}
			}
			return nil
		}
		type kv struct{ k, v []byte }
		var postings []kv
		type nsStats struct{ docs, length int64 }
		stats := make(map[string]*nsStats)
		for _, e := range entries {
			doc := memKey(e.Namespace, e.Key)
			tf, dl := termFreqs(e.Value)
			for term, n := range tf {
				v := binary.AppendUvarint(nil, uint64(n))
				postings = append(postings, kv{postingKey(term, doc), binary.AppendUvarint(v, uint64(dl))})
			}
			st := stats[e.Namespace]
			if st == nil {
				st = &nsStats{}
				stats[e.Namespace] = st
			}
			st.docs++
			st.length += int64(dl)
		}
		slices.SortFunc(postings, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
		// Pages split by in-order inserts need no room for later
		// inserts between their keys as much as randomly filled ones.
		mb.index.FillPercent = 0.9
		for _, p := range postings {
			if err := mb.index.Put(p.k, p.v); err != nil {
				return err
			}
		}
		for ns, st := range stats {
			if err := mb.addStats(ns, st.docs, st.length); err != nil {
				return err
			}
		}
		sorted := slices.Clone(entries)
		slices.SortFunc(sorted, func(a, b MemoryEntry) int {
			return bytes.Compare(memKey(a.Namespace, a.Key), memKey(b.Namespace, b.Key))
		})
		for _, e := range sorted {
			if err := mb.entries.Put(memKey(e.Namespace, e.Key), encodeEntry(now, now, e.Value)); err != nil {
				return err
			}
		}
		return nil
	})
}

// GetMemory returns the entry ns/key, or an error wrapping ErrNotFound.
func (s *Store) GetMemory(ctx context.Context, ns, key string) (MemoryEntry, error) {
	if err := validEntryName(ns, key); err != nil {
		return MemoryEntry{}, err
	}
	var e MemoryEntry
	err := s.view(ctx, func(tx *bolt.Tx) error {
		k := memKey(ns, key)
		v := tx.Bucket(bucketMemory).Get(k)
		if v == nil {
			return fmt.Errorf("memory %s/%s: %w", ns, key, ErrNotFound)
		}
		var err error
		e, err = decodeEntry(s.path, k, v)
		return err
	})
	return e, err
}

// ListMemory returns the entries of namespace ns ("" for all namespaces)
// ordered by namespace and key, at most limit of them (<= 0: all).
func (s *Store) ListMemory(ctx context.Context, ns string, limit int) ([]MemoryEntry, error) {
	var prefix []byte
	if ns != "" {
		if err := validName("memory namespace", ns); err != nil {
			return nil, err
		}
		prefix = memKey(ns, "")
	}
	var out []MemoryEntry
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketMemory).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if limit > 0 && len(out) >= limit {
				break
			}
			if len(out)%256 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			e, err := decodeEntry(s.path, k, v)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// DeleteMemory removes the entry ns/key, or returns an error wrapping
// ErrNotFound.
func (s *Store) DeleteMemory(ctx context.Context, ns, key string) error {
	if err := validEntryName(ns, key); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		mb := memBuckets(tx)
		doc := memKey(ns, key)
		old := mb.entries.Get(doc)
		if old == nil {
			return fmt.Errorf("memory %s/%s: %w", ns, key, ErrNotFound)
		}
		if err := mb.unindex(ns, doc, bytes.Clone(old)); err != nil {
			return err
		}
		return mb.entries.Delete(doc)
	})
}

// termCursor walks the postings of one term in the selected namespaces.
// doc (ns\x00key) is the current posting's entry, nil at the end; it points
// into the transaction.
type termCursor struct {
	c       *bolt.Cursor
	prefix  []byte // term\x00
	allowed map[string]bool
	path    string
	idf     float64

	doc    []byte
	tf, dl uint64
}

func (tc *termCursor) first() error {
	k, v := tc.c.Seek(tc.prefix)
	return tc.settle(k, v)
}

func (tc *termCursor) next() error {
	k, v := tc.c.Next()
	return tc.settle(k, v)
}

// settle moves on from k to the first posting of the term in a selected
// namespace and decodes it.
func (tc *termCursor) settle(k, v []byte) error {
	for ; k != nil && bytes.HasPrefix(k, tc.prefix); k, v = tc.c.Next() {
		doc := k[len(tc.prefix):]
		if tc.allowed != nil {
			ns, _, _ := bytes.Cut(doc, []byte{0})
			if !tc.allowed[string(ns)] {
				continue
			}
		}
		var n1, n2 int
		tc.tf, n1 = binary.Uvarint(v)
		if n1 > 0 {
			tc.dl, n2 = binary.Uvarint(v[n1:])
		}
		if n1 <= 0 || n2 <= 0 {
			tc.doc = nil
			return corruptf(tc.path, "malformed memory index entry %q", k)
		}
		tc.doc = doc
		return nil
	}
	tc.doc = nil
	return nil
}

// scored is a candidate hit.
type scored struct {
	doc   []byte
	score float64
}

// worse orders hits: lower score first, then larger namespace/key.
func (a scored) worse(b scored) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	return bytes.Compare(a.doc, b.doc) > 0
}

// topK keeps the k best hits in a min-heap (worst on top).
type topK struct {
	k int
	h []scored
}

func (t *topK) push(x scored) {
	if len(t.h) < t.k {
		t.h = append(t.h, x)
		for i := len(t.h) - 1; i > 0; {
			p := (i - 1) / 2
			if !t.h[i].worse(t.h[p]) {
				break
			}
			t.h[i], t.h[p] = t.h[p], t.h[i]
			i = p
		}
		return
	}
	if !t.h[0].worse(x) {
		return
	}
	t.h[0] = x
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(t.h) && t.h[l].worse(t.h[m]) {
			m = l
		}
		if r < len(t.h) && t.h[r].worse(t.h[m]) {
			m = r
		}
		if m == i {
			break
		}
		t.h[i], t.h[m] = t.h[m], t.h[i]
		i = m
	}
}

// SearchMemory ranks the entries matching any term of q.Text by BM25
// (k1 = 1.2, b = 0.75) and returns the best q.Limit of them, best first, ties
// ordered by namespace and key. A query without terms (only stop words or
// punctuation) returns no hits.
func (s *Store) SearchMemory(ctx context.Context, q MemoryQuery) ([]MemoryHit, error) {
	terms := queryTerms(q.Text)
	if len(terms) == 0 {
		return nil, ctx.Err()
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 10
	}
	var hits []MemoryHit
	err := s.view(ctx, func(tx *bolt.Tx) error {
		mb := memBuckets(tx)

		// Corpus statistics over the selected namespaces.
		allowed, docs, total, err := s.memoryStats(mb, q.Namespace)
		if err != nil || docs == 0 {
			return err
		}
		avgdl := float64(total) / float64(docs)
		if avgdl == 0 {
			avgdl = 1
		}

		// Each term's postings are sorted by namespace and key. A first
		// pass counts them (document frequency over the selected
		// namespaces, for the idf); the second merges them, one cursor per
		// term, scoring each entry once. Nothing is materialised, so a
		// term that occurs in every entry costs two cursor walks and no
		// allocation.
		cursors, err := s.termCursors(ctx, mb, terms, allowed, docs)
		if err != nil {
			return err
		}
		best, err := rankMemory(ctx, cursors, avgdl, limit)
		if err != nil {
			return err
		}
		hits, err = s.memoryHits(mb, best)
		return err
	})
	return hits, err
}

// queryTerms returns the distinct terms of a query's text, at most
// maxQueryTerm of them, in order.
func queryTerms(text string) []string {
	var terms []string
	tokenize(text, func(t []byte) {
		if len(terms) < maxQueryTerm && !slices.Contains(terms, string(t)) {
			terms = append(terms, string(t))
		}
	})
	return terms
}

// memoryStats sums the entry count and total length of the namespaces
// selected (nil: all), and returns the set of them (nil when all are).
func (s *Store) memoryStats(mb memoryBuckets, selected func(ns string) bool) (allowed map[string]bool, docs, total uint64, err error) {
	if selected != nil {
		allowed = make(map[string]bool)
	}
	err = mb.stats.ForEach(func(k, v []byte) error {
		if allowed != nil {
			if !selected(string(k)) {
				return nil
			}
			allowed[string(k)] = true
		}
		count, n1 := binary.Uvarint(v)
		length, n2 := uint64(0), 0
		if n1 > 0 {
			length, n2 = binary.Uvarint(v[n1:])
		}
		if n1 <= 0 || n2 <= 0 {
			return corruptf(s.path, "malformed memory statistics for namespace %q", k)
		}
		docs += count
		total += length
		return nil
	})
	return allowed, docs, total, err
}

// termCursors opens a cursor per term, counting its postings for the idf
// (the first pass), and leaves each on its first posting.
func (s *Store) termCursors(ctx context.Context, mb memoryBuckets, terms []string, allowed map[string]bool, docs uint64) ([]*termCursor, error) {
	cursors := make([]*termCursor, len(terms))
	for i, term := range terms {
		tc := &termCursor{c: mb.index.Cursor(), prefix: append([]byte(term), 0), allowed: allowed, path: s.path}
		df := 0
		for err := tc.first(); tc.doc != nil; err = tc.next() {
			if err != nil {
				return nil, err
			}
			df++
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		tc.idf = BM25IDF(docs, uint64(df))
		if err := tc.first(); err != nil {
			return nil, err
		}
		cursors[i] = tc
	}
	return cursors, nil
}

// rankMemory merges the cursors' postings (the second pass), scoring each
// entry once, and returns the best limit of them, best first.
func rankMemory(ctx context.Context, cursors []*termCursor, avgdl float64, limit int) ([]scored, error) {
	top := topK{k: limit}
	at := make([]bool, len(cursors)) // cursors positioned on doc
	for n := 0; ; n++ {
		var doc []byte
		for i, tc := range cursors {
			if tc.doc == nil {
				at[i] = false
				continue
			}
			c := -1
			if doc != nil {
				c = bytes.Compare(tc.doc, doc)
			}
			if c < 0 {
				doc = tc.doc
				clear(at[:i])
			}
			at[i] = c <= 0
		}
		if doc == nil {
			break
		}
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		score := 0.0
		for i, tc := range cursors {
			if at[i] {
				score += BM25Term(tc.idf, float64(tc.tf), float64(tc.dl), avgdl)
				if err := tc.next(); err != nil {
					return nil, err
				}
			}
		}
		top.push(scored{doc: doc, score: score})
	}

	slices.SortFunc(top.h, func(a, b scored) int {
		switch {
		case b.worse(a):
			return -1
		case a.worse(b):
			return 1
		}
		return 0
	})
	return top.h, nil
}

// memoryHits looks up and decodes the ranked entries; on an error it
// returns the hits decoded before it.
func (s *Store) memoryHits(mb memoryBuckets, best []scored) ([]MemoryHit, error) {
	hits := make([]MemoryHit, 0, len(best))
	for _, h := range best {
		v := mb.entries.Get(h.doc)
		if v == nil {
			return hits, corruptf(s.path, "memory index names a missing entry %q", h.doc)
		}
		e, err := decodeEntry(s.path, h.doc, v)
		if err != nil {
			return hits, err
		}
		hits = append(hits, MemoryHit{MemoryEntry: e, Score: h.score})
	}
	return hits, nil
}
