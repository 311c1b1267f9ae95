package workflow

import (
	"errors"
	"reflect"
	"testing"
)

func testLookup(r ref) (any, error) {
	switch r.String() {
	case "params.n":
		return 3.0, nil
	case "params.name":
		return "world", nil
	case "params.on":
		return true, nil
	case "steps.a.success":
		return true, nil
	case "steps.a.output":
		return "a's output", nil
	case "steps.a.data.files":
		return []any{"x.go", "y.go"}, nil
	case "item.path":
		return "x.go", nil
	}
	return nil, errors.New("unknown " + r.String())
}

func TestSubstitute(t *testing.T) {
	in := map[string]any{
		"typed":  "${{ params.n }}",
		"list":   "${{ steps.a.data.files }}",
		"text":   "hello ${{ params.name }}, ${{ params.n }} files: ${{ steps.a.data.files }}",
		"nested": []any{map[string]any{"p": " ${{ item.path }} "}, 7},
		"plain":  "no references",
	}
	out, err := substitute(in, testLookup)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"typed":  3.0,
		"list":   []any{"x.go", "y.go"},
		"text":   `hello world, 3 files: ["x.go","y.go"]`,
		"nested": []any{map[string]any{"p": "x.go"}, 7},
		"plain":  "no references",
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("got %#v", out)
	}
	if _, err := substitute("${{ params.missing }}", testLookup); err == nil {
		t.Error("an unknown reference substituted")
	}
}

func TestConditions(t *testing.T) {
	for src, want := range map[string]bool{
		"${{ steps.a.success }}":                            true,
		"${{ !steps.a.success }}":                           false,
		"${{ params.n == 3 }}":                              true,
		"${{ params.n != 3 }}":                              false,
		"${{ params.name == 'world' && params.on }}":        true,
		"${{ params.name == \"mars\" || params.n == 3 }}":   true,
		"${{ !(params.on && params.name == 'mars') }}":      true,
		"${{ steps.a.data.files }}":                         true,
		"${{ null }}":                                       false,
		"${{ false || (true && params.n == 3.0) }}":         true,
		"${{ params.name == 'world' && !steps.a.success }}": false,
	} {
		c, err := parseCond(src)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		v, err := c.eval(testLookup)
		if err != nil || truthy(v) != want {
			t.Errorf("%s = %v (%v), want %v", src, v, err, want)
		}
	}
	for _, bad := range []string{"steps.a.success", "${{ }}", "${{ params.n = 3 }}", "${{ (params.on }}", "${{ 'open }}", "${{ params.n == }}", "${{ exec('rm') }}",
		// Found by FuzzRefs and FuzzValidate: no JSON value, and blanks the
		// published schema's pattern does not allow.
		"${{ nan == inf }}", "${{ params.n == -Inf }}", "${{ params.n\n}}", "\u00a0${{ true }}"} {
		if _, err := parseCond(bad); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}
