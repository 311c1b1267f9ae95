package hostfuncs

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		in, tool, args, problem string
	}{
		{`{"tool":"system","args":{"operation":"get_info"}}`, "system", `{"operation":"get_info"}`, ""},
		{` {"args":[1],"tool":"x"} `, "x", `[1]`, ""}, // args' shape is the gate's to refuse
		{`{"tool":"x","args":{},"tool":"y"}`, "x", "", "given twice"},
		{`{"tool":"x","args":{},"args":{}}`, "x", "", "given twice"},
		{`{"tool":"x","args":{},"Args":{}}`, "x", "", `unknown field "Args"`},
		{`{"tool":"x"}`, "x", "", `"args" is missing`},
		{`{"args":{}}`, "", "", `"tool" is missing`},
		{`{"tool":"","args":{}}`, "", "", `"tool" is empty`},
		{`{"tool":null,"args":{}}`, "", "", `not a string`},
		{`{"tool":"x","args":{}} x`, "x", "", "after the request"},
		{`{"tool":"x","args":{`, "x", "", "not valid JSON"},
		{`{"tool":"x",`, "x", "", "not valid JSON"},
		{`[]`, "", "", "not a JSON object"},
		{``, "", "", "not JSON"},
		{"{\"tool\":\"x\xff\",\"args\":{}}", "", "", "UTF-8"},
	}
	for _, tc := range tests {
		tool, args, problem := parseRequest([]byte(tc.in))
		if tool != tc.tool || string(args) != tc.args || (tc.problem == "") != (problem == "") || !strings.Contains(problem, tc.problem) {
			t.Errorf("parseRequest(%q) = %q, %q, %q; want %q, %q, %q", tc.in, tool, args, problem, tc.tool, tc.args, tc.problem)
		}
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{`{"tool":"system","args":{"operation":"get_info"}}`, `{"tool":"a","tool":"b"}`, `[`, `{"args":{"a":{"b":[1,2,{}]}},"tool":"t"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		tool, args, problem := parseRequest(in)
		if problem == "" && (tool == "" || !json.Valid(args)) {
			t.Fatalf("accepted %q as tool %q args %q", in, tool, args)
		}
		if problem != "" && args != nil {
			t.Fatalf("problem %q but args %q", problem, args)
		}
	})
}

func TestHandleWithoutGate(t *testing.T) {
	// No guest in the context: INTERNAL, made here.
	res := handle(context.Background(), []byte(`{"tool":"system","args":{}}`), 27)
	if res.Success || res.Error == nil || res.Error.Code != tool.CodeInternal || res.CallID == "" || string(res.Data) != "{}" || res.Warnings == nil {
		t.Fatalf("%+v", res)
	}
	// Oversize: WASM_LIMIT without reading it (no gate needed to refuse).
	ctx := gate.WithGuest(context.Background(), &gate.Guest{Tool: "x", Parent: &tool.Call{}})
	res = handle(ctx, nil, maxRequestBytes+1)
	if res.Success || res.Error == nil || res.Error.Code != tool.CodeWasmLimit {
		t.Fatalf("%+v", res)
	}
	// A guest without a gate: the call cannot be made: INTERNAL.
	res = handle(ctx, []byte(`{"tool":"system","args":{}}`), 27)
	if res.Success || res.Error == nil || res.Error.Code != tool.CodeInternal || res.Tool != "system" {
		t.Fatalf("%+v", res)
	}
}

// FuzzParseCanonical: what the fast path reads, the general one reads the
// same way.
func FuzzParseCanonical(f *testing.F) {
	for _, s := range []string{
		`{"tool":"system","args":{"operation":"get_info"}}`, " {\"tool\" :\t\"x\" ,\n\"args\": [1] } ", `{"tool":"x","args":{}, "y":{}}`,
		`{"tool":"x","args":{"a":1}`, `{"tool":"x","args":1}}`, `{"tool":"","args":{}}`, `{"tool":"a\"b","args":{}}`, `{"toolx":"a","args":{}}`,
		`{"tool":"x","args":"}"}`, `{"tool":"x","args":{}}}`, `{"tool":"x","args":}`, `{"tool":"é","args":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !utf8.Valid(in) {
			return
		}
		tool, args, ok := parseCanonical(in)
		if !ok {
			return
		}
		gtool, gargs, problem := parseGeneral(in)
		if problem != "" || gtool != tool || !bytes.Equal(gargs, args) {
			t.Fatalf("%q: fast %q %q; general %q %q %q", in, tool, args, gtool, gargs, problem)
		}
	})
}

func TestParseCanonicalTakesHelperRequests(t *testing.T) {
	for _, in := range []string{
		`{"tool":"system","args":{"operation":"get_info"}}`,
		`{"tool":"write_memory","args":{"key":"k","namespace":"notes","value":"\u003cb\u003e \"q\" \\ é"}}`,
		`{"tool":"t","args":{}}`,
	} {
		if _, _, ok := parseCanonical([]byte(in)); !ok {
			t.Errorf("the fast path refused %s", in)
		}
	}
}

// FuzzEnvelopeData: the data of the binary envelope is what json.Marshal
// writes for it inside the JSON envelope, and fails where it fails.
func FuzzEnvelopeData(f *testing.F) {
	for _, s := range []string{`{"a" : [1, 2]}`, ` "<b>&\u2028" `, "\"\xe2\x80\xa8\xe2\x80\xa9\"", `{`, ``, `null`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, werr := json.Marshal(json.RawMessage(data))
		got, gerr := envelopeData(data)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%q: %q, %v; json.Marshal: %q, %v", data, got, gerr, want, werr)
		}
	})
}
