package decode

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// fastSeeds are JSON texts the fast path must decode as the token walk
// does, or leave to it: each of JSON's corners, and the hostile inputs
// the walk refuses (a duplicate key, one spelled with an escape, too
// deep, a control character, a lone surrogate, a number JSON has not).
var fastSeeds = []string{
	`{"operation":"get_info"}`, ` { "path" : "a b\tc" , "n" : [ 1 , -0.5e+3 , true , false , null ] } `,
	`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":{"b":1,"b":1}}`, `[{"x":1},{"x":1}]`,
	`{"s":"\u00e9\ud800\udc00\ud800 \"\\\/\b\f\n\r\t"}`, `{"s":"\ud800"}`, `"\u00"`, `"\x41"`, "\"a\tb\"", "\"a\\\tb\"",
	`01`, `-`, `-0`, `1.`, `.5`, `1e`, `1e+`, `1E-7`, `+1`, `1.5e3x`, `0x10`, `NaN`, `Infinity`, `-01`,
	`tru`, `truex`, `nul`, `[1true]`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a"}`, `{"a":}`, `{1:2}`, `{'a':1}`,
	`{} {}`, `{}x`, `"x" 1`, ``, ` `, `[]`, `{}`, `[[]]`, "\ufeff{}", "{}\n", `{"a":[1,{"b":null}],"c":"\u00e9"}`,
	strings.Repeat("[", 8) + strings.Repeat("]", 8), strings.Repeat("[", 9) + strings.Repeat("]", 9),
	strings.Repeat(`{"a":`, 9) + "1" + strings.Repeat("}", 9), `[[[[[[[[1]]]]]]]]`, `[[[[[[[[[1]]]]]]]]]`,
}

// sameAsWalk checks that the fast path decodes data as the token walk
// does, or gives up on it.
func sameAsWalk(t *testing.T, data []byte, maxDepth int) {
	t.Helper()
	if !utf8.Valid(data) {
		return // JSON refuses it before either runs
	}
	fast, ok := fastJSON(data, maxDepth)
	if !ok {
		return
	}
	slow, err := walkJSON("f.json", data, maxDepth)
	if err != nil {
		t.Fatalf("the fast path accepted %q, which the walk refuses: %v", data, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q: the fast path decoded %#v, the walk %#v", data, fast, slow)
	}
}

// TestFastJSONSameAsWalk: what the fast path accepts, the walk accepts
// too, as the same value; what the walk refuses, JSON still refuses with
// the walk's message.
func TestFastJSONSameAsWalk(t *testing.T) {
	for _, s := range fastSeeds {
		sameAsWalk(t, []byte(s), 8)
		_, fastOK := fastJSON([]byte(s), 8)
		_, walkErr := walkJSON("f.json", []byte(s), 8)
		if walkErr == nil && !fastOK {
			t.Errorf("%q: the walk accepts it and the fast path gave up (it should decode it)", s)
		}
		_, err := JSON("f.json", []byte(s), &Limits{MaxDepth: 8})
		if (err == nil) != (walkErr == nil) || err != nil && err.Error() != walkErr.Error() {
			t.Errorf("%q: JSON says %v, the walk %v", s, err, walkErr)
		}
	}
}

// FuzzJSONFast: the fast path never accepts what the token walk refuses,
// and decodes what it accepts to the same value.
func FuzzJSONFast(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsWalk(t, data, 8)
	})
}
