package tool

import (
	"encoding/json"
	"testing"
)

// TestFlatSchemaReviewEdges: schemas and values at the edges of the flat
// shape (fields named like keywords, duplicate required names, bounds
// written oddly, characters whose UTF-16 length or byte length is not
// their code-point count): the flat schema and the validator alone agree.
func TestFlatSchemaReviewEdges(t *testing.T) {
	schemas := []string{
		`{"type":"object","properties":{"type":{"type":"string","maxLength":1},"required":{"type":"boolean"},"$ref":{"type":"string","minLength":2},"properties":{"type":"string"}},"required":["type","type"],"additionalProperties":false}`,
		`{"type":"object","properties":{"a":{"type":"string","minLength":-0,"maxLength":0}},"additionalProperties":false}`,
		`{"type":"object","properties":{"a":{"type":"string","maxLength":1.0}},"additionalProperties":false}`,
		`{"type":"object","properties":{"a":{"type":"string","maxLength":1e0}},"additionalProperties":false}`,
		`{"type":"object","properties":{"a":{"type":"string","maxLength":9223372036854775807}},"additionalProperties":false}`,
		`{"type":"object","properties":{"a":{"type":"string","maxLength":2},"a":{"type":"boolean"}},"additionalProperties":false}`,
		`{"type":"object","properties":{"é":{"type":"string","maxLength":1},"\u0000":{"type":"boolean"}},"required":["é"],"additionalProperties":false}`,
	}
	strs := []any{"", "a", "ab", "😀", "😀😀", "\U0010FFFF", "\ufffd", "\xed\xa0\x80", "e\u0301", "\x00", "aa😀"}
	others := []any{nil, true, false, json.Number("1"), "1", []any{}, map[string]any{}}
	keys := []string{"type", "required", "$ref", "properties", "a", "é", "e\u0301", "\u0000", "additionalProperties"}
	for _, raw := range schemas {
		s, err := CompileSchema("t", json.RawMessage(raw))
		if err != nil {
			t.Logf("%s: not compiled: %v", raw, err)
			continue
		}
		full := fullOnly(t, s)
		vals := append(append([]any{}, strs...), others...)
		for _, k1 := range keys {
			for _, v1 := range vals {
				for _, k2 := range keys {
					for _, v2 := range vals {
						arg := map[string]any{k1: v1, k2: v2}
						got, want := s.Validate(arg), full.Validate(arg)
						if (got == nil) != (want == nil) {
							t.Fatalf("%s: %#v: got %v, want %v", raw, arg, got, want)
						}
					}
				}
			}
		}
	}
}
