package wasmtool

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wardenrt/warden/runtime/tool"
)

// TestEnforceSchema: schemas as published servlets write them are closed
// (unknown and case-variant names refused), combined schemas keep
// accepting what their branches declare, free-form objects and maps stay
// open, and each common mistake is repaired with a word about it.
func TestEnforceSchema(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		valid        []string
		invalid      []string
		closed       []string // substrings of Closed
		open         []string // substrings of Open
		repairs      []string // substrings of Repairs
	}{
		{
			name:    "open and nested open",
			schema:  `{"type":"object","properties":{"q":{"type":"string"},"filters":{"type":"object","properties":{"lang":{"type":"string"}}}},"required":["q"]}`,
			valid:   []string{`{"q":"x"}`, `{"q":"x","filters":{"lang":"en"}}`},
			invalid: []string{`{"q":"x","Q":"y"}`, `{"q":"x","limit":3}`, `{"q":"x","filters":{"lang":"en","Lang":"fr"}}`, `{}`},
			closed:  []string{"#", "#/properties/filters"},
		},
		{
			name:    "no properties: no arguments",
			schema:  `{"type":"object"}`,
			valid:   []string{`{}`},
			invalid: []string{`{"x":1}`},
			closed:  []string{"#"},
		},
		{
			name:    "free-form and map objects stay open",
			schema:  `{"type":"object","properties":{"data":{"type":"object"},"headers":{"type":"object","additionalProperties":{"type":"string"}}}}`,
			valid:   []string{`{"data":{"anything":[1,2],"Anything":true}}`, `{"headers":{"X-A":"1","x-a":"2"}}`},
			invalid: []string{`{"Data":{}}`, `{"headers":{"X-A":1}}`},
			open:    []string{"#/properties/data: free-form", "#/properties/headers: a map"},
		},
		{
			name:    "allOf branches",
			schema:  `{"type":"object","allOf":[{"properties":{"a":{"type":"string"}}},{"properties":{"b":{"type":"number"}},"required":["b"]}]}`,
			valid:   []string{`{"a":"x","b":1}`, `{"b":2}`},
			invalid: []string{`{"a":"x","b":1,"c":1}`, `{"a":1,"b":1}`, `{"a":"x","B":1,"b":1}`},
		},
		{
			name:    "oneOf of two shapes",
			schema:  `{"type":"object","properties":{"kind":{"enum":["a","b"]}},"oneOf":[{"properties":{"kind":{"const":"a"},"x":{"type":"string"}},"required":["x"]},{"properties":{"kind":{"const":"b"},"y":{"type":"integer"}},"required":["y"]}]}`,
			valid:   []string{`{"kind":"a","x":"1"}`, `{"kind":"b","y":2}`},
			invalid: []string{`{"kind":"a","x":"1","z":1}`, `{"kind":"a","X":"1"}`},
		},
		{
			name:    "$ref to a definition",
			schema:  `{"$defs":{"F":{"type":"object","properties":{"x":{"type":"string"}}}},"type":"object","properties":{"f":{"$ref":"#/$defs/F"}}}`,
			valid:   []string{`{"f":{"x":"1"}}`},
			invalid: []string{`{"f":{"x":"1","X":"2"}}`, `{"g":1}`},
		},
		{
			name:    "draft-07 with allOf and definitions",
			schema:  `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"Base":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}},"type":"object","allOf":[{"$ref":"#/definitions/Base"},{"properties":{"n":{"type":"integer"}}}]}`,
			valid:   []string{`{"id":"1","n":2}`, `{"id":"1"}`},
			invalid: []string{`{"id":"1","n":2,"m":3}`, `{"ID":"1","id":"1"}`, `{"n":2}`},
		},
		{
			name:    "not is never closed",
			schema:  `{"type":"object","properties":{"a":{}},"not":{"properties":{"a":{"const":1}},"required":["a"]}}`,
			valid:   []string{`{"a":2}`},
			invalid: []string{`{"a":1}`, `{"b":1}`},
		},
		{
			name:    "required misplaced inside properties",
			schema:  `{"type":"object","properties":{"q":{"type":"string"},"required":["q"]}}`,
			valid:   []string{`{"q":"x"}`},
			invalid: []string{`{}`, `{"q":"x","required":["q"]}`},
			repairs: []string{"moved the required list found inside properties"},
		},
		{
			name:    "draft-03 required true",
			schema:  `{"type":"object","properties":{"q":{"type":"string","required":true},"n":{"type":"integer","required":false}}}`,
			valid:   []string{`{"q":"x"}`, `{"q":"x","n":1}`},
			invalid: []string{`{"n":1}`},
			repairs: []string{`draft-03 "required": true`, `dropped draft-03 "required": false`},
		},
		{
			name:    "required names an undeclared property; missing types",
			schema:  `{"properties":{"a":{"type":"string"},"opts":{"properties":{"v":{"type":"boolean"}}}},"required":["a","b","a",3]}`,
			valid:   []string{`{"a":"x","b":[1]}`, `{"a":"x","b":1,"opts":{"v":true}}`},
			invalid: []string{`{"a":"x"}`, `{"a":"x","b":1,"opts":"no"}`, `{"a":"x","b":1,"c":1}`},
			repairs: []string{`#: added "type": "object"`, `#/properties/opts: added "type": "object"`, `duplicate required entry "a"`, "dropped the required entry 3", `required names "b"`},
		},
		{
			// Found by FuzzDescribe: the root, closed, refused the name only
			// a branch required (no call could satisfy that branch), and
			// enforcing the result again changed it.
			name:    "a branch requires a name nothing declares",
			schema:  `{"type":"object","properties":{"k":{"type":"string"}},"oneOf":[{"required":["x"]},{"properties":{"y":{"type":"integer"}},"required":["y"]}]}`,
			valid:   []string{`{"x":1}`, `{"k":"a","y":2}`},
			invalid: []string{`{"x":1,"y":2}`, `{"k":"a"}`, `{"x":1,"z":1}`},
			repairs: []string{`#/oneOf/0: required names "x"`},
		},
		{
			// Found by FuzzDescribe: draft-07 ignores what stands beside
			// $ref, so additionalProperties: false there closed nothing.
			name:    "draft-07 $ref at the root, as zod-to-json-schema writes it",
			schema:  `{"$schema":"http://json-schema.org/draft-07/schema#","$ref":"#/definitions/A","definitions":{"A":{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}}}`,
			valid:   []string{`{"n":1}`},
			invalid: []string{`{"n":1,"m":2}`, `{"N":1,"n":1}`, `{}`},
			closed:  []string{"#", "#/definitions/A"},
			repairs: []string{`#: added "type": "object"`, "#: moved $ref into allOf"},
		},
		{
			name:    "draft-07 $ref to a free-form object",
			schema:  `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","$ref":"#/definitions/A","definitions":{"A":{"type":"object"}}}`,
			valid:   []string{`{}`},
			invalid: []string{`{"x":1}`},
			repairs: []string{"#: moved $ref into allOf"},
		},
		{
			name:    "explicit additionalProperties true on named fields",
			schema:  `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":true}`,
			valid:   []string{`{"a":"x"}`},
			invalid: []string{`{"a":"x","b":1}`},
			repairs: []string{"additionalProperties true on an object that names its fields became false"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, rep, err := enforceSchema(json.RawMessage(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			sch, err := tool.CompileSchema("t", out)
			if err != nil {
				t.Fatalf("enforced schema does not compile: %v\n%s", err, out)
			}
			for _, a := range tc.valid {
				v, _, derr := tool.DecodeArgs([]byte(a))
				if derr != nil {
					t.Fatal(derr)
				}
				if verr := sch.Validate(v); verr != nil {
					t.Errorf("%s refused: %v\nschema %s", a, verr, out)
				}
			}
			for _, a := range tc.invalid {
				v, _, derr := tool.DecodeArgs([]byte(a))
				if derr != nil {
					t.Fatal(derr)
				}
				if verr := sch.Validate(v); verr == nil || verr.Code != tool.CodeInvalidInput {
					t.Errorf("%s accepted\nschema %s", a, out)
				}
			}
			check := func(kind string, got, want []string) {
				for _, w := range want {
					found := false
					for _, g := range got {
						if g == w || strings.Contains(g, w) {
							found = true
						}
					}
					if !found {
						t.Errorf("%s: want %q in %q", kind, w, got)
					}
				}
			}
			check("closed", rep.Closed, tc.closed)
			check("open", rep.Open, tc.open)
			check("repairs", rep.Repairs, tc.repairs)
			if len(tc.repairs) == 0 && len(rep.Repairs) > 0 {
				t.Errorf("unexpected repairs %q", rep.Repairs)
			}
		})
	}
}

// TestEnforceSchemaRefusesWhatItCannotRead: what is not a schema object is
// refused with a reason, never passed through.
func TestEnforceSchemaRefusesWhatItCannotRead(t *testing.T) {
	for _, s := range []string{`[]`, `"x"`, `{`, `{} {}`} {
		if _, _, err := enforceSchema(json.RawMessage(s)); err == nil {
			t.Errorf("%s: accepted", s)
		}
	}
}
