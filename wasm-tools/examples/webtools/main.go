// Command webtools is an MCP-style servlet (exports "describe" and "call")
// exposing two network tools: web_get (GET a URL: status, content type and
// the first bytes of the body) and web_links (GET an HTML page and list the
// links in it, resolved against the page's URL).
//
// The guest has no network of its own. Its requests go through Extism's
// http_request, which warden sends through its core http tool: the URL,
// every redirect hop and every resolved address are checked against the
// tool's net: grants ∩ the run's, and audited. A refused request traps the
// guest; warden reports it as CAPABILITY_DENIED, so this code never sees it.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/wardenrt/warden/wasm-tools/warden"
)

func main() {}

// toolDef is one entry of describe's output.
type toolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

var tools = []toolDef{
	{
		Name: "web_get",
		Description: "GET an http:// or https:// URL and return the HTTP status, the content type (when the host passes " +
			"response headers), the body size and its first max_bytes bytes as text. Needs a net: grant for the URL's host " +
			"and for every host a redirect leads to.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"url":{"type":"string","description":"An http:// or https:// URL."},` +
			`"max_bytes":{"type":"integer","minimum":0,"maximum":65536,"description":"How many bytes of the body to return (default 2048)."}},` +
			`"required":["url"],"additionalProperties":false}`),
	},
	{
		Name: "web_links",
		Description: "GET an HTML page and list the links (<a href>) in it: each absolute URL (relative links resolved " +
			"against the page's URL, duplicates and javascript: links dropped) with its link text, in page order. " +
			"Needs a net: grant for the page's host.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"url":{"type":"string","description":"An http:// or https:// URL of an HTML page."},` +
			`"limit":{"type":"integer","minimum":1,"maximum":500,"description":"At most this many links (default 50)."}},` +
			`"required":["url"],"additionalProperties":false}`),
	},
}

//go:wasmexport describe
func describe() int32 {
	return warden.Return(map[string]any{"tools": tools})
}

// callInput is the servlet convention's call input.
type callInput struct {
	Params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"params"`
}

type content struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type callResult struct {
	Content []content `json:"content"`
	IsError bool      `json:"isError"`
}

//go:wasmexport call
func call() int32 {
	var in callInput
	if err := warden.Args(&in); err != nil {
		// Not a well-formed call: a protocol error, not a tool result.
		return warden.Fail(err)
	}
	text, err := dispatch(httpGet, in.Params.Name, in.Params.Arguments)
	if err != nil {
		// A tool failure is a result the model sees.
		return warden.Return(callResult{Content: []content{{"text", err.Error()}}, IsError: true})
	}
	return warden.Return(callResult{Content: []content{{"text", text}}})
}

// response is what a GET returns to the tools.
type response struct {
	Status int
	// Headers has lower-case names; nil when the host does not pass
	// response headers to guests.
	Headers map[string]string
	Body    []byte
}

// getter performs a GET: httpGet (pdk http_request) in the module, a fake
// in the native unit tests.
type getter func(url, userAgent string) (response, error)

const defaultUserAgent = "warden-webtools/1"

func userAgent() string {
	if ua, ok := warden.Config("user_agent"); ok && ua != "" {
		return ua
	}
	return defaultUserAgent
}

func dispatch(get getter, name string, raw json.RawMessage) (string, error) {
	switch name {
	case "web_get":
		var a struct {
			URL      string `json:"url"`
			MaxBytes *int   `json:"max_bytes"`
		}
		if err := warden.DecodeArgs(raw, &a); err != nil {
			return "", err
		}
		n := 2048
		if a.MaxBytes != nil {
			if *a.MaxBytes < 0 || *a.MaxBytes > 65536 {
				return "", errors.New("max_bytes must be between 0 and 65536")
			}
			n = *a.MaxBytes
		}
		return webGet(get, a.URL, n)
	case "web_links":
		var a struct {
			URL   string `json:"url"`
			Limit *int   `json:"limit"`
		}
		if err := warden.DecodeArgs(raw, &a); err != nil {
			return "", err
		}
		limit := 50
		if a.Limit != nil {
			if *a.Limit < 1 || *a.Limit > 500 {
				return "", errors.New("limit must be between 1 and 500")
			}
			limit = *a.Limit
		}
		return webLinks(get, a.URL, limit)
	}
	return "", fmt.Errorf("unknown tool %q (this servlet has web_get and web_links)", name)
}

// checkURL accepts absolute http and https URLs with a host.
func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("url must be an absolute http:// or https:// URL")
	}
	return u, nil
}

// GetResult is web_get's output.
type GetResult struct {
	URL         string `json:"url"`
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	Bytes       int    `json:"bytes"`
	Body        string `json:"body"`
	Truncated   bool   `json:"truncated"`
}

func webGet(get getter, raw string, maxBytes int) (string, error) {
	if _, err := checkURL(raw); err != nil {
		return "", err
	}
	resp, err := get(raw, userAgent())
	if err != nil {
		return "", err
	}
	body, truncated := prefix(resp.Body, maxBytes)
	r := GetResult{
		URL: raw, Status: resp.Status, ContentType: resp.Headers["content-type"],
		Bytes: len(resp.Body), Body: body, Truncated: truncated,
	}
	return encode(r)
}

// encode marshals a result as compact JSON without escaping <, > and &
// (page text is full of them).
func encode(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// prefix returns the first n bytes of b as valid UTF-8 text, not cutting a
// multi-byte sequence in half, and whether anything was left out.
func prefix(b []byte, n int) (string, bool) {
	truncated := len(b) > n
	if truncated {
		b = b[:n]
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.Valid(b); i++ {
			b = b[:len(b)-1]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), truncated
}

// LinksResult is web_links' output.
type LinksResult struct {
	URL    string `json:"url"`
	Status int    `json:"status"`
	Links  []Link `json:"links"`
	// Truncated is true when the page has more links than the limit.
	Truncated bool `json:"truncated"`
}

func webLinks(get getter, raw string, limit int) (string, error) {
	base, err := checkURL(raw)
	if err != nil {
		return "", err
	}
	resp, err := get(raw, userAgent())
	if err != nil {
		return "", err
	}
	if resp.Status < 200 || resp.Status > 299 {
		return "", fmt.Errorf("GET %s: HTTP status %d", raw, resp.Status)
	}
	links, more := extractLinks(base, resp.Body, limit)
	return encode(LinksResult{URL: raw, Status: resp.Status, Links: links, Truncated: more})
}
