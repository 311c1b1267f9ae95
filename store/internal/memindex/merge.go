package memindex

import (
	"bytes"
	"fmt"
)

// Blocks is one term's blocks in a sorted store, each under the first doc
// it holds. Seek, First, Last, Next and Prev return a block's first doc and
// its bytes, or nil past either end. Put and Delete change the store; the
// position of the cursor is lost after them.
type Blocks interface {
	Seek(doc []byte) (first, v []byte)
	Last() (first, v []byte)
	Next() (first, v []byte)
	Prev() (first, v []byte)
	Put(first, v []byte) error
	Delete(first []byte) error
}

// Change is a posting to add or replace (Delete false) or to remove.
type Change struct {
	Posting
	Delete bool
}

// seekBlock returns the block that holds doc if any does: the last block
// whose first doc is at most doc, or else the first block.
func seekBlock(bl Blocks, doc []byte) (first, v []byte) {
	first, v = bl.Seek(doc)
	if first != nil && bytes.Equal(first, doc) {
		return first, v
	}
	var pf, pv []byte
	if first == nil {
		pf, pv = bl.Last()
	} else {
		pf, pv = bl.Prev()
	}
	if pf != nil {
		return pf, pv
	}
	return bl.Seek(doc)
}

// Apply applies changes (sorted by doc, one per doc) to a term's blocks,
// rewriting each block they fall in, split so that none holds more than
// MaxBlock postings. It returns how many postings were added (removed:
// negative) — a change of a doc the term does not hold, or a removal of
// one it does not, counts nothing.
func Apply(bl Blocks, changes []Change) (added int, err error) {
	for i := 0; i < len(changes); {
		first, v := seekBlock(bl, changes[i].Doc)
		var ps []Posting
		var next []byte // the first doc of the block after, nil if none
		if first != nil {
			if ps, err = DecodeBlock(first, v); err != nil {
				return added, fmt.Errorf("block %q: %w", first, err)
			}
			first = bytes.Clone(first)
			bl.Seek(first)
			if nf, _ := bl.Next(); nf != nil {
				next = bytes.Clone(nf)
			}
		}
		j := i
		for j < len(changes) && (next == nil || bytes.Compare(changes[j].Doc, next) < 0) {
			j++
		}
		var n int
		ps, n = merge(ps, changes[i:j])
		added += n
		if first != nil {
			if err := bl.Delete(first); err != nil {
				return added, err
			}
		}
		for _, b := range Split(ps) {
			if err := bl.Put(b[0].Doc, Encode(b)); err != nil {
				return added, err
			}
		}
		i = j
	}
	return added, nil
}

// merge applies sorted changes to sorted postings.
func merge(ps []Posting, changes []Change) ([]Posting, int) {
	out := make([]Posting, 0, len(ps)+len(changes))
	added := 0
	i := 0
	for _, c := range changes {
		for i < len(ps) && bytes.Compare(ps[i].Doc, c.Doc) < 0 {
			out = append(out, ps[i])
			i++
		}
		held := i < len(ps) && bytes.Equal(ps[i].Doc, c.Doc)
		if held {
			i++
		}
		switch {
		case c.Delete && held:
			added--
		case !c.Delete:
			out = append(out, c.Posting)
			if !held {
				added++
			}
		}
	}
	return append(out, ps[i:]...), added
}
