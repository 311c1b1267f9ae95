package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/wardenrt/warden/runtime/capability"
)

// Typed is a tool whose arguments are the struct A. Its input schema is
// derived from A (see schemaFor) and its arguments are decoded into an A
// once per call: Needs, Preview and Run all receive the same value. Adapt
// turns it into a Tool.
type Typed[A any] interface {
	// Spec describes the tool; its InputSchema is left empty (Adapt
	// derives it).
	Spec() Spec
	Needs(c *Call, a *A) ([]capability.Need, error)
	Run(ctx context.Context, c *Call, a *A) Outcome
}

// TypedPreviewer is implemented by a typed tool with side effects: its
// Preview says what Run would do and does nothing.
type TypedPreviewer[A any] interface {
	Preview(ctx context.Context, c *Call, a *A) Outcome
}

// TypedSinker is implemented by a typed tool that writes parts of its
// arguments into files (see Sinker).
type TypedSinker[A any] interface {
	Sinks(c *Call, a *A) ([]Sink, error)
}

// SchemaRefiner is implemented by a typed tool whose schema says what the
// struct tags cannot (a oneOf, a description computed from constants). It
// may add keywords and descriptions; it must not add or remove
// properties: the agreement check (Agreement) holds either way.
type SchemaRefiner interface {
	RefineSchema(s *jsonschema.Schema)
}

// Adapt turns a typed tool into a Tool. The result implements Previewer
// and Sinker exactly when t implements TypedPreviewer and TypedSinker. Its
// input schema is derived from A when first asked for (Spec; HeadOf),
// not here — building every core tool is on the start-up path of every
// warden process, which calls one of them or a few. A struct the schema
// cannot be derived from is a programming error, and Spec panics saying
// which (every core tool's schema is derived in tests: builtin
// TestEveryToolAgrees).
func Adapt[A any](t Typed[A]) Tool {
	spec := t.Spec()
	a := &adapter[A]{t: t, spec: spec}
	a.schema = sync.OnceValue(func() json.RawMessage {
		s, err := schemaFor[A]()
		if err != nil {
			panic(fmt.Sprintf("tool %s: %v", spec.Name, err))
		}
		if r, ok := t.(SchemaRefiner); ok {
			r.RefineSchema(s)
		}
		raw, err := marshalSchema(s)
		if err != nil {
			panic(fmt.Sprintf("tool %s: schema: %v", spec.Name, err))
		}
		return raw
	})
	p, previews := t.(TypedPreviewer[A])
	k, sinks := t.(TypedSinker[A])
	switch {
	case previews && sinks:
		return &previewSinkAdapter[A]{previewAdapter[A]{a, p}, k}
	case previews:
		return &previewAdapter[A]{a, p}
	case sinks:
		return &sinkAdapter[A]{a, k}
	}
	return a
}

type adapter[A any] struct {
	t      Typed[A]
	spec   Spec                   // without InputSchema
	schema func() json.RawMessage // derived once, on first use
}

// args returns the call's arguments bound into an A: decoded once, on the
// first use, and kept on the call.
func (a *adapter[A]) args(c *Call) (*A, error) {
	if v, ok := c.bound.(*A); ok {
		return v, nil
	}
	v := new(A)
	if err := c.Bind(v); err != nil {
		return nil, err
	}
	c.bound = v
	return v, nil
}

func (a *adapter[A]) Spec() Spec {
	spec := a.spec
	spec.InputSchema = a.schema()
	return spec
}

func (a *adapter[A]) head() Spec { return a.spec }

func (a *adapter[A]) Needs(c *Call) ([]capability.Need, error) {
	v, err := a.args(c)
	if err != nil {
		return nil, err
	}
	return a.t.Needs(c, v)
}

func (a *adapter[A]) Run(ctx context.Context, c *Call) Outcome {
	v, err := a.args(c)
	if err != nil {
		return Outcome{Err: AsError(err)}
	}
	return a.t.Run(ctx, c, v)
}

type previewAdapter[A any] struct {
	*adapter[A]
	p TypedPreviewer[A]
}

func (a *previewAdapter[A]) Preview(ctx context.Context, c *Call) Outcome {
	v, err := a.args(c)
	if err != nil {
		return Outcome{Err: AsError(err)}
	}
	return a.p.Preview(ctx, c, v)
}

type sinkAdapter[A any] struct {
	*adapter[A]
	k TypedSinker[A]
}

func (a *sinkAdapter[A]) Sinks(c *Call) ([]Sink, error) {
	// Sinks are asked before and after masks are restored: bind afresh
	// each time, never keeping the value (the arguments differ).
	v := new(A)
	if err := c.Bind(v); err != nil {
		return nil, err
	}
	return a.k.Sinks(c, v)
}

type previewSinkAdapter[A any] struct {
	previewAdapter[A]
	k TypedSinker[A]
}

func (a *previewSinkAdapter[A]) Sinks(c *Call) ([]Sink, error) {
	return (&sinkAdapter[A]{a.adapter, a.k}).Sinks(c)
}

// ---- the schema -------------------------------------------------------------

var schemaCache sync.Map // reflect.Type → *jsonschema.Schema

// schemaFor derives the input schema of the argument struct A: its
// properties, their types and which are required from the struct's fields
// and their json tags (a field without omitempty is required), every
// object closed (additionalProperties: false), descriptions from the
// jsonschema tag, and these keywords from tags of their own name:
//
//	enum:"a,b,c"  default:"x"  pattern:"^…$"  format:"uri"
//	minLength:"1"  maxLength:"4096"  minimum:"0"  maximum:"100"
//	exclusiveMinimum:"0"  minItems:"1"  maxItems:"64"  maxProperties:"64"
//	keyPattern:"^…$"  (a map: its keys must match; additionalProperties: false)
//
// and, prefixed with "items." or "values.", the same keywords for the
// elements of a slice or the values of a map (items.maxLength:"256").
// A slice or a pointer is not nullable in the published schema (strict
// decoding treats null as absent).
func schemaFor[A any]() (*jsonschema.Schema, error) {
	t := reflect.TypeFor[A]()
	if c, ok := schemaCache.Load(t); ok {
		return c.(*jsonschema.Schema).CloneSchemas(), nil
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("arguments type %s is not a struct", t)
	}
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{})
	if err != nil {
		return nil, err
	}
	if err := applyTags(t, s); err != nil {
		return nil, fmt.Errorf("arguments type %s: %w", t, err)
	}
	schemaCache.Store(t, s.CloneSchemas())
	return s, nil
}

// marshalSchema renders a schema as JSON, a closed object's
// additionalProperties as false.
func marshalSchema(s *jsonschema.Schema) (json.RawMessage, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return bytes.ReplaceAll(raw, []byte(`"additionalProperties":{"not":{}}`), []byte(`"additionalProperties":false`)), nil
}

// applyTags walks a struct type beside its derived schema.
func applyTags(t reflect.Type, s *jsonschema.Schema) error {
	notNull(s)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if s.Items != nil {
			return applyTags(t.Elem(), s.Items)
		}
	case reflect.Map:
		if as := s.AdditionalProperties; as != nil {
			return applyTags(t.Elem(), as)
		}
	case reflect.Struct:
		for _, f := range reflect.VisibleFields(t) {
			name := jsonName(f)
			if name == "" || f.Anonymous {
				continue
			}
			p := s.Properties[name]
			if p == nil {
				continue
			}
			if err := applyTags(f.Type, p); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if err := applyFieldTags(f, p); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return nil
}

// jsonName is the name encoding/json gives the field ("" when skipped).
func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return ""
	}
	if name, _, _ := strings.Cut(tag, ","); name != "" {
		return name
	}
	return f.Name
}

// notNull makes a nullable type ("null" and one other) that one type.
func notNull(s *jsonschema.Schema) {
	if len(s.Types) == 2 && s.Types[0] == "null" {
		s.Type, s.Types = s.Types[1], nil
	}
}

// schemaKeywords are the tags applyFieldTags reads, in the order it
// applies them.
var schemaKeywords = []string{"enum", "default", "pattern", "format", "minLength", "maxLength",
	"minimum", "maximum", "exclusiveMinimum", "minItems", "maxItems", "maxProperties", "keyPattern"}

func applyFieldTags(f reflect.StructField, p *jsonschema.Schema) error {
	if err := applyKeywords(f.Tag, "", f.Type, p); err != nil {
		return err
	}
	elem := f.Type
	for elem.Kind() == reflect.Pointer {
		elem = elem.Elem()
	}
	switch {
	case (elem.Kind() == reflect.Slice || elem.Kind() == reflect.Array) && p.Items != nil:
		return applyKeywords(f.Tag, "items.", elem.Elem(), p.Items)
	case elem.Kind() == reflect.Map && p.AdditionalProperties != nil:
		target := p.AdditionalProperties
		if len(p.PatternProperties) == 1 {
			for _, v := range p.PatternProperties {
				target = v
			}
		}
		return applyKeywords(f.Tag, "values.", elem.Elem(), target)
	}
	return nil
}

func applyKeywords(tag reflect.StructTag, prefix string, t reflect.Type, p *jsonschema.Schema) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for _, k := range schemaKeywords {
		v, ok := tag.Lookup(prefix + k)
		if !ok {
			continue
		}
		if err := applyKeyword(k, v, t, p); err != nil {
			return fmt.Errorf("tag %s%s:%q: %w", prefix, k, v, err)
		}
	}
	return nil
}

func applyKeyword(k, v string, t reflect.Type, p *jsonschema.Schema) error {
	num := func() (*float64, error) {
		f, err := strconv.ParseFloat(v, 64)
		return &f, err
	}
	count := func() (*int, error) {
		n, err := strconv.Atoi(v)
		if err == nil && n < 0 {
			err = fmt.Errorf("negative")
		}
		return &n, err
	}
	var err error
	switch k {
	case "enum":
		if t.Kind() != reflect.String {
			return fmt.Errorf("enum is for strings")
		}
		for _, e := range strings.Split(v, ",") {
			p.Enum = append(p.Enum, e)
		}
	case "default":
		var d any
		switch t.Kind() {
		case reflect.String:
			d = v
		case reflect.Bool:
			d, err = strconv.ParseBool(v)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			d, err = strconv.ParseInt(v, 10, 64)
		case reflect.Float32, reflect.Float64:
			d, err = strconv.ParseFloat(v, 64)
		default:
			return fmt.Errorf("default is for strings, booleans and numbers")
		}
		if err != nil {
			return err
		}
		p.Default, err = json.Marshal(d)
	case "pattern":
		p.Pattern = v
	case "format":
		p.Format = v
	case "minLength":
		p.MinLength, err = count()
	case "maxLength":
		p.MaxLength, err = count()
	case "minimum":
		p.Minimum, err = num()
	case "maximum":
		p.Maximum, err = num()
	case "exclusiveMinimum":
		p.ExclusiveMinimum, err = num()
	case "minItems":
		p.MinItems, err = count()
	case "maxItems":
		p.MaxItems, err = count()
	case "maxProperties":
		p.MaxProperties, err = count()
	case "keyPattern":
		if t.Kind() != reflect.Map || p.AdditionalProperties == nil {
			return fmt.Errorf("keyPattern is for maps")
		}
		p.PatternProperties = map[string]*jsonschema.Schema{v: p.AdditionalProperties}
		p.AdditionalProperties = &jsonschema.Schema{Not: &jsonschema.Schema{}}
	}
	return err
}
