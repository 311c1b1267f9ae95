package tool

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/wardenrt/warden/runtime/capability"
)

type sampleArgs struct {
	Path     string            `json:"path" jsonschema:"the file" minLength:"1" maxLength:"4096"`
	Encoding string            `json:"encoding,omitempty" enum:"utf-8,base64" default:"utf-8"`
	Lines    int               `json:"lines,omitempty" minimum:"1" maximum:"1000" default:"20"`
	Force    bool              `json:"force,omitempty" default:"false"`
	Tags     []string          `json:"tags,omitempty" maxItems:"4" items.maxLength:"8"`
	Env      map[string]string `json:"env,omitempty" keyPattern:"^[A-Z]+$" maxProperties:"2" values.maxLength:"3"`
	Changes  []sampleChange    `json:"changes,omitempty"`
}

type sampleChange struct {
	Old string `json:"old"`
	New string `json:"new"`
}

type sampleTool struct {
	needsSaw, runSaw *sampleArgs
	refine           func(*jsonschema.Schema)
}

func (t *sampleTool) Spec() Spec { return Spec{Name: "sample", Description: "a sample"} }
func (t *sampleTool) Needs(c *Call, a *sampleArgs) ([]capability.Need, error) {
	t.needsSaw = a
	return nil, nil
}
func (t *sampleTool) Run(ctx context.Context, c *Call, a *sampleArgs) Outcome {
	t.runSaw = a
	return Outcome{Output: a.Path}
}
func (t *sampleTool) RefineSchema(s *jsonschema.Schema) {
	if t.refine != nil {
		t.refine(s)
	}
}

// TestSchemaFromTags: the derived schema carries the struct's fields, what
// is required, closed objects and every tagged keyword.
func TestSchemaFromTags(t *testing.T) {
	st := Adapt[sampleArgs](&sampleTool{})
	var got map[string]any
	if err := json.Unmarshal(st.Spec().InputSchema, &got); err != nil {
		t.Fatal(err)
	}
	want := `{"additionalProperties":false,"properties":{` +
		`"changes":{"items":{"additionalProperties":false,"properties":{"new":{"type":"string"},"old":{"type":"string"}},"required":["old","new"],"type":"object"},"type":"array"},` +
		`"encoding":{"default":"utf-8","enum":["utf-8","base64"],"type":"string"},` +
		`"env":{"additionalProperties":false,"maxProperties":2,"patternProperties":{"^[A-Z]+$":{"maxLength":3,"type":"string"}},"type":"object"},` +
		`"force":{"default":false,"type":"boolean"},` +
		`"lines":{"default":20,"maximum":1000,"minimum":1,"type":"integer"},` +
		`"path":{"description":"the file","maxLength":4096,"minLength":1,"type":"string"},` +
		`"tags":{"items":{"maxLength":8,"type":"string"},"maxItems":4,"type":"array"}},` +
		`"required":["path"],"type":"object"}`
	norm, _ := json.Marshal(got)
	if string(norm) != want {
		t.Fatalf("schema\n got %s\nwant %s", norm, want)
	}
	if _, err := CompileSchema("sample", st.Spec().InputSchema); err != nil {
		t.Fatal(err)
	}
	if err := Agreement(st); err != nil {
		t.Fatal(err)
	}
}

// TestTypedBindsOnce: Needs and Run see the same decoded value.
func TestTypedBindsOnce(t *testing.T) {
	tt := &sampleTool{}
	st := Adapt[sampleArgs](tt)
	c := &Call{Tool: "sample"}
	c.SetArgs(json.RawMessage(`{"path":"a"}`), nil)
	if _, err := st.Needs(c); err != nil {
		t.Fatal(err)
	}
	if o := st.Run(context.Background(), c); o.Output != "a" || tt.runSaw != tt.needsSaw {
		t.Fatalf("%+v: run saw %p, needs %p", o, tt.runSaw, tt.needsSaw)
	}
	// New arguments (masks restored) are bound afresh.
	c.SetArgs(json.RawMessage(`{"path":"b"}`), nil)
	if o := st.Run(context.Background(), c); o.Output != "b" {
		t.Fatalf("%+v", o)
	}
	if _, ok := st.(Previewer); ok {
		t.Fatal("a tool without Preview is a Previewer")
	}
	if _, ok := st.(Sinker); ok {
		t.Fatal("a tool without Sinks is a Sinker")
	}
	c.SetArgs(json.RawMessage(`{"Path":"b"}`), nil)
	if o := st.Run(context.Background(), c); o.Err == nil || o.Err.Code != CodeInvalidInput {
		t.Fatalf("a case variant was bound: %+v", o)
	}
}

// TestAgreementFails: a schema that names a field the struct lacks, or
// drops one, or requires the wrong ones, or leaves an object open, fails.
func TestAgreementFails(t *testing.T) {
	for name, refine := range map[string]func(*jsonschema.Schema){
		"extra property":   func(s *jsonschema.Schema) { s.Properties["mode"] = &jsonschema.Schema{Type: "string"} },
		"missing property": func(s *jsonschema.Schema) { delete(s.Properties, "force") },
		"required":         func(s *jsonschema.Schema) { s.Required = append(s.Required, "lines") },
		"open nested":      func(s *jsonschema.Schema) { s.Properties["changes"].Items.AdditionalProperties = nil },
		// What only the metaschema refuses: the registry compiles a core
		// tool's schema without that check (DeferOwnSchema), the
		// agreement test with it.
		"metaschema": func(s *jsonschema.Schema) { s.Properties["tags"].Items.Type = "strin" },
		"negative":   func(s *jsonschema.Schema) { n := -1; s.Properties["path"].MinLength = &n },
	} {
		err := Agreement(Adapt[sampleArgs](&sampleTool{refine: refine}))
		if err == nil {
			t.Errorf("%s: agreement passed", name)
		} else if !strings.Contains(err.Error(), "tool sample") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := Agreement(untyped{}); err == nil || !strings.Contains(err.Error(), "not typed") {
		t.Fatalf("an untyped tool: %v", err)
	}
}

type untyped struct{}

func (untyped) Spec() Spec {
	return Spec{Name: "u", InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false}`)}
}
func (untyped) Needs(*Call) ([]capability.Need, error) { return nil, nil }
func (untyped) Run(context.Context, *Call) Outcome     { return Outcome{} }
