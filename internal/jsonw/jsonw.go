// Package jsonw writes a JSON object field by field, byte for byte as
// encoding/json's Marshal writes a struct with the same fields, without
// reflection: for a record written on every call (the gate's audit
// events), where Marshal's reflection was the larger part of the cost.
//
// Plain text is written as it is; a string holding anything Marshal
// escapes (a quote, a backslash, a control character, HTML's < > &,
// invalid UTF-8, U+2028 or U+2029), raw JSON that is not compact printable
// ASCII, and any other value are handed to Marshal, which writes them as
// it always has.
package jsonw

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Object is a JSON object being written. Keys are written as they are:
// plain ASCII, as a struct's json tags are.
type Object struct {
	b   []byte
	err error
}

// NewObject starts an object, with room for size bytes.
func NewObject(size int) *Object {
	return &Object{b: append(make([]byte, 0, size), '{')}
}

// key writes the comma before a field, unless it is the first of its
// object, and the field's key.
func (o *Object) key(k string) {
	if last := o.b[len(o.b)-1]; last != '{' {
		o.b = append(o.b, ',')
	}
	o.b = append(o.b, '"')
	o.b = append(o.b, k...)
	o.b = append(o.b, '"', ':')
}

// String writes a string field.
func (o *Object) String(k, s string) {
	o.key(k)
	o.b = appendString(o.b, s)
}

// OptString writes a string field unless s is empty (omitempty).
func (o *Object) OptString(k, s string) {
	if s != "" {
		o.String(k, s)
	}
}

// Strings writes a []string field; nil is null.
func (o *Object) Strings(k string, ss []string) {
	o.key(k)
	if ss == nil {
		o.b = append(o.b, "null"...)
		return
	}
	o.b = append(o.b, '[')
	for i, s := range ss {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.b = appendString(o.b, s)
	}
	o.b = append(o.b, ']')
}

// OptStrings writes a []string field unless it is empty (omitempty).
func (o *Object) OptStrings(k string, ss []string) {
	if len(ss) > 0 {
		o.Strings(k, ss)
	}
}

// OptTrue writes a bool field when it is true (omitempty).
func (o *Object) OptTrue(k string, v bool) {
	if v {
		o.key(k)
		o.b = append(o.b, "true"...)
	}
}

// Int writes an integer field.
func (o *Object) Int(k string, v int64) {
	o.key(k)
	o.b = strconv.AppendInt(o.b, v, 10)
}

// OptInt writes an integer field unless it is 0 (omitempty).
func (o *Object) OptInt(k string, v int64) {
	if v != 0 {
		o.Int(k, v)
	}
}

// OptUint writes an unsigned integer field unless it is 0 (omitempty).
func (o *Object) OptUint(k string, v uint64) {
	if v != 0 {
		o.key(k)
		o.b = strconv.AppendUint(o.b, v, 10)
	}
}

// OptRaw writes a json.RawMessage field unless it is empty (omitempty):
// checked, compacted, with < > & and U+2028, U+2029 escaped, as Marshal
// does. Compact printable ASCII without HTML's characters (not even a
// space, which compacting drops between values) is written as it is, once
// checked.
func (o *Object) OptRaw(k string, raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	plain := true
	for _, c := range raw {
		if c == ' ' || !plainString[c] && c != '"' && c != '\\' {
			plain = false
			break
		}
	}
	if plain && json.Valid(raw) {
		o.key(k)
		o.b = append(o.b, raw...)
		return
	}
	o.Value(k, raw)
}

// Value writes a field of any other value, as Marshal writes it.
func (o *Object) Value(k string, v any) {
	out, err := json.Marshal(v)
	if err != nil {
		o.err = err
		return
	}
	o.key(k)
	o.b = append(o.b, out...)
}

// Mark returns where the next field starts, for Since.
func (o *Object) Mark() int { return len(o.b) }

// Since returns a copy of the fields written since mark (each with the
// comma before it, unless it was its object's first): to be written again
// as they are, with Fields, in another object at the same place.
func (o *Object) Since(mark int) []byte { return append([]byte(nil), o.b[mark:]...) }

// Fields writes fields Since returned, after at least one other field.
func (o *Object) Fields(written []byte) { o.b = append(o.b, written...) }

// Open starts an object field; Close ends it.
func (o *Object) Open(k string) {
	o.key(k)
	o.b = append(o.b, '{')
}

// Close ends the object Open started, or the object itself.
func (o *Object) Close() { o.b = append(o.b, '}') }

// Bytes ends the object and returns it, or the first error a value gave.
func (o *Object) Bytes() ([]byte, error) {
	if o.err != nil {
		return nil, o.err
	}
	o.Close()
	return o.b, nil
}

// plainString are the bytes Marshal writes as they are in a string:
// printable ASCII but the quote, the backslash and HTML's < > &.
var plainString = func() (set [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		set[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return set
}()

// appendString appends s as Marshal writes it.
func appendString(b []byte, s string) []byte {
	ascii := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			ascii = false
			continue
		}
		if !plainString[c] {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	// Other text is written as it is when it is valid UTF-8 without the
	// line and paragraph separators, which JavaScript reads as line ends.
	if !ascii && (!utf8.ValidString(s) || strings.Contains(s, "\u2028") || strings.Contains(s, "\u2029")) {
		q, _ := json.Marshal(s)
		return append(b, q...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
