package main

import (
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

func TestExtractLinks(t *testing.T) {
	base, _ := url.Parse("https://example.com/docs/index.html")
	tests := []struct {
		name  string
		page  string
		limit int
		want  []Link
		more  bool
	}{
		{"relative and absolute", `<p><a href="a.html">A</a> <A HREF='/top'>Top</A> <a href=https://other.org/x?y=1&amp;z=2>X</a>`, 10,
			[]Link{{"https://example.com/docs/a.html", "A"}, {"https://example.com/top", "Top"}, {"https://other.org/x?y=1&z=2", "X"}}, false},
		{"text collapsed, nested tags, entities", "<a href=\"b\">\n  <b>Bold</b>\t&amp; <i>more</i>  </a>", 10,
			[]Link{{"https://example.com/docs/b", "Bold & more"}}, false},
		{"duplicates and fragments", `<a href="#top">self</a><a href="c#x">C</a><a href="c#y">C again</a><a href="index.html">page</a>`, 10,
			[]Link{{"https://example.com/docs/c#x", "C"}, {"https://example.com/docs/index.html", "page"}}, false},
		{"schemes", `<a href="javascript:alert(1)">js</a><a href="data:text/html,x">d</a><a href="mailto:a@b.c">mail</a><a href="ftp://f.org/">ftp</a><a href="">empty</a><a name="n">anchor</a>`, 10,
			[]Link{{"mailto:a@b.c", "mail"}, {"ftp://f.org/", "ftp"}}, false},
		{"comments, scripts, styles skipped", `<!-- <a href="hidden">h</a> --><script>var s = '<a href="js">';</script><STYLE>a{}</STYLE><title><a href="t">t</a></title><a href="seen">S</a>`, 10,
			[]Link{{"https://example.com/docs/seen", "S"}}, false},
		{"base href", `<head><base href="https://cdn.example.net/v2/"></head><a href="lib.js">lib</a><base href="https://ignored.org/">`, 10,
			[]Link{{"https://cdn.example.net/v2/lib.js", "lib"}}, false},
		{"limit", `<a href="1">1</a><a href="2">2</a><a href="3">3</a>`, 2,
			[]Link{{"https://example.com/docs/1", "1"}, {"https://example.com/docs/2", "2"}}, true},
		{"unclosed links", `<a href="1">one<a href="2">two`, 10,
			[]Link{{"https://example.com/docs/1", "one"}, {"https://example.com/docs/2", "two"}}, false},
		{"unterminated tag at the end", `<<a <a href="x" <a href='unterminated`, 10, []Link{}, false},
		{"tag without > at the end", `<a href="y">y</a><a href="x"`, 10, []Link{{"https://example.com/docs/y", "y"}}, false},
		{"lone angle brackets", `1 < 2 <a href=x>a < b</a> <!doctype html>`, 10,
			[]Link{{"https://example.com/docs/x", "a < b"}}, false},
		{"empty", ``, 10, []Link{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, more := extractLinks(base, []byte(tc.page), tc.limit)
			if !reflect.DeepEqual(got, tc.want) || more != tc.more {
				t.Fatalf("got %+v, %v\nwant %+v, %v", got, more, tc.want, tc.more)
			}
		})
	}
}

func TestLinkTextClipped(t *testing.T) {
	base, _ := url.Parse("http://example.com/")
	got, _ := extractLinks(base, []byte(`<a href="x">`+strings.Repeat("é", 1000)+`</a>`), 1)
	if len(got) != 1 || len(got[0].Text) > maxLinkText+len("…") || !strings.HasSuffix(got[0].Text, "…") || !strings.HasPrefix(got[0].Text, "éé") {
		t.Fatalf("got %q", got)
	}
	if strings.ContainsRune(got[0].Text, '\uFFFD') {
		t.Fatalf("cut inside a rune: %q", got[0].Text)
	}
}

// fakeGet answers every GET with resp and records the URL.
func fakeGet(resp response, urls *[]string) getter {
	return func(u, ua string) (response, error) {
		*urls = append(*urls, u+" ua="+ua)
		return resp, nil
	}
}

func TestDispatch(t *testing.T) {
	page := response{Status: 200, Headers: map[string]string{"content-type": "text/html; charset=utf-8"},
		Body: []byte(`<html><a href="/a">A</a> <a href="b">B</a> ünïcode</html>`)}
	tests := []struct {
		name, tool, args string
		resp             response
		want             string // JSON output, or the error's text with bad
		bad              bool
	}{
		{"get", "web_get", `{"url":"https://example.com/p/"}`, page,
			`{"url":"https://example.com/p/","status":200,"content_type":"text/html; charset=utf-8","bytes":59,"body":"<html><a href=\"/a\">A</a> <a href=\"b\">B</a> ünïcode</html>","truncated":false}`, false},
		{"get truncated at a rune boundary", "web_get", `{"url":"https://example.com/p/","max_bytes":47}`, page,
			`{"url":"https://example.com/p/","status":200,"content_type":"text/html; charset=utf-8","bytes":59,"body":"<html><a href=\"/a\">A</a> <a href=\"b\">B</a> ün","truncated":true}`, false},
		{"get without headers, empty body", "web_get", `{"url":"http://example.com","max_bytes":0}`, response{Status: 204},
			`{"url":"http://example.com","status":204,"bytes":0,"body":"","truncated":false}`, false},
		{"links", "web_links", `{"url":"https://example.com/p/","limit":5}`, page,
			`{"url":"https://example.com/p/","status":200,"links":[{"url":"https://example.com/a","text":"A"},{"url":"https://example.com/p/b","text":"B"}],"truncated":false}`, false},
		{"links of a 404", "web_links", `{"url":"https://example.com/p/"}`, response{Status: 404}, "HTTP status 404", true},
		{"unknown field", "web_get", `{"url":"https://example.com","bytes":3}`, page, `unknown field "bytes"`, true},
		{"case-variant field", "web_links", `{"URL":"https://example.com"}`, page, "case-sensitive", true},
		{"missing url", "web_get", `{}`, page, "absolute http:// or https:// URL", true},
		{"relative url", "web_links", `{"url":"/x"}`, page, "absolute http:// or https:// URL", true},
		{"file url", "web_get", `{"url":"file:///etc/passwd"}`, page, "absolute http:// or https:// URL", true},
		{"max_bytes range", "web_get", `{"url":"https://example.com","max_bytes":70000}`, page, "max_bytes must be", true},
		{"limit range", "web_links", `{"url":"https://example.com","limit":0}`, page, "limit must be", true},
		{"unknown tool", "web_post", `{}`, page, `unknown tool "web_post"`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var urls []string
			got, err := dispatch(fakeGet(tc.resp, &urls), tc.tool, json.RawMessage(tc.args))
			if tc.bad {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %s, %v; want an error containing %q", got, err, tc.want)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %s, %v\nwant %s", got, err, tc.want)
			}
			if len(urls) != 1 || !strings.HasSuffix(urls[0], " ua="+defaultUserAgent) {
				t.Fatalf("requests %q", urls)
			}
		})
	}
	// A transport error (only the native stub returns one) is the tool's error.
	if _, err := dispatch(func(string, string) (response, error) { return response{}, errors.New("boom") }, "web_get", json.RawMessage(`{"url":"http://x.org"}`)); err == nil || err.Error() != "boom" {
		t.Fatalf("transport error: %v", err)
	}
}

func TestSchemasAreClosed(t *testing.T) {
	for _, d := range tools {
		var s map[string]any
		if err := json.Unmarshal(d.InputSchema, &s); err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		if s["type"] != "object" || s["additionalProperties"] != false {
			t.Errorf("%s: schema not a closed object: %s", d.Name, d.InputSchema)
		}
	}
}
