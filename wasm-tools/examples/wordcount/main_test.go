package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name, in   string
		code       int
		out, inErr string
	}{
		{"text", `{"text":"one two  three\nfour\n"}`, 0, `{"words":4,"lines":2,"bytes":20}` + "\n", ""},
		{"last line without newline", `{"text":"a\nb"}`, 0, `{"words":2,"lines":2,"bytes":3}` + "\n", ""},
		{"unicode", `{"text":"héllo\u00a0wörld\tß"}`, 0, `{"words":3,"lines":1,"bytes":17}` + "\n", ""},
		{"empty text", `{"text":""}`, 0, `{"words":0,"lines":0,"bytes":0}` + "\n", ""},
		{"only newlines", `{"text":"\n\n"}`, 0, `{"words":0,"lines":2,"bytes":2}` + "\n", ""},
		{"missing text", `{}`, 2, "", `"text" is required`},
		{"empty stdin", ``, 2, "", `"text" is required`},
		{"unknown field", `{"text":"a","top":1}`, 2, "", `unknown field "top"`},
		{"case-variant field", `{"Text":"a"}`, 2, "", "case-sensitive"},
		{"not JSON", `text`, 2, "", "invalid arguments"},
		{"not an object", `["a"]`, 2, "", "expected a JSON object"},
		{"wrong type", `{"text":3}`, 2, "", "invalid arguments"},
		{"trailing data", `{"text":"a"}{}`, 2, "", "trailing data"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(strings.NewReader(tc.in), &out, &errb)
			if code != tc.code || out.String() != tc.out || !strings.Contains(errb.String(), tc.inErr) {
				t.Fatalf("code %d, stdout %q, stderr %q; want %d, %q, stderr containing %q", code, out.String(), errb.String(), tc.code, tc.out, tc.inErr)
			}
			if tc.code != 0 && !strings.HasPrefix(errb.String(), "wordcount: ") {
				t.Fatalf("stderr %q", errb.String())
			}
		})
	}
}

func TestRunRefusesHugeInput(t *testing.T) {
	var out, errb bytes.Buffer
	in := `{"text":"` + strings.Repeat("a", maxInput) + `"}`
	if code := run(strings.NewReader(in), &out, &errb); code != 2 || !strings.Contains(errb.String(), "input over") {
		t.Fatalf("code %d, stderr %q", code, errb.String())
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, bytes.ErrTooLarge }

func TestRunOutputError(t *testing.T) {
	var errb bytes.Buffer
	if code := run(strings.NewReader(`{"text":"a"}`), failWriter{}, &errb); code != 1 {
		t.Fatalf("code %d, stderr %q", code, errb.String())
	}
}
