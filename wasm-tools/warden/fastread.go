package warden

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// A guest spends most of a warden_call round trip in encoding/json, which
// is slow in wasm (reflection, and a validation pass before decoding). The
// envelope and the request have a fixed shape, so they are read and written
// here directly. These fast paths handle exactly what encoding/json would
// accept, with the same result (fast_test.go checks both against it); on
// anything else — a type mismatch, a duplicated or case-variant field
// name, nesting deeper than maxFastDepth — they give up and the caller
// uses encoding/json, which then decides (and names the error).

// maxFastDepth bounds the nesting the fast paths follow (encoding/json
// allows 10000; deeper values go to it).
const maxFastDepth = 1000

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// hex4 is the value of four hex digits, or -1.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// skipString returns the end of the JSON string starting at b[i] (a
// quote), checked as encoding/json's scanner does.
func skipString(b []byte, i int) (int, bool) {
	for i++; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(b) {
				return 0, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if hex4(b[i+2:]) < 0 {
					return 0, false
				}
				i += 6
			default:
				return 0, false
			}
		case c < 0x20:
			return 0, false
		default:
			i++
		}
	}
	return 0, false
}

// skipNumber returns the end of the JSON number starting at b[i].
func skipNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return 0, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return 0, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, true
}

// skipScalar returns the end of the string, number or literal at b[i].
func skipScalar(b []byte, i int) (int, bool) {
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '-' || isDigit(c):
		return skipNumber(b, i)
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if bytes.HasPrefix(b[i:], []byte(lit)) {
			return i + len(lit), true
		}
	}
	return 0, false
}

// skipValue returns the end of the JSON value starting at b[i] (leading
// whitespace allowed), checked as encoding/json's scanner does; false
// also for nesting deeper than maxFastDepth.
func skipValue(b []byte, i int) (int, bool) {
	var stack []byte // the open containers: '{' or '['
	for {
		// A value.
		i = skipSpace(b, i)
		if i >= len(b) {
			return 0, false
		}
		closed := true
		switch b[i] {
		case '{', '[':
			if len(stack) >= maxFastDepth {
				return 0, false
			}
			open, end := b[i], byte('}')
			if open == '[' {
				end = ']'
			}
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == end {
				i++
				break
			}
			stack = append(stack, open)
			closed = false
			if open == '{' {
				var ok bool
				if i, ok = skipKey(b, i); !ok {
					return 0, false
				}
			}
		default:
			var ok bool
			if i, ok = skipScalar(b, i); !ok {
				return 0, false
			}
		}
		if !closed {
			continue
		}
		// After a value: close containers until one continues.
		for {
			if len(stack) == 0 {
				return i, true
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return 0, false
			}
			top := stack[len(stack)-1]
			if b[i] == ',' {
				i++
				if top == '{' {
					var ok bool
					if i, ok = skipKey(b, i); !ok {
						return 0, false
					}
				}
				break
			}
			if b[i] != top+2 { // '{'+2 == '}', '['+2 == ']'
				return 0, false
			}
			i++
			stack = stack[:len(stack)-1]
		}
	}
}

// skipKey skips an object member's key and its colon.
func skipKey(b []byte, i int) (int, bool) {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	i, ok := skipString(b, i)
	if !ok {
		return 0, false
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return 0, false
	}
	return i + 1, true
}

// unquote decodes the JSON string starting at b[i] as encoding/json does
// (invalid UTF-8 and lone surrogates become U+FFFD) and returns its end.
func unquote(b []byte, i int) (string, int, bool) {
	end, ok := skipString(b, i)
	if !ok {
		return "", 0, false
	}
	s := b[i+1 : end-1]
	plain := utf8.Valid(s)
	for _, c := range s {
		if c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		return string(s), end, true
	}
	out := make([]byte, 0, len(s)+utf8.UTFMax)
	for r := 0; r < len(s); {
		switch c := s[r]; {
		case c == '\\':
			r++
			switch s[r] {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				rr := hex4(s[r+1:])
				r += 5
				if utf16.IsSurrogate(rr) {
					rr1 := rune(-1)
					if r+1 < len(s) && s[r] == '\\' && s[r+1] == 'u' {
						rr1 = hex4(s[r+2:])
					}
					if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
						out = utf8.AppendRune(out, dec)
						r += 6
						continue
					}
					rr = unicode.ReplacementChar
				}
				out = utf8.AppendRune(out, rr)
				continue
			default: // '"', '\\', '/'
				out = append(out, s[r])
			}
			r++
		case c < utf8.RuneSelf:
			out = append(out, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			out = utf8.AppendRune(out, rr)
			r += size
		}
	}
	return string(out), end, true
}

// reader walks one JSON document for the fast decoder.
type reader struct {
	b []byte
	i int
}

// object reads an object, calling member for each key with r.i at its
// value; member must consume the value. Keys are matched exactly against
// names: a repeated name, or a key that matches a name only without
// regard to case (as encoding/json would take it), fails; other keys are
// skipped.
func (r *reader) object(names []string, member func(k int) bool) bool {
	r.i = skipSpace(r.b, r.i)
	if r.i >= len(r.b) || r.b[r.i] != '{' {
		return false
	}
	r.i = skipSpace(r.b, r.i+1)
	if r.i < len(r.b) && r.b[r.i] == '}' {
		r.i++
		return true
	}
	var seen uint64
	for {
		r.i = skipSpace(r.b, r.i)
		if r.i >= len(r.b) || r.b[r.i] != '"' {
			return false
		}
		key, end, ok := unquote(r.b, r.i)
		if !ok {
			return false
		}
		r.i = skipSpace(r.b, end)
		if r.i >= len(r.b) || r.b[r.i] != ':' {
			return false
		}
		r.i = skipSpace(r.b, r.i+1)
		k := matchName(names, key)
		switch {
		case k == -2:
			return false
		case k == -1:
			if r.i, ok = skipValue(r.b, r.i); !ok {
				return false
			}
		case seen&(1<<k) != 0:
			return false
		default:
			seen |= 1 << k
			if !member(k) {
				return false
			}
		}
		r.i = skipSpace(r.b, r.i)
		if r.i >= len(r.b) {
			return false
		}
		switch r.b[r.i] {
		case ',':
			r.i++
		case '}':
			r.i++
			return true
		default:
			return false
		}
	}
}

// matchName is the index of key in names, -1 for no name, -2 for a name
// matched only without regard to case.
func matchName(names []string, key string) int {
	for k, n := range names {
		if n == key {
			return k
		}
	}
	for _, n := range names {
		if bytes.EqualFold([]byte(n), []byte(key)) {
			return -2
		}
	}
	return -1
}

func (r *reader) str(dst *string) bool {
	if r.i >= len(r.b) || r.b[r.i] != '"' {
		return false
	}
	s, end, ok := unquote(r.b, r.i)
	*dst, r.i = s, end
	return ok
}

func (r *reader) boolean(dst *bool) bool {
	for _, v := range [...]bool{true, false} {
		lit := strconv.FormatBool(v)
		if bytes.HasPrefix(r.b[r.i:], []byte(lit)) {
			*dst, r.i = v, r.i+len(lit)
			return true
		}
	}
	return false
}

// int64 reads an integer literal (encoding/json refuses a fraction or an
// exponent for an int64).
func (r *reader) int64(dst *int64) bool {
	end, ok := skipNumber(r.b, r.i)
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(string(r.b[r.i:end]), 10, 64)
	if err != nil {
		return false
	}
	*dst, r.i = n, end
	return true
}

// strings reads an array of strings (empty: a non-nil empty slice).
func (r *reader) strings(dst *[]string) bool {
	if r.i >= len(r.b) || r.b[r.i] != '[' {
		return false
	}
	out := []string{}
	r.i = skipSpace(r.b, r.i+1)
	if r.i < len(r.b) && r.b[r.i] == ']' {
		r.i++
		*dst = out
		return true
	}
	for {
		var s string
		r.i = skipSpace(r.b, r.i)
		if !r.str(&s) {
			return false
		}
		out = append(out, s)
		r.i = skipSpace(r.b, r.i)
		if r.i >= len(r.b) {
			return false
		}
		switch r.b[r.i] {
		case ',':
			r.i++
		case ']':
			r.i++
			*dst = out
			return true
		default:
			return false
		}
	}
}

// raw reads any value as its bytes (null too: a json.RawMessage takes it
// as it is).
func (r *reader) raw(dst *json.RawMessage) bool {
	end, ok := skipValue(r.b, r.i)
	if !ok {
		return false
	}
	*dst, r.i = append(json.RawMessage(nil), r.b[r.i:end]...), end
	return true
}

var (
	envelopeNames = []string{"tool", "call_id", "success", "dry_run", "output", "data", "warnings", "error", "duration_ms"}
	errorNames    = []string{"code", "message", "hint", "missing_grants", "approval"}
	approvalNames = []string{"rule", "mode", "failed"}
)

// decodeEnvelopeFast is json.Unmarshal(b, &e) for what it handles; ok is
// false for anything else.
func decodeEnvelopeFast(b []byte) (e Envelope, ok bool) {
	r := &reader{b: b}
	ok = r.object(envelopeNames, func(k int) bool {
		switch k {
		case 0:
			return r.str(&e.Tool)
		case 1:
			return r.str(&e.CallID)
		case 2:
			return r.boolean(&e.Success)
		case 3:
			return r.boolean(&e.DryRun)
		case 4:
			return r.str(&e.Output)
		case 5:
			return r.raw(&e.Data)
		case 6:
			return r.strings(&e.Warnings)
		case 7:
			e.Error = &Error{}
			return r.errorObject(e.Error)
		default:
			return r.int64(&e.DurationMS)
		}
	})
	if !ok || skipSpace(b, r.i) != len(b) {
		return Envelope{}, false
	}
	return e, true
}

func (r *reader) errorObject(e *Error) bool {
	return r.object(errorNames, func(k int) bool {
		switch k {
		case 0:
			return r.str(&e.Code)
		case 1:
			return r.str(&e.Message)
		case 2:
			return r.str(&e.Hint)
		case 3:
			return r.strings(&e.MissingGrants)
		default:
			e.Approval = &Approval{}
			a := e.Approval
			return r.object(approvalNames, func(k int) bool {
				switch k {
				case 0:
					return r.str(&a.Rule)
				case 1:
					return r.str(&a.Mode)
				default:
					return r.str(&a.Failed)
				}
			})
		}
	})
}
