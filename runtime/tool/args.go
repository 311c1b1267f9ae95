package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/wardenrt/warden/runtime/decode"
)

// Limits of strict argument decoding.
const (
	MaxArgsBytes = 1 << 20 // 1 MiB
	MaxArgsDepth = 64
)

// DecodeArgs decodes a tool's arguments strictly, through the decoder of
// bytes from outside (package decode): at most MaxArgsBytes, valid UTF-8,
// one JSON object, no duplicate keys at any depth, nesting at most
// MaxArgsDepth. Empty input means {}. It returns the decoded value
// (numbers as json.Number, for schema validation) and the compact bytes.
// Unknown and case-variant field names are refused by schema validation
// (every object schema is closed) and again by Call.Bind.
func DecodeArgs(raw []byte) (map[string]any, []byte, *Error) {
	if len(raw) > MaxArgsBytes {
		return nil, nil, Errorf(CodeTooLarge, "send at most 1 MiB of arguments", "arguments are %d bytes; the limit is %d", len(raw), MaxArgsBytes)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, []byte("{}"), nil
	}
	const hint = `send one JSON object, e.g. {"operation":"get_info"}`
	v, err := decode.JSON("arguments", raw, &decode.Limits{MaxBytes: MaxArgsBytes, MaxDepth: MaxArgsDepth})
	if err != nil {
		var de *decode.Error
		if errors.As(err, &de) {
			if strings.HasPrefix(de.Message, "not valid UTF-8") {
				return nil, nil, Errorf(CodeInvalidInput, "send arguments as UTF-8 JSON", "arguments are %s", de.Message)
			}
			return nil, nil, Errorf(CodeInvalidInput, hint, "arguments: %s", de.Message)
		}
		return nil, nil, Errorf(CodeInvalidInput, hint, "arguments: %v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, nil, Errorf(CodeInvalidInput, hint, "arguments must be a JSON object, not %s", decode.Kind(v))
	}
	if bytes.IndexAny(raw, " \t\r\n") < 0 {
		// Compact already: json.Compact only removes white space.
		return obj, bytes.Clone(raw), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, nil, Errorf(CodeInvalidInput, "", "arguments: %v", err)
	}
	return obj, buf.Bytes(), nil
}

func EscapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func PointerOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// bindStrict decodes raw into v, refusing unknown fields and field names that
// differ from the struct's JSON names only by case (encoding/json would
// accept them).
func bindStrict(raw []byte, decoded map[string]any, v any) error {
	var generic any = decoded
	if decoded == nil {
		gd := json.NewDecoder(bytes.NewReader(raw))
		gd.UseNumber()
		if err := gd.Decode(&generic); err != nil {
			return Errorf(CodeInvalidInput, "", "arguments: %v", err)
		}
	}
	rt := reflect.TypeOf(v)
	if rt == nil || rt.Kind() != reflect.Pointer {
		return Errorf(CodeInternal, "", "Bind needs a pointer, got %T", v)
	}
	if err := checkExactKeys(generic, rt.Elem(), ""); err != nil {
		return err
	}
	if obj, ok := generic.(map[string]any); ok && bindFast(obj, v) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Errorf(CodeInvalidInput, "check the tool's input schema with `warden tools`", "arguments: %v", err)
	}
	return nil
}

// holdsKeys reports a value checkExactKeys looks into: an object or an
// array.
func holdsKeys(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

func checkExactKeys(v any, t reflect.Type, ptr string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch val := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t)
			for k, sub := range val {
				ft, ok := fields[k]
				if !ok {
					hint := "check the tool's input schema with `warden tools`"
					for name := range fields {
						if strings.EqualFold(name, k) {
							hint = fmt.Sprintf("field names are case-sensitive: did you mean %q?", name)
						}
					}
					return Errorf(CodeInvalidInput, hint, "unknown field %q at %q", k, PointerOrRoot(ptr))
				}
				if !holdsKeys(sub) {
					continue // a scalar has no keys (and its pointer is not built)
				}
				if err := checkExactKeys(sub, ft, ptr+"/"+EscapePointer(k)); err != nil {
					return err
				}
			}
		case reflect.Map:
			for k, sub := range val {
				if !holdsKeys(sub) {
					continue
				}
				if err := checkExactKeys(sub, t.Elem(), ptr+"/"+EscapePointer(k)); err != nil {
					return err
				}
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, sub := range val {
				if !holdsKeys(sub) {
					continue
				}
				if err := checkExactKeys(sub, t.Elem(), ptr+"/"+strconv.Itoa(i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// fieldsCache holds jsonFields' answers: reflect.Type → map[string]reflect.Type.
var fieldsCache sync.Map

// jsonFields maps the JSON names of a struct's fields (embedded structs
// flattened) to their types. The map is shared: read it, never change it.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldsCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m, _ := fieldsCache.LoadOrStore(t, structFields(t))
	return m.(map[string]reflect.Type)
}

// structFields is jsonFields, computed.
func structFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
