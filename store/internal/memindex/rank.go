package memindex

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Term is one term of a query.
type Term struct {
	Blocks Blocks // its blocks (read only)
	IDF    float64
	Bound  []Pair // bounds every posting of the term
}

// Query is a ranked search.
type Query struct {
	Terms []Term // in the query's order: scores add up in it
	AvgDL float64
	Limit int
	// Allowed says whether a namespace is searched; nil: every one.
	Allowed func(ns []byte) bool
	// Score is one term's contribution to an entry's score (BM25).
	Score func(idf, tf, dl, avgdl float64) float64
	// Check is called now and then; its error ends the search.
	Check func() error
	// Exhaustive scores every posting, skipping nothing (the baseline
	// the benchmarks measure pruning against).
	Exhaustive bool
}

// Hit is a ranked entry.
type Hit struct {
	Doc   []byte
	Score float64
}

// margin keeps pruning safe from rounding: a bound is added up in another
// order than a score, so it may come out a few units of the last place
// below it; a doc is passed over only if its bound is below the k-th
// score by more than this fraction.
const margin = 1e-9

// Rank returns the Limit best entries matching any term, best first, ties
// by doc: exactly what scoring every posting would return, with the same
// scores to the bit.
//
// It merges the terms' postings in doc order (block-max MaxScore): the
// terms whose bounds together cannot reach the k-th best score found so
// far are only looked up in, for the entries the others bring; a stretch
// of the others' postings whose blocks' bounds cannot reach it is skipped
// without decoding; an entry whose bound cannot is not scored. Entries are
// met in doc order, so one that only ties the k-th score loses to it (a
// smaller doc, met earlier).
func Rank(q Query) ([]Hit, error) {
	r := &ranker{q: q, top: topK{k: q.Limit}, theta: math.Inf(-1)}
	for i := range q.Terms {
		c := &cursor{t: &q.Terms[i], r: r}
		for _, p := range q.Terms[i].Bound {
			c.ub = max(c.ub, q.Score(q.Terms[i].IDF, float64(p.TF), float64(p.DL), q.AvgDL))
		}
		c.load(c.t.Blocks.Seek(nil))
		c.settle()
		r.cs = append(r.cs, c)
		r.order = append(r.order, i)
	}
	slices.SortStableFunc(r.order, func(a, b int) int {
		if r.cs[a].ub != r.cs[b].ub {
			if r.cs[a].ub < r.cs[b].ub {
				return -1
			}
			return 1
		}
		return 0
	})
	r.contrib, r.at = make([]float64, len(r.cs)), make([]bool, len(r.cs))
	if err := r.run(); err != nil {
		return nil, err
	}
	for _, c := range r.cs {
		if c.err != nil {
			return nil, c.err
		}
	}
	return r.top.sorted(), nil
}

type ranker struct {
	q       Query
	cs      []*cursor // in query order
	order   []int     // cs by increasing bound
	ness    int       // order[:ness] are looked up in only (non-essential)
	nessSum float64   // their bounds' sum
	top     topK
	theta   float64 // the k-th best score, once there are k
	contrib []float64
	at      []bool
	doc     []byte
}

// prune reports whether a bound cannot beat the k-th best score.
func (r *ranker) prune(bound float64) bool {
	return !r.q.Exhaustive && r.top.full() && bound+math.Abs(bound)*margin <= r.theta
}

// repartition moves the terms whose bounds together cannot reach theta
// to the looked-up-in set.
func (r *ranker) repartition() {
	r.ness, r.nessSum = 0, 0
	for _, i := range r.order {
		if !r.prune(r.nessSum + r.cs[i].ub) {
			break
		}
		r.nessSum += r.cs[i].ub
		r.ness++
	}
}

func (r *ranker) run() error {
	for n := 0; ; n++ {
		if n%1024 == 0 && r.q.Check != nil {
			if err := r.q.Check(); err != nil {
				return err
			}
		}
		ess := r.order[r.ness:]
		// The window: from the first position of any list that brings
		// entries to the first end of their current blocks.
		var hi []byte
		for _, i := range ess {
			if c := r.cs[i]; !c.end && (hi == nil || bytes.Compare(c.h.Last, hi) < 0) {
				hi = c.h.Last
			}
		}
		if hi == nil {
			return nil
		}
		if r.top.full() {
			ub := r.nessSum
			for _, i := range ess {
				if c := r.cs[i]; !c.end && bytes.Compare(c.start(), hi) <= 0 {
					ub += c.bound
				}
			}
			if r.prune(ub) {
				hi = bytes.Clone(hi)
				for _, i := range ess {
					r.cs[i].skipPast(hi)
				}
				continue
			}
		}
		if len(ess) == 1 && r.top.full() && !r.sweep(r.cs[ess[0]]) {
			continue // the block is done
		}
		var d []byte
		for _, i := range ess {
			if c := r.cs[i]; !c.end {
				if doc := c.doc(); doc != nil && (d == nil || bytes.Compare(doc, d) < 0) {
					d = doc
				}
			}
		}
		if d == nil {
			continue // a cursor ended while decoding
		}
		r.doc = append(r.doc[:0], d...)
		r.score(r.doc)
		for _, c := range r.cs {
			if !c.end && c.decoded && bytes.Equal(c.doc(), r.doc) {
				c.step()
			}
		}
	}
}

// sweep passes over the postings of c, the one list bringing entries,
// whose bound (with those of the looked-up-in terms) cannot make the top
// k: the common case, in a tight loop. It reports whether it stopped on a
// posting to score; false if it ran to the end of the block.
func (r *ranker) sweep(c *cursor) bool {
	if !c.decode() {
		return false
	}
	allowed := r.q.Allowed
	for ; c.pos < c.dec.Len(); c.pos++ {
		if allowed != nil && !allowed(nsOf(c.dec.Doc(c.pos))) {
			continue
		}
		if !r.prune(c.contribution() + r.nessSum) {
			return true
		}
	}
	c.load(c.t.Blocks.Next())
	c.settle()
	return false
}

// score scores doc, unless its bound shows it cannot make the top k.
func (r *ranker) score(doc []byte) {
	clear(r.at)
	bound := r.nessSum
	for _, i := range r.order[r.ness:] {
		if c := r.cs[i]; !c.end && c.decoded && bytes.Equal(c.doc(), doc) {
			r.contrib[i], r.at[i] = c.contribution(), true
			bound += r.contrib[i]
		}
	}
	// The looked-up-in terms, most weighty first: first the bound of the
	// block that could hold doc (no decoding), then the posting itself.
	for k := r.ness - 1; k >= 0; k-- {
		if r.prune(bound) {
			return
		}
		c := r.cs[r.order[k]]
		bound -= c.ub
		if c.toBlock(doc) {
			bound += c.bound
		}
	}
	for k := r.ness - 1; k >= 0; k-- {
		if r.prune(bound) {
			return
		}
		i := r.order[k]
		c := r.cs[i]
		if c.end || bytes.Compare(c.start(), doc) > 0 {
			continue // no block holds it: counted as 0 already
		}
		bound -= c.bound
		if c.advanceTo(doc) {
			r.contrib[i], r.at[i] = c.contribution(), true
			bound += r.contrib[i]
		}
	}
	if r.prune(bound) {
		return
	}
	score := 0.0
	for i := range r.cs {
		if r.at[i] {
			score += r.contrib[i]
		}
	}
	if r.top.full() && score <= r.theta {
		return // a tie loses: the docs kept are smaller
	}
	r.top.push(Hit{Doc: bytes.Clone(doc), Score: score})
	if r.top.full() {
		r.theta = r.top.h[0].Score
		r.repartition()
	}
}

// cursor walks one term's postings in the searched namespaces.
type cursor struct {
	t     *Term
	r     *ranker
	ub    float64 // bounds every posting of the term
	end   bool
	err   error
	first []byte // the current block's key
	h     Header
	bound float64 // bounds every posting of the current block
	pairs []Pair
	dec   Decoded
	// decoded: dec holds the current block, pos its current posting;
	// otherwise the cursor is on the block's first posting.
	decoded bool
	pos     int
}

func (c *cursor) fail(err error) {
	if c.err == nil {
		c.err = fmt.Errorf("block %q: %w", c.first, err)
	}
	c.end = true
}

// load makes the block first, v current.
func (c *cursor) load(first, v []byte) {
	c.decoded, c.pos = false, 0
	if first == nil {
		c.end = true
		return
	}
	c.first = first
	var err error
	if c.h, err = ReadHeader(v, c.pairs); err != nil {
		c.fail(err)
		return
	}
	c.pairs = c.h.Pairs
	c.bound = 0
	for _, p := range c.h.Pairs {
		c.bound = max(c.bound, c.r.q.Score(c.t.IDF, float64(p.TF), float64(p.DL), c.r.q.AvgDL))
	}
	if c.bound > c.ub+math.Abs(c.ub)*margin {
		// The term's bound is wrong: skipping by it could lose hits.
		c.fail(errBound)
	}
}

// errBound reports a bound that a block or posting exceeds.
var errBound = errors.New("a posting scores above its bound")

// start is the current doc if decoded, else the block's first.
func (c *cursor) start() []byte {
	if c.decoded {
		return c.dec.Doc(c.pos)
	}
	return c.first
}

func (c *cursor) decode() bool {
	if c.end {
		return false
	}
	if !c.decoded {
		if err := c.dec.Decode(c.first, c.h); err != nil {
			c.fail(err)
			return false
		}
		c.decoded = true
	}
	return true
}

// doc is the current doc, nil at the end.
func (c *cursor) doc() []byte {
	if !c.decode() {
		return nil
	}
	return c.dec.Doc(c.pos)
}

func (c *cursor) contribution() float64 {
	s := c.r.q.Score(c.t.IDF, float64(c.dec.TF[c.pos]), float64(c.dec.DL[c.pos]), c.r.q.AvgDL)
	if s > c.bound+math.Abs(c.bound)*margin {
		// The block's bound is wrong: skipping by it could lose hits.
		c.fail(errBound)
		return 0
	}
	return s
}

// step moves to the next posting in a searched namespace.
func (c *cursor) step() {
	if !c.decode() {
		return
	}
	if c.pos++; c.pos == c.dec.Len() {
		c.load(c.t.Blocks.Next())
	}
	c.settle()
}

// settle moves on to the first posting in a searched namespace.
func (c *cursor) settle() {
	allowed := c.r.q.Allowed
	for allowed != nil && !c.end {
		if !c.decoded {
			if ns := nsOf(c.first); bytes.Equal(ns, nsOf(c.h.Last)) && !allowed(ns) {
				c.load(c.t.Blocks.Next())
				continue
			}
		}
		doc := c.doc()
		if doc == nil || allowed(nsOf(doc)) {
			return
		}
		if c.pos++; c.pos == c.dec.Len() {
			c.load(c.t.Blocks.Next())
		}
	}
}

func nsOf(doc []byte) []byte {
	if i := bytes.IndexByte(doc, 0); i >= 0 {
		return doc[:i]
	}
	return doc
}

// skipPast moves to the first posting after doc hi.
func (c *cursor) skipPast(hi []byte) {
	for !c.end && bytes.Compare(c.h.Last, hi) <= 0 {
		c.load(c.t.Blocks.Next())
	}
	if c.end || bytes.Compare(c.start(), hi) > 0 {
		c.settle()
		return
	}
	if !c.decode() {
		return
	}
	c.pos += c.search(hi, true)
	c.settle()
}

// search returns how far past pos the first doc after (strict) or at
// target is, in the decoded block.
func (c *cursor) search(target []byte, strict bool) int {
	n := c.dec.Len() - c.pos
	i, j := 0, n
	for i < j {
		m := int(uint(i+j) >> 1)
		cmp := bytes.Compare(c.dec.Doc(c.pos+m), target)
		if cmp < 0 || strict && cmp == 0 {
			i = m + 1
		} else {
			j = m
		}
	}
	return i
}

// toBlock moves to the block that holds target if any block does (else to
// the first block after it), without decoding, and reports whether the
// current block's range covers target.
func (c *cursor) toBlock(target []byte) bool {
	if c.end {
		return false
	}
	if bytes.Compare(c.h.Last, target) < 0 {
		// Not in this block. Probes mostly go forward a little: try the
		// next block first.
		c.load(c.t.Blocks.Next())
		if c.end || bytes.Compare(c.h.Last, target) >= 0 {
			c.settle()
			return !c.end && bytes.Compare(c.start(), target) <= 0
		}
		// Further: the last block starting at or before target, if it
		// reaches target, else the one after it.
		f, v := c.t.Blocks.Seek(target)
		if f == nil || !bytes.Equal(f, target) {
			var pf, pv []byte
			if f == nil {
				pf, pv = c.t.Blocks.Last()
			} else {
				pf, pv = c.t.Blocks.Prev()
			}
			if h, err := ReadHeader(pv, nil); pf != nil && err == nil && bytes.Compare(h.Last, target) >= 0 {
				f, v = pf, pv
			} else {
				f, v = c.t.Blocks.Seek(target) // back where Seek left it
			}
		}
		c.load(f, v)
		c.settle()
		if c.end {
			return false
		}
	}
	return bytes.Compare(c.start(), target) <= 0
}

// advanceTo moves to the first posting at or after target and reports
// whether it is target.
func (c *cursor) advanceTo(target []byte) bool {
	c.toBlock(target)
	if c.end {
		return false
	}
	if bytes.Compare(c.start(), target) < 0 {
		if !c.decode() {
			return false
		}
		c.pos += c.search(target, false) // within: the block reaches target
	}
	c.settle()
	doc := c.doc()
	return doc != nil && bytes.Equal(doc, target)
}

// topK keeps the k best hits in a min-heap (worst on top): lower score,
// or at equal scores the larger doc, is worse.
type topK struct {
	k int
	h []Hit
}

func worse(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score < b.Score
	}
	return bytes.Compare(a.Doc, b.Doc) > 0
}

func (t *topK) full() bool { return len(t.h) >= t.k }

func (t *topK) push(x Hit) {
	if len(t.h) < t.k {
		t.h = append(t.h, x)
		for i := len(t.h) - 1; i > 0; {
			p := (i - 1) / 2
			if !worse(t.h[i], t.h[p]) {
				break
			}
			t.h[i], t.h[p] = t.h[p], t.h[i]
			i = p
		}
		return
	}
	if !worse(t.h[0], x) {
		return
	}
	t.h[0] = x
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(t.h) && worse(t.h[l], t.h[m]) {
			m = l
		}
		if r < len(t.h) && worse(t.h[r], t.h[m]) {
			m = r
		}
		if m == i {
			break
		}
		t.h[i], t.h[m] = t.h[m], t.h[i]
		i = m
	}
}

// sorted returns the hits best first.
func (t *topK) sorted() []Hit {
	out := slices.Clone(t.h)
	slices.SortFunc(out, func(a, b Hit) int {
		switch {
		case worse(b, a):
			return -1
		case worse(a, b):
			return 1
		}
		return 0
	})
	return out
}
