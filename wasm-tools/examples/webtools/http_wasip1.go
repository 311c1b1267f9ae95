//go:build wasip1

package main

import "github.com/extism/go-pdk"

// httpGet sends a GET through Extism's http_request. warden's host makes
// the request through its core http tool and checks the URL, every
// redirect hop and every resolved address against the tool's net: grants
// (∩ the run's); a refused request traps this guest and never returns.
func httpGet(url, userAgent string) (response, error) {
	req := pdk.NewHTTPRequest(pdk.MethodGet, url)
	req.SetHeader("User-Agent", userAgent)
	resp := req.Send()
	body := resp.Body()
	if m := resp.Memory(); m.Offset() != 0 {
		m.Free()
	}
	return response{Status: int(resp.Status()), Headers: resp.Headers(), Body: body}, nil
}
