package warden

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// specEnvelope is the example of docs/envelope.md.
const specEnvelope = `{
  "tool": "fs_write", "call_id": "c1", "success": false, "dry_run": false,
  "output": "human/model-readable text",
  "data": {"k": "v"},
  "warnings": ["overwrites an existing file"],
  "error": { "code": "CAPABILITY_DENIED", "message": "needs fs.write:notes/todo.md", "hint": "needs the grant fs.write:notes/**", "missing_grants": ["fs.write:notes/**"] },
  "duration_ms": 3
}`

func TestDecodeEnvelopeSpecShape(t *testing.T) {
	e, err := DecodeEnvelope([]byte(specEnvelope))
	if err != nil {
		t.Fatal(err)
	}
	want := Envelope{
		Tool: "fs_write", CallID: "c1", Output: "human/model-readable text",
		Data:       json.RawMessage(`{"k": "v"}`),
		Warnings:   []string{"overwrites an existing file"},
		Error:      &Error{Code: "CAPABILITY_DENIED", Message: "needs fs.write:notes/todo.md", Hint: "needs the grant fs.write:notes/**", MissingGrants: []string{"fs.write:notes/**"}},
		DurationMS: 3,
	}
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("got %+v\nwant %+v", e, want)
	}
	var werr *Error
	if err := e.Err(); !errors.As(err, &werr) || werr.Code != "CAPABILITY_DENIED" {
		t.Fatalf("Err() = %v", err)
	}
	if got := e.Err().Error(); got != "CAPABILITY_DENIED: needs fs.write:notes/todo.md (needs the grant fs.write:notes/**)" {
		t.Fatalf("Error() = %q", got)
	}
}

func TestEnvelopeRoundTripFieldNames(t *testing.T) {
	b, err := json.Marshal(Envelope{Tool: "system", CallID: "x", Success: true, Data: json.RawMessage(`{}`), Warnings: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tool", "call_id", "success", "dry_run", "output", "data", "warnings", "duration_ms"} {
		if _, ok := m[k]; !ok {
			t.Errorf("marshalled envelope lacks %q: %s", k, b)
		}
	}
	if _, ok := m["error"]; ok {
		t.Errorf("successful envelope has an error field: %s", b)
	}
}

func TestDecodeEnvelopeRefusesGarbage(t *testing.T) {
	for _, in := range []string{"", "  ", "not json", `{"success":false}`, `[1,2]`} {
		if _, err := DecodeEnvelope([]byte(in)); err == nil {
			t.Errorf("DecodeEnvelope(%q) accepted it", in)
		}
	}
	if _, err := DecodeEnvelope(nil); !errors.Is(err, ErrNoEnvelope) {
		t.Errorf("empty answer: %v, want ErrNoEnvelope", err)
	}
}

func TestErrWithoutErrorObject(t *testing.T) {
	var werr *Error
	if err := (Envelope{Tool: "x"}).Err(); !errors.As(err, &werr) || werr.Code != "TOOL_ERROR" {
		t.Fatalf("got %v", err)
	}
	if err := (Envelope{Tool: "x", Success: true}).Err(); err != nil {
		t.Fatalf("success: %v", err)
	}
}

func TestEncodeRequest(t *testing.T) {
	tests := []struct {
		name string
		args any
		want string
		bad  bool
	}{
		{"nil", nil, `{"tool":"t","args":{}}`, false},
		{"map", map[string]any{"operation": "get_info"}, `{"tool":"t","args":{"operation":"get_info"}}`, false},
		{"struct", struct {
			Path string `json:"path"`
		}{"a.txt"}, `{"tool":"t","args":{"path":"a.txt"}}`, false},
		{"raw", json.RawMessage(`{"a":1}`), `{"tool":"t","args":{"a":1}}`, false},
		{"bytes", []byte(`{"a":[1,2]}`), `{"tool":"t","args":{"a":[1,2]}}`, false},
		{"array", []int{1}, "", true},
		{"string", "x", "", true},
		{"bad raw", json.RawMessage(`{`), "", true},
		{"unmarshalable", map[string]any{"f": func() {}}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := EncodeRequest("t", tc.args)
			if tc.bad {
				if err == nil {
					t.Fatalf("accepted: %s", b)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Fatalf("got %s, want %s", b, tc.want)
			}
		})
	}
	if _, err := EncodeRequest("", nil); err == nil {
		t.Fatal("empty tool name accepted")
	}
}

// fakeHost answers warden_call requests like the host would.
func fakeHost(t *testing.T, answer func(Request) string) func([]byte) ([]byte, error) {
	return func(req []byte) ([]byte, error) {
		var r Request
		dec := json.NewDecoder(strings.NewReader(string(req)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("request %s: %v", req, err)
		}
		return []byte(answer(r)), nil
	}
}

func TestCallWith(t *testing.T) {
	send := fakeHost(t, func(r Request) string {
		if r.Tool != "system" || string(r.Args) != `{"operation":"get_info"}` {
			t.Errorf("request = %+v", r)
		}
		return `{"tool":"system","call_id":"c","success":true,"dry_run":false,"output":"ok","data":{"os":"linux"},"warnings":[],"duration_ms":1}`
	})
	e, err := callWith(send, "system", map[string]string{"operation": "get_info"})
	if err != nil || !e.Success || e.Output != "ok" {
		t.Fatalf("got %+v, %v", e, err)
	}
	var d struct {
		OS string `json:"os"`
	}
	if err := e.DecodeData(&d); err != nil || d.OS != "linux" {
		t.Fatalf("data: %+v %v", d, err)
	}

	// A transport failure is a Go error; a tool failure is an envelope.
	if _, err := callWith(func([]byte) ([]byte, error) { return nil, nil }, "system", nil); !errors.Is(err, ErrNoEnvelope) {
		t.Fatalf("empty answer: %v", err)
	}
	denied := fakeHost(t, func(Request) string {
		return `{"tool":"write_memory","call_id":"c","success":false,"dry_run":false,"output":"","data":null,"warnings":[],"error":{"code":"CAPABILITY_DENIED","message":"m","hint":"h"},"duration_ms":0}`
	})
	e, err = callWith(denied, "write_memory", nil)
	if err != nil || e.Success || e.Error.Code != "CAPABILITY_DENIED" {
		t.Fatalf("got %+v, %v", e, err)
	}
}

func TestStubSaysItIsAStub(t *testing.T) {
	if _, err := Call("system", nil); !errors.Is(err, ErrNotWasm) {
		t.Fatalf("native Call: %v, want ErrNotWasm", err)
	}
	var v struct{}
	if err := Args(&v); !errors.Is(err, ErrNotWasm) {
		t.Fatalf("native Args: %v", err)
	}
	if _, err := ReadFile("x"); !errors.Is(err, ErrNotWasm) {
		t.Fatalf("native ReadFile: %v", err)
	}
	if Return("x") != 0 || Fail(errors.New("x")) != 1 || Fail(nil) != 1 {
		t.Fatal("Return/Fail codes")
	}
}

type inner struct {
	Name string `json:"name"`
}

type argsT struct {
	Text  string           `json:"text"`
	Top   *int             `json:"top,omitempty"`
	Items []inner          `json:"items"`
	Map   map[string]inner `json:"map"`
	inner
}

func TestDecodeArgs(t *testing.T) {
	tests := []struct {
		in  string
		bad string // substring of the error; "" = accepted
	}{
		{`{"text":"a","top":3}`, ""},
		{``, ""},
		{`{"text":"a","items":[{"name":"x"}],"map":{"k":{"name":"y"}},"name":"emb"}`, ""},
		{`{"Text":"a"}`, "case-sensitive"},
		{`{"text":"a","extra":1}`, `unknown field "extra"`},
		{`{"items":[{"Name":"x"}]}`, "/items/0"},
		{`{"map":{"k":{"nope":1}}}`, "/map/k"},
		{`{"text":"a"} {"text":"b"}`, "trailing data"},
		{`[1]`, "expected a JSON object"},
		{`{"text":1}`, "invalid arguments"},
		{`{"text":`, "invalid arguments"},
	}
	for _, tc := range tests {
		var a argsT
		err := DecodeArgs([]byte(tc.in), &a)
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%s: error %v, want one containing %q", tc.in, err, tc.bad)
		}
	}
	var a argsT
	if err := DecodeArgs([]byte(`{"text":"hi","top":2}`), &a); err != nil || a.Text != "hi" || *a.Top != 2 {
		t.Fatalf("decoded %+v, %v", a, err)
	}
	if err := DecodeArgs([]byte(`{}`), a); err == nil {
		t.Fatal("non-pointer accepted")
	}
}

func TestEncodeOutput(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{"plain text", "plain text"},
		{[]byte("raw"), "raw"},
		{json.RawMessage(`{"a":1}`), `{"a":1}`},
		{map[string]int{"n": 2}, `{"n":2}`},
	} {
		b, err := EncodeOutput(tc.v)
		if err != nil || string(b) != tc.want {
			t.Errorf("EncodeOutput(%v) = %s, %v", tc.v, b, err)
		}
	}
	if _, err := EncodeOutput(func() {}); err == nil {
		t.Error("func encoded")
	}
}

// callWith is Call over a JSON transport (the warden_call path).
func callWith(send func([]byte) ([]byte, error), tool string, args any) (Envelope, error) {
	req, err := EncodeRequest(tool, args)
	if err != nil {
		return Envelope{}, err
	}
	resp, err := send(req)
	if err != nil {
		return Envelope{}, err
	}
	return DecodeEnvelope(resp)
}
