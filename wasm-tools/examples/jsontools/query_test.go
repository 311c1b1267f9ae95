package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestQuery(t *testing.T) {
	doc := `{"a":{"b":[10,{"c":"x"},30]},"odd.key":{"z":1.50},"items":[{"name":"n0"},{"name":"n1"}]}`
	tests := []struct{ path, want, bad string }{
		{"a.b[1].c", `"x"`, ""},
		{"$.a.b[0]", "10", ""},
		{".a.b.2", "30", ""},
		{"a.b[-1]", "30", ""},
		{`["odd.key"].z`, "1.50", ""},
		{`$["odd.key"]`, "{\n  \"z\": 1.50\n}", ""},
		{"items[1].name", `"n1"`, ""},
		{"", "", ""},
		{"$", "", ""},
		{"a.nope", "", "has no key"},
		{"a.b[3]", "", "out of range"},
		{"a.b.c", "", "is an array"},
		{"a[0]", "", "is an object"},
		{"a.b[0].x", "", "not an object or array"},
		{"a[", "", "bad path"},
		{"a..b", "", "bad path"},
	}
	for _, tc := range tests {
		got, err := query(doc, tc.path)
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%q: got %q, %v; want error with %q", tc.path, got, err, tc.bad)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.path, err)
			continue
		}
		if tc.want != "" && got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.path, got, tc.want)
		}
	}
	if _, err := query("{", "a"); err == nil {
		t.Error("invalid JSON accepted")
	}
}

func TestFormat(t *testing.T) {
	got, err := format(`{ "b": 1, "a": [1, 2.0] }`, 0)
	if err != nil || got != `{"b":1,"a":[1,2.0]}` {
		t.Fatalf("compact: %q %v", got, err)
	}
	got, err = format(`{"b":1}`, 4)
	if err != nil || got != "{\n    \"b\": 1\n}" {
		t.Fatalf("indent: %q %v", got, err)
	}
	if _, err := format(`{`, 2); err == nil {
		t.Fatal("invalid JSON accepted")
	}
	if _, err := format(`{}`, 9); err == nil {
		t.Fatal("indent 9 accepted")
	}
}

func TestDescribeSchemasAreClosed(t *testing.T) {
	for _, tool := range tools {
		var s map[string]any
		if err := json.Unmarshal(tool.InputSchema, &s); err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		if s["type"] != "object" || s["additionalProperties"] != false {
			t.Errorf("%s: schema not a closed object: %s", tool.Name, tool.InputSchema)
		}
	}
}

func TestDispatch(t *testing.T) {
	got, err := dispatch("json_query", json.RawMessage(`{"json":"{\"a\":[1,2]}","path":"a[1]"}`))
	if err != nil || got != "2" {
		t.Fatalf("json_query: %q %v", got, err)
	}
	if _, err := dispatch("json_query", json.RawMessage(`{"json":"{}","Path":"a"}`)); err == nil {
		t.Fatal("case-variant field accepted")
	}
	if _, err := dispatch("nope", nil); err == nil {
		t.Fatal("unknown tool accepted")
	}
}
