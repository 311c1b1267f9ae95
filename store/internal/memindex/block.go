// Package memindex is the memory index of the bbolt store: each term's
// postings (the entries holding it, with its frequency in each and each
// entry's length) in blocks of up to MaxBlock, ordered by entry, and the
// exact top-k BM25 search over them that skips whole blocks and lists
// which cannot reach the k-th best score (block-max MaxScore). It knows
// nothing of bbolt: a term's blocks are reached through Blocks.
//
// An entry is named by its document key (namespace, NUL, key); a term's
// postings are in key order, so every list is merged in the same order
// and ties between equal scores go to the smaller key, as the contract
// wants.
package memindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
)

// MaxBlock is the most postings a block holds.
const MaxBlock = 128

// maxPairs is the most (tf, dl) pairs a bound keeps.
const maxPairs = 8

// Posting is one entry holding a term.
type Posting struct {
	Doc []byte // namespace, NUL, key
	TF  uint32 // occurrences of the term in the entry
	DL  uint32 // the entry's length in terms
}

// Pair is a (term frequency, entry length) that bounds a term's score: a
// posting scores at most what the pair does if its frequency is at most
// TF and its length at least DL.
type Pair struct{ TF, DL uint32 }

// errMalformed is returned for bytes that are not a block.
var errMalformed = errors.New("malformed memory index block")

// A block is
//
//	uvarint n | uvarint len(last doc) | last doc | uvarint pairs | pairs x (uvarint tf, uvarint dl)
//	n x (uvarint shared prefix with the previous doc | uvarint len(rest) | rest | uvarint tf | uvarint dl)
//
// and is stored under its first doc. The pairs are the Pareto frontier of
// its postings' (tf, dl): whatever the corpus statistics, no posting of
// the block scores more than the best of them.

// Encode returns the block of postings (sorted by doc, at least one).
func Encode(ps []Posting) []byte {
	last := ps[len(ps)-1].Doc
	b := make([]byte, 0, 16+len(last)+len(ps)*8)
	b = binary.AppendUvarint(b, uint64(len(ps)))
	b = binary.AppendUvarint(b, uint64(len(last)))
	b = append(b, last...)
	pairs := Frontier(ps)
	b = binary.AppendUvarint(b, uint64(len(pairs)))
	for _, p := range pairs {
		b = binary.AppendUvarint(b, uint64(p.TF))
		b = binary.AppendUvarint(b, uint64(p.DL))
	}
	var prev []byte
	for _, p := range ps {
		shared := commonPrefix(prev, p.Doc)
		b = binary.AppendUvarint(b, uint64(shared))
		b = binary.AppendUvarint(b, uint64(len(p.Doc)-shared))
		b = append(b, p.Doc[shared:]...)
		b = binary.AppendUvarint(b, uint64(p.TF))
		b = binary.AppendUvarint(b, uint64(p.DL))
		prev = p.Doc
	}
	return b
}

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// Frontier returns the Pareto frontier of the postings' (tf, dl) — highest
// frequency, shortest length — by decreasing tf, merged down to maxPairs
// pairs (two neighbours become the higher tf with the shorter length,
// which bounds both).
func Frontier(ps []Posting) []Pair {
	pairs := make([]Pair, 0, 4)
	for _, p := range ps {
		pairs = addPair(pairs, Pair{p.TF, p.DL})
	}
	return pairs
}

// addPair adds q to a frontier (sorted by decreasing tf, so by decreasing
// dl too) unless a pair of it dominates q.
func addPair(f []Pair, q Pair) []Pair {
	for _, p := range f {
		if p.TF >= q.TF && p.DL <= q.DL {
			return f
		}
	}
	f = slices.DeleteFunc(f, func(p Pair) bool { return q.TF >= p.TF && q.DL <= p.DL })
	i, _ := slices.BinarySearchFunc(f, q, func(a, b Pair) int { return int(b.TF) - int(a.TF) })
	f = slices.Insert(f, i, q)
	for len(f) > maxPairs {
		// Merge the last two (the lowest tf): (tf of the one before,
		// dl of the last).
		n := len(f)
		f[n-2] = Pair{f[n-2].TF, f[n-1].DL}
		f = f[:n-1]
	}
	return f
}

// MergePairs returns a frontier bounding both a and b.
func MergePairs(a, b []Pair) []Pair {
	out := slices.Clone(a)
	for _, q := range b {
		out = addPair(out, q)
	}
	return out
}

// Header is what a block says about itself without decoding its postings.
type Header struct {
	N     int
	Last  []byte // its last doc (points into the block)
	Pairs []Pair
	body  []byte // the postings
}

// ReadHeader reads a block's header.
func ReadHeader(v []byte, pairs []Pair) (Header, error) {
	var h Header
	n, w := binary.Uvarint(v)
	if w <= 0 || n == 0 || n > 1<<20 {
		return h, errMalformed
	}
	h.N, v = int(n), v[w:]
	l, w := binary.Uvarint(v)
	if w <= 0 || uint64(len(v)-w) < l {
		return h, errMalformed
	}
	h.Last, v = v[w:w+int(l)], v[w+int(l):]
	var err error
	h.Pairs, h.body, err = readPairs(v, pairs[:0])
	return h, err
}

// readPairs reads uvarint k and k pairs, appending them to dst.
func readPairs(v []byte, dst []Pair) ([]Pair, []byte, error) {
	k, w := binary.Uvarint(v)
	if w <= 0 || k > maxPairs {
		return dst, v, errMalformed
	}
	v = v[w:]
	for range k {
		tf, w1 := binary.Uvarint(v)
		if w1 <= 0 {
			return dst, v, errMalformed
		}
		dl, w2 := binary.Uvarint(v[w1:])
		if w2 <= 0 || tf > 1<<32-1 || dl > 1<<32-1 {
			return dst, v, errMalformed
		}
		dst = append(dst, Pair{uint32(tf), uint32(dl)})
		v = v[w1+w2:]
	}
	return dst, v, nil
}

// Decoded is a block's postings, decoded into reused buffers.
type Decoded struct {
	arena []byte
	ends  []int // doc i is arena[ends[i-1]:ends[i]]
	TF    []uint32
	DL    []uint32
}

// Len is the number of postings.
func (d *Decoded) Len() int { return len(d.ends) }

// Doc returns doc i (valid until the next Decode).
func (d *Decoded) Doc(i int) []byte {
	start := 0
	if i > 0 {
		start = d.ends[i-1]
	}
	return d.arena[start:d.ends[i]]
}

// Decode decodes the postings of a block whose header is h, checking that
// they are in order, that the first is first and the last is h.Last.
func (d *Decoded) Decode(first []byte, h Header) error {
	d.arena, d.ends, d.TF, d.DL = d.arena[:0], d.ends[:0], d.TF[:0], d.DL[:0]
	v := h.body
	prev := 0 // start of the previous doc in arena
	for i := range h.N {
		shared, w1 := binary.Uvarint(v)
		if w1 <= 0 {
			return errMalformed
		}
		rest, w2 := binary.Uvarint(v[w1:])
		if w2 <= 0 || uint64(len(v)-w1-w2) < rest {
			return errMalformed
		}
		v = v[w1+w2:]
		start := len(d.arena)
		if i > 0 {
			if shared > uint64(start-prev) {
				return errMalformed
			}
			d.arena = append(d.arena, d.arena[prev:prev+int(shared)]...)
		} else if shared != 0 {
			return errMalformed
		}
		d.arena = append(d.arena, v[:rest]...)
		v = v[rest:]
		tf, w3 := binary.Uvarint(v)
		if w3 <= 0 {
			return errMalformed
		}
		dl, w4 := binary.Uvarint(v[w3:])
		if w4 <= 0 || tf == 0 || tf > 1<<32-1 || dl > 1<<32-1 {
			return errMalformed
		}
		v = v[w3+w4:]
		if i > 0 && !after(d.arena[prev:start], d.arena[start:], int(shared)) {
			return errMalformed
		}
		d.ends = append(d.ends, len(d.arena))
		d.TF, d.DL = append(d.TF, uint32(tf)), append(d.DL, uint32(dl))
		prev = start
	}
	if len(v) != 0 || !bytes.Equal(d.Doc(0), first) || !bytes.Equal(d.Doc(h.N-1), h.Last) {
		return errMalformed
	}
	return nil
}

// after reports whether cur, which shares its first shared bytes with
// prev, sorts after it: at once if they differ at shared (the encoder's
// prefixes are the longest), else by comparing them.
func after(prev, cur []byte, shared int) bool {
	switch {
	case len(cur) == shared:
		return false // a prefix of prev, or prev itself
	case shared == len(prev):
		return true
	case cur[shared] != prev[shared]:
		return cur[shared] > prev[shared]
	}
	return bytes.Compare(prev, cur) < 0
}

// Postings returns the decoded postings as copies.
func (d *Decoded) Postings() []Posting {
	out := make([]Posting, d.Len())
	for i := range out {
		out[i] = Posting{Doc: bytes.Clone(d.Doc(i)), TF: d.TF[i], DL: d.DL[i]}
	}
	return out
}

// DecodeBlock decodes the block stored under first.
func DecodeBlock(first, v []byte) ([]Posting, error) {
	h, err := ReadHeader(v, nil)
	if err != nil {
		return nil, err
	}
	var d Decoded
	if err := d.Decode(first, h); err != nil {
		return nil, err
	}
	return d.Postings(), nil
}

// Split cuts a sorted list of postings into blocks of at most MaxBlock,
// of even sizes.
func Split(ps []Posting) [][]Posting {
	if len(ps) == 0 {
		return nil
	}
	k := (len(ps) + MaxBlock - 1) / MaxBlock
	out := make([][]Posting, 0, k)
	for i := range k {
		out = append(out, ps[i*len(ps)/k:(i+1)*len(ps)/k])
	}
	return out
}

// EncodeTermStats is what the index keeps of a term over all namespaces:
// how many entries hold it, and a frontier bounding its postings (kept
// through removals: it only has to bound them).
func EncodeTermStats(df uint64, pairs []Pair) []byte {
	b := binary.AppendUvarint(nil, df)
	b = binary.AppendUvarint(b, uint64(len(pairs)))
	for _, p := range pairs {
		b = binary.AppendUvarint(b, uint64(p.TF))
		b = binary.AppendUvarint(b, uint64(p.DL))
	}
	return b
}

// DecodeTermStats decodes EncodeTermStats.
func DecodeTermStats(v []byte) (df uint64, pairs []Pair, err error) {
	df, w := binary.Uvarint(v)
	if w <= 0 {
		return 0, nil, errMalformed
	}
	pairs, rest, err := readPairs(v[w:], nil)
	if err == nil && len(rest) != 0 {
		err = errMalformed
	}
	return df, pairs, err
}
