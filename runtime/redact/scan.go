package redact

import (
	"sync"
)

// The anchors of all the rules are found in one pass over the text: a
// table indexed by each pair of adjacent bytes says which anchors may
// start there (those whose first two bytes are that pair, in either case
// for the rules that fold case), and only those are compared. The pass
// hands each rule its candidates — every position where one of its anchors
// starts, overlapping ones included, in order — which is what searching
// the text once for each anchor gave before, without reading the text once
// per anchor (or lower-casing a copy of it for the rules that fold case).

// scanAnchor is one anchor of one rule.
type scanAnchor struct {
	text string // lower case when fold
	fold bool
	rule int // index in rules
	// word, mask and lower compare the anchor's first eight bytes (at
	// most) with eight bytes of text read as one word (little-endian):
	// the text's word, its letters lower-cased by lower where the anchor
	// folds case, masked to the anchor's length, is word.
	word, mask, lower uint64
}

// newScanAnchor returns anchor a of rule ri, folding case with fold.
func newScanAnchor(a string, fold bool, ri int) scanAnchor {
	sa := scanAnchor{text: a, fold: fold, rule: ri}
	for k := range min(len(a), 8) {
		sa.word |= uint64(a[k]) << (8 * k)
		sa.mask |= 0xff << (8 * k)
		if fold && 'a' <= a[k] && a[k] <= 'z' {
			sa.lower |= 0x20 << (8 * k)
		}
	}
	return sa
}

// at reports whether the anchor starts at s[i].
func (a *scanAnchor) at(s string, i int) bool {
	n := len(a.text)
	if len(s)-i < max(n, 8) {
		return len(s)-i >= n && hasAnchor(s[i:i+n], a.text, a.fold)
	}
	t := s[i : i+8] // read as one word
	w := uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24 |
		uint64(t[4])<<32 | uint64(t[5])<<40 | uint64(t[6])<<48 | uint64(t[7])<<56
	return (w|a.lower)&a.mask == a.word && (n <= 8 || hasAnchor(s[i+8:i+n], a.text[8:], a.fold))
}

// scanner is the table of the anchors of every rule.
type scanner struct {
	anchors []scanAnchor
	// pair maps the two bytes at a position (first | second<<8) to
	// 1 + the index in groups of the anchors that may start there; 0: none.
	pair   [1 << 16]uint8
	groups [][]int // anchors, by index in anchors, in rule order
	// third says, for each group, the bytes that may follow its pair (all
	// of them when one of its anchors is two bytes long): most pairs that
	// begin an anchor in prose and code ("to", "se", "co") do not go on
	// as one.
	third []byteSet
}

var (
	scanOnce   sync.Once
	theScanner *scanner
)

// rulesScanner returns the scanner of rules, built on first use.
func rulesScanner() *scanner {
	scanOnce.Do(func() { theScanner = newScanner(rules) })
	return theScanner
}

// caseVariants returns c, and its other case when fold and c is an ASCII
// letter.
func caseVariants(c byte, fold bool) []byte {
	switch {
	case fold && 'a' <= c && c <= 'z':
		return []byte{c, c - 'a' + 'A'}
	case fold && 'A' <= c && c <= 'Z':
		return []byte{c, c - 'A' + 'a'}
	}
	return []byte{c}
}

func newScanner(rs []rule) *scanner {
	sc := &scanner{}
	byPair := map[uint16][]int{}
	var keys []uint16 // in the order first seen, for a table that does not depend on map order
	for ri := range rs {
		for _, a := range rs[ri].anchors {
			if len(a) < 2 {
				panic("redact: an anchor shorter than two bytes: " + a)
			}
			ai := len(sc.anchors)
			sc.anchors = append(sc.anchors, newScanAnchor(a, rs[ri].fold, ri))
			for _, c0 := range caseVariants(a[0], rs[ri].fold) {
				for _, c1 := range caseVariants(a[1], rs[ri].fold) {
					k := uint16(c0) | uint16(c1)<<8
					if _, seen := byPair[k]; !seen {
						keys = append(keys, k)
					}
					byPair[k] = append(byPair[k], ai)
				}
			}
		}
	}
	groupOf := map[string]int{}
	for _, k := range keys {
		set := byPair[k]
		id := string(intsKey(set))
		g, ok := groupOf[id]
		if !ok {
			g = len(sc.groups)
			sc.groups = append(sc.groups, set)
			groupOf[id] = g
		}
		if g+1 > 255 {
			panic("redact: too many anchor groups")
		}
		sc.pair[k] = uint8(g + 1)
	}
	sc.third = make([]byteSet, len(sc.groups))
	for g, set := range sc.groups {
		for _, ai := range set {
			a := sc.anchors[ai]
			if len(a.text) == 2 {
				for c := range sc.third[g] {
					sc.third[g][c] = true
				}
				continue
			}
			for _, c := range caseVariants(a.text[2], a.fold) {
				sc.third[g][c] = true
			}
		}
	}
	return sc
}

func intsKey(set []int) []byte {
	b := make([]byte, 0, 2*len(set))
	for _, i := range set {
		b = append(b, byte(i), byte(i>>8))
	}
	return b
}

// candidates are the positions of the anchors of each rule in one text.
type candidates struct {
	byRule [][]int
}

var candidatePool = sync.Pool{New: func() any { return &candidates{} }}

// scan returns, for each rule, the positions in s where one of its anchors
// starts, in order. Release it with put when done.
func (sc *scanner) scan(s string) *candidates {
	c := candidatePool.Get().(*candidates)
	if len(c.byRule) < len(rules) {
		c.byRule = make([][]int, len(rules))
	}
	for i := range c.byRule {
		c.byRule[i] = c.byRule[i][:0]
	}
	pair := &sc.pair
	for i := range len(s) - 1 { // (a form the compiler reads without checking bounds)
		g := pair[uint16(s[i])|uint16(s[i+1])<<8]
		if g == 0 || i+2 < len(s) && !sc.third[g-1][s[i+2]] {
			continue
		}
		for _, ai := range sc.groups[g-1] {
			a := &sc.anchors[ai]
			if !a.at(s, i) {
				continue
			}
			list := c.byRule[a.rule]
			if n := len(list); n > 0 && list[n-1] == i {
				continue // another anchor of the same rule starts here too
			}
			c.byRule[a.rule] = append(list, i)
		}
	}
	return c
}

// has reports whether one of the anchors occurs in b.
func (sc *scanner) has(b []byte) bool {
	for i := range len(b) - 1 {
		g := sc.pair[uint16(b[i])|uint16(b[i+1])<<8]
		if g == 0 || i+2 < len(b) && !sc.third[g-1][b[i+2]] {
			continue
		}
		for _, ai := range sc.groups[g-1] {
			a := &sc.anchors[ai]
			if len(b)-i >= len(a.text) && hasAnchor(b[i:i+len(a.text)], a.text, a.fold) {
				return true
			}
		}
	}
	return false
}

func (c *candidates) put() {
	for i := range c.byRule {
		if cap(c.byRule[i]) > 1<<16 {
			c.byRule[i] = nil // do not keep a huge text's lists
		}
	}
	candidatePool.Put(c)
}

// hasAnchor reports whether t is anchor (lower case, when fold: t in any
// ASCII case).
func hasAnchor[T string | []byte](t T, anchor string, fold bool) bool {
	if len(t) != len(anchor) {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if fold && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != anchor[i] {
			return false
		}
	}
	return true
}

// cursor hands out a rule's candidates in order, from a position on.
type cursor struct {
	list []int
	i    int
}

// from returns the first candidate >= pos, or -1.
func (cu *cursor) from(pos int) int {
	for cu.i < len(cu.list) && cu.list[cu.i] < pos {
		cu.i++
	}
	if cu.i == len(cu.list) {
		return -1
	}
	return cu.list[cu.i]
}
