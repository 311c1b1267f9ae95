package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"github.com/wardenrt/warden/store/internal/membolt"
	"github.com/wardenrt/warden/store/internal/memindex"
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

// maxNameLen bounds namespaces, keys, run ids and pin names.
const maxNameLen = 256

// Entries live in bucketMemory under ns\x00key, as created (8 bytes) |
// updated (8 bytes) | value; bucketMemStats holds per namespace: uvarint
// entry count, uvarint total length (in terms). The index of their terms
// is in memoryindex.go. Namespaces, keys and terms never contain NUL, so
// the keys split unambiguously and sort by (namespace, key).

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

// termFreqs returns the distinct terms of text with their frequencies, and
// the number of terms.
func termFreqs(text string) (map[string]uint32, uint32) { return memindex.TermFreqs(text) }

// addStats adds docs entries of total length length to ns's statistics.
func addStats(stats *bolt.Bucket, ns string, docs, length int64) error {
	var count, total uint64
	if v := stats.Get([]byte(ns)); v != nil {
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
		return stats.Delete([]byte(ns))
	}
	v := binary.AppendUvarint(nil, count)
	return stats.Put([]byte(ns), binary.AppendUvarint(v, total))
}

// putMemoryTx is the whole of a memory upsert; PutMemory and bulk loads
// both use it, so both build the same index.
func putMemoryTx(tx *bolt.Tx, ns, key, value string, now time.Time) error {
	return putEntries(tx, []MemoryEntry{{Namespace: ns, Key: key, Value: value}}, now)
}

// putEntries upserts entries (distinct) in tx, with one clock reading:
// each keeps its creation time if it exists. The index changes of all of
// them are applied together, term by term.
func putEntries(tx *bolt.Tx, entries []MemoryEntry, now time.Time) error {
	ix := membolt.NewBatch()
	mem, stats := tx.Bucket(bucketMemory), tx.Bucket(bucketMemStats)
	type put struct{ doc, value []byte }
	puts := make([]put, 0, len(entries))
	for _, e := range entries {
		doc := memKey(e.Namespace, e.Key)
		created := now
		var oldTF map[string]uint32
		var oldDL uint32
		if old := mem.Get(doc); old != nil {
			if len(old) < 16 {
				return fmt.Errorf("malformed memory entry %q", doc)
			}
			created = time.Unix(0, int64(binary.BigEndian.Uint64(old)))
			oldTF, oldDL = termFreqs(string(old[16:]))
		}
		newTF, newDL := termFreqs(e.Value)
		ix.Entry(e.Namespace, doc, oldTF, newTF, newDL)
		docs := int64(1)
		if oldTF != nil {
			docs = 0
		}
		if err := addStats(stats, e.Namespace, docs, int64(newDL)-int64(oldDL)); err != nil {
			return err
		}
		puts = append(puts, put{doc, encodeEntry(created, now, e.Value)})
	}
	if len(entries) > 1 {
		// A bulk load: keys in order, pages filled (bbolt splits a page
		// at FillPercent).
		mem.FillPercent, tx.Bucket(bucketMemPostings).FillPercent = 0.9, 0.9
		slices.SortFunc(puts, func(a, b put) int { return bytes.Compare(a.doc, b.doc) })
	}
	if err := applyIndex(tx, ix); err != nil {
		return err
	}
	for _, p := range puts {
		if err := mem.Put(p.doc, p.value); err != nil {
			return err
		}
	}
	return nil
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
// the same clock reading); the postings of the whole batch are merged
// into the index term by term, in key order, which is many times faster
// than entry by entry.
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
		if len(docs) == len(entries) {
			return putEntries(tx, entries, now)
		}
		for _, e := range entries { // an entry twice: in turn
			if err := putMemoryTx(tx, e.Namespace, e.Key, e.Value, now); err != nil {
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
		mem := tx.Bucket(bucketMemory)
		doc := memKey(ns, key)
		old := mem.Get(doc)
		if old == nil {
			return fmt.Errorf("memory %s/%s: %w", ns, key, ErrNotFound)
		}
		if len(old) < 16 {
			return fmt.Errorf("malformed memory entry %q", doc)
		}
		oldTF, oldDL := termFreqs(string(old[16:]))
		ix := membolt.NewBatch()
		ix.Entry(ns, doc, oldTF, nil, 0)
		if err := applyIndex(tx, ix); err != nil {
			return err
		}
		if err := addStats(tx.Bucket(bucketMemStats), ns, -1, -int64(oldDL)); err != nil {
			return err
		}
		return mem.Delete(doc)
	})
}

// SearchMemory ranks the entries matching any term of q.Text by BM25
// (k1 = 1.2, b = 0.75) and returns the best q.Limit of them, best first, ties
// ordered by namespace and key. A query without terms (only stop words or
// punctuation) returns no hits.
func (s *Store) SearchMemory(ctx context.Context, q MemoryQuery) ([]MemoryHit, error) {
	return s.searchMemory(ctx, q, false)
}

// searchMemory is SearchMemory; exhaustive scores every posting.
func (s *Store) searchMemory(ctx context.Context, q MemoryQuery, exhaustive bool) ([]MemoryHit, error) {
	terms := memindex.QueryTerms(q.Text)
	if len(terms) == 0 {
		return nil, ctx.Err()
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 10
	}
	var hits []MemoryHit
	err := s.view(ctx, func(tx *bolt.Tx) error {
		// Corpus statistics over the selected namespaces.
		allowed, docs, total, err := s.memoryStats(tx.Bucket(bucketMemStats), q.Namespace)
		if err != nil || docs == 0 {
			return err
		}
		avgdl := float64(total) / float64(docs)
		if avgdl == 0 {
			avgdl = 1
		}
		mq := memindex.Query{AvgDL: avgdl, Limit: limit, Score: BM25Term, Check: ctx.Err, Exhaustive: exhaustive}
		if allowed != nil {
			mq.Allowed = func(ns []byte) bool { return allowed[string(ns)] }
		}
		postings, termStats := tx.Bucket(bucketMemPostings), tx.Bucket(bucketMemTerms)
		for _, term := range terms {
			df, bound, err := membolt.TermStats(termStats, term, allowed)
			if err != nil {
				return corruptf(s.path, "%v", err)
			}
			mq.Terms = append(mq.Terms, memindex.Term{Blocks: membolt.NewBlocks(postings, term), IDF: BM25IDF(docs, df), Bound: bound})
		}
		best, err := memindex.Rank(mq)
		if err != nil {
			return corruptf(s.path, "the memory index: %v", err)
		}
		hits, err = s.memoryHits(tx.Bucket(bucketMemory), best)
		return err
	})
	return hits, err
}

// memoryStats sums the entry count and total length of the namespaces
// selected (nil: all), and returns the set of them (nil when all are).
func (s *Store) memoryStats(stats *bolt.Bucket, selected func(ns string) bool) (allowed map[string]bool, docs, total uint64, err error) {
	if selected != nil {
		allowed = make(map[string]bool)
	}
	err = stats.ForEach(func(k, v []byte) error {
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

// memoryHits looks up and decodes the ranked entries; on an error it
// returns the hits decoded before it.
func (s *Store) memoryHits(mem *bolt.Bucket, best []memindex.Hit) ([]MemoryHit, error) {
	hits := make([]MemoryHit, 0, len(best))
	for _, h := range best {
		v := mem.Get(h.Doc)
		if v == nil {
			return hits, corruptf(s.path, "memory index names a missing entry %q", h.Doc)
		}
		e, err := decodeEntry(s.path, h.Doc, v)
		if err != nil {
			return hits, err
		}
		hits = append(hits, MemoryHit{MemoryEntry: e, Score: h.Score})
	}
	return hits, nil
}
