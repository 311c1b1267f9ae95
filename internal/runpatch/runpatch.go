// Package runpatch is the form in which a run's record is written step by
// step without writing it whole each time: a small head document, plus the
// elements of its lists (a transcript, responses, tool calls) that are new
// or changed since the last write. The store keeps the parts and gives
// back the whole document. It is a leaf both the runtime (which writes
// runs) and the store (which keeps them) import, as neither may import
// the other.
package runpatch

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/wardenrt/warden/internal/jsontop"
)

// ErrConflict means a patch assumed elements the store does not hold: the
// run's record was written whole (or by another writer) since. The writer
// sends every element again.
var ErrConflict = errors.New("the run's record changed since it was last written in parts")

// Patch is a change to a run's record.
type Patch struct {
	// Head is the record as one JSON object in which the value of each
	// list field (Lists) is null; the document is Head with those nulls
	// replaced by the lists.
	Head json.RawMessage
	// Lists are the record's list fields, each a top-level member of Head.
	Lists []List
}

// List is one list field of a record.
type List struct {
	// Field is the member's name in Head.
	Field string
	// Len is the list's length after the patch.
	Len int
	// Set holds the elements this patch writes, by index (each below Len):
	// the new ones and any that changed. Every other element below Len
	// must be one the store holds already (else ErrConflict).
	Set map[int]json.RawMessage
}

// Writer writes patches: the store, and what stands for it.
type Writer interface {
	PatchRun(ctx context.Context, id string, p Patch) error
}

// Limits on a patch.
const (
	MaxLists = 16
	MaxLen   = 1 << 30
)

// Checked is a patch found well formed, its JSON compacted.
type Checked struct {
	Head   []byte
	Fields []string
	Lens   []int
	Set    []map[int][]byte // per list
}

// Check checks p: Head is one JSON object in which each list field is a
// member (at the top level, once) whose value is null; fields are distinct
// and at most MaxLists; each list's length is at most MaxLen, and each
// element it sets is one JSON value at an index below it.
func Check(p Patch) (*Checked, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, p.Head); err != nil || buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return nil, errors.New("the run's head is not a JSON object")
	}
	if len(p.Lists) > MaxLists {
		return nil, fmt.Errorf("a run has at most %d lists", MaxLists)
	}
	c := &Checked{Head: buf.Bytes()}
	for _, l := range p.Lists {
		if slices.Contains(c.Fields, l.Field) {
			return nil, fmt.Errorf("list %q is named twice", l.Field)
		}
		if l.Len < 0 || l.Len > MaxLen {
			return nil, fmt.Errorf("list %q: length %d out of range", l.Field, l.Len)
		}
		set := make(map[int][]byte, len(l.Set))
		for i, elem := range l.Set {
			if i < 0 || i >= l.Len {
				return nil, fmt.Errorf("list %q: element %d is past its length %d", l.Field, i, l.Len)
			}
			var eb bytes.Buffer
			if err := json.Compact(&eb, elem); err != nil || eb.Len() == 0 {
				return nil, fmt.Errorf("list %q: element %d is not JSON", l.Field, i)
			}
			set[i] = eb.Bytes()
		}
		c.Fields, c.Lens, c.Set = append(c.Fields, l.Field), append(c.Lens, l.Len), append(c.Set, set)
	}
	if _, err := nulls(c.Head, c.Fields); err != nil {
		return nil, err
	}
	return c, nil
}

// Stored is what a store holds of a run kept in parts: its lists and
// their lengths.
type Stored struct {
	Fields []string
	Lens   []int
}

// EncodeStored is the bytes of s: uvarint lists, then per list uvarint
// len(name) | name | uvarint length.
func EncodeStored(s Stored) []byte {
	b := binary.AppendUvarint(nil, uint64(len(s.Fields)))
	for i, f := range s.Fields {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
		b = binary.AppendUvarint(b, uint64(s.Lens[i]))
	}
	return b
}

// DecodeStored decodes EncodeStored.
func DecodeStored(v []byte) (*Stored, error) {
	bad := errors.New("malformed list lengths")
	n, w := binary.Uvarint(v)
	if w <= 0 || n > MaxLists {
		return nil, bad
	}
	v = v[w:]
	var st Stored
	for range n {
		l, w := binary.Uvarint(v)
		if w <= 0 || uint64(len(v)-w) < l {
			return nil, bad
		}
		st.Fields = append(st.Fields, string(v[w:w+int(l)]))
		v = v[w+int(l):]
		m, w2 := binary.Uvarint(v)
		if w2 <= 0 || m > MaxLen {
			return nil, bad
		}
		st.Lens = append(st.Lens, int(m))
		v = v[w2:]
	}
	if len(v) != 0 {
		return nil, bad
	}
	return &st, nil
}

// SameLists reports whether s has c's lists, in c's order.
func (c *Checked) SameLists(s *Stored) bool {
	return s != nil && slices.Equal(s.Fields, c.Fields)
}

// Applies returns an error wrapping ErrConflict unless every element of c
// below its list's length that c does not set is held by s (nil: the run
// is not kept in parts).
func (c *Checked) Applies(s *Stored) error {
	for li, n := range c.Lens {
		held := 0
		if c.SameLists(s) {
			held = s.Lens[li]
		}
		for i := held; i < n; i++ {
			if _, ok := c.Set[li][i]; !ok {
				return fmt.Errorf("%w: element %d of list %q is neither held nor sent", ErrConflict, i, c.Fields[li])
			}
		}
	}
	return nil
}

// Assemble returns the document kept as head and lists (lists[i] holding
// the elements of fields[i]): head with each list field's null replaced by
// its elements.
func Assemble(head []byte, fields []string, lists [][][]byte) ([]byte, error) {
	at, err := nulls(head, fields)
	if err != nil {
		return nil, err
	}
	size := len(head)
	for _, l := range lists {
		for _, e := range l {
			size += len(e) + 1
		}
	}
	out := make([]byte, 0, size+2*len(lists))
	prev := 0
	order := make([]int, len(fields)) // fields by position in head
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return at[a] - at[b] })
	for _, li := range order {
		out = append(out, head[prev:at[li]]...)
		out = append(out, '[')
		for i, e := range lists[li] {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, e...)
		}
		out = append(out, ']')
		prev = at[li] + len("null")
	}
	return append(out, head[prev:]...), nil
}

// nulls returns the offset in head of each field's null value.
func nulls(head []byte, fields []string) ([]int, error) {
	at := make([]int, len(fields))
	for i := range at {
		at[i] = -1
	}
	var dup error
	ok := jsontop.Members(head, func(name jsontop.Name, start, end int) bool {
		for i, f := range fields {
			if !name.Is(f) {
				continue
			}
			if at[i] >= 0 {
				dup = fmt.Errorf("list %q is a member of the head twice", f)
				return false
			}
			if string(head[start:end]) != "null" {
				dup = fmt.Errorf("list %q is not null in the head", f)
				return false
			}
			at[i] = start
		}
		return true
	})
	switch {
	case dup != nil:
		return nil, dup
	case !ok:
		return nil, errors.New("the run's head is not a compact JSON object")
	}
	if i := slices.Index(at, -1); i >= 0 {
		return nil, fmt.Errorf("list %q is not a member of the head", fields[i])
	}
	return at, nil
}
