package warden

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string exactly as json.Marshal writes
// it (HTML characters, U+2028 and U+2029 escaped; invalid UTF-8 as
// U+FFFD).
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendCompact appends the JSON value raw (already checked) as
// json.Marshal writes a json.RawMessage: without insignificant whitespace,
// HTML characters, U+2028 and U+2029 escaped.
func appendCompact(dst, raw []byte) []byte {
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '<' || c == '>' || c == '&':
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			continue
		case c == 0xE2 && i+2 < len(raw) && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xA8:
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[raw[i+2]&0xF])
			i += 2
			continue
		case inString:
			if c == '\\' {
				dst = append(dst, c, raw[i+1])
				i++
				continue
			}
			inString = c != '"'
		case isSpace(c):
			continue
		case c == '"':
			inString = true
		}
		dst = append(dst, c)
	}
	return dst
}

// appendRawObject appends raw, a JSON object with nothing but whitespace
// around it, compacted; false when raw is anything else.
func appendRawObject(dst, raw []byte) ([]byte, bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return dst, false
	}
	end, ok := skipValue(raw, i)
	if !ok || skipSpace(raw, end) != len(raw) {
		return dst, false
	}
	return appendCompact(dst, raw[i:end]), true
}

// appendValue appends v as json.Marshal writes it, for the types maps of
// arguments usually hold; false for any other (or nesting deeper than
// maxFastDepth, or a float JSON cannot hold), for json.Marshal to do.
func appendValue(dst []byte, v any, depth int) ([]byte, bool) {
	if depth > maxFastDepth {
		return dst, false
	}
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case string:
		return appendString(dst, x), true
	case bool:
		return strconv.AppendBool(dst, x), true
	case int:
		return strconv.AppendInt(dst, int64(x), 10), true
	case int64:
		return strconv.AppendInt(dst, x, 10), true
	case float64:
		return appendFloat(dst, x)
	case []string:
		if x == nil {
			return append(dst, "null"...), true
		}
		dst = append(dst, '[')
		for i, s := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, s)
		}
		return append(dst, ']'), true
	case []any:
		if x == nil {
			return append(dst, "null"...), true
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendValue(dst, e, depth+1); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	case map[string]string:
		if x == nil {
			return append(dst, "null"...), true
		}
		return appendMap(dst, x, func(dst []byte, v string) ([]byte, bool) { return appendString(dst, v), true })
	case map[string]any:
		if x == nil {
			return append(dst, "null"...), true
		}
		return appendMap(dst, x, func(dst []byte, v any) ([]byte, bool) { return appendValue(dst, v, depth+1) })
	}
	return dst, false
}

// appendMap appends m with its keys sorted, as json.Marshal does.
func appendMap[V any](dst []byte, m map[string]V, value func([]byte, V) ([]byte, bool)) ([]byte, bool) {
	if len(m) == 1 { // no order to find
		for k, v := range m {
			dst = append(appendString(append(dst, '{'), k), ':')
			var ok bool
			if dst, ok = value(dst, v); !ok {
				return dst, false
			}
		}
		return append(dst, '}'), true
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(appendString(dst, k), ':')
		var ok bool
		if dst, ok = value(dst, m[k]); !ok {
			return dst, false
		}
	}
	return append(dst, '}'), true
}

// appendFloat appends f as json.Marshal writes a float64.
func appendFloat(dst []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return dst, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9
		if b := dst[start:]; len(b) >= 4 && b[len(b)-4] == 'e' && b[len(b)-3] == '-' && b[len(b)-2] == '0' {
			b[len(b)-2] = b[len(b)-1]
			dst = dst[:len(dst)-1]
		}
	}
	return dst, true
}

// encodeRequestFast is EncodeRequest for what it handles: args nil, a
// JSON object as json.RawMessage or []byte, or a map of the types
// appendValue knows; ok is false for anything else.
func encodeRequestFast(tool string, args any) (req []byte, ok bool) {
	return appendRequestFast(make([]byte, 0, 128+len(tool)), tool, args)
}

// appendRequestFast is encodeRequestFast appending to dst.
func appendRequestFast(dst []byte, tool string, args any) (req []byte, ok bool) {
	req = appendString(append(dst, `{"tool":`...), tool)
	req = append(req, `,"args":`...)
	switch a := args.(type) {
	case nil:
		req = append(req, "{}"...)
		ok = true
	case json.RawMessage:
		req, ok = appendRawObject(req, a)
	case []byte:
		req, ok = appendRawObject(req, a)
	case map[string]string:
		req, ok = appendValue(req, a, 0)
		ok = ok && a != nil
	case map[string]any:
		req, ok = appendValue(req, a, 0)
		ok = ok && a != nil
	}
	if !ok {
		return nil, false
	}
	return append(req, '}'), true
}
