//go:build wasip1

// Command fetch is a warden wasm tool (Extism plugin, export "call") that
// GETs a URL through the host's http_request and returns the status and the
// first bytes of the body.
//
// The guest has no network of its own: the request is made by the host, and
// warden checks the tool's net: grants (∩ the run's) on the URL, on every
// redirect hop and on the resolved address, like the http core tool. An
// ungranted host, a redirect to one, or a loopback/private address is
// refused.
package main

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/extism/go-pdk"
	"github.com/wardenrt/warden/wasm-tools/warden"
)

func main() {}

type args struct {
	URL      string `json:"url"`
	MaxBytes *int   `json:"max_bytes"`
}

// Result is the tool's output.
type Result struct {
	URL       string `json:"url"`
	Status    int    `json:"status"`
	Bytes     int    `json:"bytes"`
	Body      string `json:"body"`
	Truncated bool   `json:"truncated"`
}

//go:wasmexport call
func call() int32 {
	var a args
	if err := warden.Args(&a); err != nil {
		return warden.Fail(err)
	}
	if !strings.HasPrefix(a.URL, "https://") && !strings.HasPrefix(a.URL, "http://") {
		return warden.Fail(errors.New("url must start with http:// or https://"))
	}
	n := 1024
	if a.MaxBytes != nil {
		n = min(max(*a.MaxBytes, 0), 65536)
	}
	req := pdk.NewHTTPRequest(pdk.MethodGet, a.URL)
	ua, ok := warden.Config("user_agent")
	if !ok {
		ua = "warden-fetch/1"
	}
	req.SetHeader("User-Agent", ua)
	resp := req.Send()
	body := resp.Body()
	r := Result{URL: a.URL, Status: int(resp.Status()), Bytes: len(body)}
	if len(body) > n {
		body = body[:n]
		// Do not cut a UTF-8 sequence in half.
		for i := 0; i < utf8.UTFMax-1 && len(body) > 0 && !utf8.Valid(body); i++ {
			body = body[:len(body)-1]
		}
		r.Truncated = true
	}
	r.Body = strings.ToValidUTF8(string(body), "\uFFFD")
	return warden.Return(r)
}
