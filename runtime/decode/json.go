package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
)

// JSON decodes data, one JSON value, strictly and under the budget: at
// most Limits.MaxBytes, valid UTF-8, no duplicate keys at any depth,
// nesting at most Limits.MaxDepth, nothing after the value. Numbers are
// json.Number (for schema validation). Errors say where, as a line and
// column and as a JSON pointer ("/x/1").
func JSON(source string, data []byte, lim *Limits) (any, error) {
	l := lim.withDefaults()
	if int64(len(data)) > l.MaxBytes {
		return nil, tooLarge(source, 0, 0, "%d bytes, over the limit of %s", len(data), sizeText(l.MaxBytes))
	}
	if err := checkUTF8(source, data); err != nil {
		return nil, err
	}
	if v, ok := fastJSON(data, l.MaxDepth); ok {
		return v, nil
	}
	return walkJSON(source, data, l.MaxDepth)
}

// walkJSON decodes data (valid UTF-8) with encoding/json's tokens: slower
// than fastJSON, and it says what is wrong and where.
func walkJSON(source string, data []byte, maxDepth int) (any, error) {
	d := &jsonDecoder{dec: json.NewDecoder(bytes.NewReader(data)), data: data, source: source, maxDepth: maxDepth}
	d.dec.UseNumber()
	v, err := d.value(0, "")
	if err != nil {
		return nil, err
	}
	end := d.dec.InputOffset()
	if _, terr := d.dec.Token(); terr != io.EOF {
		return nil, d.fail(end, "unexpected data after the value")
	}
	return v, nil
}

type jsonDecoder struct {
	dec      *json.Decoder
	data     []byte
	source   string
	maxDepth int
}

func (d *jsonDecoder) value(depth int, ptr string) (any, error) {
	if depth > d.maxDepth {
		return nil, d.fail(d.dec.InputOffset(), "nesting deeper than %d at %q", d.maxDepth, pointer(ptr))
	}
	at := d.dec.InputOffset()
	tok, err := d.dec.Token()
	if err != nil {
		return nil, d.syntax(at, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := map[string]any{}
			for d.dec.More() {
				at := d.dec.InputOffset()
				kt, err := d.dec.Token()
				if err != nil {
					return nil, d.syntax(at, err)
				}
				key := kt.(string) // the decoder only yields string keys inside objects
				if _, dup := obj[key]; dup {
					return nil, d.fail(at, "duplicate key %q at %q", key, pointer(ptr))
				}
				v, err := d.value(depth+1, ptr+"/"+escapePointer(key))
				if err != nil {
					return nil, err
				}
				obj[key] = v
			}
			if _, err := d.dec.Token(); err != nil {
				return nil, d.syntax(d.dec.InputOffset(), err)
			}
			return obj, nil
		case '[':
			arr := []any{}
			for i := 0; d.dec.More(); i++ {
				v, err := d.value(depth+1, ptr+"/"+strconv.Itoa(i))
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := d.dec.Token(); err != nil {
				return nil, d.syntax(d.dec.InputOffset(), err)
			}
			return arr, nil
		}
		return nil, d.fail(at, "unexpected %q", t)
	default:
		return t, nil // string, json.Number, bool or nil
	}
}

// syntax turns encoding/json's error into one with a position: the
// offset it names, else where the token began.
func (d *jsonDecoder) syntax(at int64, err error) *Error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return d.fail(int64(len(d.data)), "unexpected end of JSON")
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		at = se.Offset
	}
	return d.fail(at, "%s", strings.TrimPrefix(err.Error(), "json: "))
}

// fail is a refusal at byte offset off, or rather at the next token after
// it (encoding/json's offsets are where the previous token ended).
func (d *jsonDecoder) fail(off int64, format string, args ...any) *Error {
	for off >= 0 && off < int64(len(d.data)) && strings.IndexByte(" \t\r\n,:", d.data[off]) >= 0 {
		off++
	}
	line, col := lineCol(d.data, off)
	return invalid(d.source, line, col, format, args...)
}

// lineCol is the 1-based line and column (in runes) of byte offset off.
func lineCol(data []byte, off int64) (int, int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte{'\n'}) + 1
	if i := bytes.LastIndexByte(before, '\n'); i >= 0 {
		before = before[i+1:]
	}
	return line, len([]rune(string(before))) + 1
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func pointer(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// Kind names the JSON type of a value JSON returned, for messages: "an
// object", "a number", …
func Kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	}
	return "an object"
}
