package jsonw

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand"
	"testing"
)

type inner struct {
	A string   `json:"a"`
	B []string `json:"b,omitempty"`
}

type record struct {
	S  string          `json:"s"`
	O  string          `json:"o,omitempty"`
	L  []string        `json:"l"`
	OL []string        `json:"ol,omitempty"`
	R  json.RawMessage `json:"r,omitempty"`
	T  bool            `json:"t,omitempty"`
	In *inner          `json:"in,omitempty"`
	I  int64           `json:"i"`
	OI int64           `json:"oi,omitempty"`
	U  uint64          `json:"u,omitempty"`
	V  any             `json:"v,omitempty"`
}

func (r *record) write() ([]byte, error) {
	o := NewObject(64)
	o.String("s", r.S)
	o.OptString("o", r.O)
	o.Strings("l", r.L)
	o.OptStrings("ol", r.OL)
	o.OptRaw("r", r.R)
	o.OptTrue("t", r.T)
	if r.In != nil {
		o.Open("in")
		o.String("a", r.In.A)
		o.OptStrings("b", r.In.B)
		o.Close()
	}
	o.Int("i", r.I)
	o.OptInt("oi", r.OI)
	o.OptUint("u", r.U)
	if r.V != nil {
		o.Value("v", r.V)
	}
	return o.Bytes()
}

var (
	strs = []string{"", "plain", "a b", `q"uote`, `back\slash`, "nl\n\t\r\x00\x1f\x7f", "<&>", "é世", "\xff", "\u2028", "x\u2029y"}
	raws = []string{`{"a":1}`, `{ "a" : 1 }`, `[1,"<"]`, "\"\u2028\"", `{"a":`, `nope`, `"\u00e9\""`, "{\"a\":\"\xff\"}", `1 2`}
	vals = []any{nil, 1.5, math.Inf(1), map[string]int{"z": 1, "a": 2}, []any{"<", nil}}
)

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.Intn(len(xs))] }

func list(rng *rand.Rand) []string {
	switch n := rng.Intn(4); n {
	case 0:
		return nil
	default:
		l := make([]string, n-1)
		for i := range l {
			l[i] = pick(rng, strs)
		}
		return l
	}
}

// TestObjectIsMarshal: what an Object writes is what json.Marshal writes
// for the struct with the same fields, and it fails where Marshal does.
func TestObjectIsMarshal(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for range 50000 {
		r := record{S: pick(rng, strs), O: pick(rng, strs), L: list(rng), OL: list(rng), T: rng.Intn(2) == 0,
			I: rng.Int63n(3) - 1, OI: rng.Int63n(2), U: uint64(rng.Intn(2)) << 63, V: pick(rng, vals)}
		if rng.Intn(3) > 0 {
			r.R = json.RawMessage(pick(rng, raws))
		}
		if rng.Intn(2) == 0 {
			r.In = &inner{A: pick(rng, strs), B: list(rng)}
		}
		want, werr := json.Marshal(r)
		got, gerr := r.write()
		if (werr != nil) != (gerr != nil) || werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("%#v:\n Object  %s (%v)\n Marshal %s (%v)", r, got, gerr, want, werr)
		}
	}
}
