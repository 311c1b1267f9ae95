package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/wardenrt/warden/internal/thirdparty/jsonschema"
	"github.com/wardenrt/warden/runtime/gate"
)

// refSeeds are strings and conditions as workflows write them.
var refSeeds = []string{
	"${{ params.n }}",
	"hello ${{ params.name }}, ${{ params.n }} files: ${{ steps.a.data.files }}",
	" ${{ item.path }} ",
	"${{ steps.a.data.x.y }}${{item}}",
	"no references",
	"${{ params.x",
	"${{ steps.a.output.x }}",
	"${{ steps.a.success }}",
	"${{ !steps.a.success }}",
	"${{ params.n == 3 }}",
	"${{ params.name == 'world' && params.on }}",
	"${{ params.name == \"mars\" || params.n == 3 }}",
	"${{ !(params.on && params.name == 'mars') }}",
	"${{ null }}",
	"${{ false || (true && params.n == 3.0) }}",
	"${{ params.name == 'world' && !steps.a.success }}",
	"${{ 1e3 != -2.5 && 'a\"b' == \"c'd\" }}",
	"${{ nan == inf }}",
}

// FuzzRefs: the reference language. A reference that parses prints back
// as itself (ref.String) and reads again as the same; refsIn, wholeRef
// and substitute agree — what refsIn accepts substitutes without an error,
// looking up exactly the references refsIn found, and leaves no `${{`;
// what substitute refuses, refsIn refuses. A condition that parses
// prints (with only the parentheses it needs) and parses back to the same
// tree, evaluates without an error over any values, gives a boolean
// wherever an operator is, and compares literals as their values are
// equal.
func FuzzRefs(f *testing.F) {
	for _, s := range refSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := refsIn(s)
		if err == nil {
			for _, r := range rs {
				checkRoundTrip(t, r)
			}
		}
		if r, ok := wholeRef(s); ok {
			checkRoundTrip(t, r)
			if err != nil || len(rs) != 1 || !reflect.DeepEqual(rs[0], r) {
				t.Fatalf("%q is one reference %v, but refsIn says %v %v", s, r, rs, err)
			}
		}
		var looked []ref
		look := func(r ref) (any, error) {
			looked = append(looked, r)
			return "<" + r.String() + ">", nil
		}
		out, serr := substitute(s, look)
		switch {
		case serr != nil && err == nil:
			t.Fatalf("refsIn accepts %q (%v) but substitute fails: %v", s, rs, serr)
		case err == nil:
			if !reflect.DeepEqual(looked, rs) && !(len(looked) == 0 && len(rs) == 0) {
				t.Fatalf("%q: substitute looked up %v, refsIn found %v", s, looked, rs)
			}
			if str, ok := out.(string); !ok || strings.Contains(str, "${{") {
				t.Fatalf("%q substitutes to %#v", s, out)
			}
		}

		c, err := parseCond(s)
		if err != nil {
			return
		}
		c2, err := parseCond(s)
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("%q parses twice differently: %#v / %#v (%v)", s, c, c2, err)
		}
		for _, r := range c.refs() {
			checkRoundTrip(t, r)
		}
		if src := "${{ " + renderCond(c, 0) + " }}"; len(src) <= maxCondLen {
			back, err := parseCond(src)
			if err != nil || !reflect.DeepEqual(back, c) {
				t.Fatalf("%q prints as %q, which parses as %#v (%v), not %#v", s, src, back, err, c)
			}
		}
		v, err := c.eval(fuzzLookup)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if _, isOp := c.(condBinary); isOp {
			if _, ok := v.(bool); !ok {
				t.Fatalf("%q evaluates to %#v, not a boolean", s, v)
			}
		}
		checkLiteralComparisons(t, s, c)
	})
}

func checkRoundTrip(t *testing.T, r ref) {
	t.Helper()
	back, err := parsePath(r.String())
	if err != nil || !reflect.DeepEqual(back, r) {
		t.Fatalf("reference %#v prints as %q, which reads as %#v (%v)", r, r.String(), back, err)
	}
}

// fuzzLookup gives every reference a value of some kind.
func fuzzLookup(r ref) (any, error) {
	s := r.String()
	switch len(s) % 6 {
	case 0:
		return s, nil
	case 1:
		return float64(len(s)), nil
	case 2:
		return len(s)%4 == 1, nil
	case 3:
		return nil, nil
	case 4:
		return []any{s}, nil
	}
	return map[string]any{"k": s}, nil
}

// renderCond prints a condition with the parentheses its structure needs
// at level (0 ||, 1 &&, 2 unary, 3 operand).
func renderCond(c cond, level int) string {
	wrap := func(s string, need bool) string {
		if need {
			return "(" + s + ")"
		}
		return s
	}
	switch x := c.(type) {
	case condBinary:
		switch x.op {
		case "||":
			return wrap(renderCond(x.l, 0)+" || "+renderCond(x.r, 1), level > 0)
		case "&&":
			return wrap(renderCond(x.l, 1)+" && "+renderCond(x.r, 2), level > 1)
		}
		return wrap(renderCond(x.l, 3)+" "+x.op+" "+renderCond(x.r, 3), level > 2)
	case condNot:
		return wrap("!"+renderCond(x.c, 2), level > 2)
	case condPath:
		return x.r.String()
	case condLiteral:
		switch v := x.v.(type) {
		case nil:
			return "null"
		case bool:
			return strconv.FormatBool(v)
		case float64:
			return strconv.FormatFloat(v, 'g', -1, 64)
		case string:
			if strings.Contains(v, "'") {
				return `"` + v + `"`
			}
			return "'" + v + "'"
		}
	}
	panic(fmt.Sprintf("renderCond: %#v", c))
}

// checkLiteralComparisons: `a == b` of two literals is true exactly when
// they are the same value (numbers by value), != the opposite.
func checkLiteralComparisons(t *testing.T, s string, c cond) {
	t.Helper()
	switch x := c.(type) {
	case condNot:
		checkLiteralComparisons(t, s, x.c)
	case condBinary:
		checkLiteralComparisons(t, s, x.l)
		checkLiteralComparisons(t, s, x.r)
		l, lok := x.l.(condLiteral)
		r, rok := x.r.(condLiteral)
		if !lok || !rok || (x.op != "==" && x.op != "!=") {
			return
		}
		if ls, ok := l.v.(string); ok && !utf8.ValidString(ls) {
			return // a workflow file is UTF-8
		}
		if rs, ok := r.v.(string); ok && !utf8.ValidString(rs) {
			return
		}
		want := l.v == r.v
		if x.op == "!=" {
			want = !want
		}
		if got, _ := x.eval(fuzzLookup); got != want {
			t.Fatalf("%q: %s evaluates to %v", s, renderCond(x, 0), got)
		}
	}
}

// workflowSeeds are workflow files: the examples, the tests' valid
// workflow, and shapes of the errors validation reports.
func workflowSeeds(tb testing.TB) []string {
	seeds := []string{
		validWorkflow,
		subWorkflow,
		"version: 1\nname: w\nsteps:\n  - id: a\n    tool: fs_glob\n    argz: {}\n",
		"version: 1\nname: w\nsteps:\n  - {id: a, tool: fs_glob}\n  - {id: a, tool: fs_glob}\n",
		"version: 1\nname: w\nsteps:\n  - id: b\n    tool: fs_read\n    args: {path: \"${{ steps.c.output }}\"}\n  - {id: c, tool: git_status}\n",
		"version: 1\nname: w\nparams: {p: {type: integer, default: 2.5}}\nsteps:\n  - {id: a, workflow: sub.yaml, params: {target: 3}}\noutputs: {o: \"${{ steps.a.output }}\"}\n",
		"version: 1\nname: w\nsteps:\n  - id: a\n    agent: summarize ${{ item }}\n    foreach: [1, 2]\n    retry: {attempts: 3, delay: 2s}\n    timeout: 30s\n    when: ${{ true }}\n",
	}
	files, _ := filepath.Glob("../../examples/workflows/*.yaml")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, string(b))
	}
	return seeds
}

// FuzzValidate: workflow.Parse never panics; every problem it reports is
// a *gate.PositionError of the file; an accepted workflow parses again to
// the same workflow, the published JSON Schema accepts it (as read), and what
// validation promises holds of it: steps with unique ids and one kind
// each, a condition that parses, and references only to declared params,
// earlier steps, and item inside a foreach.
func FuzzValidate(f *testing.F) {
	for _, s := range workflowSeeds(f) {
		f.Add([]byte(s))
	}
	sch := compileSchema(f)
	o := testOptions(map[string]string{"sub.yaml": subWorkflow})
	f.Fuzz(func(t *testing.T, data []byte) { fuzzValidate(t, data, o, sch) })
}

// fuzzValidate checks one input of FuzzValidate.
func fuzzValidate(t *testing.T, data []byte, o Options, sch *jsonschema.Schema) {
	w, err := Parse("w.yaml", data, o)
	if err != nil {
		for _, e := range leafErrors(err) {
			var pe *gate.PositionError
			if !errors.As(e, &pe) || pe.Source != "w.yaml" && !strings.HasPrefix(pe.Source, "sub.yaml") {
				t.Fatalf("error %T %v is not a position in the file", e, e)
			}
		}
		return
	}
	w2, err := Parse("w.yaml", data, o)
	if err != nil {
		t.Fatalf("accepted once, then: %v", err)
	}
	w.pos, w2.pos = nil, nil
	if !reflect.DeepEqual(w, w2) {
		t.Fatalf("two parses differ: %#v / %#v", w, w2)
	}
	// The published schema accepts the workflow as warden read it (a
	// YAML scalar read into a string field is a string).
	b, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("accepted, but the published schema refuses %s: %v", b, err)
	}
	checkAccepted(t, w)
}

func leafErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leafErrors(e)...)
		}
		return out
	}
	return []error{err}
}

// checkAccepted re-checks, independently of the checker, what an accepted
// workflow promises.
func checkAccepted(t *testing.T, w *Workflow) {
	t.Helper()
	if w.Version != 1 || strings.TrimSpace(w.Name) == "" || len(w.Steps) == 0 {
		t.Fatalf("accepted: %#v", w)
	}
	index := map[string]int{}
	for i, s := range w.Steps {
		if _, dup := index[s.ID]; dup || !stepID.MatchString(s.ID) || s.Kind() == "" {
			t.Fatalf("accepted step %d: %#v", i, s)
		}
		index[s.ID] = i
	}
	checkRefs := func(where string, step int, item bool, strs []string) {
		for _, s := range strs {
			rs, err := refsIn(s)
			if err != nil {
				t.Fatalf("%s: %q: %v", where, s, err)
			}
			for _, r := range rs {
				switch r.root {
				case "params":
					if _, ok := w.Params[r.name]; !ok {
						t.Fatalf("%s: %s names no param", where, r)
					}
				case "steps":
					if j, ok := index[r.name]; !ok || j >= step {
						t.Fatalf("%s: %s is not an earlier step's", where, r)
					}
				case "item":
					if !item {
						t.Fatalf("%s: %s outside a foreach", where, r)
					}
				}
			}
		}
	}
	for i, s := range w.Steps {
		item := s.Foreach != nil
		where := "step " + s.ID
		checkRefs(where, i, item, stringsIn(s.Args))
		checkRefs(where, i, item, stringsIn(s.Params))
		checkRefs(where, i, item, []string{s.Agent})
		if f, ok := s.Foreach.(string); ok {
			if _, whole := wholeRef(f); !whole {
				t.Fatalf("%s: foreach %q", where, f)
			}
			checkRefs(where, i, false, []string{f})
		} else {
			checkRefs(where, i, false, stringsIn(s.Foreach))
		}
		if s.When != "" {
			c, err := parseCond(s.When)
			if err != nil {
				t.Fatalf("%s: when %q: %v", where, s.When, err)
			}
			for _, r := range c.refs() {
				checkRefs(where, i, false, []string{"${{ " + r.String() + " }}"})
			}
		}
	}
	var outs []string
	for _, o := range w.Outputs {
		outs = append(outs, o)
	}
	checkRefs("outputs", len(w.Steps), false, outs)
}

// stringsIn lists the strings in a decoded YAML value.
func stringsIn(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case map[string]any:
		var out []string
		for _, e := range x {
			out = append(out, stringsIn(e)...)
		}
		return out
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, stringsIn(e)...)
		}
		return out
	}
	return nil
}
