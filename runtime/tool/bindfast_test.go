package tool

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// flatArgs is an argument struct bindFast binds: every kind it sets.
type flatArgs struct {
	Path    string   `json:"path"`
	Mode    string   `json:"mode,omitempty"`
	Force   bool     `json:"force,omitempty"`
	Count   int      `json:"count,omitempty"`
	Small   int8     `json:"small,omitempty"`
	Size    uint32   `json:"size,omitempty"`
	Ratio   float64  `json:"ratio,omitempty"`
	Narrow  float32  `json:"narrow,omitempty"`
	Names   []string `json:"names,omitempty"`
	Limit   *int     `json:"limit,omitempty"`
	Recurse *bool    `json:"recurse,omitempty"`
	Kind    kindName `json:"kind,omitempty"`
	Untag   string
	hidden  string //nolint:unused // encoding/json ignores it
}

type kindName string

// declined are argument structs bindFast leaves to encoding/json.
type (
	withNumber struct {
		N json.Number `json:"n"`
	}
	withDuration struct {
		D time.Duration `json:"d"`
		T time.Time     `json:"t"`
	}
	withString struct {
		N int `json:"n,string"`
	}
	withEmbedded struct {
		flatInner
		X string `json:"x"`
	}
	flatInner struct {
		Y string `json:"y"`
	}
	withMap struct {
		M map[string]string `json:"m"`
	}
	withBytes struct {
		B []byte `json:"b"`
	}
	withOddTag struct {
		A string `json:"a b"`
	}
)

// bindSeeds are arguments for the structs above: each kind's values, its
// edges (overflow, a fraction for an integer, null, an empty list) and a
// value of the wrong type.
var bindSeeds = []string{
	`{}`, `{"path":"a b","mode":"x","force":true,"count":-3,"small":127,"size":4294967295,"ratio":1.5e3,"narrow":-0.25}`,
	`{"names":["a","b"],"limit":0,"recurse":false,"kind":"k","Untag":"u"}`, `{"names":[]}`, `{"names":null,"limit":null,"path":null}`,
	`{"small":128}`, `{"small":-129}`, `{"size":-1}`, `{"size":4294967296}`, `{"count":1.0}`, `{"count":1e2}`, `{"count":9223372036854775808}`,
	`{"narrow":1e39}`, `{"ratio":1e400}`, `{"path":1}`, `{"force":"true"}`, `{"names":["a",null]}`, `{"names":[1]}`, `{"names":"a"}`,
	`{"limit":"1"}`, `{"recurse":1}`, `{"count":-0}`, `{"ratio":-0.0}`, `{"path":"\u00e9\n"}`,
	`{"n":"12"}`, `{"n":12}`, `{"n":"x"}`, `{"d":5,"t":"2024-01-02T03:04:05Z"}`, `{"x":"1","y":"2"}`, `{"m":{"a":"b"}}`,
	`{"b":"aGk="}`, `{"a":"x"}`, `{"a b":"x"}`,
}

// bindTargets makes a fresh value of each argument struct.
var bindTargets = []func() any{
	func() any { return new(flatArgs) }, func() any { return new(withNumber) }, func() any { return new(withDuration) },
	func() any { return new(withString) }, func() any { return new(withEmbedded) }, func() any { return new(withMap) },
	func() any { return new(withBytes) }, func() any { return reflect.New(withDup).Interface() }, func() any { return new(withOddTag) },
}

// withDup is a struct with two fields named "a" (made at run time: vet
// refuses the duplicate tag written out).
var withDup = reflect.StructOf([]reflect.StructField{
	{Name: "A", Type: reflect.TypeFor[string](), Tag: `json:"a"`},
	{Name: "B", Type: reflect.TypeFor[string](), Tag: `json:"a"`},
})

// sameAsJSON checks that bindFast, where it binds raw into a fresh value
// from target, binds it as encoding/json (strict) does, and never binds
// what encoding/json refuses.
func sameAsJSON(t *testing.T, raw []byte, target func() any) bool {
	t.Helper()
	obj, compact, derr := DecodeArgs(raw)
	if derr != nil {
		return false
	}
	raw = compact // what a call holds and encoding/json decodes (empty arguments are {})
	fast := target()
	if !bindFast(obj, fast) {
		if !reflect.ValueOf(fast).Elem().IsZero() {
			t.Fatalf("%s: bindFast declined and left %+v", raw, fast)
		}
		return false
	}
	slow := target()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(slow); err != nil {
		t.Fatalf("%s into %T: bindFast bound %+v, encoding/json refuses: %v", raw, fast, fast, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%s into %T: bindFast bound %+v, encoding/json %+v", raw, fast, fast, slow)
	}
	return true
}

// TestBindFastSameAsJSON: binding the decoded arguments gives what
// encoding/json gives from the text; a struct with a field of a type that
// decodes itself, a ",string" option, an embedded struct, a map, bytes, a
// name given twice or an odd tag name is left to encoding/json; Bind's
// refusals are unchanged.
func TestBindFastSameAsJSON(t *testing.T) {
	bound := map[string]int{}
	for _, target := range bindTargets {
		for _, s := range bindSeeds {
			if sameAsJSON(t, []byte(s), target) {
				bound[reflect.TypeOf(target()).Elem().Name()]++
			}
		}
	}
	if bound["flatArgs"] < 5 {
		t.Errorf("bindFast bound flatArgs %d times, want at least 5 (%v)", bound["flatArgs"], bound)
	}
	for name, n := range bound {
		if name != "flatArgs" && n > 0 {
			t.Errorf("bindFast bound %s, which it must leave to encoding/json", name)
		}
	}
	if bindPlan(withDup) != nil || bindPlan(reflect.TypeFor[withOddTag]()) != nil {
		t.Errorf("a struct with a name given twice or an odd tag name has a plan")
	}
	// Refusals through Bind, as before.
	for _, s := range []string{`{"small":128}`, `{"path":1}`, `{"Path":"x"}`, `{"nope":1}`, `{"names":[1]}`} {
		obj, _, derr := DecodeArgs([]byte(s))
		if derr != nil {
			t.Fatal(derr)
		}
		c := &Call{}
		c.SetArgs([]byte(s), obj)
		if err := c.Bind(new(flatArgs)); err == nil || AsError(err).Code != CodeInvalidInput {
			t.Errorf("%s: Bind = %v, want INVALID_INPUT", s, err)
		}
	}
}

// FuzzBindFast: bindFast never binds what encoding/json refuses, and
// binds what it binds as encoding/json does.
func FuzzBindFast(f *testing.F) {
	for _, s := range bindSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, target := range bindTargets {
			sameAsJSON(t, raw, target)
		}
	})
}
