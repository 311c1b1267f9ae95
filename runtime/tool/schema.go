package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/wardenrt/warden/internal/thirdparty/jsonschema"
)

// Schema is a tool's input schema, compiled.
type Schema struct {
	compiled func() (*compiledSchema, error)
}

// compiledSchema is the validator, and the flat schema that vouches
// cheaply for the values it surely accepts (nil: none; see flatSchema).
type compiledSchema struct {
	sch  *jsonschema.Schema
	flat *flatSchema
}

// CompileSchema compiles a tool's input schema. It must be an object schema,
// and every object schema inside it that lists properties must be closed
// (additionalProperties: false), so unknown and case-variant field names are
// refused.
func CompileSchema(name string, raw json.RawMessage) (*Schema, error) {
	sch, err := compileSchema(name, raw, false)
	if err != nil {
		return nil, err
	}
	return &Schema{compiled: func() (*compiledSchema, error) { return sch, nil }}, nil
}

// DeferOwnSchema is CompileSchema of the schema raw returns, run when the
// schema is first used (Validate) rather than now, for a schema warden
// derives from its own types (Adapt): deriving it costs, and a process
// calls one tool or a few. It is not checked against its metaschema —
// compiling the draft's metaschemas would cost a process more than the
// rest of its schema work; tests check every such schema whole
// (builtin TestEveryToolAgrees) — so never use it for a schema someone
// else wrote. A schema that does not compile refuses every value
// (CodeInternal): nothing is let through unchecked.
func DeferOwnSchema(name string, raw func() json.RawMessage) *Schema {
	return &Schema{compiled: sync.OnceValues(func() (*compiledSchema, error) {
		return compileSchema(name, raw(), true)
	})}
}

func compileSchema(name string, raw json.RawMessage, own bool) (*compiledSchema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("tool %s: input schema is not JSON: %w", name, err)
	}
	root, ok := doc.(map[string]any)
	if !ok || root["type"] != "object" {
		return nil, fmt.Errorf("tool %s: input schema must be {\"type\":\"object\",...}", name)
	}
	if at := refsBeside(root); len(at) > 0 {
		return nil, fmt.Errorf("tool %s: input schema: $ref beside other keywords at %s, which its draft ignores (put the $ref in an allOf)", name, strings.Join(at, ", "))
	}
	if open := openObjects(root, ""); len(open) > 0 {
		return nil, fmt.Errorf("tool %s: input schema objects must set additionalProperties: false (at %s)", name, strings.Join(open, ", "))
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if own {
		c.SkipMetaschemaCheck()
	}
	url := "warden:///tools/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("tool %s: input schema: %w", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("tool %s: input schema: %w", name, err)
	}
	return &compiledSchema{sch: sch, flat: flatSchemaOf(root)}, nil
}

// openObjects lists the schema locations that name fields (properties or
// patternProperties), or are the root, but leave additionalProperties
// open. A nested object that names no fields is a map (free-form, or with
// an additionalProperties schema): its keys are data, not field names, so
// it may stay open; so may a root that is explicitly a map. Nothing under
// not or if is checked: closing there would loosen the schema.
func openObjects(v any, at string) []string {
	var out []string
	switch s := v.(type) {
	case map[string]any:
		_, hasProps := s["properties"]
		_, hasPatterns := s["patternProperties"]
		ap, hasAP := s["additionalProperties"]
		_, apSchema := ap.(map[string]any)
		if hasProps || hasPatterns || (at == "" && !apSchema) {
			if !hasAP || ap != false {
				if _, ok := s["$ref"]; !ok {
					out = append(out, "#"+at)
				}
			}
		}
		keys := make([]string, 0, len(s))
		for k := range s {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "const" || k == "enum" || k == "default" || k == "examples" || k == "not" || k == "if" {
				continue
			}
			out = append(out, openObjects(s[k], at+"/"+EscapePointer(k))...)
		}
	case []any:
		for i, e := range s {
			out = append(out, openObjects(e, fmt.Sprintf("%s/%d", at, i))...)
		}
	}
	return out
}

var schemaPrinter = message.NewPrinter(language.English)

// Validate checks v against the schema and reports every error with the JSON
// pointer of the value at fault.
func (s *Schema) Validate(v any) *Error {
	compiled, err := s.compiled()
	if err != nil {
		return Errorf(CodeInternal, "the tool's input schema is broken: report it to the tool's author", "%v", err)
	}
	if compiled.flat != nil && compiled.flat.accepts(v) {
		return nil
	}
	err = compiled.sch.Validate(v)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return Errorf(CodeInvalidInput, "", "arguments: %v", err)
	}
	var msgs []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			ptr := "/" + strings.Join(escapeAll(e.InstanceLocation), "/")
			msgs = append(msgs, fmt.Sprintf("at %q: %s", ptr, e.ErrorKind.LocalizedString(schemaPrinter)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return Errorf(CodeInvalidInput, "check the tool's input schema with `warden tools --json`", "invalid arguments: %s", strings.Join(msgs, "; "))
}

func escapeAll(parts []string) []string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = EscapePointer(p)
	}
	return out
}

// noLoader refuses every document a schema refers to: a tool's schema is
// compiled from its own text and the drafts' metaschemas (built in), never
// from a file or the network, so a schema someone else wrote can neither
// read the host's files nor change with them.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("a schema is compiled from its own text: %s is not loaded (use $defs and a #/$defs/… reference)", url)
}

// refsBeside lists, for a schema of a draft before 2019-09 (draft-03 to
// -07, by its $schema), the locations where $ref stands beside a keyword
// that is not an annotation: those drafts ignore every keyword beside a
// $ref, so an additionalProperties: false there closes nothing.
func refsBeside(root map[string]any) []string {
	draft, _ := root["$schema"].(string)
	if !strings.Contains(draft, "json-schema.org/draft-0") && !strings.Contains(draft, "json-schema.org/schema") {
		return nil
	}
	var out []string
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch n := v.(type) {
		case map[string]any:
			if _, ok := n["$ref"]; ok {
				for k := range n {
					if !refSibling[k] {
						out = append(out, "#"+at)
						break
					}
				}
			}
			for k, e := range n {
				if k != "const" && k != "enum" && k != "default" && k != "examples" {
					walk(e, at+"/"+EscapePointer(k))
				}
			}
		case []any:
			for i, e := range n {
				walk(e, fmt.Sprintf("%s/%d", at, i))
			}
		}
	}
	walk(root, "")
	sort.Strings(out)
	return out
}

// refSibling are the keywords that may stand beside a $ref in any draft:
// annotations, and the definitions it may point into.
var refSibling = map[string]bool{"$ref": true, "$schema": true, "$id": true, "id": true, "$comment": true,
	"title": true, "description": true, "default": true, "examples": true, "definitions": true, "$defs": true}
