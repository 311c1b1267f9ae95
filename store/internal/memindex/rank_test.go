package memindex

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// memBlocks is Blocks over a sorted slice.
type memBlocks struct {
	keys, vals [][]byte
	pos        int // current index; len(keys) past the end, -1 before the start
}

func (m *memBlocks) at(i int) ([]byte, []byte) {
	m.pos = i
	if i < 0 || i >= len(m.keys) {
		return nil, nil
	}
	return m.keys[i], m.vals[i]
}

func (m *memBlocks) Seek(doc []byte) ([]byte, []byte) {
	i, _ := slices.BinarySearchFunc(m.keys, doc, bytes.Compare)
	return m.at(i)
}
func (m *memBlocks) Last() ([]byte, []byte) { return m.at(len(m.keys) - 1) }
func (m *memBlocks) Next() ([]byte, []byte) { return m.at(min(m.pos+1, len(m.keys))) }
func (m *memBlocks) Prev() ([]byte, []byte) { return m.at(max(m.pos-1, -1)) }
func (m *memBlocks) Put(first, v []byte) error {
	i, found := slices.BinarySearchFunc(m.keys, first, bytes.Compare)
	if found {
		m.vals[i] = v
		return nil
	}
	m.keys, m.vals = slices.Insert(m.keys, i, bytes.Clone(first)), slices.Insert(m.vals, i, v)
	return nil
}
func (m *memBlocks) Delete(first []byte) error {
	if i, found := slices.BinarySearchFunc(m.keys, first, bytes.Compare); found {
		m.keys, m.vals = slices.Delete(m.keys, i, i+1), slices.Delete(m.vals, i, i+1)
	}
	return nil
}

func bm25(idf, tf, dl, avgdl float64) float64 {
	norm := float64(1.2 * (1 - 0.75 + 0.75*dl/avgdl))
	return idf * tf * (1.2 + 1) / (tf + norm)
}

// TestRankMatchesBruteForce builds terms of every shape — dense ones of
// low weight, rare ones, ones whose few heavy postings sit in one block,
// docs with identical scores — through Apply in random batches (with
// removals), and checks that Rank returns what scoring every posting
// returns, for every limit and namespace filter, and that the index
// holds exactly the postings applied.
func TestRankMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 30 {
		ndocs := 200 + rng.IntN(3000)
		docs := make([][]byte, ndocs)
		for i := range docs {
			docs[i] = fmt.Appendf(nil, "ns%d\x00%s-%06d", rng.IntN(4), []string{"a", "bb", "note"}[rng.IntN(3)], rng.IntN(1_000_000))
		}
		slices.SortFunc(docs, bytes.Compare)
		docs = slices.CompactFunc(docs, bytes.Equal)
		nterms := 8
		truth := make([]map[string]Posting, nterms)
		lists := make([]*memBlocks, nterms)
		dl := func(i int) uint32 { return uint32(5 + (i*7919)%60) }
		for ti := range nterms {
			truth[ti], lists[ti] = map[string]Posting{}, &memBlocks{}
			density := []float64{0.95, 0.5, 0.1, 0.01, 0.3, 0.7, 0.8, 0.6}[ti]
			hot := len(docs) * (ti - 5) / 3 // terms 6 and 7: heavy postings in one stretch, light elsewhere
			for pass := range 3 {
				var changes []Change
				for i, d := range docs {
					if rng.Float64() >= density/2 {
						continue
					}
					tf := uint32(1)
					if ti == 4 && rng.IntN(50) == 0 || ti != 4 && rng.IntN(5) == 0 {
						tf += uint32(rng.IntN(6))
					}
					if ti == 5 {
						tf = 1 // identical scores: ties decided by doc
					}
					if ti >= 6 {
						tf = 1
						if i >= hot && i < hot+len(docs)/50 {
							tf = 9
						}
					}
					c := Change{Posting: Posting{Doc: d, TF: tf, DL: dl(i)}}
					if pass == 2 && rng.IntN(3) == 0 {
						c.Delete = true
					}
					changes = append(changes, c)
				}
				if _, err := Apply(lists[ti], changes); err != nil {
					t.Fatal(err)
				}
				for _, c := range changes {
					if c.Delete {
						delete(truth[ti], string(c.Doc))
					} else {
						truth[ti][string(c.Doc)] = c.Posting
					}
				}
			}
			var got []Posting
			for i := range lists[ti].keys {
				ps, err := DecodeBlock(lists[ti].keys[i], lists[ti].vals[i])
				if err != nil || len(ps) > MaxBlock {
					t.Fatal(err, len(ps))
				}
				got = append(got, ps...)
			}
			if len(got) != len(truth[ti]) {
				t.Fatalf("round %d term %d: %d postings held, %d applied", round, ti, len(got), len(truth[ti]))
			}
			for _, p := range got {
				if w := truth[ti][string(p.Doc)]; w.TF != p.TF || w.DL != p.DL {
					t.Fatalf("posting %q: %+v, want %+v", p.Doc, p, w)
				}
			}
		}
		for q := range 40 {
			checkRank(t, rng, round, q, docs, truth, lists)
		}
	}
}

func checkRank(t *testing.T, rng *rand.Rand, round, qn int, docs [][]byte, truth []map[string]Posting, lists []*memBlocks) {
	t.Helper()
	var terms []int
	for range 1 + rng.IntN(4) {
		if ti := rng.IntN(len(lists)); !slices.Contains(terms, ti) {
			terms = append(terms, ti)
		}
	}
	var allowed func([]byte) bool
	if rng.IntN(3) == 0 {
		skip := fmt.Sprintf("ns%d", rng.IntN(4))
		allowed = func(ns []byte) bool { return string(ns) != skip }
	}
	avgdl := 30.0
	q := Query{AvgDL: avgdl, Limit: []int{1, 2, 5, 10, 100}[rng.IntN(5)], Allowed: allowed, Score: bm25}
	for _, ti := range terms {
		var bound []Pair
		df := 0
		for _, p := range truth[ti] {
			bound = addPair(bound, Pair{p.TF, p.DL})
			df++
		}
		q.Terms = append(q.Terms, Term{Blocks: lists[ti], IDF: math.Log(1 + (float64(len(docs))-float64(df)+0.5)/(float64(df)+0.5)), Bound: bound})
	}
	got, err := Rank(q)
	if err != nil {
		t.Fatal(err)
	}
	var want []Hit
	for _, d := range docs {
		if allowed != nil && !allowed(nsOf(d)) {
			continue
		}
		score, hit := 0.0, false
		for i, ti := range terms {
			if p, ok := truth[ti][string(d)]; ok {
				score += bm25(q.Terms[i].IDF, float64(p.TF), float64(p.DL), avgdl)
				hit = true
			}
		}
		if hit {
			want = append(want, Hit{Doc: d, Score: score})
		}
	}
	slices.SortStableFunc(want, func(a, b Hit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	want = want[:min(q.Limit, len(want))]
	if len(got) != len(want) {
		t.Fatalf("round %d query %d (terms %v, limit %d): %d hits, want %d", round, qn, terms, q.Limit, len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].Doc, want[i].Doc) || got[i].Score != want[i].Score {
			t.Fatalf("round %d query %d (terms %v, limit %d) hit %d: %q %v, want %q %v", round, qn, terms, q.Limit, i, got[i].Doc, got[i].Score, want[i].Doc, want[i].Score)
		}
	}
}

// TestBoundsAreChecked: a bound below what a posting scores (a tampered
// index) makes the search fail instead of skipping a hit.
func TestBoundsAreChecked(t *testing.T) {
	bl := &memBlocks{}
	var changes []Change
	for i := range 300 {
		changes = append(changes, Change{Posting: Posting{Doc: fmt.Appendf(nil, "n\x00%04d", i), TF: 1 + uint32(i%3), DL: 10}})
	}
	if _, err := Apply(bl, changes); err != nil {
		t.Fatal(err)
	}
	q := Query{AvgDL: 10, Limit: 3, Score: bm25, Terms: []Term{{Blocks: bl, IDF: 1, Bound: []Pair{{TF: 1, DL: 10}}}}}
	if _, err := Rank(q); err == nil {
		t.Errorf("a term bound below its postings went unnoticed")
	}
}

func TestFrontier(t *testing.T) {
	var ps []Posting
	for i := range 40 {
		ps = append(ps, Posting{TF: uint32(1 + i%20), DL: uint32(100 - i)})
	}
	f := Frontier(ps)
	if len(f) > maxPairs {
		t.Fatalf("%d pairs", len(f))
	}
	for _, p := range ps {
		if !slices.ContainsFunc(f, func(b Pair) bool { return b.TF >= p.TF && b.DL <= p.DL }) {
			t.Errorf("(%d, %d) not bounded by %v", p.TF, p.DL, f)
		}
	}
}

// TestCursorMoves: a cursor skips past a doc and advances to one within a
// block, across blocks, to the end, and through namespaces not searched.
func TestCursorMoves(t *testing.T) {
	bl := &memBlocks{}
	var changes []Change
	doc := func(i int) []byte { return fmt.Appendf(nil, "ns%d\x00%04d", i/200, i) }
	for i := 0; i < 1000; i += 2 {
		changes = append(changes, Change{Posting: Posting{Doc: doc(i), TF: 1, DL: 10}})
	}
	if _, err := Apply(bl, changes); err != nil {
		t.Fatal(err)
	}
	r := &ranker{q: Query{AvgDL: 10, Score: bm25}}
	term := &Term{Blocks: bl, IDF: 1, Bound: []Pair{{1, 10}}}
	newCursor := func(allowed func([]byte) bool) *cursor {
		r.q.Allowed = allowed
		c := &cursor{t: term, r: r, ub: 10}
		c.load(bl.Seek(nil))
		c.settle()
		return c
	}
	c := newCursor(nil)
	for _, step := range []struct {
		skip    bool
		target  int
		want    int // -1: the end
		atFound bool
	}{
		{true, 3, 4, false}, {true, 4, 6, false}, {false, 6, 6, true}, {false, 7, 8, false},
		{true, 300, 302, false}, {false, 555, 556, false}, {false, 556, 556, true}, {true, 998, -1, false},
	} {
		var found bool
		if step.skip {
			c.skipPast(doc(step.target))
		} else {
			found = c.advanceTo(doc(step.target))
		}
		if step.want < 0 {
			if !c.end {
				t.Fatalf("past %d: at %q, want the end", step.target, c.doc())
			}
			continue
		}
		if got := c.doc(); !bytes.Equal(got, doc(step.want)) || found != step.atFound {
			t.Fatalf("to %d (skip %v): at %q (found %v), want %q", step.target, step.skip, got, found, doc(step.want))
		}
	}
	// Only ns2 and ns4 searched.
	c = newCursor(func(ns []byte) bool { return string(ns) == "ns2" || string(ns) == "ns4" })
	if got := c.doc(); !bytes.Equal(got, doc(400)) {
		t.Fatalf("first searched doc %q", got)
	}
	c.skipPast(doc(598))
	if got := c.doc(); !bytes.Equal(got, doc(800)) {
		t.Fatalf("after ns2: %q", got)
	}
	if c.advanceTo(doc(801)); !bytes.Equal(c.doc(), doc(802)) {
		t.Fatalf("advance in ns4: %q", c.doc())
	}
}

// FuzzDecodeBlock: any bytes under any key decode to postings that encode
// back to the same block, or to an error; never a panic.
func FuzzDecodeBlock(f *testing.F) {
	ps := []Posting{{Doc: []byte("a\x00k1"), TF: 1, DL: 3}, {Doc: []byte("a\x00k2"), TF: 4, DL: 9}, {Doc: []byte("b\x00x"), TF: 2, DL: 2}}
	f.Add([]byte("a\x00k1"), Encode(ps))
	f.Add([]byte("a\x00k1"), Encode(ps[:1]))
	f.Add([]byte("x"), []byte{1, 1, 'x', 0, 0, 1, 'x', 1, 1})
	f.Fuzz(func(t *testing.T, first, v []byte) {
		got, err := DecodeBlock(first, v)
		if err != nil {
			return
		}
		// The header's frontier and prefixes are the writer's: a block may
		// carry looser ones. What decodes must still be in order, start
		// at first and fit the header.
		if len(got) == 0 || !bytes.Equal(got[0].Doc, first) {
			t.Fatalf("decoded %d postings not starting at %q", len(got), first)
		}
		for i := 1; i < len(got); i++ {
			if bytes.Compare(got[i-1].Doc, got[i].Doc) >= 0 {
				t.Fatalf("decoded out of order: %q then %q", got[i-1].Doc, got[i].Doc)
			}
		}
	})
}
