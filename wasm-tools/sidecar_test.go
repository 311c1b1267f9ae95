package wasmtools_test

import (
	"fmt"
	"regexp"
	"sort"
	"testing"

	"github.com/goccy/go-yaml"

	wasmtools "github.com/wardenrt/warden/wasm-tools"
)

// sidecar mirrors the fields warden's host reads from NAME.tool.yaml
// (runtime/wasmtool.Sidecar); it is parsed strictly, like the host does, so
// an unknown or misspelt field fails here too.
type sidecar struct {
	Name         string            `yaml:"name"`
	Description  string            `yaml:"description"`
	ABI          string            `yaml:"abi"`
	Export       string            `yaml:"export"`
	InputSchema  map[string]any    `yaml:"input_schema"`
	Capabilities []string          `yaml:"capabilities"`
	Limits       map[string]int    `yaml:"limits"`
	Config       map[string]string `yaml:"config"`
}

var (
	toolName   = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	configKey  = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	capability = regexp.MustCompile(`^[a-z][a-z.]*(:\S+)?$`)
)

// checkSidecar parses a sidecar strictly and checks it against the module:
// the name, the ABI and its required fields, the export, closed input
// schemas, limits and config keys.
func checkSidecar(t *testing.T, data []byte, name string, abi wasmtools.ABI, m wasmtools.Module) sidecar {
	t.Helper()
	var sc sidecar
	if err := yaml.UnmarshalWithOptions(data, &sc, yaml.Strict()); err != nil {
		t.Fatalf("sidecar does not parse:\n%v", err)
	}
	if sc.Name != name || !toolName.MatchString(sc.Name) {
		t.Errorf("sidecar name %q, want %q", sc.Name, name)
	}
	if sc.ABI != string(abi) {
		t.Errorf("sidecar abi %q, want %q", sc.ABI, abi)
	}
	if sc.Description == "" {
		t.Errorf("sidecar lacks a description")
	}
	if sc.Capabilities == nil {
		t.Errorf("sidecar lacks capabilities (write [] for none)")
	}
	for _, c := range sc.Capabilities {
		if !capability.MatchString(c) {
			t.Errorf("capability %q does not look like KIND[:SCOPE]", c)
		}
	}
	if len(sc.Limits) == 0 {
		t.Errorf("sidecar lacks limits")
	}
	for k, v := range sc.Limits {
		switch k {
		case "memory_mb", "timeout_ms", "max_output_bytes":
			if v <= 0 {
				t.Errorf("limits.%s = %d", k, v)
			}
		default:
			t.Errorf("unknown limit %q", k)
		}
	}
	for k := range sc.Config {
		if !configKey.MatchString(k) {
			t.Errorf("config key %q (env:NAME keys are served by the host, not set here)", k)
		}
	}
	switch abi {
	case wasmtools.Servlet:
		// describe lists the tools and their schemas.
		if sc.InputSchema != nil || sc.Export != "" {
			t.Errorf("a servlet sidecar has neither input_schema nor export")
		}
	case wasmtools.WASICommand, wasmtools.Extism:
		if abi == wasmtools.WASICommand && sc.Export != "" {
			t.Errorf("a WASI command sidecar has no export")
		}
		if abi == wasmtools.Extism {
			export := sc.Export
			if export == "" {
				export = "call"
			}
			if m.Exports[export] != "func" {
				t.Errorf("sidecar export %q is not exported", export)
			}
		}
		if sc.InputSchema == nil {
			t.Errorf("sidecar lacks input_schema")
		} else if sc.InputSchema["type"] != "object" {
			t.Errorf("input_schema is not an object schema")
		}
		if open := openObjects(sc.InputSchema, "input_schema"); len(open) > 0 {
			t.Errorf("input_schema objects without additionalProperties: false: %v", open)
		}
	}
	return sc
}

// openObjects lists the object schemas under v that do not say
// additionalProperties: false.
func openObjects(v any, path string) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		if x["type"] == "object" && x["additionalProperties"] != false {
			out = append(out, path)
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, openObjects(x[k], path+"."+k)...)
		}
	case []any:
		for i, e := range x {
			out = append(out, openObjects(e, fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return out
}
