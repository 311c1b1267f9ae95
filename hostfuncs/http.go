package hostfuncs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// maxHTTPRequestBody is the http tool's cap on a request body; a guest
// request with a larger body is refused here (TOO_LARGE) without being
// read further.
const maxHTTPRequestBody = 512 << 10

// httpDropHeaders are the request headers the http tool refuses (it sets
// them from the URL and the body, and asks for the encodings it decodes):
// a guest's values are left out rather than failing the request.
var httpDropHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Keep-Alive": true, "Upgrade": true, "Te": true, "Trailer": true, "Proxy-Connection": true,
	"Accept-Encoding": true,
}

// Transport gates the requests Extism's http_request sends through
// http.DefaultClient: a request whose context carries a gate.Guest
// becomes a call of the core `http` tool through that guest's gate (run ∩
// tool grants, principal chain, every hop and resolved address checked by
// the http tool, audited); any other request goes to Base.
//
// For a guest request, nothing is sent by Transport itself:
//
//   - the request becomes the http tool's arguments: method, url, headers
//     (Host, Content-Length, Transfer-Encoding, Connection and the other
//     hop-by-hop headers the tool sets itself are left out; repeated values
//     joined with ", ") and the body as data. A body that is not UTF-8
//     text is refused with INVALID_INPUT, one over 512 KiB with TOO_LARGE
//     (the http tool's limit); neither is sent nor audited.
//   - a failed call (CAPABILITY_DENIED, NETWORK_ERROR, TIMEOUT, …) is
//     returned as an error wrapping a *tool.Error with the result's code,
//     message and hint; Extism's http_request panics with it, and the
//     engine reports that code for the wasm tool's call.
//   - a successful call becomes the response: the http tool's status,
//     headers (Set-Cookie split back into its values) and body (text,
//     base64-decoded bytes, or the parsed JSON as compact JSON text), with
//     Content-Length set to the body's length. A body the tool cut at 1 MiB
//     carries the header X-Warden-Truncated: true. The tool has already
//     followed (and checked) the redirects; see InstallHTTP.
//   - in a dry run (a preview of the wasm tool) nothing is sent: the
//     response is 200 with X-Warden-Dry-Run: true and the tool's preview as
//     its text body.
type Transport struct {
	// Base sends the requests made outside a guest; nil means
	// http.DefaultTransport.
	Base http.RoundTripper
}

var _ gate.GuestHTTPGuard = (*Transport)(nil)

// GuardsGuestHTTP marks Transport as warden's gated transport
// (gate.GuestHTTPGuard): while http.DefaultClient uses it, the engine
// lets a guest's http_request through.
func (t *Transport) GuardsGuestHTTP() {}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	g, ok := gate.GuestFrom(req.Context())
	if !ok {
		base := t.Base
		if base == nil {
			base = http.DefaultTransport
		}
		return base.RoundTrip(req)
	}
	return guestRoundTrip(g, req)
}

// httpData is the part of the http tool's data (web.HTTPResponse) a
// response is built from.
type httpData struct {
	StatusCode   int               `json:"status_code"`
	Status       string            `json:"status"`
	Headers      map[string]string `json:"headers"`
	Body         *string           `json:"body"`
	BodyEncoding string            `json:"body_encoding"`
	JSON         json.RawMessage   `json:"json"`
	Truncated    bool              `json:"truncated"`
}

func guestRoundTrip(g *gate.Guest, req *http.Request) (*http.Response, error) {
	args, rerr := httpArgs(req)
	if rerr != nil {
		return nil, rerr
	}
	// The http tool runs as itself under the guest's grants: its context
	// carries no guest (see the package doc).
	ctx := gate.WithGuest(req.Context(), nil)
	res, err := g.Call(ctx, "http", args)
	if err != nil {
		return nil, tool.Errorf(tool.CodeInternal, "the request was not sent or its result is not on record; try again",
			"warden could not make the guest's http request through its gate or record it in the audit log")
	}
	if !res.Success {
		if res.Error == nil {
			return nil, tool.Errorf(tool.CodeToolError, "", "http failed without an error")
		}
		e := *res.Error
		return nil, &e
	}
	if res.DryRun {
		return newResponse(req, http.StatusOK, "", http.Header{"X-Warden-Dry-Run": {"true"}, "Content-Type": {"text/plain; charset=utf-8"}},
			[]byte(res.Output)), nil
	}
	var d httpData
	if err := json.Unmarshal(res.Data, &d); err != nil || d.StatusCode < 100 || d.StatusCode > 999 {
		return nil, tool.Errorf(tool.CodeInternal, "this is a bug in warden; please report it", "the http tool's data is not a response")
	}
	var body []byte
	switch {
	case len(d.JSON) > 0:
		body = d.JSON
	case d.Body != nil && d.BodyEncoding == "base64":
		b, err := base64.StdEncoding.DecodeString(*d.Body)
		if err != nil {
			return nil, tool.Errorf(tool.CodeInternal, "this is a bug in warden; please report it", "the http tool's base64 body does not decode")
		}
		body = b
	case d.Body != nil:
		body = []byte(*d.Body)
	}
	h := make(http.Header, len(d.Headers)+1)
	for name, v := range d.Headers {
		name = http.CanonicalHeaderKey(name)
		if name == "Set-Cookie" {
			h[name] = strings.Split(v, "\n")
			continue
		}
		h[name] = []string{v}
	}
	if req.Method != http.MethodHead {
		h.Set("Content-Length", strconv.Itoa(len(body)))
	}
	h.Del("X-Warden-Truncated") // only warden says that
	h.Del("X-Warden-Dry-Run")
	if d.Truncated {
		h.Set("X-Warden-Truncated", "true")
	}
	return newResponse(req, d.StatusCode, d.Status, h, body), nil
}

// httpArgs turns a guest's request into the http tool's arguments.
func httpArgs(req *http.Request) (json.RawMessage, *tool.Error) {
	if req.Body != nil {
		defer req.Body.Close() // a RoundTripper closes the body, even on errors
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if req.URL == nil {
		return nil, tool.Errorf(tool.CodeInvalidInput, "give an absolute http:// or https:// URL", "the request has no URL")
	}
	a := map[string]any{"method": method, "url": req.URL.String()}
	if len(req.Header) > 0 {
		hs := make(map[string]string, len(req.Header))
		for name, vs := range req.Header {
			cn := http.CanonicalHeaderKey(name)
			if httpDropHeaders[cn] {
				continue
			}
			v := strings.Join(vs, ", ")
			if prev, ok := hs[cn]; ok {
				v = prev + ", " + v
			}
			hs[cn] = v
		}
		if len(hs) > 0 {
			a["headers"] = hs
		}
	}
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxHTTPRequestBody+1))
		if err != nil {
			return nil, tool.Errorf(tool.CodeInvalidInput, "", "the request body could not be read")
		}
		if len(b) > maxHTTPRequestBody {
			return nil, tool.Errorf(tool.CodeTooLarge, fmt.Sprintf("send at most %d bytes of body", maxHTTPRequestBody),
				"the request body is over %d bytes", maxHTTPRequestBody)
		}
		if !utf8.Valid(b) {
			return nil, tool.Errorf(tool.CodeInvalidInput, "send a UTF-8 text body (encode binary data, e.g. as base64)",
				"the request body is not UTF-8 text: warden's http tool sends text bodies only")
		}
		a["data"] = string(b)
	}
	raw, err := json.Marshal(a)
	if err != nil {
		return nil, tool.Errorf(tool.CodeInvalidInput, "", "the request cannot be encoded")
	}
	return raw, nil
}

func newResponse(req *http.Request, code int, status string, h http.Header, body []byte) *http.Response {
	if !strings.HasPrefix(status, strconv.Itoa(code)+" ") {
		status = strconv.Itoa(code) + " " + http.StatusText(code)
	}
	return &http.Response{
		Status: status, StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		Request: req,
	}
}

var installOnce sync.Once

// InstallHTTP makes http.DefaultClient use a Transport over its current
// transport and refuses redirects for guest requests (the http tool already
// followed and checked them; the client returns the response it got).
// Redirects of other requests keep the client's behaviour (its own
// CheckRedirect, or net/http's default of at most 10). Idempotent and safe
// for concurrent callers; call it at start-up, before http.DefaultClient is
// used concurrently, since it changes the client's fields.
func InstallHTTP() {
	installOnce.Do(func() {
		c := http.DefaultClient
		if _, ok := c.Transport.(gate.GuestHTTPGuard); !ok {
			c.Transport = &Transport{Base: c.Transport}
		}
		prev := c.CheckRedirect
		c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if _, ok := gate.GuestFrom(req.Context()); ok {
				return http.ErrUseLastResponse
			}
			if prev != nil {
				return prev(req, via)
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		}
	})
}
