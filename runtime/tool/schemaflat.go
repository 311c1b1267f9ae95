package tool

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// flatSchema is an input schema of the one shape most tools' schemas have
// — a closed object of string and boolean fields, some required, strings
// bounded in length — read from the schema's own text so that a value it
// surely accepts is accepted without the full validator's walk. It only
// ever says yes: a value it cannot vouch for (any other type, a missing or
// unknown field, a length out of bounds, text that is not UTF-8) goes to
// the full validator, which decides and words the refusal. A schema with
// any keyword outside this shape has no flatSchema.
type flatSchema struct {
	props    map[string]flatProp
	required []string
}

// flatProp is one field of a flatSchema.
type flatProp struct {
	boolean  bool // else a string
	min, max int  // in code points, as JSON Schema counts; max -1: none
}

// flatRootKeys and flatPropKeys are the keywords a flatSchema reads; the
// annotations (description, title) assert nothing.
var (
	flatRootKeys = map[string]bool{"type": true, "properties": true, "required": true, "additionalProperties": true, "description": true, "title": true}
	flatPropKeys = map[string]bool{"type": true, "minLength": true, "maxLength": true, "description": true, "title": true}
)

// flatSchemaOf returns root's flatSchema, or nil when root is not of that
// shape.
func flatSchemaOf(root map[string]any) *flatSchema {
	for k := range root {
		if !flatRootKeys[k] {
			return nil
		}
	}
	props, ok := root["properties"].(map[string]any)
	if root["type"] != "object" || root["additionalProperties"] != false || !ok {
		return nil
	}
	f := &flatSchema{props: make(map[string]flatProp, len(props))}
	for name, v := range props {
		p, ok := flatPropOf(v)
		if !ok {
			return nil
		}
		f.props[name] = p
	}
	if r, present := root["required"]; present {
		list, ok := r.([]any)
		if !ok {
			return nil
		}
		for _, e := range list {
			name, ok := e.(string)
			if !ok {
				return nil
			}
			f.required = append(f.required, name)
		}
	}
	return f
}

// flatPropOf reads one field's schema: {"type":"string"} with optional
// minLength and maxLength, or {"type":"boolean"}.
func flatPropOf(v any) (flatProp, bool) {
	s, ok := v.(map[string]any)
	if !ok {
		return flatProp{}, false
	}
	for k := range s {
		if !flatPropKeys[k] {
			return flatProp{}, false
		}
	}
	p := flatProp{max: -1}
	switch s["type"] {
	case "string":
	case "boolean":
		_, hasMin := s["minLength"]
		_, hasMax := s["maxLength"]
		if hasMin || hasMax {
			return flatProp{}, false
		}
		p.boolean = true
		return p, true
	default:
		return flatProp{}, false
	}
	if m, present := s["minLength"]; present {
		if p.min, ok = schemaCount(m); !ok {
			return flatProp{}, false
		}
	}
	if m, present := s["maxLength"]; present {
		if p.max, ok = schemaCount(m); !ok {
			return flatProp{}, false
		}
	}
	return p, true
}

// schemaCount reads a length bound: a non-negative integer written as one.
func schemaCount(v any) (int, bool) {
	var text string
	switch n := v.(type) {
	case json.Number:
		text = string(n)
	case float64:
		text = strconv.FormatFloat(n, 'f', -1, 64)
	default:
		return 0, false
	}
	c, err := strconv.Atoi(text)
	if err != nil || c < 0 {
		return 0, false
	}
	return c, true
}

// accepts reports whether v surely validates against f.
func (f *flatSchema) accepts(v any) bool {
	obj, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for _, name := range f.required {
		if _, ok := obj[name]; !ok {
			return false
		}
	}
	for name, val := range obj {
		p, ok := f.props[name]
		if !ok {
			return false
		}
		if p.boolean {
			if _, ok := val.(bool); !ok {
				return false
			}
			continue
		}
		s, ok := val.(string)
		if !ok || !utf8.ValidString(s) {
			return false
		}
		if n := utf8.RuneCountInString(s); n < p.min || p.max >= 0 && n > p.max {
			return false
		}
	}
	return true
}
