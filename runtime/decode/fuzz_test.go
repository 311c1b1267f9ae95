package decode

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// yamlSeeds are the fuzz targets' seeds: the shapes warden reads and the
// shapes that cost the YAML library most.
var yamlSeeds = []string{
	"version: 1\ngrants: [\"fs.read:**\", system.info]\nrules:\n  - { tool: shell, action: allow, require_approval: true }\n  - tool: \"git_*\"\n    action: deny\n",
	"name: t\ninput_schema:\n  type: object\n  properties:\n    text: {type: string}\n  additionalProperties: false\nlimits: {memory_mb: 16}\n",
	"version: 1\nname: w\nsteps:\n  - id: a\n    tool: analyze\n    args: {text: \"${{ params.x }}\"}\n    when: ${{ steps.b.success }}\n",
	"a: &x [1, 2]\nb: *x\nc: {<<: {d: 1}}\n",
	"- - - - - x\n",
	"? a\n: b\n? - c\n  - d\n: e\n",
	"k: |\n  line\n   more\n\n  end\nn: >2-\n    folded\nm: 1\n",
	"\"a\":\n  'b''c': \"d\\\"e\\\n  f\"\n",
	"%YAML 1.2\n%TAG ! tag:x,2000:\n--- !foo\na: !!str 1\n...\n---\nb\n",
	"[{a: [b, {c: d}]}, \"e\": f, g]\n",
	"a: b # comment\n# c\nd:\n- e\n- f\ng: h\n",
	"{\"a\": {\"b\": [1, 2.5, true, null, \"s\"]}}",
	"a:\r\n  b: c\r\n",
}

// FuzzYAML: the decoder never panics, and the budget scan never counts
// fewer than the library's tokens (within a factor of two) or less depth
// (within a factor of two) — what the budget lets through, the library
// handles within it.
func FuzzYAML(f *testing.F) {
	for _, s := range yamlSeeds {
		f.Add([]byte(s))
	}
	if dir := os.Getenv("WARDEN_YAML_SUITE"); dir != "" { // e.g. goccy/go-yaml's testdata/yaml-test-suite
		files, _ := filepath.Glob(filepath.Join(dir, "*", "in.yaml"))
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		_, _ = YAML("f.yaml", data, &v, nil)
		if !utf8.Valid(data) || len(data) > 64<<10 {
			return
		}
		checkScanBound(t, data)
	})
}

func checkScanBound(t *testing.T, data []byte) {
	t.Helper()
	s := &budgetScan{src: data, source: "f.yaml", lim: Limits{MaxTokens: 1 << 30, MaxDepth: 1 << 30, MaxKeys: 1 << 30}, maxTokens: 1 << 30,
		line: 1, bol: true, keyCol: -1, adjacentTo: -1, nodeStart: true}
	if err := s.run(); err != nil {
		t.Fatalf("unlimited scan: %v", err)
	}
	tokens, lerr := lex("f.yaml", data)
	if n := len(tokens); n > 2*s.tokens+4 {
		t.Fatalf("the library makes %d tokens of %q; the scan counted %d", n, data, s.tokens)
	}
	if lerr != nil {
		return
	}
	for _, tk := range tokens {
		switch tk.Type {
		case token.AnchorType, token.AliasType, token.MergeKeyType, token.TagType:
			return // refused from the tokens: never parsed
		}
	}
	file, err := func() (f *ast.File, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%v", r) // the library's; YAML recovers it
			}
		}()
		return parser.Parse(tokens, 0)
	}()
	if err != nil {
		return
	}
	d := 0
	for _, doc := range file.Docs {
		d = max(d, astDepth(doc.Body))
	}
	if d > 2*s.deepest+2 {
		t.Fatalf("the library nests %q %d deep; the scan measured %d", data, d, s.deepest)
	}
}

// astDepth is how deep collections nest under n.
func astDepth(n ast.Node) int {
	switch m := n.(type) {
	case *ast.MappingNode:
		best := 0
		for _, v := range m.Values {
			best = max(best, astDepth(v.Key), astDepth(v.Value))
		}
		return best + 1
	case *ast.MappingValueNode:
		return max(astDepth(m.Key), astDepth(m.Value)) + 1
	case *ast.SequenceNode:
		best := 0
		for _, v := range m.Values {
			best = max(best, astDepth(v))
		}
		return best + 1
	case *ast.TagNode:
		return astDepth(m.Value)
	case *ast.AnchorNode:
		return astDepth(m.Value)
	case *ast.MappingKeyNode:
		return astDepth(m.Value)
	}
	return 0
}

// FuzzJSON: the JSON decoder never panics, and what it accepts has no
// nesting past the limit.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":null}],"c":"\u00e9"}`, `{"a":1,"a":2}`, `[[[[]]]]`, `{"a":`, `"x" 1`, "{\"a\":\"\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := JSON("f.json", data, &Limits{MaxDepth: 8})
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Line == 0 {
				t.Fatalf("an error without a position: %v", err)
			}
			return
		}
		if jsonDepth(v) > 9 {
			t.Fatalf("accepted %q nested %d deep", data, jsonDepth(v))
		}
	})
}

func jsonDepth(v any) int {
	best := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			best = max(best, jsonDepth(e))
		}
		return best + 1
	case []any:
		for _, e := range x {
			best = max(best, jsonDepth(e))
		}
		return best + 1
	}
	return 0
}
