package tool

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSchemaLoadsNothingElse: a tool's schema (a wasm tool's, written by
// someone else) is compiled from its own text and the drafts' built-in
// metaschemas only. A $ref to a file or a URL is refused: before, the
// compiler read the file the $ref named (a schema could probe the host's
// files, and depend on them).
func TestSchemaLoadsNothingElse(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "other.json")
	if err := os.WriteFile(target, []byte(`{"type":"string","description":"HOST-FILE-CONTENT"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"file://" + target, "file://" + target + "#/description", "https://example.com/s.json", "other.json"} {
		raw, _ := json.Marshal(map[string]any{
			"type": "object", "additionalProperties": false,
			"properties": map[string]any{"x": map[string]any{"$ref": ref}},
		})
		_, err := CompileSchema("probe", raw)
		if err == nil {
			t.Errorf("$ref %s: compiled", ref)
			continue
		}
		if strings.Contains(err.Error(), "HOST-FILE-CONTENT") {
			t.Errorf("$ref %s: the error shows the file: %v", ref, err)
		}
	}
	// A $ref within the schema itself still works.
	raw := `{"type":"object","additionalProperties":false,"$defs":{"s":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/s"}}}`
	if _, err := CompileSchema("local", json.RawMessage(raw)); err != nil {
		t.Fatalf("a local $ref: %v", err)
	}
}

// TestSchemaOldDraftRefBeside: in drafts before 2019-09 every keyword
// beside a $ref is ignored, so a root $ref made additionalProperties:
// false (and the rest) void — the schema compiled and took any field.
func TestSchemaOldDraftRefBeside(t *testing.T) {
	for _, draft := range []string{"http://json-schema.org/draft-07/schema#", "http://json-schema.org/draft-04/schema#", "http://json-schema.org/schema#"} {
		raw := `{"$schema":"` + draft + `","type":"object","additionalProperties":false,` +
			`"properties":{"a":{"type":"string"}},"$ref":"#/definitions/o","definitions":{"o":{"type":"object"}}}`
		if _, err := CompileSchema("old", json.RawMessage(raw)); err == nil || !strings.Contains(err.Error(), "allOf") {
			t.Errorf("%s: %v", draft, err)
		}
	}
	// As allOf, or under 2020-12 (where $ref beside keywords applies), it compiles.
	for _, raw := range []string{
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}},"allOf":[{"$ref":"#/definitions/o"}],"definitions":{"o":{"type":"object"}}}`,
		`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}},"$ref":"#/$defs/o","$defs":{"o":{"type":"object"}}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":false,"properties":{"a":{"$ref":"#/definitions/s","description":"an a"}},"definitions":{"s":{"type":"string"}}}`,
	} {
		if _, err := CompileSchema("ok", json.RawMessage(raw)); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
}
