package jsontop

import (
	"encoding/json"
	"slices"
	"testing"
)

// FuzzStrings: the one-pass reader agrees with encoding/json on every
// valid JSON document.
func FuzzStrings(f *testing.F) {
	for _, s := range []string{
		`{"a":"x","b":1}`, `{"a":"x","a":"y"}`, `{"\u0061":"x"}`, `{"a":"\u00e9\ud800"}`, `{"a":{"a":"n"},"b":[1,"]"]}`,
		`{}`, `[]`, `"a"`, `{"a":"x" ,"b":"y"}`, "{\"a\":\"\xff\"}", `{"b":"}","a":"{"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		if !json.Valid(obj) {
			return
		}
		got, want := Strings(obj, "a", "b"), stringsSlow(obj, []string{"a", "b"})
		if !slices.Equal(got, want) {
			t.Fatalf("Strings(%q) = %q, encoding/json reads %q", obj, got, want)
		}
	})
}

func TestMembers(t *testing.T) {
	obj := []byte(`{"a":[1,{"x":"]}"}],"b\"c":"q\"","d":null}`)
	var names, values []string
	ok := Members(obj, func(n Name, start, end int) bool {
		names = append(names, string(n.raw))
		values = append(values, string(obj[start:end]))
		return true
	})
	if !ok || !slices.Equal(values, []string{`[1,{"x":"]}"}]`, `"q\""`, `null`}) || len(names) != 3 {
		t.Errorf("Members = %v %q %q", ok, names, values)
	}
	for _, bad := range []string{`{"a":1 }`, `{"a":1,}`, `{"a"}`, `{"a":"x`, `[1]`, `{"a":1}x`} {
		if Members([]byte(bad), func(Name, int, int) bool { return true }) {
			t.Errorf("Members(%s) = true", bad)
		}
	}
}
