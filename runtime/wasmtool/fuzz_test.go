package wasmtool

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// sidecarSeeds are the example modules' sidecars and the shapes the tests
// refuse.
func sidecarSeeds(tb testing.TB) []string {
	seeds := []string{
		"name: x\nbogus: 1\n",
		"name: x\nlimits:\n  memory_mb: lots\n",
		"abi: wasm\n",
		"config: {\"env:HOME\": x}\n",
		"name: up\ndescription: upper-cases\nabi: extism\ninput: {from: text}\noutput: text\n",
		"abi: servlet\ntools:\n  get: {description: fetch a page, input_schema: {type: object, properties: {url: {type: string}}}}\n",
		"name: cmd\nabi: wasi-command\ninput_schema: {type: object}\nlimits: {memory_mb: 16, timeout_ms: 1000, max_output_bytes: 4096}\n",
	}
	files, _ := filepath.Glob("../../wasm-tools/examples/*/*.tool.yaml")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, string(b))
	}
	return seeds
}

// FuzzSidecar: ParseSidecar never panics; what it refuses is a
// *SidecarError of the file; what it accepts keeps its promises (a known
// ABI, limits within their ceilings, grants that parse, config keys of
// the allowed shape, schemas kept as JSON) and, written out again as JSON
// (which is YAML), parses to the same sidecar. A schema it carries, if
// warden can enforce it, is enforced as FuzzDescribe checks.
func FuzzSidecar(f *testing.F) {
	for _, s := range sidecarSeeds(f) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := ParseSidecar("m.tool.yaml", data)
		if err != nil {
			var se *SidecarError
			if !errors.As(err, &se) || se.Source != "m.tool.yaml" || se.Message == "" {
				t.Fatalf("error %T %v is not a *SidecarError of the file", err, err)
			}
			return
		}
		checkSidecar(t, sc)
		again, err := ParseSidecar("again.tool.yaml", renderSidecar(t, sc))
		if err != nil {
			t.Fatalf("%q is accepted, but not as rendered again (%s): %v", data, renderSidecar(t, sc), err)
		}
		if !sameSidecar(sc, again) {
			t.Fatalf("%q reads as %#v, rendered again as %#v", data, sc, again)
		}
		if sc.schema != nil {
			checkEnforced(t, ToolSpec{Name: "m", Description: "d", InputSchema: sc.schema}, nil)
		}
		for name, o := range sc.Tools {
			if o.schema != nil {
				checkEnforced(t, ToolSpec{Name: name, Description: "d", InputSchema: o.schema}, nil)
			}
		}
	})
}

func checkSidecar(t *testing.T, sc *Sidecar) {
	t.Helper()
	switch sc.ABI {
	case "", ABIExtism, ABIServlet, ABICommand:
	default:
		t.Fatalf("abi %q accepted", sc.ABI)
	}
	l := sc.Limits.withDefaults()
	if l.MemoryMB < 1 || l.MemoryMB > MaxMemoryMB || l.TimeoutMS < 1 || l.TimeoutMS > MaxTimeoutMS ||
		l.MaxOutputBytes < 1 || l.MaxOutputBytes > MaxMaxOutputBytes {
		t.Fatalf("limits %v accepted", l)
	}
	for _, c := range sc.Capabilities {
		if _, err := capability.Parse(c); err != nil {
			t.Fatalf("capability %q accepted: %v", c, err)
		}
	}
	for k := range sc.Config {
		if !configKey.MatchString(k) {
			t.Fatalf("config key %q accepted", k)
		}
	}
	if (sc.InputSchema == nil) != (sc.schema == nil) || sc.schema != nil && !json.Valid(sc.schema) {
		t.Fatalf("input_schema %#v kept as %q", sc.InputSchema, sc.schema)
	}
	if sc.ABI == ABIServlet && (sc.schema != nil || sc.Input.From != "" || sc.Output != "") {
		t.Fatalf("a servlet's sidecar with a schema, input or output: %#v", sc)
	}
	for name, o := range sc.Tools {
		if name == "" || len(name) > 128 || o.Description == "" && o.InputSchema == nil || (o.InputSchema == nil) != (o.schema == nil) {
			t.Fatalf("tools.%s: %#v", name, o)
		}
	}
}

// renderSidecar writes an accepted sidecar out again, as JSON.
func renderSidecar(t *testing.T, sc *Sidecar) []byte {
	t.Helper()
	m := map[string]any{
		"name": sc.Name, "description": sc.Description, "abi": sc.ABI, "export": sc.Export,
		"capabilities": sc.Capabilities, "config": sc.Config, "output": sc.Output,
		"limits": map[string]int{"memory_mb": sc.Limits.MemoryMB, "timeout_ms": sc.Limits.TimeoutMS, "max_output_bytes": sc.Limits.MaxOutputBytes},
	}
	if sc.schema != nil {
		m["input_schema"] = json.RawMessage(sc.schema)
	}
	if sc.Input.From != "" {
		m["input"] = map[string]string{"from": sc.Input.From}
	}
	if len(sc.Tools) > 0 {
		tools := map[string]any{}
		for name, o := range sc.Tools {
			e := map[string]any{"description": o.Description}
			if o.schema != nil {
				e["input_schema"] = json.RawMessage(o.schema)
			}
			tools[name] = e
		}
		m["tools"] = tools
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sameSidecar(a, b *Sidecar) bool {
	if a.Name != b.Name || a.Description != b.Description || a.ABI != b.ABI || a.Export != b.Export ||
		a.Output != b.Output || a.Input != b.Input || a.Limits != b.Limits || !jsonEqual(a.schema, b.schema) ||
		len(a.Capabilities) != len(b.Capabilities) || !maps.Equal(a.Config, b.Config) || len(a.Tools) != len(b.Tools) {
		return false
	}
	for i := range a.Capabilities {
		if a.Capabilities[i] != b.Capabilities[i] {
			return false
		}
	}
	for name, o := range a.Tools {
		p, ok := b.Tools[name]
		if !ok || o.Description != p.Description || !jsonEqual(o.schema, p.schema) {
			return false
		}
	}
	return true
}

// describeSeeds are describe outputs as servlets write them.
var describeSeeds = []string{
	`{"tools":[{"name":"web_get","description":"GET a URL","inputSchema":{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}}]}`,
	`{"tools":[{"name":"q","description":"d","inputSchema":{"type":"object","properties":{"q":{"type":"string"},"filters":{"type":"object","properties":{"lang":{"type":"string"}}}},"required":["q"]}}]}`,
	`{"tools":[{"name":"a","description":"d","inputSchema":{"type":"object","allOf":[{"properties":{"a":{"type":"string"}}},{"properties":{"b":{"type":"number"}},"required":["b"]}]}},{"name":"b","description":"d","inputSchema":{"properties":{"data":{"type":"object"},"headers":{"type":"object","additionalProperties":{"type":"string"}}}}}]}`,
	`{"tools":[{"name":"o","description":"d","inputSchema":{"type":"object","properties":{"kind":{"enum":["a","b"]}},"oneOf":[{"properties":{"kind":{"const":"a"},"x":{"type":"string"}},"required":["x"]},{"properties":{"kind":{"const":"b"},"y":{"type":"integer"}},"required":["y"]}]}}]}`,
	`{"tools":[{"name":"r","description":"d","inputSchema":{"$defs":{"F":{"type":"object","properties":{"x":{"type":"string"}}}},"type":"object","properties":{"f":{"$ref":"#/$defs/F"}}}}]}`,
	`{"tools":[{"name":"z","description":"zod","inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","$ref":"#/definitions/A","definitions":{"A":{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}}}}]}`,
	`{"tools":[{"name":"m","description":"d","inputSchema":{"type":"object","properties":{"required":["a"],"a":{"type":"string","required":true}}}}]}`,
	`{"tools":[{"name":"f","description":"d","inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","$ref":"#/definitions/A","definitions":{"A":{"type":"object"}}}}]}`,
	`{"tools":[]}`,
	`{"tools":[{"name":"x","description":"d"},{"name":"x","description":"d"}]}`,
}

// FuzzDescribe: parseDescribe (a servlet's describe output) never panics;
// what it accepts lists tools with unique UTF-8 names of at most 128
// bytes, each called through call. Each tool's schema that warden accepts
// (enforceTool) compiles, is closed the way warden promises — enforcing it
// again changes nothing, and an unknown field at its closed root is
// refused where the same arguments without it are accepted (args, when
// they are a JSON object).
func FuzzDescribe(f *testing.F) {
	for _, s := range describeSeeds {
		f.Add([]byte(s), []byte(`{"url":"https://example.com","q":"x","n":1,"b":2}`))
	}
	f.Fuzz(func(t *testing.T, out, args []byte) {
		tools, err := parseDescribe(out)
		if err != nil {
			return
		}
		if len(tools) == 0 {
			t.Fatalf("%q: accepted with no tools", out)
		}
		seen := map[string]bool{}
		for _, ts := range tools {
			if ts.Name == "" || len(ts.Name) > 128 || !utf8.ValidString(ts.Name) || seen[ts.Name] || ts.Export != "call" {
				t.Fatalf("%q: tool %#v", out, ts)
			}
			seen[ts.Name] = true
			checkEnforced(t, ts, args)
		}
	})
}

// unknownField is a field name no schema in the seeds declares.
const unknownField = "warden-fuzz-unknown-field"

// checkEnforced checks a tool's schema as warden enforces it.
func checkEnforced(t *testing.T, ts ToolSpec, args []byte) {
	t.Helper()
	orig := append(json.RawMessage(nil), ts.InputSchema...)
	if err := enforceTool("m", ABIServlet, &ts); err != nil {
		return
	}
	sch, err := tool.CompileSchema(ts.Name, ts.InputSchema)
	if err != nil {
		t.Fatalf("%s: enforced, but does not compile: %v", ts.InputSchema, err)
	}
	again, rep, err := enforceSchema(ts.InputSchema)
	if err != nil || !jsonEqual(again, ts.InputSchema) || len(rep.Closed) > 0 || len(rep.Repairs) > 0 {
		t.Fatalf("%s (from %s) enforced again: %s %+v %v", ts.InputSchema, orig, again, rep, err)
	}
	if args == nil {
		return
	}
	var root map[string]any
	if err := json.Unmarshal(ts.InputSchema, &root); err != nil {
		t.Fatal(err)
	}
	props, _ := root["properties"].(map[string]any)
	if root["additionalProperties"] != false || root["patternProperties"] != nil || props[unknownField] != nil {
		return
	}
	obj, _, derr := tool.DecodeArgs(args)
	if derr != nil || sch.Validate(obj) != nil {
		return
	}
	if _, has := obj[unknownField]; has {
		return
	}
	obj[unknownField] = "x"
	if sch.Validate(obj) == nil {
		t.Fatalf("schema %s (from %s) accepts the unknown field %q: %s", ts.InputSchema, orig, unknownField, mustJSON(obj))
	}
}
