package tool

import (
	"strings"
	"testing"
)

// reviewHostile are argument texts a hostile caller might send to make the
// capability check and the tool read different values: a key spelled
// twice (once with an escape), case variants, NUL in keys, a BOM,
// trailing garbage, numbers at and past the edges of each field's type,
// surrogates, deep nesting.
var reviewHostile = []string{
	`{"path":"a","\u0070ath":"b"}`, `{"\u0070ath":"b","path":"a"}`, `{"path":"a","Path":"b"}`, `{"PATH":"b"}`, `{"pat\u0068":"x"}`,
	`{"path\u0000":"x"}`, `{"path":"a\u0000b"}`, "\ufeff{\"path\":\"a\"}", `{"path":"a"}x`, `{"path":"a"} {"path":"b"}`,
	`{"path":"a"}` + "\n" + `{"path":"b"}`, `{"count":1e400}`, `{"count":-0}`, `{"count":9223372036854775807}`,
	`{"count":9223372036854775808}`, `{"count":-9223372036854775808}`, `{"count":1E2}`, `{"count":10e-1}`, `{"size":-0}`,
	`{"size":0.0}`, `{"ratio":1e-400}`, `{"ratio":-1e308}`, `{"ratio":2e308}`, `{"narrow":3.4028235e38}`, `{"narrow":3.4028236e38}`,
	`{"narrow":1e-46}`, `{"path":"\ud800"}`, `{"path":"\udc00\ud800"}`, `{"path":"\ud83d\ude00"}`, `{"path":"\u212a"}`,
	`{"names":["a","\u0000"]}`, `{"names":[]}`, `{"names":null}`, `{"names":{}}`, `{"limit":null,"limit":1}`,
	`{"path":"` + strings.Repeat("a", 5000) + `"}`, `{"Untag":"u","untag":"v"}`, `{"untag":"v"}`, `{"hidden":"h"}`,
	`{"kind":"\u006b"}`, `{"force":true,"force":false}`, `{"force":null}`, `{"recurse":null}`, `{"small":-128}`, `{"small":"1"}`,
	`{"path":"/etc/passwd","names":["/etc/shadow"]}`, `{"path":"\/etc\/passwd"}`, `{"path":"a\\\"b"}`,
}

// TestReviewBindHostile: for each hostile text, the fast decoder and the
// fast binder give the tool exactly what encoding/json (strict) gives it
// from the compact text, or leave it to encoding/json.
func TestReviewBindHostile(t *testing.T) {
	for _, s := range reviewHostile {
		for _, target := range bindTargets {
			sameAsJSON(t, []byte(s), target)
		}
		obj, _, derr := DecodeArgs([]byte(s))
		if derr != nil {
			continue
		}
		c := &Call{}
		c.SetArgs([]byte(s), obj)
		var a flatArgs
		if err := c.Bind(&a); err == nil {
			if p, ok := obj["path"].(string); ok && a.Path != p {
				t.Errorf("%s: the decoded path is %q, the tool's %q", s, p, a.Path)
			}
		}
	}
}

// reviewArgs has the field types flatArgs leaves out: pointers to named
// and narrow types, lists of a named string, unsigned and narrow kinds.
type reviewArgs struct {
	Path  *kindName  `json:"path"`
	Names []kindName `json:"names"`
	Count *int16     `json:"count"`
	Size  uint8      `json:"size"`
	Ratio *float32   `json:"ratio"`
	Force *bool      `json:"force"`
	Small uint       `json:"small"`
	Kind  string     `json:"kind"`
	Dash  string     `json:"-,"`
	Skip  string     `json:"-"`
}

// FuzzReviewBind: bindFast binds reviewArgs and flatArgs as encoding/json
// does, from the hostile texts on.
func FuzzReviewBind(f *testing.F) {
	for _, s := range append(reviewHostile, bindSeeds...) {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"-":"x","path":"p","names":["a"],"count":-32768,"size":255,"ratio":1.5,"force":false,"small":0}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		sameAsJSON(t, raw, func() any { return new(reviewArgs) })
		sameAsJSON(t, raw, func() any { return new(flatArgs) })
	})
}
