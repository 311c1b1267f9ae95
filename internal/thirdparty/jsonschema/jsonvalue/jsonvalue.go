// Package jsonvalue holds what the JSON Schema validator does with a JSON
// value on its own: equality (numbers by value), finding duplicates,
// hashing, decoding a document, and the content encodings and media types
// known without registering them — split from the package that compiles
// and validates schemas. From santhosh-tekuri/jsonschema v6.0.3's util.go,
// loader.go and content.go, unchanged but for exported names (see
// ../README.md).
package jsonvalue

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"math/big"
	"slices"

	"github.com/wardenrt/warden/internal/thirdparty/jsonschema/kind"
)

// UnmarshalJSON decodes one JSON document, numbers as json.Number.
func UnmarshalJSON(r io.Reader) (any, error) {
	decoder := json.NewDecoder(r)
	decoder.UseNumber()
	var doc any
	if err := decoder.Decode(&doc); err != nil {
		return nil, err
	}
	if _, err := decoder.Token(); err == nil || err != io.EOF {
		return nil, fmt.Errorf("invalid character after top-level value")
	}
	return doc, nil
}

// IsInteger reports whether a JSON number is an integer.
func IsInteger(num any) bool {
	rat, ok := new(big.Rat).SetString(fmt.Sprint(num))
	return ok && rat.IsInt()
}

// Equal reports whether two JSON values are equal, numbers by value; a
// Go value of no JSON type is the error.
func Equal(v1, v2 any) (bool, *kind.InvalidJsonValue) {
	switch v1 := v1.(type) {
	case map[string]any:
		v2, ok := v2.(map[string]any)
		if !ok || len(v1) != len(v2) {
			return false, nil
		}
		for k, val1 := range v1 {
			val2, ok := v2[k]
			if !ok {
				return false, nil
			}
			if ok, k := Equal(val1, val2); !ok || k != nil {
				return ok, k
			}
		}
		return true, nil
	case []any:
		v2, ok := v2.([]any)
		if !ok || len(v1) != len(v2) {
			return false, nil
		}
		for i := range v1 {
			if ok, k := Equal(v1[i], v2[i]); !ok || k != nil {
				return ok, k
			}
		}
		return true, nil
	case nil:
		return v2 == nil, nil
	case bool:
		v2, ok := v2.(bool)
		return ok && v1 == v2, nil
	case string:
		v2, ok := v2.(string)
		return ok && v1 == v2, nil
	case json.Number, float32, float64, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		if TypeOf(v2) != Number {
			return false, nil
		}
		num1, ok1 := new(big.Rat).SetString(fmt.Sprint(v1))
		num2, ok2 := new(big.Rat).SetString(fmt.Sprint(v2))
		return ok1 && ok2 && num1.Cmp(num2) == 0, nil
	default:
		return false, &kind.InvalidJsonValue{Value: v1}
	}
}

// Duplicates returns the indexes of two equal items of arr (-1, -1: none).
func Duplicates(arr []any) (int, int, *kind.InvalidJsonValue) {
	if len(arr) <= 20 {
		for i := 1; i < len(arr); i++ {
			for j := 0; j < i; j++ {
				if ok, k := Equal(arr[i], arr[j]); ok || k != nil {
					return j, i, k
				}
			}
		}
		return -1, -1, nil
	}

	m := make(map[uint64][]int)
	h := new(maphash.Hash)
	for i, item := range arr {
		h.Reset()
		writeHash(item, h)
		hash := h.Sum64()
		indexes, ok := m[hash]
		if ok {
			for _, j := range indexes {
				if ok, k := Equal(item, arr[j]); ok || k != nil {
					return j, i, k
				}
			}
		}
		indexes = append(indexes, i)
		m[hash] = indexes
	}
	return -1, -1, nil
}

func writeHash(v any, h *maphash.Hash) *kind.InvalidJsonValue {
	switch v := v.(type) {
	case map[string]any:
		_ = h.WriteByte(0)
		props := make([]string, 0, len(v))
		for prop := range v {
			props = append(props, prop)
		}
		slices.Sort(props)
		for _, prop := range props {
			writeHash(prop, h)
			writeHash(v[prop], h)
		}
	case []any:
		_ = h.WriteByte(1)
		for _, item := range v {
			writeHash(item, h)
		}
	case nil:
		_ = h.WriteByte(2)
	case bool:
		_ = h.WriteByte(3)
		if v {
			_ = h.WriteByte(1)
		} else {
			_ = h.WriteByte(0)
		}
	case string:
		_ = h.WriteByte(4)
		_, _ = h.WriteString(v)
	case json.Number, float32, float64, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		_ = h.WriteByte(5)
		num, _ := new(big.Rat).SetString(fmt.Sprint(v))
		_, _ = h.Write(num.Num().Bytes())
		_, _ = h.Write(num.Denom().Bytes())
	default:
		return &kind.InvalidJsonValue{Value: v}
	}
	return nil
}

// Decoder specifies how to decode specific contentEncoding.
type Decoder struct {
	// Name of contentEncoding.
	Name string
	// Decode given string to byte array.
	Decode func(string) ([]byte, error)
}

// Decoders are the content encodings known without registering them.
var Decoders = map[string]*Decoder{
	"base64": {
		Name: "base64",
		Decode: func(s string) ([]byte, error) {
			return base64.StdEncoding.DecodeString(s)
		},
	},
}

// MediaType specified how to validate bytes against specific contentMediaType.
type MediaType struct {
	// Name of contentMediaType.
	Name string

	// Validate checks whether bytes conform to this mediatype.
	Validate func([]byte) error

	// UnmarshalJSON unmarshals bytes into json value.
	// This must be nil if this mediatype is not compatible
	// with json.
	UnmarshalJSON func([]byte) (any, error)
}

// MediaTypes are the content media types known without registering them.
var MediaTypes = map[string]*MediaType{
	"application/json": {
		Name: "application/json",
		Validate: func(b []byte) error {
			var v any
			return json.Unmarshal(b, &v)
		},
		UnmarshalJSON: func(b []byte) (any, error) {
			return UnmarshalJSON(bytes.NewReader(b))
		},
	},
}

// Type is a JSON value's type (Integer: a number that is one).
type Type int

const (
	Invalid Type = 0
	Null    Type = 1 << iota
	Boolean
	Number
	Integer
	String
	Array
	Object
)

// TypeOf returns v's JSON type (Invalid: none, or a NaN or infinite float).
func TypeOf(v any) Type {
	switch v := v.(type) {
	case nil:
		return Null
	case bool:
		return Boolean
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Invalid
		}
		return Number
	case float32:
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return Invalid
		}
		return Number
	case json.Number, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return Number
	case string:
		return String
	case []any:
		return Array
	case map[string]any:
		return Object
	default:
		return Invalid
	}
}

// TypeFromString is the type a schema's "type" names.
func TypeFromString(s string) Type {
	switch s {
	case "null":
		return Null
	case "boolean":
		return Boolean
	case "number":
		return Number
	case "integer":
		return Integer
	case "string":
		return String
	case "array":
		return Array
	case "object":
		return Object
	}
	return Invalid
}

// String is the type's name in a schema.
func (jt Type) String() string {
	switch jt {
	case Null:
		return "null"
	case Boolean:
		return "boolean"
	case Number:
		return "number"
	case Integer:
		return "integer"
	case String:
		return "string"
	case Array:
		return "array"
	case Object:
		return "object"
	}
	return ""
}
