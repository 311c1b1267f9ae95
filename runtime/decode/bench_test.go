package decode

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"
)

// benchPolicy is a policy of 40 rules and 20 grants, with comments.
func benchPolicy() []byte {
	var b strings.Builder
	b.WriteString("# the team's policy\nversion: 1\napproval: ask\ngrants:\n")
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&b, "  - \"fs.read:src/pkg%d/**\"   # package %d\n", i, i)
	}
	b.WriteString("rules:\n")
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&b, "  - { tool: \"tool_%d*\", action: allow, require_approval: %v }\n", i, i%2 == 0)
	}
	return []byte(b.String())
}

// benchSidecar is a sidecar whose input_schema has 30 properties.
func benchSidecar() []byte {
	var b strings.Builder
	b.WriteString("name: textstats\ndescription: counts words\nabi: extism\ncapabilities: [\"memory.read:notes\"]\nlimits: {memory_mb: 32}\ninput_schema:\n  type: object\n  additionalProperties: false\n  properties:\n")
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&b, "    field%d: {type: string, description: \"the %dth field\", maxLength: 4096}\n", i, i)
	}
	return []byte(b.String())
}

// BenchmarkYAML: the decoder (budget scan, token checks, one parse that
// also gives positions) against what the loaders did before it (goccy's
// strict Unmarshal, then a second parse for positions).
func BenchmarkYAML(b *testing.B) {
	for _, in := range []struct {
		name string
		data []byte
	}{{"policy", benchPolicy()}, {"sidecar", benchSidecar()}} {
		b.Run(in.name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			for b.Loop() {
				var v policyShapeOrSidecar
				if _, err := YAML("b.yaml", in.data, &v, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(in.name+"/baseline", func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			for b.Loop() {
				var v policyShapeOrSidecar
				if err := yaml.UnmarshalWithOptions(in.data, &v, yaml.Strict()); err != nil {
					b.Fatal(err)
				}
				if _, err := parser.ParseBytes(in.data, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(in.name+"/scan-only", func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			l := (*Limits)(nil).withDefaults()
			for b.Loop() {
				if err := scanBudget("b.yaml", in.data, l); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type policyShapeOrSidecar struct {
	Version      int              `yaml:"version"`
	Approval     string           `yaml:"approval"`
	Grants       []string         `yaml:"grants"`
	Rules        []map[string]any `yaml:"rules"`
	Name         string           `yaml:"name"`
	Description  string           `yaml:"description"`
	ABI          string           `yaml:"abi"`
	Capabilities []string         `yaml:"capabilities"`
	Limits       map[string]int   `yaml:"limits"`
	InputSchema  any              `yaml:"input_schema"`
}

// BenchmarkJSON: tool arguments through the strict decoder (duplicate
// keys, depth, positions) against encoding/json's lenient Unmarshal.
func BenchmarkJSON(b *testing.B) {
	args := []byte(`{"path":"notes/today.md","content":"` + strings.Repeat("a line of text ", 50) + `","mode":"append","tags":["x","y","z"],"meta":{"author":"me","n":3}}`)
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(args)))
		for b.Loop() {
			if _, err := JSON("args", args, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline", func(b *testing.B) {
		b.SetBytes(int64(len(args)))
		for b.Loop() {
			var v any
			if err := json.Unmarshal(args, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
