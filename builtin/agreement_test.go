package builtin

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/wardenrt/warden/runtime/tool"
)

// TestEveryToolAgrees: for every core tool, the published input schema is
// derived from the tool's argument struct, and schema, struct and strict
// decoding agree (tool.Agreement): a field in one and not the other, a
// required field that is optional in the other, an open object, fails.
func TestEveryToolAgrees(t *testing.T) {
	tools := Core(Config{})
	if len(tools) < 33 {
		t.Fatalf("only %d core tools", len(tools))
	}
	for _, tl := range tools {
		t.Run(tl.Spec().Name, func(t *testing.T) {
			if err := tool.Agreement(tl); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestToolsGolden: what `warden tools --json` publishes of each core tool
// keeps its meaning (testdata/tools.json): no tool appears or disappears,
// its capabilities and its read-only and approval flags stay, and no
// schema keyword appears, disappears or changes at any location —
// descriptions may be reworded. WARDEN_UPDATE_GOLDEN=1 rewrites the file
// (review the diff: a new keyword can widen what a tool accepts).
func TestToolsGolden(t *testing.T) {
	type published struct {
		Name             string          `json:"name"`
		Capabilities     []string        `json:"capabilities"`
		ReadOnly         bool            `json:"read_only"`
		ApprovalRequired bool            `json:"approval_required"`
		InputSchema      json.RawMessage `json:"input_schema"`
	}
	var now []published
	for _, tl := range Core(Config{}) {
		sp := tl.Spec()
		var caps []string
		for _, k := range sp.Capabilities {
			caps = append(caps, string(k))
		}
		now = append(now, published{sp.Name, caps, sp.ReadOnly, sp.ApprovalRequired, sp.InputSchema})
	}
	if os.Getenv("WARDEN_UPDATE_GOLDEN") == "1" {
		b, _ := json.MarshalIndent(now, "", "  ")
		if err := os.WriteFile("testdata/tools.json", append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile("testdata/tools.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden []published
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	byName := map[string]published{}
	for _, p := range now {
		byName[p.Name] = p
	}
	if len(golden) != len(now) {
		t.Errorf("%d core tools, the golden file has %d", len(now), len(golden))
	}
	for _, g := range golden {
		cur, ok := byName[g.Name]
		if !ok {
			t.Errorf("tool %s is gone", g.Name)
			continue
		}
		if fmt.Sprint(cur.Capabilities) != fmt.Sprint(g.Capabilities) || cur.ReadOnly != g.ReadOnly || cur.ApprovalRequired != g.ApprovalRequired {
			t.Errorf("%s: capabilities %v read-only %v approval %v, was %v %v %v", g.Name,
				cur.Capabilities, cur.ReadOnly, cur.ApprovalRequired, g.Capabilities, g.ReadOnly, g.ApprovalRequired)
		}
		var a, b any
		_ = json.Unmarshal(g.InputSchema, &a)
		_ = json.Unmarshal(cur.InputSchema, &b)
		for _, d := range schemaDiff(a, b, "") {
			t.Errorf("%s: %s", g.Name, d)
		}
		for _, d := range schemaDiff(b, a, "") {
			if strings.HasSuffix(d, " is gone") {
				t.Errorf("%s: %s is new", g.Name, strings.TrimSuffix(d, " is gone"))
			}
		}
	}
}

// schemaDiff lists what of schema a is missing or different in b, at
// every location; descriptions are free to change.
func schemaDiff(a, b any, at string) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var out []string
		for k, av := range am {
			if k == "description" {
				continue
			}
			bv, ok := bm[k]
			if !ok {
				out = append(out, at+"/"+k+" is gone")
				continue
			}
			if k == "required" {
				if !sameSet(av, bv) {
					out = append(out, at+"/required changed")
				}
				continue
			}
			out = append(out, schemaDiff(av, bv, at+"/"+k)...)
		}
		return out
	}
	al, alok := a.([]any)
	bl, blok := b.([]any)
	if alok && blok && len(al) == len(bl) {
		var out []string
		for i := range al {
			out = append(out, schemaDiff(al[i], bl[i], at+"/"+strconv.Itoa(i))...)
		}
		return out
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		return []string{at + ": " + string(ja) + " became " + string(jb)}
	}
	return nil
}

func sameSet(a, b any) bool {
	al, _ := a.([]any)
	bl, _ := b.([]any)
	if len(al) != len(bl) {
		return false
	}
	seen := map[any]int{}
	for _, x := range al {
		seen[x]++
	}
	for _, x := range bl {
		seen[x]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}
