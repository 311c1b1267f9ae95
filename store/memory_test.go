package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/wardenrt/warden/store/internal/memindex"
)

func terms(text string) []string {
	var out []string
	memindex.Tokenize(text, func(t []byte) { out = append(out, string(t)) })
	return out
}

func TestTokenize(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"", nil},
		{"Hello, World!", []string{"hello", "world"}},
		{"The quick brown fox is in the box", []string{"quick", "brown", "fox", "box"}},
		{"naïve Café ÉCOLE", []string{"naïve", "café", "école"}},
		{"snake_case-and-kebab42 v1.2.3", []string{"snake", "case", "kebab42", "v1", "2", "3"}},
		{"日本語 テキスト", []string{"日本語", "テキスト"}},
		{"tab\tnew\nline\x00nul", []string{"tab", "new", "line", "nul"}},
		{"bad\xffutf8", []string{"bad", "utf8"}},
		{strings.Repeat("a", 100) + " b", []string{strings.Repeat("a", 64), "b"}},
		{strings.Repeat("é", 40), []string{strings.Repeat("é", 32)}},
	}
	for _, tc := range tests {
		if got := terms(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("tokenize(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

// dumpIndex returns the memory index as the postings of each term, the
// entries holding each term in each namespace, and the count of entries it
// holds; it fails the test if the blocks are out of shape or the bounds
// do not bound the postings.
func dumpIndex(t *testing.T, s *Store) (postings map[string][]memindex.Posting, df map[string]uint64, docs uint64) {
	t.Helper()
	postings, df = map[string][]memindex.Posting{}, map[string]uint64{}
	bounds := map[string][]memindex.Pair{}
	err := s.view(bg, func(tx *bolt.Tx) error {
		err := tx.Bucket(bucketMemPostings).ForEach(func(k, v []byte) error {
			term, first, _ := bytes.Cut(k, []byte{0})
			ps, err := memindex.DecodeBlock(first, v)
			if err != nil || len(ps) > memindex.MaxBlock {
				return fmt.Errorf("block %q: %v (%d postings)", k, err, len(ps))
			}
			if prev := postings[string(term)]; len(prev) > 0 && bytes.Compare(prev[len(prev)-1].Doc, first) >= 0 {
				return fmt.Errorf("block %q overlaps the one before", k)
			}
			postings[string(term)] = append(postings[string(term)], ps...)
			return nil
		})
		if err != nil {
			return err
		}
		err = tx.Bucket(bucketMemTerms).ForEach(func(k, v []byte) error {
			term, ns, _ := bytes.Cut(k, []byte{0})
			if len(ns) == 0 {
				n, pairs, err := memindex.DecodeTermStats(v)
				df[string(term)+"\x00*"], bounds[string(term)] = n, pairs
				return err
			}
			n, _ := binary.Uvarint(v)
			df[string(k)] = n
			return nil
		})
		if err != nil {
			return err
		}
		docs, _ = binary.Uvarint(tx.Bucket(bucketMeta).Get(memIndexKey))
		if k, _ := tx.Bucket(bucketMemIndex).Cursor().First(); k != nil {
			return fmt.Errorf("the old index bucket is not empty")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for term, ps := range postings {
		for _, p := range ps {
			if !slices.ContainsFunc(bounds[term], func(b memindex.Pair) bool { return b.TF >= p.TF && b.DL <= p.DL }) {
				t.Fatalf("term %q: posting %q (%d, %d) not bounded by %v", term, p.Doc, p.TF, p.DL, bounds[term])
			}
		}
	}
	return postings, df, docs
}

// wantIndex is the index the entries of s call for.
func wantIndex(t *testing.T, s *Store) (postings map[string][]memindex.Posting, df map[string]uint64, docs uint64) {
	t.Helper()
	postings, df = map[string][]memindex.Posting{}, map[string]uint64{}
	all, err := s.ListMemory(bg, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		tf, dl := termFreqs(e.Value)
		for term, n := range tf {
			postings[term] = append(postings[term], memindex.Posting{Doc: memKey(e.Namespace, e.Key), TF: n, DL: dl})
			df[term+"\x00"+e.Namespace]++
			df[term+"\x00*"]++
		}
	}
	return postings, df, uint64(len(all))
}

// checkIndex fails the test unless the index is exactly what the entries
// call for.
func checkIndex(t *testing.T, s *Store) {
	t.Helper()
	gp, gdf, gdocs := dumpIndex(t, s)
	wp, wdf, wdocs := wantIndex(t, s)
	if gdocs != wdocs {
		t.Errorf("the index counts %d entries, there are %d", gdocs, wdocs)
	}
	if !maps.Equal(gdf, wdf) {
		t.Errorf("document frequencies differ:\n%v\n%v", gdf, wdf)
	}
	if len(gp) != len(wp) {
		t.Errorf("%d terms indexed, want %d", len(gp), len(wp))
	}
	for term, want := range wp {
		if got := gp[term]; !slices.EqualFunc(got, want, func(a, b memindex.Posting) bool {
			return bytes.Equal(a.Doc, b.Doc) && a.TF == b.TF && a.DL == b.DL
		}) {
			t.Errorf("postings of %q: %d, want %d", term, len(got), len(want))
		}
	}
}

func fixedClock() time.Time { return time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC) }

func openFixed(t *testing.T) *Store {
	s, err := Open(filepath.Join(t.TempDir(), "warden.db"), &Options{Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestBulkLoadBuildsTheSameIndex: the bulk loader used by the benchmark
// and copies indexes what PutMemory indexes.
func TestBulkLoadBuildsTheSameIndex(t *testing.T) {
	c := newCorpus(3, 400)
	var entries []MemoryEntry
	for i := range 600 {
		entries = append(entries, MemoryEntry{Namespace: fmt.Sprintf("ns%d", i%3), Key: fmt.Sprintf("k%d", i), Value: c.text()})
	}
	one, bulk := openFixed(t), openFixed(t)
	for _, e := range entries {
		if err := one.PutMemory(bg, e.Namespace, e.Key, e.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := bulk.putMemoryBatch(bg, entries[:300]); err != nil {
		t.Fatal(err)
	}
	if err := bulk.putMemoryBatch(bg, entries[300:]); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, one)
	checkIndex(t, bulk)
	if p, _, _ := dumpIndex(t, bulk); len(p) < 300 {
		t.Fatalf("only %d terms", len(p))
	}
	// A batch that updates existing entries and repeats a key takes the
	// general path.
	updates := []MemoryEntry{entries[5], entries[7], entries[5]}
	updates[0].Value, updates[1].Value, updates[2].Value = "first update", c.text(), "second update"
	if err := bulk.putMemoryBatch(bg, updates); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, bulk)
	if e, err := bulk.GetMemory(bg, entries[5].Namespace, entries[5].Key); err != nil || e.Value != "second update" {
		t.Errorf("after the batch: %+v, %v", e, err)
	}
}

// TestUpdatesAndDeletesMaintainTheIndex: after updates and deletes the
// index holds exactly the postings of the live entries.
func TestUpdatesAndDeletesMaintainTheIndex(t *testing.T) {
	s := openFixed(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.PutMemory(bg, "n", "a", "alpha beta beta gamma"))
	must(s.PutMemory(bg, "n", "b", "beta delta"))
	must(s.PutMemory(bg, "n", "a", "gamma epsilon"))
	checkIndex(t, s)
	p, _, _ := dumpIndex(t, s)
	if got := slices.Sorted(maps.Keys(p)); !slices.Equal(got, []string{"beta", "delta", "epsilon", "gamma"}) {
		t.Errorf("terms = %q", got)
	}
	var stats []string
	if err := s.view(bg, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMemStats).ForEach(func(k, v []byte) error { stats = append(stats, fmt.Sprintf("%s=%x", k, v)); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"n=0204"}; !slices.Equal(stats, want) {
		t.Errorf("stats = %q, want %q (2 entries, 4 terms)", stats, want)
	}
	must(s.DeleteMemory(bg, "n", "a"))
	must(s.DeleteMemory(bg, "n", "b"))
	checkIndex(t, s)
	if p, df, docs := dumpIndex(t, s); len(p)+len(df) != 0 || docs != 0 {
		t.Errorf("after deleting everything: %v %v %d", p, df, docs)
	}
}

// TestBM25Scores checks scores against the formula computed by hand, and
// that a namespace filter restricts the statistics too.
func TestBM25Scores(t *testing.T) {
	s := openFixed(t)
	docs := map[string]string{
		"d1": "apple banana apple",
		"d2": "banana cherry",
		"d3": "cherry date elderberry fig",
	}
	for k, v := range docs {
		if err := s.PutMemory(bg, "a", k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutMemory(bg, "b", "x", "apple apple apple apple apple apple apple apple"); err != nil {
		t.Fatal(err)
	}
	bm25 := func(tf, dl, avgdl, n, df float64) float64 {
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		return idf * tf * 2.2 / (tf + 1.2*(0.25+0.75*dl/avgdl))
	}
	hits, err := s.SearchMemory(bg, MemoryQuery{Text: "apple banana", Namespace: func(ns string) bool { return ns == "a" }})
	if err != nil {
		t.Fatal(err)
	}
	avgdl := 9.0 / 3
	want := map[string]float64{
		"d1": bm25(2, 3, avgdl, 3, 1) + bm25(1, 3, avgdl, 3, 2),
		"d2": bm25(1, 2, avgdl, 3, 2),
	}
	if len(hits) != 2 || hits[0].Key != "d1" || hits[1].Key != "d2" {
		t.Fatalf("hits = %+v", hits)
	}
	for _, h := range hits {
		if math.Abs(h.Score-want[h.Key]) > 1e-9 {
			t.Errorf("score of %s = %v, want %v", h.Key, h.Score, want[h.Key])
		}
	}
	// Over both namespaces: 4 entries of 17 terms, apple in 2 of them.
	hits, err = s.SearchMemory(bg, MemoryQuery{Text: "apple"})
	if err != nil {
		t.Fatal(err)
	}
	avgdl = 17.0 / 4
	if len(hits) != 2 || hits[0].Key != "x" || math.Abs(hits[0].Score-bm25(8, 8, avgdl, 4, 2)) > 1e-9 ||
		math.Abs(hits[1].Score-bm25(2, 3, avgdl, 4, 2)) > 1e-9 {
		t.Errorf("unfiltered hits = %+v", hits)
	}
}

// TestSearchLimitAndOrderAtScale: over a generated corpus, the hits are the
// best-scoring entries, best first, whatever the limit.
func TestSearchLimitAndOrderAtScale(t *testing.T) {
	s := openFixed(t)
	c := newCorpus(5, 500)
	var entries []MemoryEntry
	for i := range 2000 {
		entries = append(entries, MemoryEntry{Namespace: fmt.Sprintf("ns%d", i%4), Key: fmt.Sprintf("k%04d", i), Value: c.text()})
	}
	if err := s.putMemoryBatch(bg, entries); err != nil {
		t.Fatal(err)
	}
	q := c.vocab[0] + " " + c.vocab[40] + " " + c.vocab[300]
	all, err := s.SearchMemory(bg, MemoryQuery{Text: q, Limit: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 100 {
		t.Fatalf("only %d hits", len(all))
	}
	for i := 1; i < len(all); i++ {
		a, b := all[i-1], all[i]
		if a.Score < b.Score || (a.Score == b.Score && a.Namespace+"\x00"+a.Key > b.Namespace+"\x00"+b.Key) {
			t.Fatalf("hits %d and %d out of order: %v %s/%s, %v %s/%s", i-1, i, a.Score, a.Namespace, a.Key, b.Score, b.Namespace, b.Key)
		}
	}
	for _, limit := range []int{1, 7, 50} {
		top, err := s.SearchMemory(bg, MemoryQuery{Text: q, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(top) != limit {
			t.Fatalf("limit %d: %d hits", limit, len(top))
		}
		for i := range top {
			if top[i].Key != all[i].Key || top[i].Score != all[i].Score {
				t.Errorf("limit %d: hit %d is %s, want %s", limit, i, top[i].Key, all[i].Key)
			}
		}
	}
	// Every hit contains a query term.
	qt := terms(q)
	for _, h := range all {
		if !slices.ContainsFunc(terms(h.Value), func(t string) bool { return slices.Contains(qt, t) }) {
			t.Errorf("hit %s/%s contains no query term", h.Namespace, h.Key)
		}
	}
}

// referenceSearch ranks every entry by the contract's BM25, the slow way:
// what SearchMemory must return, scores to the bit.
func referenceSearch(entries []MemoryEntry, q MemoryQuery) []MemoryHit {
	qterms := QueryTerms(q.Text)
	type scoredEntry struct {
		e     MemoryEntry
		tf    map[string]uint32
		dl    uint32
		score float64
	}
	var sel []*scoredEntry
	var total uint64
	df := map[string]uint64{}
	for _, e := range entries {
		if q.Namespace != nil && !q.Namespace(e.Namespace) {
			continue
		}
		tf, dl := termFreqs(e.Value)
		sel = append(sel, &scoredEntry{e: e, tf: tf, dl: dl})
		total += uint64(dl)
		for term := range tf {
			df[term]++
		}
	}
	if len(sel) == 0 || len(qterms) == 0 {
		return nil
	}
	avgdl := float64(total) / float64(len(sel))
	if avgdl == 0 {
		avgdl = 1
	}
	var hits []MemoryHit
	for _, se := range sel {
		matched := false
		for _, term := range qterms {
			if n := se.tf[term]; n > 0 {
				se.score += BM25Term(BM25IDF(uint64(len(sel)), df[term]), float64(n), float64(se.dl), avgdl)
				matched = true
			}
		}
		if matched {
			hits = append(hits, MemoryHit{MemoryEntry: se.e, Score: se.score})
		}
	}
	slices.SortFunc(hits, func(a, b MemoryHit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return bytes.Compare(memKey(a.Namespace, a.Key), memKey(b.Namespace, b.Key))
	})
	limit := q.Limit
	if limit <= 0 {
		limit = 10
	}
	return hits[:min(limit, len(hits))]
}

// TestSearchMatchesReference: after puts, bulk loads, updates and deletes
// in any order, the index is exactly what the entries call for, and every
// search — frequent and rare terms, small and large limits, namespace
// filters — returns what scoring every entry returns, to the bit. The
// search skips blocks and lists by bounds; this is what says it never
// skips a hit.
func TestSearchMatchesReference(t *testing.T) {
	s := openFixed(t)
	c := newCorpus(9, 300)
	rng := rand.New(rand.NewPCG(10, 11))
	live := map[string]MemoryEntry{}
	put := func(e MemoryEntry) { live[string(memKey(e.Namespace, e.Key))] = e }
	var batch []MemoryEntry
	for i := range 2500 {
		e := MemoryEntry{Namespace: fmt.Sprintf("ns%d", rng.IntN(5)), Key: fmt.Sprintf("k%05d", rng.IntN(3000)), Value: c.text()}
		if i%7 == 0 {
			e.Value = c.word() + " " + c.word() // short entries: high scores
		}
		switch x := rng.IntN(10); {
		case x < 6:
			batch = append(batch, e)
			if len(batch) == 200 {
				if err := s.putMemoryBatch(bg, batch); err != nil {
					t.Fatal(err)
				}
				for _, b := range batch {
					put(b)
				}
				batch = batch[:0]
			}
		case x < 9:
			if err := s.PutMemory(bg, e.Namespace, e.Key, e.Value); err != nil {
				t.Fatal(err)
			}
			put(e)
		default:
			for k, old := range live {
				if err := s.DeleteMemory(bg, old.Namespace, old.Key); err != nil {
					t.Fatal(err)
				}
				delete(live, k)
				break
			}
		}
	}
	checkIndex(t, s)
	entries := slices.Collect(maps.Values(live))
	filters := []func(string) bool{nil, func(ns string) bool { return ns == "ns2" }, func(ns string) bool { return ns != "ns0" && ns != "ns3" }}
	for i := range 400 {
		words := make([]string, 1+rng.IntN(4))
		for j := range words {
			if rng.IntN(3) == 0 {
				words[j] = c.vocab[rng.IntN(len(c.vocab))]
			} else {
				words[j] = c.word()
			}
		}
		q := MemoryQuery{Text: strings.Join(words, " "), Limit: []int{1, 3, 10, 50}[rng.IntN(4)], Namespace: filters[i%len(filters)]}
		got, err := s.SearchMemory(bg, q)
		if err != nil {
			t.Fatal(err)
		}
		want := referenceSearch(entries, q)
		if len(got) != len(want) {
			t.Fatalf("query %q (limit %d, filter %d): %d hits, want %d", q.Text, q.Limit, i%len(filters), len(got), len(want))
		}
		for j := range got {
			if got[j].Namespace != want[j].Namespace || got[j].Key != want[j].Key || got[j].Score != want[j].Score {
				t.Fatalf("query %q (limit %d, filter %d) hit %d: %s/%s %v, want %s/%s %v", q.Text, q.Limit, i%len(filters), j,
					got[j].Namespace, got[j].Key, got[j].Score, want[j].Namespace, want[j].Key, want[j].Score)
			}
		}
	}
}

// TestMemoryOldStore: a store an older warden made (its memory indexed
// one posting per key) has its index rebuilt when opened, and searches
// return what that warden returned, scores to the bit.
func TestMemoryOldStore(t *testing.T) {
	dir := oldStore(t)
	golden := readGolden(t)
	s := openTest(t, dir)
	checkIndex(t, s)
	for name, q := range map[string]MemoryQuery{
		"search deploy":                         {Text: "deploy", Limit: 7},
		"search kumquat heron":                  {Text: "kumquat heron", Limit: 7},
		"search zeppelin walrus garden":         {Text: "zeppelin walrus garden", Limit: 7},
		"search release tests service pipeline": {Text: "release tests service pipeline", Limit: 7},
		"search deploy garden without ns1":      {Text: "deploy garden", Namespace: func(ns string) bool { return ns != "ns1" }},
	} {
		var want []MemoryHit
		if err := json.Unmarshal(golden[name], &want); err != nil || len(want) == 0 {
			t.Fatalf("golden %q: %v", name, err)
		}
		got, err := s.SearchMemory(bg, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d hits, the older warden found %d", name, len(got), len(want))
		}
		for i := range got {
			if got[i].Namespace != want[i].Namespace || got[i].Key != want[i].Key || got[i].Score != want[i].Score || !got[i].Updated.Equal(want[i].Updated) {
				t.Errorf("%s hit %d: %s/%s %v, the older warden: %s/%s %v", name, i, got[i].Namespace, got[i].Key, got[i].Score, want[i].Namespace, want[i].Key, want[i].Score)
			}
		}
	}
}

// TestMemoryWrittenByOlderWarden: memory an older warden writes to a store
// with the new index (its own postings, or an entry it removes, which
// only its statistics show) is noticed when the store is next opened, and
// the index rebuilt from the entries.
func TestMemoryWrittenByOlderWarden(t *testing.T) {
	for name, older := range map[string]func(tx *bolt.Tx) error{
		"an entry added with its postings": func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucketMemory).Put(memKey("n", "new"), encodeEntry(fixedClock(), fixedClock(), "quokka pelican")); err != nil {
				return err
			}
			if err := addStats(tx.Bucket(bucketMemStats), "n", 1, 2); err != nil {
				return err
			}
			return tx.Bucket(bucketMemIndex).Put([]byte("quokka\x00n\x00new"), []byte{1, 2})
		},
		"an entry removed": func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucketMemory).Delete(memKey("n", "b")); err != nil {
				return err
			}
			return addStats(tx.Bucket(bucketMemStats), "n", -1, -2)
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := openTest(t, dir)
			for k, v := range map[string]string{"a": "pelican beaks", "b": "pelican feathers", "c": "ostrich"} {
				if err := s.PutMemory(bg, "n", k, v); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			editDB(t, dir, older)
			s = openTest(t, dir)
			checkIndex(t, s)
			hits, err := s.SearchMemory(bg, MemoryQuery{Text: "pelican quokka"})
			if err != nil {
				t.Fatal(err)
			}
			want := referenceSearch(mustList(t, s), MemoryQuery{Text: "pelican quokka"})
			if len(hits) != len(want) {
				t.Fatalf("%d hits, want %d", len(hits), len(want))
			}
		})
	}
}

func mustList(t *testing.T, s *Store) []MemoryEntry {
	t.Helper()
	all, err := s.ListMemory(bg, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return all
}
