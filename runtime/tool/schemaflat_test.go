package tool

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
)

// fullOnly is s without its flat schema: the validator alone decides.
func fullOnly(t *testing.T, s *Schema) *Schema {
	t.Helper()
	c, err := s.compiled()
	if err != nil {
		t.Fatal(err)
	}
	return &Schema{compiled: func() (*compiledSchema, error) { return &compiledSchema{sch: c.sch}, nil }}
}

// TestFlatSchemaOnlyForItsShape: a schema with any keyword beyond a closed
// object of plain string and boolean fields gets no flat schema, and each
// value that keyword refuses is still refused. (Were the flat schema read
// from such a schema, these values — of the right type and length — would
// go through.)
func TestFlatSchemaOnlyForItsShape(t *testing.T) {
	tests := []struct{ schema, value string }{
		{`{"type":"object","additionalProperties":false,"properties":{"x":{"type":"string","pattern":"^a+$"}}}`, `{"x":"b"}`},
		{`{"type":"object","additionalProperties":false,"properties":{"x":{"type":"string","enum":["a"]}}}`, `{"x":"b"}`},
		{`{"type":"object","additionalProperties":false,"properties":{"x":{"type":"string","const":"a"}}}`, `{"x":"b"}`},
		{`{"type":"object","additionalProperties":false,"properties":{"x":{"type":"string","format":"email"}}}`, `{"x":"b"}`},
		{`{"type":"object","additionalProperties":false,"properties":{"x":{"type":"string","not":{"const":"b"}}}}`, `{"x":"b"}`},
		{`{"type":"object","additionalProperties":false,"properties":{"x":{"type":"string","allOf":[{"maxLength":0}]}}}`, `{"x":"b"}`},
		{`{"type":"object","additionalProperties":false,"properties":{"x":{"type":"string"}},"minProperties":2}`, `{"x":"b"}`},
		{`{"type":"object","additionalProperties":false,"properties":{"x":{"type":"string"}},"not":{"required":["x"]}}`, `{"x":"b"}`},
		{`{"type":"object","additionalProperties":false,"properties":{"x":{"type":"string"}},"dependentRequired":{"x":["y"]},"$defs":{}}`, `{"x":"b"}`},
		{`{"type":"object","additionalProperties":false,"properties":{"x":{"type":"string"},"y":{"type":"string"}},"oneOf":[{"required":["y"]}]}`, `{"x":"b"}`},
		{`{"type":"object","additionalProperties":false,"properties":{"x":{"type":"boolean","const":true}}}`, `{"x":false}`},
		{`{"type":"object","additionalProperties":false,"properties":{"x":{"$ref":"#/$defs/s"}},"$defs":{"s":{"type":"string","maxLength":0}}}`, `{"x":"b"}`},
	}
	for _, tt := range tests {
		s, err := CompileSchema("t", json.RawMessage(tt.schema))
		if err != nil {
			t.Fatalf("%s: %v", tt.schema, err)
		}
		c, _ := s.compiled()
		if c.flat != nil {
			t.Errorf("%s: read as a flat schema", tt.schema)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(tt.value), &v); err != nil {
			t.Fatal(err)
		}
		if s.Validate(v) == nil {
			t.Errorf("%s: %s accepted", tt.schema, tt.value)
		}
	}
	// An object left open is no flat schema (a schema must close it to
	// compile at all, but the flat schema does not count on that).
	for _, raw := range []string{`{"type":"object","properties":{}}`, `{"type":"object","properties":{},"additionalProperties":true}`,
		`{"type":"object","properties":{},"additionalProperties":{"type":"string"}}`, `{"type":"array","properties":{},"additionalProperties":false}`} {
		var root map[string]any
		if err := json.Unmarshal([]byte(raw), &root); err != nil {
			t.Fatal(err)
		}
		if flatSchemaOf(root) != nil {
			t.Errorf("%s: read as a flat schema", raw)
		}
	}
}

// TestFlatSchemaAgreesWithValidator: for flat schemas, Validate with the
// flat schema accepts and refuses what the validator alone does, over
// values of every type, unknown and case-variant fields, missing required
// ones, lengths at and past their bounds (counted in code points), and
// text that is not UTF-8.
func TestFlatSchemaAgreesWithValidator(t *testing.T) {
	schemas := []string{
		`{"type":"object","properties":{"operation":{"type":"string","description":"d","minLength":1,"maxLength":128}},"required":["operation"],"additionalProperties":false}`,
		`{"type":"object","title":"t","properties":{"a":{"type":"string","maxLength":3},"b":{"type":"boolean"},"c":{"type":"string","minLength":2,"title":"c"}},"required":["a","b"],"additionalProperties":false}`,
		`{"type":"object","properties":{},"additionalProperties":false}`,
		`{"type":"object","properties":{"a":{"type":"string"}},"required":["z"],"additionalProperties":false}`,
		`{"type":"object","properties":{"c":{"type":"string","minLength":2,"maxLength":3},"b":{"type":"boolean"}},"additionalProperties":false}`,
	}
	strs := []string{"", "a", "ab", "abc", "abcd", "é", "éé", "ééé", "éééé", "日本語", "\xff", "a\xffb", "\u2028", strings.Repeat("x", 128), strings.Repeat("x", 129), strings.Repeat("é", 128), strings.Repeat("é", 129)}
	others := []any{nil, true, false, json.Number("1"), 1.0, []any{}, []any{"a"}, map[string]any{}, map[string]any{"a": "b"}}
	keys := []string{"operation", "Operation", "a", "b", "c", "A", "z", "x", ""}
	rng := rand.New(rand.NewSource(18))
	value := func() any {
		if rng.Intn(2) == 0 {
			return strs[rng.Intn(len(strs))]
		}
		return others[rng.Intn(len(others))]
	}
	flats := 0
	for _, raw := range schemas {
		s, err := CompileSchema("t", json.RawMessage(raw))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if c, _ := s.compiled(); c.flat == nil {
			t.Fatalf("%s: not read as a flat schema", raw)
		}
		full := fullOnly(t, s)
		for range 20000 {
			v := map[string]any{}
			for range rng.Intn(4) {
				v[keys[rng.Intn(len(keys))]] = value()
			}
			var arg any = v
			if rng.Intn(50) == 0 {
				arg = value() // not an object at all
			}
			// A refusal is the validator's own, worded by the same code
			// either way (the order it lists fields in is its map's).
			got, want := s.Validate(arg), full.Validate(arg)
			if (got == nil) != (want == nil) || got != nil && got.Code != want.Code {
				t.Fatalf("%s: %#v: got %v, want %v", raw, arg, got, want)
			}
			if got == nil {
				flats++
			}
		}
	}
	if flats == 0 {
		t.Fatal("no value was accepted: the test reads nothing")
	}
}

// TestFlatSchemaDeferred: a schema warden derives from its own types
// (DeferOwnSchema) gets its flat schema too, and it refuses as before.
func TestFlatSchemaDeferred(t *testing.T) {
	raw := `{"type":"object","properties":{"operation":{"type":"string","minLength":1,"maxLength":4}},"required":["operation"],"additionalProperties":false}`
	s := DeferOwnSchema("t", func() json.RawMessage { return json.RawMessage(raw) })
	if c, err := s.compiled(); err != nil || c.flat == nil {
		t.Fatalf("%v %+v", err, c)
	}
	if e := s.Validate(map[string]any{"operation": "get"}); e != nil {
		t.Fatal(e)
	}
	for _, v := range []map[string]any{{"operation": "get_info"}, {"operation": ""}, {}, {"operation": "get", "x": "y"}, {"Operation": "get"}} {
		if e := s.Validate(v); e == nil || e.Code != CodeInvalidInput {
			t.Errorf("%v: %v", v, e)
		}
	}
}
