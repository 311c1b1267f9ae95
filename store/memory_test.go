package store

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func terms(text string) []string {
	var out []string
	tokenize(text, func(t []byte) { out = append(out, string(t)) })
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

// dumpBuckets returns the memory buckets' contents.
func dumpBuckets(t *testing.T, s *Store) map[string][]string {
	t.Helper()
	out := make(map[string][]string)
	err := s.view(bg, func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketMemory, bucketMemIndex, bucketMemStats} {
			err := tx.Bucket(name).ForEach(func(k, v []byte) error {
				out[string(name)] = append(out[string(name)], fmt.Sprintf("%q=%x", k, v))
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
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

func equalDumps(t *testing.T, what string, a, b map[string][]string) {
	t.Helper()
	for _, name := range []string{"memory", "memory_index", "memory_stats"} {
		if !slices.Equal(a[name], b[name]) {
			t.Errorf("%s: bucket %s differs: %d keys vs %d", what, name, len(a[name]), len(b[name]))
		}
	}
}

// TestBulkLoadBuildsTheSameIndex: the bulk loader used by the benchmark
// stores exactly what PutMemory stores.
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
	d := dumpBuckets(t, one)
	if len(d["memory_index"]) < 1000 {
		t.Fatalf("only %d postings", len(d["memory_index"]))
	}
	equalDumps(t, "bulk load of new entries", d, dumpBuckets(t, bulk))

	// A batch that updates existing entries and repeats a key takes the
	// general path, with the same result.
	updates := []MemoryEntry{entries[5], entries[7], entries[5]}
	updates[0].Value, updates[1].Value, updates[2].Value = "first update", c.text(), "second update"
	for _, e := range updates {
		if err := one.PutMemory(bg, e.Namespace, e.Key, e.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := bulk.putMemoryBatch(bg, updates); err != nil {
		t.Fatal(err)
	}
	equalDumps(t, "bulk updates", dumpBuckets(t, one), dumpBuckets(t, bulk))
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
	d := dumpBuckets(t, s)
	want := []string{
		fmt.Sprintf("%q=%x", "beta\x00n\x00b", []byte{1, 2}),
		fmt.Sprintf("%q=%x", "delta\x00n\x00b", []byte{1, 2}),
		fmt.Sprintf("%q=%x", "epsilon\x00n\x00a", []byte{1, 2}),
		fmt.Sprintf("%q=%x", "gamma\x00n\x00a", []byte{1, 2}),
	}
	if !slices.Equal(d["memory_index"], want) {
		t.Errorf("index = %q, want %q", d["memory_index"], want)
	}
	if want := []string{fmt.Sprintf("%q=%x", "n", []byte{2, 4})}; !slices.Equal(d["memory_stats"], want) {
		t.Errorf("stats = %q, want %q (2 entries, 4 terms)", d["memory_stats"], want)
	}
	must(s.DeleteMemory(bg, "n", "a"))
	must(s.DeleteMemory(bg, "n", "b"))
	d = dumpBuckets(t, s)
	if len(d["memory"])+len(d["memory_index"])+len(d["memory_stats"]) != 0 {
		t.Errorf("after deleting everything: %v", d)
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
