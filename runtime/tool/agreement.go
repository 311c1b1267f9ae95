package tool

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// ArgsType returns the argument struct of an adapted tool.
func (a *adapter[A]) ArgsType() reflect.Type { return reflect.TypeFor[A]() }

// Agreement checks that what a tool publishes and what it decodes agree:
// the tool is typed (Adapt), its published input schema names exactly the
// fields of its argument struct — at every level — and requires exactly
// those without omitempty, every object in it is closed, and strict
// decoding (Bind) accepts each field the schema names and refuses a field
// it does not name, and a field name that differs only in case, as the
// compiled schema does. It returns every disagreement found.
func Agreement(t Tool) error {
	spec := t.Spec()
	typed, ok := t.(interface{ ArgsType() reflect.Type })
	if !ok {
		return fmt.Errorf("tool %s is not typed: adapt it (tool.Adapt) so its schema is derived from its arguments", spec.Name)
	}
	var doc map[string]any
	if err := json.Unmarshal(spec.InputSchema, &doc); err != nil {
		return fmt.Errorf("tool %s: schema: %v", spec.Name, err)
	}
	sch, err := CompileSchema(spec.Name, spec.InputSchema)
	if err != nil {
		return err
	}
	var errs []error
	agreeObject(spec.Name, "", doc, typed.ArgsType(), &errs)
	// Strict decoding beside the compiled schema, field by field.
	st := typed.ArgsType()
	for name, ft := range jsonFields(st) {
		v := sampleJSON(ft)
		raw, _ := json.Marshal(map[string]any{name: v})
		if err := bindStrict(raw, nil, reflect.New(st).Interface()); err != nil {
			errs = append(errs, fmt.Errorf("tool %s: Bind refuses field %q that the struct has: %v", spec.Name, name, err))
		}
		upper := strings.ToUpper(name[:1]) + name[1:]
		if upper == name {
			continue
		}
		raw, _ = json.Marshal(map[string]any{upper: v})
		if err := bindStrict(raw, nil, reflect.New(st).Interface()); err == nil {
			errs = append(errs, fmt.Errorf("tool %s: Bind accepts %q, a case variant of %q", spec.Name, upper, name))
		}
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		if sch.Validate(m) == nil {
			errs = append(errs, fmt.Errorf("tool %s: the schema accepts %q, a case variant of %q", spec.Name, upper, name))
		}
	}
	extra := []byte(`{"warden_no_such_field":1}`)
	if err := bindStrict(extra, nil, reflect.New(st).Interface()); err == nil {
		errs = append(errs, fmt.Errorf("tool %s: Bind accepts an unknown field", spec.Name))
	}
	if sch.Validate(map[string]any{"warden_no_such_field": 1}) == nil {
		errs = append(errs, fmt.Errorf("tool %s: the schema accepts an unknown field", spec.Name))
	}
	return errors.Join(errs...)
}

// agreeObject compares one object schema with the struct type t.
func agreeObject(tool, at string, s map[string]any, t reflect.Type, errs *[]error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if items, ok := s["items"].(map[string]any); ok {
			agreeObject(tool, at+"/items", items, t.Elem(), errs)
		}
		return
	case reflect.Map:
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			agreeObject(tool, at+"/additionalProperties", ap, t.Elem(), errs)
		}
		if pp, ok := s["patternProperties"].(map[string]any); ok {
			for k, v := range pp {
				if vs, ok := v.(map[string]any); ok {
					agreeObject(tool, at+"/patternProperties/"+k, vs, t.Elem(), errs)
				}
			}
		}
		return
	case reflect.Struct:
	default:
		return
	}
	bad := func(format string, args ...any) {
		*errs = append(*errs, fmt.Errorf("tool %s: schema at %s: %s", tool, PointerOrRoot(at), fmt.Sprintf(format, args...)))
	}
	if s["additionalProperties"] != false {
		bad("the object is not closed (additionalProperties: false)")
	}
	props, _ := s["properties"].(map[string]any)
	fields := map[string]reflect.StructField{}
	var required []string
	for _, f := range reflect.VisibleFields(t) {
		name := jsonName(f)
		if name == "" || f.Anonymous {
			continue
		}
		fields[name] = f
		_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !slices.Contains(strings.Split(opts, ","), "omitempty") && !slices.Contains(strings.Split(opts, ","), "omitzero") {
			required = append(required, name)
		}
	}
	for name := range props {
		if _, ok := fields[name]; !ok {
			bad("property %q is not a field of %s", name, t)
		}
	}
	for name, f := range fields {
		p, ok := props[name].(map[string]any)
		if !ok {
			bad("field %s (%q) of %s is not a property", f.Name, name, t)
			continue
		}
		agreeObject(tool, at+"/properties/"+name, p, f.Type, errs)
	}
	var listed []string
	if r, ok := s["required"].([]any); ok {
		for _, x := range r {
			if n, ok := x.(string); ok {
				listed = append(listed, n)
			}
		}
	}
	sort.Strings(required)
	sort.Strings(listed)
	if !slices.Equal(required, listed) {
		bad("required %v, but the fields without omitempty are %v", listed, required)
	}
}

// sampleJSON is a value of Go type t, as JSON would carry it.
func sampleJSON(t reflect.Type) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "x"
	case reflect.Bool:
		return true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return 1
	case reflect.Float32, reflect.Float64:
		return 1.5
	case reflect.Slice, reflect.Array:
		return []any{}
	case reflect.Map, reflect.Struct:
		return map[string]any{}
	}
	return nil
}
