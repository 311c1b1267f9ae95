package decode

import (
	"encoding/json"
)

// fastJSON decodes data — valid UTF-8, as JSON has checked — in one pass
// over the bytes, when it is one well-formed JSON value, nested at most
// maxDepth deep, without duplicate keys. It gives up (ok false) at the
// first thing that is not so, or that it does not handle itself, and JSON
// then walks data with encoding/json's tokens, which says what is wrong
// and where. It never accepts what that walk refuses, and what it accepts
// decodes to the same value (FuzzJSONFast): it is only the quick way to
// the same answer for the arguments of every tool call.
func fastJSON(data []byte, maxDepth int) (v any, ok bool) {
	p := &fastParser{data: data, maxDepth: maxDepth}
	p.space()
	v, ok = p.value(0)
	if !ok {
		return nil, false
	}
	p.space()
	return v, p.i == len(p.data)
}

type fastParser struct {
	data     []byte
	i        int
	maxDepth int
}

// space skips JSON's insignificant white space.
func (p *fastParser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) value(depth int) (any, bool) {
	if depth > p.maxDepth || p.i >= len(p.data) {
		return nil, false
	}
	switch c := p.data[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.string()
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, false
}

func (p *fastParser) object(depth int) (any, bool) {
	p.i++ // {
	obj := map[string]any{}
	p.space()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		return obj, true
	}
	for {
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return nil, false
		}
		key, ok := p.string()
		if !ok {
			return nil, false
		}
		p.space()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return nil, false
		}
		p.i++
		p.space()
		k := key.(string)
		if _, dup := obj[k]; dup {
			return nil, false
		}
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		obj[k] = v
		p.space()
		if p.i >= len(p.data) {
			return nil, false
		}
		switch p.data[p.i] {
		case ',':
			p.i++
			p.space()
		case '}':
			p.i++
			return obj, true
		default:
			return nil, false
		}
	}
}

func (p *fastParser) array(depth int) (any, bool) {
	p.i++ // [
	arr := []any{}
	p.space()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		return arr, true
	}
	for {
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		arr = append(arr, v)
		p.space()
		if p.i >= len(p.data) {
			return nil, false
		}
		switch p.data[p.i] {
		case ',':
			p.i++
			p.space()
		case ']':
			p.i++
			return arr, true
		default:
			return nil, false
		}
	}
}

// string reads a string at p.i (its opening quote). One without escapes
// is its bytes; one with escapes is left to encoding/json to unquote, so
// that every escape means exactly what it means there.
func (p *fastParser) string() (any, bool) {
	start := p.i
	escaped := false
	for i := start + 1; i < len(p.data); i++ {
		switch c := p.data[i]; {
		case c == '"':
			p.i = i + 1
			if !escaped {
				return string(p.data[start+1 : i]), true
			}
			var s string
			if err := json.Unmarshal(p.data[start:p.i], &s); err != nil {
				return nil, false
			}
			return s, true
		case c == '\\':
			escaped = true
			i++ // the escaped byte cannot end the string
		case c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// number reads a number at p.i by JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *fastParser) number() (any, bool) {
	start, i := p.i, p.i
	if p.data[i] == '-' {
		i++
	}
	switch {
	case i < len(p.data) && p.data[i] == '0':
		i++
	case i < len(p.data) && p.data[i] >= '1' && p.data[i] <= '9':
		i = p.digits(i)
	default:
		return nil, false
	}
	if i < len(p.data) && p.data[i] == '.' {
		j := p.digits(i + 1)
		if j == i+1 {
			return nil, false
		}
		i = j
	}
	if i < len(p.data) && (p.data[i] == 'e' || p.data[i] == 'E') {
		i++
		if i < len(p.data) && (p.data[i] == '+' || p.data[i] == '-') {
			i++
		}
		j := p.digits(i)
		if j == i {
			return nil, false
		}
		i = j
	}
	p.i = i
	return json.Number(p.data[start:i]), true
}

// digits returns the index after the run of digits from i.
func (p *fastParser) digits(i int) int {
	for i < len(p.data) && p.data[i] >= '0' && p.data[i] <= '9' {
		i++
	}
	return i
}

// literal reads true, false or null at p.i.
func (p *fastParser) literal(word string) bool {
	if len(p.data)-p.i < len(word) || string(p.data[p.i:p.i+len(word)]) != word {
		return false
	}
	p.i += len(word)
	return true
}
