// Package jsontop reads the top-level members of a compact JSON object
// (one with no insignificant whitespace, as json.Compact makes it) in one
// pass, without decoding the values: the fields the store indexes an
// audit event by, and the list fields of a run's record kept in parts.
package jsontop

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Members calls fn for each member of obj in order, with the member's
// name and its value as offsets into obj ([start, end)); fn returns false
// to stop. Members reports false if obj is not a compact JSON object. It
// checks the structure only: obj must be valid JSON for the values to be.
func Members(obj []byte, fn func(name Name, start, end int) bool) bool {
	if len(obj) < 2 || obj[0] != '{' {
		return false
	}
	if obj[1] == '}' {
		return len(obj) == 2
	}
	for i := 1; ; {
		if i >= len(obj) || obj[i] != '"' {
			return false
		}
		end, esc := stringEnd(obj, i)
		if end < 0 || end >= len(obj) || obj[end] != ':' {
			return false
		}
		vend := skipValue(obj, end+1)
		if vend < 0 || vend >= len(obj) {
			return false
		}
		if !fn(Name{raw: obj[i:end], escaped: esc}, end+1, vend) {
			return true
		}
		switch {
		case obj[vend] == ',':
			i = vend + 1
		case obj[vend] == '}' && vend+1 == len(obj):
			return true
		default:
			return false
		}
	}
}

// Strings returns the value of each named member of obj as a JSON decoder
// reads obj into a map: the last member of that name, decoded, if it is a
// string; "" if it is absent or not a string (or obj not an object). obj
// must be valid JSON.
func Strings(obj []byte, names ...string) []string {
	out := make([]string, len(names))
	escaped := false
	ok := Members(obj, func(name Name, start, end int) bool {
		if name.escaped {
			escaped = true
			return false
		}
		for i, n := range names {
			if name.Is(n) {
				out[i] = String(obj[start:end])
			}
		}
		return true
	})
	if ok && !escaped {
		return out
	}
	return stringsSlow(obj, names)
}

// stringsSlow is Strings by encoding/json: the reference.
func stringsSlow(obj []byte, names []string) []string {
	out := make([]string, len(names))
	var fields map[string]json.RawMessage
	if json.Unmarshal(obj, &fields) != nil {
		return out
	}
	for i, n := range names {
		var s string
		if json.Unmarshal(fields[n], &s) == nil {
			out[i] = s
		}
	}
	return out
}

// Name is a member's name as written.
type Name struct {
	raw     []byte // with its quotes
	escaped bool
}

// Is reports whether the name, decoded, is s.
func (n Name) Is(s string) bool {
	if !n.escaped {
		return string(n.raw[1:len(n.raw)-1]) == s
	}
	return String(n.raw) == s
}

// Escaped reports whether the name is written with escapes.
func (n Name) Escaped() bool { return n.escaped }

// String decodes v if it is a JSON string (invalid UTF-8 becoming U+FFFD,
// as encoding/json does), else returns "".
func String(v []byte) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner)
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}

// stringEnd returns the index just past the string starting at b[i] (a
// quote), and whether it has escapes; -1 if it does not end.
func stringEnd(b []byte, i int) (end int, esc bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			esc = true
			j++
		case '"':
			return j + 1, esc
		}
	}
	return -1, esc
}

// skipValue returns the index just past the compact JSON value starting at
// b[i], or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := stringEnd(b, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := stringEnd(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	for j := i; j < len(b); j++ {
		switch b[j] {
		case ',', '}', ']':
			return j
		case ' ', '\t', '\n', '\r':
			return -1
		}
	}
	return -1
}
