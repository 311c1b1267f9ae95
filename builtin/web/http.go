// Package web is the web family: the http tool (one HTTP(S) request, the
// net grants checked on every hop and every address connected to) and the
// search tool (a web search through the configured backend).
package web

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// Limits of the http tool.
const (
	// httpMaxBody caps the response body kept; the rest is not read and the
	// result says truncated.
	httpMaxBody = 1 << 20
	// httpMaxRequestBody caps the request body (json or data).
	httpMaxRequestBody = 512 << 10
	// httpDefaultTimeout and httpMaxTimeout bound a call, redirects and
	// body included.
	httpDefaultTimeout = 20 * time.Second
	httpMaxTimeout     = 120 * time.Second
	// httpMaxHeaderValue caps each response header value in the result.
	httpMaxHeaderValue = 4096
	// httpUserAgent is sent unless the call sets User-Agent.
	httpUserAgent = "warden-http/1"
)

// Config configures the web family.
type Config struct {
	// Search is the search tool's backend (see SearchConfig; cmd/warden
	// passes SearchConfigFromEnv(os.Getenv)).
	Search SearchConfig
}

// Tools returns the web family: the http tool and the search tool with
// the given backend configuration.
func Tools(cfg Config) []tool.Tool {
	return []tool.Tool{
		tool.Adapt[httpArgs](&HTTPTool{}),
		tool.Adapt[searchArgs](&SearchTool{Config: cfg.Search}),
	}
}

// HTTPTool is the `http` tool: one HTTP or HTTPS
// request, with the net grants checked on the URL's host, on every redirect
// hop and on every address actually connected to (so loopback, private,
// link-local and cloud metadata addresses are reachable only through a grant
// naming them, whatever a name resolves to). TLS is always verified; no
// proxy from the environment is used and no cookie outlives the call. The
// response body is capped at 1 MiB and marked truncated beyond.
type HTTPTool struct {
	net httpSeams
}

var (
	_ tool.Typed[httpArgs]          = (*HTTPTool)(nil)
	_ tool.TypedPreviewer[httpArgs] = (*HTTPTool)(nil)
	_ tool.SchemaRefiner            = (*HTTPTool)(nil)
)

// Spec implements tool.Typed.
func (t *HTTPTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "http",
		Description: "Make one HTTP(S) request and return status_code, headers, elapsed_ms and the body (parsed into json when the response is JSON). " +
			"The URL's host needs a net grant; redirects (at most 5) are followed only to granted hosts; loopback, private and metadata addresses " +
			"need a grant naming the address. TLS is always verified. Bodies over 1 MiB are cut and marked truncated.",
		Capabilities: []capability.Kind{capability.Net},
	}
}

// httpArgs are the http tool's arguments; their schema is the tool's
// input schema (tool.SchemaFor, and RefineSchema for json).
type httpArgs struct {
	Method  string            `json:"method" pattern:"^[A-Za-z]{3,7}$" jsonschema:"GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS"`
	URL     string            `json:"url" minLength:"1" maxLength:"8192" jsonschema:"absolute http:// or https:// URL; the host needs a net grant (net:HOST); user info (user@host) is refused"`
	Headers map[string]string `json:"headers,omitempty" maxProperties:"64" keyPattern:"^[!#$%&'*+.^_|~0-9A-Za-z-]{1,256}$" values.maxLength:"8192" jsonschema:"request headers, name to value (Authorization passes through; Host, Content-Length, Transfer-Encoding, Connection and Accept-Encoding are set by warden)"`
	Params  map[string]string `json:"params,omitempty" maxProperties:"256" keyPattern:"^.{1,512}$" values.maxLength:"8192" jsonschema:"query parameters added to the URL's query"`
	// JSON is any JSON value, kept as sent (RefineSchema says so: the
	// derived schema of a json.RawMessage is an array of bytes).
	JSON    json.RawMessage `json:"json,omitempty" jsonschema:"a JSON value sent as the body, with Content-Type application/json unless headers set one"`
	Data    *string         `json:"data,omitempty" jsonschema:"a text body sent as is (set Content-Type in headers); not together with json"`
	Timeout *float64        `json:"timeout,omitempty" exclusiveMinimum:"0" maximum:"120" jsonschema:"seconds for the whole call, redirects and body included (default 20, at most 120)"`
}

// RefineSchema implements tool.SchemaRefiner: json is any JSON value,
// which its Go type (raw bytes, kept as sent) cannot say.
func (t *HTTPTool) RefineSchema(s *jsonschema.Schema) {
	p := s.Properties["json"]
	*p = jsonschema.Schema{Description: p.Description}
}

// httpPlan is a call's request, fully decided before anything is sent.
type httpPlan struct {
	method  string
	url     *url.URL
	need    capability.Need
	header  http.Header
	body    []byte
	hasBody bool
	timeout time.Duration
}

var httpMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// httpForbiddenHeaders are set by the transport; a caller's value would
// either be ignored or (Host) make the request name another site than the
// one the grant was checked for.
var httpForbiddenHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Keep-Alive": true, "Upgrade": true, "Te": true, "Trailer": true, "Proxy-Connection": true,
}

func httpInvalid(hint, format string, args ...any) *tool.Error {
	return tool.Errorf(tool.CodeInvalidInput, hint, format, args...)
}

// httpPrepare validates the arguments and builds the plan: Needs, Preview
// and Run all start from it, so what is checked is what is sent.
func httpPrepare(a *httpArgs) (*httpPlan, *tool.Error) {
	p := &httpPlan{method: strings.ToUpper(a.Method), timeout: httpDefaultTimeout, header: http.Header{}}
	if !httpMethods[p.method] {
		return nil, httpInvalid("use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS", "method %q is not supported", a.Method)
	}
	u, err := url.Parse(a.URL)
	if err != nil {
		return nil, httpInvalid("give an absolute URL such as https://example.com/path", "invalid URL: %s", httpErrText(err))
	}
	if len(a.Params) > 0 {
		keys := make([]string, 0, len(a.Params))
		for k := range a.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		q := url.Values{}
		for _, k := range keys {
			q.Add(k, a.Params[k])
		}
		if u.RawQuery != "" {
			u.RawQuery += "&" + q.Encode()
		} else {
			u.RawQuery = q.Encode()
		}
		u.ForceQuery = false
	}
	canon, need, uerr := httpCanonicalURL(u)
	if uerr != nil {
		return nil, uerr
	}
	p.url, p.need = canon, need
	for name, value := range a.Headers {
		cn := http.CanonicalHeaderKey(name)
		if _, dup := p.header[cn]; dup {
			return nil, httpInvalid("give each header once", "header %s is given twice (header names are case-insensitive)", cn)
		}
		if cn == "Accept-Encoding" {
			return nil, httpInvalid("leave Accept-Encoding out: warden asks for gzip and decodes the body, so that it is redacted as the text it carries",
				"header Accept-Encoding cannot be set")
		}
		if httpForbiddenHeaders[cn] {
			return nil, httpInvalid("leave "+cn+" out: warden sets it from the URL and the body", "header %s cannot be set", cn)
		}
		for i := 0; i < len(value); i++ {
			if b := value[i]; b < 0x20 && b != '\t' || b == 0x7f {
				return nil, httpInvalid("header values are one line of text", "header %s holds a control character", cn)
			}
		}
		p.header.Set(cn, value)
	}
	switch {
	case len(a.JSON) > 0 && string(a.JSON) != "null" && a.Data != nil:
		return nil, httpInvalid("send either json or data", "json and data are both set")
	case len(a.JSON) > 0 && string(a.JSON) != "null":
		var buf bytes.Buffer
		if err := json.Compact(&buf, a.JSON); err != nil {
			return nil, httpInvalid("", "json: %v", err)
		}
		p.body, p.hasBody = buf.Bytes(), true
		if p.header.Get("Content-Type") == "" {
			p.header.Set("Content-Type", "application/json")
		}
	case a.Data != nil:
		p.body, p.hasBody = []byte(*a.Data), true
	}
	if len(p.body) > httpMaxRequestBody {
		return nil, tool.Errorf(tool.CodeTooLarge, fmt.Sprintf("send at most %d bytes of body", httpMaxRequestBody),
			"request body is %d bytes; the limit is %d", len(p.body), httpMaxRequestBody)
	}
	if a.Timeout != nil {
		p.timeout = time.Duration(*a.Timeout * float64(time.Second))
		if p.timeout <= 0 || p.timeout > httpMaxTimeout {
			return nil, httpInvalid("timeout is in seconds, at most 120", "timeout %v is out of range", *a.Timeout)
		}
	}
	return p, nil
}

// Needs implements tool.Typed: the net need of the URL's canonical host
// and port. Redirect hops and resolved addresses are checked as the call
// runs.
func (t *HTTPTool) Needs(_ *tool.Call, a *httpArgs) ([]capability.Need, error) {
	p, err := httpPrepare(a)
	if err != nil {
		return nil, err
	}
	return []capability.Need{p.need}, nil
}

// httpPreview is the dry run's data.
type httpPreview struct {
	Method      string            `json:"method"`
	URL         string            `json:"url"`
	Headers     map[string]string `json:"headers"`
	BodyBytes   int               `json:"body_bytes"`
	TimeoutS    float64           `json:"timeout_s"`
	Need        string            `json:"need"`
	MaxRedirect int               `json:"max_redirects"`
}

// Preview implements tool.TypedPreviewer: the request that would be
// sent, and nothing is sent (no DNS lookup either).
func (t *HTTPTool) Preview(_ context.Context, _ *tool.Call, a *httpArgs) tool.Outcome {
	p, err := httpPrepare(a)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	d := httpPreview{Method: p.method, URL: p.url.String(), Headers: map[string]string{}, BodyBytes: len(p.body),
		TimeoutS: p.timeout.Seconds(), Need: p.need.String(), MaxRedirect: httpMaxRedirects}
	var b strings.Builder
	fmt.Fprintf(&b, "would send %s %s\n", p.method, p.url)
	for _, name := range httpSortedKeys(p.header) {
		d.Headers[name] = p.header.Get(name)
		fmt.Fprintf(&b, "  %s: %s\n", name, p.header.Get(name))
	}
	if p.hasBody {
		fmt.Fprintf(&b, "  body: %d bytes\n", len(p.body))
	} else {
		b.WriteString("  no body\n")
	}
	fmt.Fprintf(&b, "needs %s; timeout %s; up to %d redirects, each re-checked against the net grants; nothing was sent", p.need, p.timeout, httpMaxRedirects)
	return tool.Outcome{Output: b.String(), Data: d}
}

// HTTPResponse is the http tool's data.
type HTTPResponse struct {
	StatusCode int               `json:"status_code"`
	Status     string            `json:"status"`
	Headers    map[string]string `json:"headers"`
	ElapsedMS  int64             `json:"elapsed_ms"`
	// Body is the response text; it is absent when JSON holds the parsed
	// body. BodyEncoding is "base64" when the body is not UTF-8 text.
	Body         *string         `json:"body,omitempty"`
	BodyEncoding string          `json:"body_encoding,omitempty"`
	JSON         json.RawMessage `json:"json,omitempty"`
	// BodyBytes is how many body bytes were kept (at most 1 MiB).
	BodyBytes int `json:"body_bytes"`
	// Truncated is true when the body was longer and cut.
	Truncated bool      `json:"truncated"`
	FinalURL  string    `json:"final_url"`
	Redirects []httpHop `json:"redirects"`
}

// Run implements tool.Typed.
func (t *HTTPTool) Run(ctx context.Context, c *tool.Call, a *httpArgs) tool.Outcome {
	p, rerr := httpPrepare(a)
	if rerr != nil {
		return tool.Outcome{Err: rerr}
	}
	g := &httpGuard{grants: c.Grants, workspace: c.Workspace, seams: t.net}
	client := g.client()
	defer httpCloseClient(client)

	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var body io.Reader
	if p.hasBody {
		body = bytes.NewReader(p.body)
	}
	req, err := http.NewRequestWithContext(ctx, p.method, p.url.String(), body)
	if err != nil {
		return tool.Fail(tool.CodeInvalidInput, "", "cannot build the request: %v", err)
	}
	req.Header = p.header.Clone()
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", httpUserAgent)
	}
	if p.method != http.MethodHead && req.Header.Get("Range") == "" {
		req.Header.Set("Accept-Encoding", "gzip") // decoded by httpDecoded
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return tool.Outcome{Err: httpClassify(err, c.Workspace, p.timeout)}
	}
	defer resp.Body.Close()
	decoded, derr := httpDecoded(resp)
	if derr != nil {
		return tool.Outcome{Err: derr}
	}
	raw, truncated, err := httpReadCapped(decoded, httpMaxBody)
	if errors.Is(err, errWireCap) {
		return tool.Fail(tool.CodeTooLarge, "fetch it uncompressed, or a smaller part of it",
			"the server's compressed body took more than %d MiB on the wire before giving %d bytes of text", httpMaxWire>>20, len(raw))
	}
	if err != nil {
		return tool.Outcome{Err: httpClassify(err, c.Workspace, p.timeout)}
	}
	elapsed := time.Since(start)

	out := HTTPResponse{
		StatusCode: resp.StatusCode, Status: resp.Status, Headers: httpHeaderMap(resp.Header),
		ElapsedMS: elapsed.Milliseconds(), BodyBytes: len(raw), Truncated: truncated,
		FinalURL: resp.Request.URL.String(), Redirects: g.hops,
	}
	if out.Redirects == nil {
		out.Redirects = []httpHop{}
	}
	text, isText := httpBodyText(raw, truncated)
	switch {
	case !truncated && len(raw) > 0 && httpIsJSON(resp.Header.Get("Content-Type")) && json.Valid(raw):
		var buf bytes.Buffer
		_ = json.Compact(&buf, raw)
		out.JSON = buf.Bytes()
	case isText:
		out.Body = &text
	default:
		enc := base64.StdEncoding.EncodeToString(raw)
		out.Body, out.BodyEncoding = &enc, "base64"
	}

	var warnings []string
	if resp.StatusCode >= 400 {
		warnings = append(warnings, fmt.Sprintf("the server answered %s", resp.Status))
	}
	size := fmt.Sprintf("%d bytes", len(raw))
	if truncated {
		size = fmt.Sprintf("%d bytes shown, body truncated", len(raw))
		warnings = append(warnings, fmt.Sprintf("response body truncated at %d bytes", httpMaxBody))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s → %s (%d ms, %s", resp.Proto, p.method, p.url, resp.Status, out.ElapsedMS, size)
	switch n := len(g.hops); n {
	case 0:
	case 1:
		fmt.Fprintf(&b, ", 1 redirect, final URL %s", out.FinalURL)
	default:
		fmt.Fprintf(&b, ", %d redirects, final URL %s", n, out.FinalURL)
	}
	b.WriteString(")\n")
	if len(raw) > 0 {
		b.WriteString("\n")
		if isText {
			b.WriteString(text)
		} else {
			fmt.Fprintf(&b, "[binary body: %d bytes, base64 in data.body]", len(raw))
		}
		if truncated {
			fmt.Fprintf(&b, "\n… [body truncated: first %d bytes shown]", len(raw))
		}
	}
	return tool.Outcome{Output: b.String(), Data: out, Warnings: warnings}
}

// httpReadCapped reads at most max bytes of r and says whether there was
// more.
func httpReadCapped(r io.Reader, max int64) ([]byte, bool, error) {
	raw, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, err
	}
	if int64(len(raw)) > max {
		return raw[:max], true, nil
	}
	return raw, false, nil
}

// httpBodyText returns the body as text and whether it is UTF-8 text. A
// truncated body may end inside a character; that tail is dropped.
func httpBodyText(raw []byte, truncated bool) (string, bool) {
	if truncated {
		for i := 0; i < utf8.UTFMax && len(raw) > 0; i++ {
			r, size := utf8.DecodeLastRune(raw)
			if r != utf8.RuneError || size != 1 {
				break
			}
			raw = raw[:len(raw)-1]
		}
	}
	if !utf8.Valid(raw) || bytes.IndexByte(raw, 0) >= 0 {
		return "", false
	}
	return string(raw), true
}

func httpIsJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// httpHeaderMap flattens response headers: values of a repeated header
// joined with ", " (Set-Cookie with "\n"), each capped.
func httpHeaderMap(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for name, vs := range h {
		sep := ", "
		if name == "Set-Cookie" {
			sep = "\n"
		}
		v := strings.Join(vs, sep)
		if len(v) > httpMaxHeaderValue {
			cut := httpMaxHeaderValue
			for cut > 0 && !utf8.RuneStart(v[cut]) {
				cut--
			}
			v = v[:cut] + "…[truncated]"
		}
		out[name] = strings.ToValidUTF8(v, "\uFFFD")
	}
	return out
}

func httpSortedKeys(h http.Header) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
