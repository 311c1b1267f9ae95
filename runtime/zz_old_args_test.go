package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

var _ = strconv.Itoa
var _ = strings.Repeat

func oldDecodeArgs(raw []byte) (map[string]any, []byte, *Error) {
	if len(raw) > MaxArgsBytes {
		return nil, nil, Errorf(CodeTooLarge, "send at most 1 MiB of arguments", "arguments are %d bytes; the limit is %d", len(raw), MaxArgsBytes)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, []byte("{}"), nil
	}
	if !utf8.Valid(raw) {
		return nil, nil, Errorf(CodeInvalidInput, "send arguments as UTF-8 JSON", "arguments are not valid UTF-8")
	}
	d := &oldStrictDecoder{dec: json.NewDecoder(bytes.NewReader(raw))}
	d.dec.UseNumber()
	v, err := d.value(0, "")
	if err == nil {
		if _, terr := d.dec.Token(); terr != io.EOF {
			err = errors.New("unexpected data after the arguments object")
		}
	}
	if err != nil {
		return nil, nil, Errorf(CodeInvalidInput, `send one JSON object, e.g. --args '{"operation":"get_info"}'`, "arguments: %v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, nil, Errorf(CodeInvalidInput, `send one JSON object, e.g. --args '{"operation":"get_info"}'`, "arguments must be a JSON object, not %s", oldJSONKind(v))
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, nil, Errorf(CodeInvalidInput, "", "arguments: %v", err)
	}
	return obj, buf.Bytes(), nil
}

type oldStrictDecoder struct{ dec *json.Decoder }

func (d *oldStrictDecoder) value(depth int, ptr string) (any, error) {
	if depth > MaxArgsDepth {
		return nil, fmt.Errorf("nesting deeper than %d at %q", MaxArgsDepth, ptrOrRoot(ptr))
	}
	tok, err := d.dec.Token()
	if err != nil {
		return nil, oldSyntaxErr(err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := map[string]any{}
			for d.dec.More() {
				kt, err := d.dec.Token()
				if err != nil {
					return nil, oldSyntaxErr(err)
				}
				key := kt.(string) // the decoder only yields string keys inside objects
				kp := ptr + "/" + escapePointer(key)
				if _, dup := obj[key]; dup {
					return nil, fmt.Errorf("duplicate key %q at %q", key, ptrOrRoot(ptr))
				}
				v, err := d.value(depth+1, kp)
				if err != nil {
					return nil, err
				}
				obj[key] = v
			}
			if _, err := d.dec.Token(); err != nil {
				return nil, oldSyntaxErr(err)
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
				return nil, oldSyntaxErr(err)
			}
			return arr, nil
		}
		return nil, fmt.Errorf("unexpected %q", t)
	default:
		return t, nil // string, json.Number, bool or nil
	}
}

func oldSyntaxErr(err error) error {
	if err == io.EOF {
		return errors.New("unexpected end of JSON")
	}
	return err
}

func oldJSONKind(v any) string {
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


func BenchmarkZZDecodeArgs(b *testing.B) {
	args := []byte(`{"path":"notes/today.md","content":"` + strings.Repeat("a line of text ", 50) + `","mode":"append","tags":["x","y","z"],"meta":{"author":"me","n":3}}`)
	b.Run("now", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := DecodeArgs(args); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("before", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := oldDecodeArgs(args); err != nil {
				b.Fatal(err)
			}
		}
	})
}
