package warden

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// The fast paths (fastread.go, fastwrite.go) against encoding/json: the
// same result for what they handle, and they handle what warden sends.

// envelopeSeeds are envelopes as warden writes them and as they must not
// be misread.
var envelopeSeeds = []string{
	specEnvelope,
	`{"tool":"system","call_id":"01JDKZ8Q8K3V2S5X6Y7Z8A9B0C","success":true,"dry_run":false,"output":"linux/amd64, 2 CPUs","data":{"os":"linux","arch":"amd64","cpus":2,"nested":[1,2.5e-3,{"a":null}]},"warnings":[],"duration_ms":0,"audit_seq":12}`,
	`{"tool":"fs_read","call_id":"c","success":false,"dry_run":true,"output":"line1\nline2\t\"quoted\" \u003cb\u003e \ud83d\ude00 \ud83d é","data":{},"warnings":["w1","w\u00e9"],"error":{"code":"APPROVAL_REQUIRED","message":"m","approval":{"rule":"r","mode":"ask","failed":"no tty"}},"duration_ms":-3}`,
	` {"tool":"x","success":true} `,
	`{"tool":"x","Tool":"y"}`,
	`{"tool":"x","tool":"y"}`,
	`{"tool":"x","ſuccess":true}`,
	`{"tool":"x","data":null}`,
	`{"tool":"x","error":null}`,
	`{"tool":"x","warnings":null}`,
	`{"tool":"x","warnings":["a",null]}`,
	`{"tool":"x","duration_ms":1.5}`,
	`{"tool":"x","duration_ms":1e3}`,
	`{"tool":"x","duration_ms":99999999999999999999}`,
	`{"tool":"x","success":"yes"}`,
	`{"tool":"x","extra":{"deep":[[[[]]]]},"more":"\u0041"}`,
	`{"tool":"x"} trailing`,
	`{"tool":"x",}`,
	`{"tool":"x\u00"}`,
	"{\"tool\":\"x\x01\"}",
	"{\"tool\":\"\xff\xfe\"}",
	`{"tool":"\ud800\u0041"}`,
	`{"tool":"x","data":01}`,
	`{"tool":"x","data":-}`,
	`{"tool":"x","data":tru}`,
	`[1,2]`,
	`"string"`,
	``,
}

func FuzzDecodeEnvelope(f *testing.F) {
	for _, s := range envelopeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fast, ok := decodeEnvelopeFast(b)
		var want Envelope
		err := json.Unmarshal(b, &want)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("fast path accepted %q, which encoding/json refuses: %v", b, err)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("%q:\nfast  %#v\njson  %#v", b, fast, want)
		}
	})
}

func FuzzSkipValue(f *testing.F) {
	for _, s := range append(envelopeSeeds, `[]`, `[1,[2,{"a":[]}],"x"]`, `{"a" : { } }`, `-0.0e+1`, `1.`, `.5`, `-`, `0x1`, "\"\\u12\"", `{"a":1,,}`, `[1 2]`, "\v{}") {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end, ok := skipValue(b, 0)
		fast := ok && skipSpace(b, end) == len(b)
		if want := json.Valid(b); fast != want {
			t.Fatalf("skipValue(%q) = %v, json.Valid = %v", b, fast, want)
		}
	})
}

func TestSkipValueDepth(t *testing.T) {
	deep := strings.Repeat("[", maxFastDepth+1) + strings.Repeat("]", maxFastDepth+1)
	if _, ok := skipValue([]byte(deep), 0); ok {
		t.Error("skipValue followed nesting deeper than maxFastDepth")
	}
	ok := strings.Repeat("[", maxFastDepth) + strings.Repeat("]", maxFastDepth)
	if end, fine := skipValue([]byte(ok), 0); !fine || end != len(ok) {
		t.Error("skipValue refused nesting of maxFastDepth")
	}
	// encoding/json decides what the fast path gives up on.
	e, err := DecodeEnvelope([]byte(`{"tool":"x","success":true,"data":` + deep + `}`))
	if err != nil || string(e.Data) != deep {
		t.Fatalf("deep data: %v", err)
	}
}

// TestDecodeEnvelopeFastCovers: envelopes as warden writes them (encoding/
// json from tool.Result's fields, any strings) take the fast path.
func TestDecodeEnvelopeFastCovers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		in := struct {
			Envelope
			Sandbox  string `json:"sandbox,omitempty"`
			AuditSeq uint64 `json:"audit_seq,omitempty"`
		}{Envelope: Envelope{
			Tool: randString(r), CallID: randString(r), Success: r.IntN(2) == 0, DryRun: r.IntN(2) == 0,
			Output: randString(r), Warnings: []string{}, DurationMS: r.Int64N(1e6) - 10,
		}, Sandbox: randString(r), AuditSeq: r.Uint64N(1e9)}
		data, _ := json.Marshal(randValue(r, 3))
		in.Data = data
		for range r.IntN(3) {
			in.Warnings = append(in.Warnings, randString(r))
		}
		if r.IntN(2) == 0 {
			in.Error = &Error{Code: randString(r), Message: randString(r), Hint: randString(r)}
			if r.IntN(2) == 0 {
				in.Error.MissingGrants = []string{randString(r)}
				in.Error.Approval = &Approval{Rule: randString(r), Mode: randString(r)}
			}
		}
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		fast, ok := decodeEnvelopeFast(b)
		if !ok {
			t.Fatalf("the fast path gave up on %s", b)
		}
		var want Envelope
		if err := json.Unmarshal(b, &want); err != nil || !reflect.DeepEqual(fast, want) {
			t.Fatalf("%s:\nfast %#v\njson %#v (%v)", b, fast, want, err)
		}
	}
}

// encodeRequestReference is EncodeRequest through encoding/json only.
func encodeRequestReference(tool string, args any) ([]byte, error) {
	if tool == "" {
		return nil, errors.New("warden: empty tool name")
	}
	var raw json.RawMessage
	switch a := args.(type) {
	case nil:
		raw = json.RawMessage(`{}`)
	case json.RawMessage:
		raw = a
	case []byte:
		raw = a
	default:
		b, err := json.Marshal(args)
		if err != nil {
			return nil, fmt.Errorf("warden: arguments of %s: %w", tool, err)
		}
		raw = b
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return nil, fmt.Errorf("warden: arguments of %s must be a JSON object", tool)
	}
	return json.Marshal(Request{Tool: tool, Args: raw})
}

func FuzzEncodeRequestRaw(f *testing.F) {
	for _, s := range []string{`{}`, ` {"a" : [1, "x <b> & \u2028", {"c":true}]} `, "{\"s\":\"\xe2\x80\xa8\xe2\x80\xa9\"}", `{"a":1}x`, "\v{}", `[]`, `{"a":"\u00e9\\"}`} {
		f.Add("system", []byte(s))
	}
	f.Fuzz(func(t *testing.T, tool string, raw []byte) {
		want, werr := encodeRequestReference(tool, json.RawMessage(raw))
		got, gerr := EncodeRequest(tool, json.RawMessage(raw))
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("EncodeRequest(%q, %q) = %q, %v; encoding/json: %q, %v", tool, raw, got, gerr, want, werr)
		}
		if fast, ok := encodeRequestFast(tool, json.RawMessage(raw)); ok && (werr != nil || !bytes.Equal(fast, want)) {
			t.Fatalf("fast path: %q; encoding/json: %q, %v", fast, want, werr)
		}
	})
}

// TestEncodeRequestMaps: maps of arguments (any strings, numbers, nesting)
// encode as encoding/json encodes them, through the fast path.
func TestEncodeRequestMaps(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	check := func(tool string, args any, wantFast bool) {
		t.Helper()
		want, werr := encodeRequestReference(tool, args)
		got, gerr := EncodeRequest(tool, args)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("EncodeRequest(%q, %#v) = %q, %v; encoding/json: %q, %v", tool, args, got, gerr, want, werr)
		}
		if _, ok := encodeRequestFast(tool, args); ok != wantFast {
			t.Fatalf("fast path for %#v: %v, want %v", args, ok, wantFast)
		}
	}
	for range 2000 {
		m := map[string]any{}
		for range r.IntN(5) {
			m[randString(r)] = randValue(r, 3)
		}
		check(randString(r)+"x", m, true)
		ms := map[string]string{randString(r): randString(r), "operation": "get_info"}
		check("system", ms, true)
	}
	for _, f := range []float64{0, -0.0, 1, -1.5, 1e-7, 1e-6, 123456789, 1e20, 1e21, 1.5e300, math.SmallestNonzeroFloat64, math.MaxFloat64, 0.1 + 0.2} {
		check("t", map[string]any{"f": f}, true)
	}
	type custom struct{ A int }
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	for _, args := range []any{
		map[string]any{"nan": math.NaN()}, map[string]any{"inf": math.Inf(1)}, map[string]any{"s": custom{1}},
		map[string]any{"u": uint8(3)}, map[string]any(nil), map[string]string(nil), cyclic, custom{2}, []any{1},
	} {
		check("t", args, false)
	}
}

// randString is a string with what JSON escaping cares about.
func randString(r *rand.Rand) string {
	parts := []string{"a", "Z", "0", " ", "\"", "\\", "/", "<", ">", "&", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "€", "😀", "\u2028", "\u2029", "\xff", "\xe2\x80", "\ufffd", "\ud7ff"}
	var b strings.Builder
	for range r.IntN(8) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

// randValue is a value of the types arguments maps usually hold.
func randValue(r *rand.Rand, depth int) any {
	n := 7
	if depth == 0 {
		n = 5
	}
	switch r.IntN(n) {
	case 0:
		return nil
	case 1:
		return randString(r)
	case 2:
		return r.IntN(2) == 0
	case 3:
		return r.IntN(1<<20) - 1<<19
	case 4:
		return (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(60)-30))
	case 5:
		var a []any
		for range r.IntN(4) {
			a = append(a, randValue(r, depth-1))
		}
		return a
	default:
		m := map[string]any{}
		for range r.IntN(4) {
			m[randString(r)] = randValue(r, depth-1)
		}
		return m
	}
}

// binEnvelope builds a binary envelope (the layout of wasm-tools/README.md,
// "The buffer path").
func binEnvelope(flags byte, duration int64, fields ...any) []byte {
	b := []byte{flags}
	b = binary.LittleEndian.AppendUint64(b, uint64(duration))
	for _, f := range fields {
		switch v := f.(type) {
		case string:
			b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		case []string:
			b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
			for _, s := range v {
				b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
				b = append(b, s...)
			}
		}
	}
	return b
}

func TestDecodeBinaryEnvelope(t *testing.T) {
	b := binEnvelope(envDryRun|envError|envApproval, -3, "fs_write", "c1", "out", `{"k":"v"}`, []string{"w"},
		"APPROVAL_REQUIRED", "m", "h", []string{}, "r", "ask", "no tty")
	e, err := decodeBinaryEnvelope(b)
	want := Envelope{Tool: "fs_write", CallID: "c1", DryRun: true, Output: "out", Data: json.RawMessage(`{"k":"v"}`), Warnings: []string{"w"},
		Error: &Error{Code: "APPROVAL_REQUIRED", Message: "m", Hint: "h", Approval: &Approval{Rule: "r", Mode: "ask", Failed: "no tty"}}, DurationMS: -3}
	if err != nil || !reflect.DeepEqual(e, want) {
		t.Fatalf("got %#v, %v\nwant %#v", e, err, want)
	}
	e, err = decodeBinaryEnvelope(binEnvelope(envSuccess|envNoWarnings, 0, "t", "", "", "null", []string{}))
	if err != nil || e.Warnings != nil || string(e.Data) != "null" || !e.Success {
		t.Fatalf("got %#v, %v", e, err)
	}
	if cap(e.Data) != len(e.Data) { // an append to it must not reach the rest of the envelope
		t.Fatal("Data's capacity reaches past it")
	}
	// Every truncation, and trailing bytes, are refused.
	for i := range b {
		if _, err := decodeBinaryEnvelope(b[:i]); err == nil {
			t.Fatalf("truncated at %d: accepted", i)
		}
	}
	if _, err := decodeBinaryEnvelope(append(b, 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
}

func FuzzDecodeBinaryEnvelope(f *testing.F) {
	f.Add(binEnvelope(envSuccess, 1, "t", "c", "o", "{}", []string{"a", "b"}))
	f.Add(binEnvelope(envError|envApproval, 1, "t", "c", "o", "{}", []string{}, "X", "m", "h", []string{"g"}, "r", "m", "f"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeBinaryEnvelope(b) // never panics
	})
}
