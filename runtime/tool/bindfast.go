package tool

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Binding the decoded arguments straight into a typed tool's struct: the
// arguments are decoded once (DecodeArgs), and most argument structs are
// flat — strings, booleans, numbers, lists of strings, pointers to these.
// For such a struct bindFast sets the fields from the decoded value, as
// encoding/json would from the text; for any other struct, or any value it
// does not take as encoding/json would without a word, it declines, and
// bindStrict decodes the text with encoding/json as before, which also
// says what is wrong (TestBindFastSameAsJSON, FuzzBindFast).

// bindField is one field of a flat struct: where it is and what it holds.
type bindField struct {
	index int
	typ   reflect.Type
}

// bindPlans holds each struct type's fields by JSON name, or nil for a
// struct bindFast declines: reflect.Type → map[string]bindField.
var bindPlans sync.Map

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	numberType      = reflect.TypeFor[json.Number]()
)

// bindPlan returns the fields of struct type t by JSON name, or nil when t
// is not flat: an embedded field, a name given twice, a tag name
// encoding/json might read otherwise, a ",string" option, or a field of a
// type bindFast does not set.
func bindPlan(t reflect.Type) map[string]bindField {
	if p, ok := bindPlans.Load(t); ok {
		return p.(map[string]bindField)
	}
	p, _ := bindPlans.LoadOrStore(t, makeBindPlan(t))
	return p.(map[string]bindField)
}

func makeBindPlan(t reflect.Type) map[string]bindField {
	plan := map[string]bindField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			return nil
		}
		if !f.IsExported() {
			continue // encoding/json ignores it too
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		} else if !plainTagName(name) {
			return nil
		}
		if strings.Contains(","+opts+",", ",string,") || !flatType(f.Type) {
			return nil
		}
		if _, dup := plan[name]; dup {
			return nil
		}
		plan[name] = bindField{index: i, typ: f.Type}
	}
	return plan
}

// plainTagName reports a tag name of letters, digits, "_", "-" and "."
// only: one encoding/json takes as it is.
func plainTagName(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// flatType reports the types bindFast sets: a scalar, a slice of strings,
// a pointer to a scalar — none with a decoding method of its own.
func flatType(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer:
		return scalarType(t.Elem()) && !decodesItself(t)
	case reflect.Slice:
		return t.Elem().Kind() == reflect.String && !decodesItself(t) && !decodesItself(t.Elem())
	}
	return scalarType(t)
}

func scalarType(t reflect.Type) bool {
	if t == numberType {
		return false // encoding/json checks a string put in one
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return !decodesItself(t)
	}
	return false
}

// decodesItself reports a type with its own JSON or text decoding.
func decodesItself(t reflect.Type) bool {
	return t.Implements(jsonUnmarshaler) || t.Implements(textUnmarshaler) ||
		reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)
}

// bindFast sets *v (a pointer to a zero struct) from decoded, the
// arguments as DecodeArgs returned them, every key already one of the
// struct's JSON names (checkExactKeys). It reports false, leaving *v as it
// was, when it declines.
func bindFast(decoded map[string]any, v any) bool {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct || !rv.Elem().IsZero() {
		return false
	}
	plan := bindPlan(rv.Elem().Type())
	if plan == nil {
		return false
	}
	out := rv.Elem()
	for k, val := range decoded {
		f, ok := plan[k]
		if !ok || !setFlat(out.Field(f.index), val) {
			out.SetZero() // as it was
			return false
		}
	}
	return true
}

// setFlat sets fv (zero) from a decoded JSON value, as encoding/json would;
// false when it would not, or would refuse.
func setFlat(fv reflect.Value, val any) bool {
	if val == nil {
		return true // null leaves a field as it is: zero
	}
	switch fv.Kind() {
	case reflect.Pointer:
		p := reflect.New(fv.Type().Elem())
		if !setScalar(p.Elem(), val) {
			return false
		}
		fv.Set(p)
		return true
	case reflect.Slice:
		arr, ok := val.([]any)
		if !ok {
			return false
		}
		s := reflect.MakeSlice(fv.Type(), len(arr), len(arr))
		for i, e := range arr {
			str, ok := e.(string)
			if !ok {
				return false
			}
			s.Index(i).SetString(str)
		}
		fv.Set(s)
		return true
	}
	return setScalar(fv, val)
}

func setScalar(fv reflect.Value, val any) bool {
	switch x := val.(type) {
	case string:
		if fv.Kind() != reflect.String {
			return false
		}
		fv.SetString(x)
	case bool:
		if fv.Kind() != reflect.Bool {
			return false
		}
		fv.SetBool(x)
	case json.Number:
		return setNumber(fv, string(x))
	default:
		return false
	}
	return true
}

// setNumber parses a JSON number into fv as encoding/json does: an
// integer field takes only an integer in its range, a float field a
// number in its range.
func setNumber(fv reflect.Value, s string) bool {
	switch fv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || fv.OverflowInt(n) {
			return false
		}
		fv.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || fv.OverflowUint(n) {
			return false
		}
		fv.SetUint(n)
	case reflect.Float32, reflect.Float64:
		n, err := strconv.ParseFloat(s, fv.Type().Bits())
		if err != nil || fv.OverflowFloat(n) {
			return false
		}
		fv.SetFloat(n)
	default:
		return false
	}
	return true
}
