package tool

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeArgs(t *testing.T) {
	deep := strings.Repeat(`{"a":`, MaxArgsDepth+2) + "1" + strings.Repeat("}", MaxArgsDepth+2)
	okDeep := strings.Repeat(`[`, MaxArgsDepth-1) + strings.Repeat("]", MaxArgsDepth-1)
	tests := []struct {
		name, in string
		code     Code
		msg      string
	}{
		{"empty means {}", "", "", ""},
		{"spaces mean {}", "  \n", "", ""},
		{"object", `{"a":1,"b":[true,null,"x"],"c":{"d":1.5}}`, "", ""},
		{"duplicate top-level key", `{"a":1,"a":2}`, CodeInvalidInput, `duplicate key "a" at "/"`},
		{"duplicate nested key", `{"x":{"b":1,"b":1}}`, CodeInvalidInput, `duplicate key "b" at "/x"`},
		{"duplicate in array element", `{"x":[{},{"c":1,"c":2}]}`, CodeInvalidInput, `duplicate key "c" at "/x/1"`},
		{"case variants are distinct keys here", `{"a":1,"A":2}`, "", ""},
		{"not an object", `[1]`, CodeInvalidInput, "must be a JSON object, not an array"},
		{"string", `"x"`, CodeInvalidInput, "not a string"},
		{"null", `null`, CodeInvalidInput, "not null"},
		{"truncated", `{"a":`, CodeInvalidInput, "unexpected end"},
		{"trailing data", `{} {}`, CodeInvalidInput, "unexpected data after"},
		{"trailing garbage", `{}x`, CodeInvalidInput, ""},
		{"bad syntax", `{"a" 1}`, CodeInvalidInput, ""},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", CodeInvalidInput, "not valid UTF-8"},
		{"too deep", deep, CodeInvalidInput, "nesting deeper than 64"},
		{"deep but allowed", `{"a":` + okDeep + `}`, "", ""},
		{"too large", `{"a":"` + strings.Repeat("x", MaxArgsBytes) + `"}`, CodeTooLarge, "the limit is 1048576"},
		{"escaped slash key", `{"a/b":1,"a~b":2}`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, compact, err := DecodeArgs([]byte(tt.in))
			if tt.code == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if v == nil || !json.Valid(compact) {
					t.Fatalf("got %v, %q", v, compact)
				}
				return
			}
			if err == nil {
				t.Fatalf("want %s, got ok", tt.code)
			}
			if err.Code != tt.code || !strings.Contains(err.Message, tt.msg) {
				t.Fatalf("want %s containing %q, got %s: %s", tt.code, tt.msg, err.Code, err.Message)
			}
			if err.Hint == "" {
				t.Errorf("error without a hint: %v", err)
			}
		})
	}
}

func TestBindStrict(t *testing.T) {
	type inner struct {
		Name string `json:"name"`
	}
	type args struct {
		Path  string  `json:"path"`
		Items []inner `json:"items"`
		Opt   *inner  `json:"opt,omitempty"`
		Skip  string  `json:"-"`
	}
	tests := []struct {
		in, err string
	}{
		{`{"path":"a","items":[{"name":"x"}],"opt":{"name":"y"}}`, ""},
		{`{"Path":"a"}`, `did you mean "path"?`},
		{`{"items":[{"NAME":"x"}]}`, `unknown field "NAME" at "/items/0"`},
		{`{"opt":{"Name":"x"}}`, `unknown field "Name" at "/opt"`},
		{`{"extra":1}`, `unknown field "extra"`},
		{`{"Skip":"x"}`, `unknown field "Skip"`},
		{`{"path":1}`, "cannot unmarshal number"},
	}
	for _, tt := range tests {
		var a args
		err := bindStrict([]byte(tt.in), nil, &a)
		if tt.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: want error containing %q, got %v", tt.in, tt.err, err)
		}
		if e := AsError(err); e.Code != CodeInvalidInput {
			t.Errorf("%s: want INVALID_INPUT, got %s", tt.in, e.Code)
		}
	}
}

// FuzzDecodeArgs: strict decoding never panics; whatever it accepts is one
// valid JSON object without duplicate keys, and re-decoding the compact form
// gives the same value.
func FuzzDecodeArgs(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":{"b":[1,2,{"c":null}]}}`, `{"a":1,"a":2}`, `[1]`, "{\"\xff\":1}", `{"a":"\u00e9"}`, `{"a":1e400}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		v, compact, err := DecodeArgs(in)
		if err != nil {
			if err.Code != CodeInvalidInput && err.Code != CodeTooLarge {
				t.Fatalf("unexpected code %s", err.Code)
			}
			return
		}
		if !json.Valid(compact) {
			t.Fatalf("accepted invalid JSON %q", compact)
		}
		v2, _, err2 := DecodeArgs(compact)
		if err2 != nil {
			t.Fatalf("compact form refused: %v", err2)
		}
		a, _ := json.Marshal(v)
		b, _ := json.Marshal(v2)
		if string(a) != string(b) {
			t.Fatalf("round trip changed the value: %s vs %s", a, b)
		}
	})
}
