package wasmtool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// SchemaReport says what warden did to a module's input schema to enforce
// it: where it closed objects, what it left open and why, and each repair
// of a common mistake. `warden tool inspect` lists all three; nothing is
// changed silently.
type SchemaReport struct {
	// Closed are the JSON pointers of the objects warden closed
	// (additionalProperties: false), so unknown and case-variant field
	// names are refused.
	Closed []string `json:"closed,omitempty"`
	// Open are the objects left open, each with why: an object that names
	// no fields is a map whose keys are data.
	Open []string `json:"open,omitempty"`
	// Repairs describe each common mistake warden repaired.
	Repairs []string `json:"repairs,omitempty"`
}

func (r *SchemaReport) empty() bool {
	return len(r.Closed) == 0 && len(r.Open) == 0 && len(r.Repairs) == 0
}

// enforceSchema returns a module's input schema as warden enforces it, and
// what it did:
//
//   - repairs: a required array misplaced inside properties is moved to
//     its object; draft-03 "required": true on a property becomes the
//     object's required list; non-string and duplicate required entries
//     are dropped; a required name no property declares is declared (any
//     value), in every member of its group; "type": "object" is added to
//     the root, and to a property's schema that lists properties without
//     a type.
//   - closing: every object that names fields (properties or
//     patternProperties), and the root, gets additionalProperties: false.
//     Objects combined with allOf, anyOf, oneOf, then/else,
//     dependentSchemas or $ref form a group: each member that may be an
//     object lists every name the group declares (as true: the member that
//     declares a name still checks its value) and is closed, so a closed
//     branch does not refuse its sibling's fields and the combination
//     still refuses names nobody declared — in every draft, without
//     unevaluatedProperties. Nothing under not or if is closed (that would
//     loosen the schema).
//   - left open: a nested object that names no fields — free-form, or a
//     map declared with an additionalProperties schema — since its keys
//     are data, not parameters.
//
// The result still has to compile (tool.CompileSchema); enforceSchema
// does not validate it against the metaschema.
func enforceSchema(raw json.RawMessage) (json.RawMessage, SchemaReport, error) {
	var rep SchemaReport
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, rep, fmt.Errorf("input schema is not JSON: %v", err)
	}
	if dec.More() {
		return nil, rep, fmt.Errorf("input schema: more than one JSON value")
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, rep, fmt.Errorf("input schema must be a JSON object ({\"type\":\"object\",…})")
	}
	s := &schemaWalk{root: root, nodes: map[string]map[string]any{}, skipped: map[string]bool{}, uf: map[string]string{}, rep: &rep}
	if _, has := root["type"]; !has {
		root["type"] = "object"
		rep.Repairs = append(rep.Repairs, `#: added "type": "object" (the root of an input schema is an object)`)
	}
	s.visit(root, "", false, false)
	s.group()
	s.close()
	if d, _ := root["$schema"].(string); legacyRefDraft(d) {
		s.refsApart(d)
	}
	out, err := json.Marshal(root)
	if err != nil {
		return nil, rep, err
	}
	return out, rep, nil
}

type schemaWalk struct {
	root map[string]any
	// nodes are the schema objects by JSON pointer ("" is the root).
	nodes   map[string]map[string]any
	order   []string
	skipped map[string]bool // under not or if: never closed
	uf      map[string]string
	rep     *SchemaReport
}

// Keywords whose values are data, not schemas.
var dataKeywords = map[string]bool{"const": true, "enum": true, "default": true, "examples": true, "example": true}

// groupKeywords combine their subschemas with the object holding them.
var groupKeywords = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "then": true, "else": true, "dependentSchemas": true}

func ptrLabel(ptr string) string { return "#" + ptr }

// visit records every schema object under v, repairing as it goes.
// property is true for a schema that is the value of a property.
func (s *schemaWalk) visit(v any, ptr string, skip, property bool) {
	switch n := v.(type) {
	case map[string]any:
		s.repair(n, ptr, property)
		s.nodes[ptr] = n
		s.order = append(s.order, ptr)
		if skip {
			s.skipped[ptr] = true
		}
		for _, k := range slices.Sorted(maps.Keys(n)) {
			if dataKeywords[k] {
				continue
			}
			child := ptr + "/" + escapeToken(k)
			switch k {
			case "not", "if":
				s.visit(n[k], child, true, false)
			case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
				if m, ok := n[k].(map[string]any); ok {
					for _, name := range slices.Sorted(maps.Keys(m)) {
						s.visit(m[name], child+"/"+escapeToken(name), skip, k == "properties")
					}
				}
			default:
				s.visit(n[k], child, skip, false)
			}
		}
	case []any:
		for i, e := range n {
			s.visit(e, ptr+"/"+strconv.Itoa(i), skip, false)
		}
	}
}

// repair fixes the common mistakes of one schema object.
func (s *schemaWalk) repair(n map[string]any, ptr string, property bool) {
	where := ptrLabel(ptr)
	props, _ := n["properties"].(map[string]any)
	if props != nil {
		// "required": [...] placed inside properties.
		if r, ok := props["required"].([]any); ok {
			delete(props, "required")
			n["required"] = appendRequired(n["required"], r)
			s.repaired("%s: moved the required list found inside properties to the object", where)
		}
		// Draft-03 "required": true on a property.
		for _, name := range slices.Sorted(maps.Keys(props)) {
			sub, ok := props[name].(map[string]any)
			if !ok {
				continue
			}
			if b, ok := sub["required"].(bool); ok {
				delete(sub, "required")
				if b {
					n["required"] = appendRequired(n["required"], []any{name})
					s.repaired("%s/properties/%s: draft-03 \"required\": true became required [%q] on the object", where, escapeToken(name), name)
				} else {
					s.repaired("%s/properties/%s: dropped draft-03 \"required\": false", where, escapeToken(name))
				}
			}
		}
		if _, has := n["type"]; !has && property && !hasAny(n, groupKeywords) && n["$ref"] == nil {
			n["type"] = "object"
			s.repaired(`%s: added "type": "object" to a property schema that lists properties`, where)
		}
	}
	switch r := n["required"].(type) {
	case nil:
	case bool:
		delete(n, "required")
		s.repaired("%s: dropped draft-03 \"required\": %v on the object itself", where, r)
	case []any:
		var keep []any
		seen := map[string]bool{}
		for _, e := range r {
			name, ok := e.(string)
			switch {
			case !ok:
				s.repaired("%s: dropped the required entry %v (not a property name)", where, e)
			case seen[name]:
				s.repaired("%s: dropped the duplicate required entry %q", where, name)
			default:
				seen[name] = true
				keep = append(keep, name)
			}
		}
		if len(keep) == 0 {
			delete(n, "required")
		} else {
			n["required"] = keep
		}
	}
}

func (s *schemaWalk) repaired(format string, args ...any) {
	s.rep.Repairs = append(s.rep.Repairs, fmt.Sprintf(format, args...))
}

func appendRequired(cur any, add []any) []any {
	out, _ := cur.([]any)
	return append(slices.Clone(out), add...)
}

func hasAny(n map[string]any, kws map[string]bool) bool {
	for k := range n {
		if kws[k] {
			return true
		}
	}
	return false
}

// find and union: groups of schema objects combined into one object.
func (s *schemaWalk) find(p string) string {
	for {
		q, ok := s.uf[p]
		if !ok || q == p {
			return p
		}
		if r, ok := s.uf[q]; ok && r != q {
			s.uf[p] = r
		}
		p = q
	}
}

func (s *schemaWalk) union(a, b string) {
	if _, ok := s.nodes[a]; !ok {
		return
	}
	if _, ok := s.nodes[b]; !ok {
		return
	}
	ra, rb := s.find(a), s.find(b)
	if ra != rb {
		s.uf[rb] = ra
	}
}

// group unions each object with its combined subschemas and local $ref
// targets.
func (s *schemaWalk) group() {
	for _, ptr := range s.order {
		n := s.nodes[ptr]
		for k := range groupKeywords {
			switch v := n[k].(type) {
			case []any:
				for i := range v {
					s.union(ptr, ptr+"/"+k+"/"+strconv.Itoa(i))
				}
			case map[string]any:
				if k == "dependentSchemas" {
					for name := range v {
						s.union(ptr, ptr+"/"+k+"/"+escapeToken(name))
					}
				} else {
					s.union(ptr, ptr+"/"+k)
				}
			}
		}
		if ref, ok := n["$ref"].(string); ok {
			if target, ok := localRef(ref); ok {
				s.union(ptr, target)
			}
		}
	}
}

// localRef turns "#", "#/$defs/x" into a node pointer.
func localRef(ref string) (string, bool) {
	if ref == "#" {
		return "", true
	}
	if !strings.HasPrefix(ref, "#/") {
		return "", false
	}
	return ref[1:], true
}

// close closes what names fields and records what stays open.
func (s *schemaWalk) close() {
	names := map[string][]string{}    // group → property names
	patterns := map[string][]string{} // group → patternProperties
	members := map[string]int{}
	for _, ptr := range s.order {
		g := s.find(ptr)
		members[g]++
		n := s.nodes[ptr]
		if m, ok := n["properties"].(map[string]any); ok {
			names[g] = append(names[g], slices.Collect(maps.Keys(m))...)
		}
		if m, ok := n["patternProperties"].(map[string]any); ok {
			patterns[g] = append(patterns[g], slices.Collect(maps.Keys(m))...)
		}
	}
	// A name a member requires is a name the group declares, also when
	// no property declares it: every member lists it, or a closed member
	// (the root) would refuse what its sibling requires.
	nowhere := map[string]bool{} // group + "\x00" + name
	for _, ptr := range s.order {
		req, ok := s.nodes[ptr]["required"].([]any)
		if !ok || s.skipped[ptr] {
			continue
		}
		g := s.find(ptr)
		for _, r := range req {
			name := r.(string) // repair kept strings only
			if !slices.Contains(names[g], name) && !matchesAnyPattern(name, patterns[g]) {
				names[g] = append(names[g], name)
				nowhere[g+"\x00"+name] = true
			}
		}
	}
	for _, ptr := range s.order {
		if s.skipped[ptr] {
			continue
		}
		n := s.nodes[ptr]
		g := s.find(ptr)
		grouped := members[g] > 1
		_, hasProps := n["properties"]
		_, hasPatterns := n["patternProperties"]
		ap, hasAP := n["additionalProperties"]
		_, apSchema := ap.(map[string]any)
		namesFields := hasProps || hasPatterns || (grouped && (len(names[g]) > 0 || len(patterns[g]) > 0) && !isBare(n))
		switch {
		case !mayBeObject(n):
			continue
		case refOnly(n):
			continue // its target is closed
		case namesFields || (ptr == "" && !apSchema):
		case n["type"] == "object" || apSchema:
			why := "free-form object: its keys are data"
			if apSchema {
				why = "a map (additionalProperties is a schema): its keys are data"
			} else if hasAP && ap == true {
				why = "additionalProperties: true and no properties: its keys are data"
			}
			s.rep.Open = append(s.rep.Open, ptrLabel(ptr)+": "+why)
			continue
		default:
			continue
		}
		// Close n: list the group's names it lacks, then refuse the rest.
		props, ok := n["properties"].(map[string]any)
		if !ok {
			props = map[string]any{}
		}
		if req, ok := n["required"].([]any); ok {
			for _, r := range req {
				name := r.(string)
				if _, has := props[name]; !has && nowhere[g+"\x00"+name] {
					s.repaired("%s: required names %q, which no property declares: declared it (any value)", ptrLabel(ptr), name)
				}
			}
		}
		for _, name := range names[g] {
			if _, has := props[name]; !has {
				props[name] = true
			}
		}
		if len(props) > 0 || hasProps {
			n["properties"] = props
		}
		if len(patterns[g]) > 0 {
			pp, ok := n["patternProperties"].(map[string]any)
			if !ok {
				pp = map[string]any{}
			}
			for _, p := range patterns[g] {
				if _, has := pp[p]; !has {
					pp[p] = true
				}
			}
			n["patternProperties"] = pp
		}
		if ap != false {
			if apSchema || ap == true {
				s.repaired("%s: additionalProperties %s on an object that names its fields became false", ptrLabel(ptr), compactJSON(mustJSON(ap)))
			}
			n["additionalProperties"] = false
			s.rep.Closed = append(s.rep.Closed, ptrLabel(ptr))
		}
	}
	sort.Strings(s.rep.Open)
}

// legacyRefDraft reports a $schema of a draft (03 to 07) in which $ref
// makes the other keywords of its object ignored.
func legacyRefDraft(schema string) bool {
	for _, d := range []string{"draft-03", "draft-04", "draft-06", "draft-07"} {
		if strings.Contains(schema, d) {
			return true
		}
	}
	return false
}

// refsApart moves $ref into allOf wherever other keywords stand beside
// it, for a draft that would ignore them there — additionalProperties:
// false included, which left the object open. Nothing under not or if is
// touched.
func (s *schemaWalk) refsApart(draft string) {
	for _, ptr := range s.order {
		n := s.nodes[ptr]
		ref, has := n["$ref"]
		all, isList := n["allOf"].([]any)
		if !has || s.skipped[ptr] || refOnly(n) || n["allOf"] != nil && !isList {
			continue
		}
		n["allOf"] = append(all, map[string]any{"$ref": ref})
		delete(n, "$ref")
		s.repaired("%s: moved $ref into allOf (%s ignores the keywords beside $ref, additionalProperties: false among them)", ptrLabel(ptr), draft)
	}
}

// matchesAnyPattern is a cheap check: a name equal to a pattern's literal
// text counts; anything else is declared explicitly.
func matchesAnyPattern(name string, patterns []string) bool {
	return slices.Contains(patterns, "^"+name+"$")
}

// mayBeObject reports whether n's type allows an object.
func mayBeObject(n map[string]any) bool {
	switch t := n["type"].(type) {
	case nil:
		return true
	case string:
		return t == "object"
	case []any:
		for _, e := range t {
			if e == "object" {
				return true
			}
		}
	}
	return false
}

// refOnly reports a schema that is a $ref and annotations only.
func refOnly(n map[string]any) bool {
	if _, ok := n["$ref"]; !ok {
		return false
	}
	for k := range n {
		switch k {
		case "$ref", "description", "title", "$comment", "default", "examples", "deprecated", "readOnly", "writeOnly":
		default:
			return false
		}
	}
	return true
}

// isBare reports a group member that constrains nothing about objects
// (e.g. {"type":"string"} is excluded earlier; {"description": …} here).
func isBare(n map[string]any) bool {
	for k := range n {
		switch k {
		case "description", "title", "$comment", "default", "examples", "deprecated":
		default:
			return false
		}
	}
	return true
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// escapeToken escapes a JSON pointer token (RFC 6901).
func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
