package web

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/tool"
)

// httpTestServer is a local server that counts the requests it gets.
type httpTestServer struct {
	*httptest.Server
	hits atomic.Int64
	port int
}

func httpServe(t testing.TB, h http.HandlerFunc) *httpTestServer {
	t.Helper()
	s := &httpTestServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	s.port = s.Listener.Addr().(*net.TCPAddr).Port
	return s
}

func httpServeTLS(t testing.TB, h http.HandlerFunc) *httpTestServer {
	t.Helper()
	s := &httpTestServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes refused by the tests are expected
	s.StartTLS()
	t.Cleanup(s.Close)
	s.port = s.Listener.Addr().(*net.TCPAddr).Port
	return s
}

// at returns scheme://host:port/path for the server under another host name.
func (s *httpTestServer) at(host, path string) string {
	scheme := "http"
	if s.TLS != nil {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s:%d%s", scheme, host, s.port, path)
}

// httpTestResolver resolves test names without DNS, counting lookups.
type httpTestResolver struct {
	mu    sync.Mutex
	names map[string][]string
	calls map[string]int
}

func httpNewResolver(names map[string][]string) *httpTestResolver {
	return &httpTestResolver{names: names, calls: map[string]int{}}
}

func (r *httpTestResolver) resolve(_ context.Context, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[host]++
	list, ok := r.names[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	// A name with several entries answers them in turn, one per lookup
	// (the last one repeats): that is how a rebinding DNS server behaves.
	i := min(r.calls[host]-1, len(list)-1)
	return []netip.Addr{netip.MustParseAddr(list[i])}, nil
}

func (r *httpTestResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

// httpTestNames is the default test DNS.
func httpTestNames() map[string][]string {
	return map[string][]string{
		"allowed.test":  {"127.0.0.1"},
		"other.test":    {"127.0.0.1"},
		"evil.test":     {"127.0.0.1"},
		"example.com":   {"127.0.0.1"}, // httptest's certificate names example.com
		"metadata.test": {"169.254.169.254"},
		"private.test":  {"10.0.0.1"},
		"searx.test":    {"127.0.0.1"},
		"brave.test":    {"127.0.0.1"},
	}
}

func httpNewTool(r *httpTestResolver) tool.Tool {
	return tool.Adapt[httpArgs](&HTTPTool{net: httpSeams{resolve: r.resolve}})
}

// httpPolicy is a policy granting exactly grants.
func httpPolicy(grants ...string) string {
	q := make([]string, len(grants))
	for i, g := range grants {
		q[i] = strconv.Quote(g)
	}
	return "version: 1\ngrants: [" + strings.Join(q, ", ") + "]\n"
}

// httpGate is a gate over tool with the given grants.
func httpGate(t testing.TB, tool tool.Tool, grants ...string) (*gate.Gate, *runtimetest.Audit) {
	t.Helper()
	return tooltest.Gate(t, httpPolicy(grants...), t.TempDir(), tool)
}

func httpArgsJSON(t testing.TB, args map[string]any) string {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func httpResult(t testing.TB, res tool.Result) HTTPResponse {
	t.Helper()
	if !res.Success {
		t.Fatalf("call failed: %+v", res.Error)
	}
	var d HTTPResponse
	if err := json.Unmarshal(res.Data, &d); err != nil {
		t.Fatalf("data %s: %v", res.Data, err)
	}
	return d
}

// httpWantError checks a failed result's code and that its message and
// hint hold the given fragments.
func httpWantError(t testing.TB, res tool.Result, code tool.Code, msgHas, hintHas string) {
	t.Helper()
	if res.Success || res.Error == nil {
		t.Fatalf("want %s, got success: %s", code, res.Output)
	}
	if res.Error.Code != code {
		t.Fatalf("want %s, got %s: %s (%s)", code, res.Error.Code, res.Error.Message, res.Error.Hint)
	}
	if !strings.Contains(res.Error.Message, msgHas) {
		t.Errorf("message %q lacks %q", res.Error.Message, msgHas)
	}
	if !strings.Contains(res.Error.Hint, hintHas) {
		t.Errorf("hint %q lacks %q", res.Error.Hint, hintHas)
	}
	// A hint naming a grant has it as data too.
	if g, ok := strings.CutPrefix(hintHas, "needs the grant "); ok && !slices.ContainsFunc(res.Error.Missing, func(m string) bool { return strings.HasPrefix(m, g) }) {
		t.Errorf("missing grants %q lack %q", res.Error.Missing, g)
	}
}

// httpEcho answers with what it received, as JSON.
func httpEcho(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Echo", "yes")
	json.NewEncoder(w).Encode(map[string]any{
		"method": r.Method, "path": r.URL.Path, "query": r.URL.RawQuery, "host": r.Host,
		"content_type": r.Header.Get("Content-Type"), "body": string(body),
		"user_agent": r.Header.Get("User-Agent"), "cookie_len": len(r.Header.Get("Cookie")),
		"x_custom": r.Header.Get("X-Custom"),
	})
}

func TestHTTPHappyPaths(t *testing.T) {
	srv := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/text":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			io.WriteString(w, "hello, world")
		case "/missing":
			http.Error(w, "no such page", http.StatusNotFound)
		case "/binary":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write([]byte{0xff, 0x00, 0xfe, 0x01})
		case "/bad-json":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, "{not json")
		case "/go-other":
			http.Redirect(w, r, fmt.Sprintf("http://other.test:%d/text", srv0port(r)), http.StatusFound)
		default:
			httpEcho(w, r)
		}
	})
	res := httpNewResolver(httpTestNames())
	g, _ := httpGate(t, httpNewTool(res), "net:allowed.test", "net:other.test", fmt.Sprintf("net:127.0.0.1:%d", srv.port))

	cases := []struct {
		name  string
		args  map[string]any
		check func(t *testing.T, r tool.Result, d HTTPResponse)
	}{
		{"get text", map[string]any{"method": "GET", "url": srv.at("allowed.test", "/text")}, func(t *testing.T, r tool.Result, d HTTPResponse) {
			if d.StatusCode != 200 || d.Body == nil || *d.Body != "hello, world" || d.JSON != nil || d.Truncated || d.BodyBytes != 12 {
				t.Fatalf("%+v", d)
			}
			if d.Headers["Content-Type"] != "text/plain; charset=utf-8" || d.ElapsedMS < 0 || d.FinalURL != srv.at("allowed.test", "/text") || len(d.Redirects) != 0 {
				t.Fatalf("%+v", d)
			}
			if !strings.Contains(r.Output, "200 OK") || !strings.HasSuffix(r.Output, "hello, world") {
				t.Fatalf("output %q", r.Output)
			}
		}},
		{"json response parsed, lower-case method", map[string]any{"method": "get", "url": srv.at("allowed.test", "/echo")}, func(t *testing.T, r tool.Result, d HTTPResponse) {
			var got map[string]any
			if err := json.Unmarshal(d.JSON, &got); err != nil || d.Body != nil {
				t.Fatalf("json %s body %v: %v", d.JSON, d.Body, err)
			}
			if got["method"] != "GET" || got["user_agent"] != httpUserAgent || got["host"] != fmt.Sprintf("allowed.test:%d", srv.port) {
				t.Fatalf("%v", got)
			}
		}},
		{"post json", map[string]any{"method": "POST", "url": srv.at("allowed.test", "/echo"), "json": map[string]any{"a": []int{1, 2}}}, func(t *testing.T, r tool.Result, d HTTPResponse) {
			var got map[string]any
			json.Unmarshal(d.JSON, &got)
			if got["method"] != "POST" || got["content_type"] != "application/json" || got["body"] != `{"a":[1,2]}` {
				t.Fatalf("%v", got)
			}
		}},
		{"put data with headers", map[string]any{"method": "PUT", "url": srv.at("allowed.test", "/echo"), "data": "x=1&y=2",
			"headers": map[string]string{"Content-Type": "application/x-www-form-urlencoded", "x-custom": "v1"}}, func(t *testing.T, r tool.Result, d HTTPResponse) {
			var got map[string]any
			json.Unmarshal(d.JSON, &got)
			if got["method"] != "PUT" || got["content_type"] != "application/x-www-form-urlencoded" || got["body"] != "x=1&y=2" || got["x_custom"] != "v1" {
				t.Fatalf("%v", got)
			}
		}},
		{"params added to the query", map[string]any{"method": "DELETE", "url": srv.at("allowed.test", "/echo?a=1#frag"), "params": map[string]string{"b": "2 3", "c": "&"}}, func(t *testing.T, r tool.Result, d HTTPResponse) {
			var got map[string]any
			json.Unmarshal(d.JSON, &got)
			if got["method"] != "DELETE" || got["query"] != "a=1&b=2+3&c=%26" {
				t.Fatalf("%v", got)
			}
			if d.FinalURL != srv.at("allowed.test", "/echo?a=1&b=2+3&c=%26") {
				t.Fatalf("final url %s", d.FinalURL)
			}
		}},
		{"head", map[string]any{"method": "HEAD", "url": srv.at("allowed.test", "/text")}, func(t *testing.T, r tool.Result, d HTTPResponse) {
			if d.StatusCode != 200 || d.BodyBytes != 0 {
				t.Fatalf("%+v", d)
			}
		}},
		{"http error status is a result with a warning", map[string]any{"method": "GET", "url": srv.at("allowed.test", "/missing")}, func(t *testing.T, r tool.Result, d HTTPResponse) {
			if d.StatusCode != 404 || !strings.Contains(strings.Join(r.Warnings, "|"), "404 Not Found") {
				t.Fatalf("%+v %v", d, r.Warnings)
			}
		}},
		{"binary body as base64", map[string]any{"method": "GET", "url": srv.at("allowed.test", "/binary")}, func(t *testing.T, r tool.Result, d HTTPResponse) {
			raw, err := base64.StdEncoding.DecodeString(*d.Body)
			if err != nil || d.BodyEncoding != "base64" || string(raw) != "\xff\x00\xfe\x01" || !strings.Contains(r.Output, "binary body: 4 bytes") {
				t.Fatalf("%+v %v", d, err)
			}
		}},
		{"invalid json body kept as text", map[string]any{"method": "GET", "url": srv.at("allowed.test", "/bad-json")}, func(t *testing.T, r tool.Result, d HTTPResponse) {
			if d.JSON != nil || d.Body == nil || *d.Body != "{not json" {
				t.Fatalf("%+v", d)
			}
		}},
		{"redirect to a granted host followed", map[string]any{"method": "GET", "url": srv.at("allowed.test", "/go-other"), "timeout": 5}, func(t *testing.T, r tool.Result, d HTTPResponse) {
			want := srv.at("other.test", "/text")
			if d.StatusCode != 200 || d.FinalURL != want || len(d.Redirects) != 1 || d.Redirects[0].URL != want || d.Redirects[0].StatusCode != 302 {
				t.Fatalf("%+v", d)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tooltest.Call(t, g, "http", httpArgsJSON(t, tc.args))
			tc.check(t, r, httpResult(t, r))
		})
	}
}

// srv0port is the port a request came in on.
func srv0port(r *http.Request) int {
	_, p, _ := net.SplitHostPort(r.Host)
	n, _ := strconv.Atoi(p)
	return n
}

func TestHTTPErrors(t *testing.T) {
	srv := httpServe(t, httpEcho)
	hang := httpServe(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	closed := httpServe(t, httpEcho)
	closedURL := closed.at("allowed.test", "/")
	closed.Close()
	tlsSrv := httpServeTLS(t, httpEcho)

	grants := []string{"net:allowed.test", "net:nowhere.test", "net:127.0.0.1"}
	g, _ := httpGate(t, httpNewTool(httpNewResolver(httpTestNames())), grants...)
	denyAll, _ := tooltest.Gate(t, httpPolicy("net:allowed.test")+"rules:\n  - { tool: http, action: deny }\n", t.TempDir(), httpNewTool(httpNewResolver(httpTestNames())))
	big := strings.Repeat("x", httpMaxRequestBody+1)

	cases := []struct {
		name          string
		gate          *gate.Gate
		args          map[string]any
		code          tool.Code
		msgHas, hintH string
	}{
		{"ftp scheme", g, map[string]any{"method": "GET", "url": "ftp://allowed.test/x"}, tool.CodeInvalidInput, `scheme "ftp"`, "http://"},
		{"relative URL", g, map[string]any{"method": "GET", "url": "/etc/passwd"}, tool.CodeInvalidInput, "no scheme", ""},
		{"no host", g, map[string]any{"method": "GET", "url": "http:///x"}, tool.CodeInvalidInput, "no host", ""},
		{"unparsable URL", g, map[string]any{"method": "GET", "url": "http://[::1"}, tool.CodeInvalidInput, "invalid URL", ""},
		{"invalid host", g, map[string]any{"method": "GET", "url": "http://a..b/"}, tool.CodeInvalidInput, "not a valid host", ""},
		{"method TRACE", g, map[string]any{"method": "TRACE", "url": srv.URL}, tool.CodeInvalidInput, "TRACE", "GET"},
		{"method CONNECT", g, map[string]any{"method": "CONNECT", "url": srv.URL}, tool.CodeInvalidInput, "CONNECT", ""},
		{"json and data", g, map[string]any{"method": "POST", "url": srv.URL, "json": 1, "data": "x"}, tool.CodeInvalidInput, "both", "either"},
		{"host header", g, map[string]any{"method": "GET", "url": srv.URL, "headers": map[string]string{"host": "evil.test"}}, tool.CodeInvalidInput, "Host", ""},
		{"duplicate header", g, map[string]any{"method": "GET", "url": srv.URL, "headers": map[string]string{"x-a": "1", "X-A": "2"}}, tool.CodeInvalidInput, "given twice", ""},
		{"header injection", g, map[string]any{"method": "GET", "url": srv.URL, "headers": map[string]string{"X-A": "a\r\nX-B: b"}}, tool.CodeInvalidInput, "control character", ""},
		{"unknown field", g, map[string]any{"method": "GET", "url": srv.URL, "verify": false}, tool.CodeInvalidInput, "verify", ""},
		{"timeout too long", g, map[string]any{"method": "GET", "url": srv.URL, "timeout": 121}, tool.CodeInvalidInput, "timeout", ""},
		{"request body too large", g, map[string]any{"method": "POST", "url": srv.URL, "data": big}, tool.CodeTooLarge, "request body", ""},
		{"no grant", g, map[string]any{"method": "GET", "url": "https://api.example.org/v1"}, tool.CodeCapabilityDenied, "net:api.example.org:443", "needs the grant net:api.example.org:443"},
		{"policy rule", denyAll, map[string]any{"method": "GET", "url": srv.at("allowed.test", "/")}, tool.CodePolicyDenied, "denied", ""},
		{"connection refused", g, map[string]any{"method": "GET", "url": closedURL}, tool.CodeNetworkError, "refused", ""},
		{"dns failure", g, map[string]any{"method": "GET", "url": "http://nowhere.test/"}, tool.CodeNetworkError, "cannot resolve nowhere.test", "host name"},
		{"tls unknown authority", g, map[string]any{"method": "GET", "url": tlsSrv.URL}, tool.CodeNetworkError, "TLS verification failed", "never skips"},
		{"timeout", g, map[string]any{"method": "GET", "url": hang.at("allowed.test", "/"), "timeout": 0.2}, tool.CodeTimeout, "within 200ms", "raise timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := tooltest.Call(t, tc.gate, "http", httpArgsJSON(t, tc.args))
			httpWantError(t, res, tc.code, tc.msgHas, tc.hintH)
		})
	}
	if n := srv.hits.Load(); n != 0 {
		t.Errorf("refused calls reached the server %d times", n)
	}
	if n := tlsSrv.hits.Load(); n != 0 {
		t.Errorf("a TLS server with an untrusted certificate got %d requests", n)
	}
}

func TestHTTPTLSVerifiedWithInjectedCA(t *testing.T) {
	srv := httpServeTLS(t, httpEcho)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	toolName := tool.Adapt[httpArgs](&HTTPTool{net: httpSeams{resolve: httpNewResolver(httpTestNames()).resolve, rootCAs: pool}})
	g, _ := httpGate(t, toolName, "net:example.com", "net:allowed.test", fmt.Sprintf("net:127.0.0.1:%d", srv.port))

	// Trusted CA, name in the certificate (by IP and by name).
	for _, u := range []string{srv.URL + "/ip", srv.at("example.com", "/name")} {
		d := httpResult(t, tooltest.Call(t, g, "http", httpArgsJSON(t, map[string]any{"method": "GET", "url": u})))
		if d.StatusCode != 200 || d.JSON == nil {
			t.Fatalf("%s: %+v", u, d)
		}
	}
	// Trusted CA, but the certificate does not name allowed.test.
	res := tooltest.Call(t, g, "http", httpArgsJSON(t, map[string]any{"method": "GET", "url": srv.at("allowed.test", "/")}))
	httpWantError(t, res, tool.CodeNetworkError, "TLS verification failed", "never skips")
	if n := srv.hits.Load(); n != 2 {
		t.Fatalf("server hits %d, want 2", n)
	}
}

func TestHTTPDryRun(t *testing.T) {
	srv := httpServe(t, httpEcho)
	res := httpNewResolver(httpTestNames())
	ws := t.TempDir()
	g, _ := tooltest.Gate(t, httpPolicy("net:allowed.test", "net:127.0.0.1"), ws, httpNewTool(res))
	before := tooltest.TreeChecksum(t, ws)
	r := tooltest.CallReq(t, g, gate.Request{Tool: "http", DryRun: true, Principal: []string{"test"}, Args: json.RawMessage(httpArgsJSON(t, map[string]any{
		"method": "post", "url": srv.at("ALLOWED.test.", "/items?x=1"), "params": map[string]string{"y": "2"},
		"json": map[string]any{"name": "n"}, "headers": map[string]string{"X-Custom": "v"}, "timeout": 7,
	}))})
	if !r.Success || !r.DryRun {
		t.Fatalf("%+v", r)
	}
	wantURL := srv.at("allowed.test", "/items?x=1&y=2")
	for _, want := range []string{"would send POST " + wantURL, "Content-Type: application/json", "X-Custom: v", "body: 12 bytes", "timeout 7s", "nothing was sent"} {
		if !strings.Contains(r.Output, want) {
			t.Errorf("preview lacks %q:\n%s", want, r.Output)
		}
	}
	var p httpPreview
	if err := json.Unmarshal(r.Data, &p); err != nil || p.Method != "POST" || p.URL != wantURL || p.BodyBytes != 12 || p.Need != fmt.Sprintf("net:allowed.test:%d", srv.port) {
		t.Fatalf("%s %v", r.Data, err)
	}
	if tooltest.TreeChecksum(t, ws) != before {
		t.Fatal("dry run changed the workspace")
	}
	if srv.hits.Load() != 0 || res.count("allowed.test") != 0 {
		t.Fatalf("dry run sent %d requests, %d lookups", srv.hits.Load(), res.count("allowed.test"))
	}
}

func TestHTTPRedactsSecrets(t *testing.T) {
	const secret = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	var seen atomic.Value
	srv := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Get("Authorization") + "|" + r.URL.Query().Get("access_token"))
		// A server that echoes the credentials back.
		fmt.Fprintf(w, "Authorization: %s\ntoken=%s\n", r.Header.Get("Authorization"), r.URL.Query().Get("access_token"))
	})
	g, audit := httpGate(t, httpNewTool(httpNewResolver(httpTestNames())), "net:allowed.test", "net:127.0.0.1")
	args := httpArgsJSON(t, map[string]any{"method": "GET", "url": srv.at("allowed.test", "/?access_token="+secret),
		"headers": map[string]string{"Authorization": "Bearer " + secret}})
	res := tooltest.Call(t, g, "http", args)
	if !res.Success {
		t.Fatalf("%+v", res.Error)
	}
	if got := seen.Load(); got != "Bearer "+secret+"|"+secret {
		t.Fatalf("the server got %q: credentials must pass through", got)
	}
	tooltest.AssertNoSecret(t, res, audit, secret)

	dry := tooltest.CallReq(t, g, gate.Request{Tool: "http", DryRun: true, Args: json.RawMessage(args), Principal: []string{"test"}})
	tooltest.AssertNoSecret(t, dry, audit, secret)
	denied := tooltest.Call(t, g, "http", httpArgsJSON(t, map[string]any{"method": "GET", "url": "http://ungranted.test/?token=" + secret}))
	httpWantError(t, denied, tool.CodeCapabilityDenied, "", "")
	tooltest.AssertNoSecret(t, denied, audit, secret)
}

func TestHTTPNoCookiesAcrossCalls(t *testing.T) {
	srv := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: "abc", Path: "/"})
		httpEcho(w, r)
	})
	g, _ := httpGate(t, httpNewTool(httpNewResolver(httpTestNames())), "net:allowed.test", "net:127.0.0.1")
	for i := 0; i < 2; i++ {
		d := httpResult(t, tooltest.Call(t, g, "http", httpArgsJSON(t, map[string]any{"method": "GET", "url": srv.at("allowed.test", "/")})))
		var got map[string]any
		json.Unmarshal(d.JSON, &got)
		if got["cookie_len"] != float64(0) {
			t.Fatalf("call %d sent a cookie: %v", i, got)
		}
	}
}

func TestHTTPIgnoresProxyEnvironment(t *testing.T) {
	proxy := httpServe(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "proxied") })
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	t.Setenv("NO_PROXY", "")
	srv := httpServe(t, httpEcho)
	g, _ := httpGate(t, httpNewTool(httpNewResolver(httpTestNames())), "net:allowed.test", "net:127.0.0.1")
	d := httpResult(t, tooltest.Call(t, g, "http", httpArgsJSON(t, map[string]any{"method": "GET", "url": srv.at("allowed.test", "/")})))
	if d.JSON == nil || proxy.hits.Load() != 0 || srv.hits.Load() != 1 {
		t.Fatalf("proxy hits %d, server hits %d: %+v", proxy.hits.Load(), srv.hits.Load(), d)
	}
}

func TestHTTPSpecAndConstructor(t *testing.T) {
	tools := Tools(Config{})
	if len(tools) != 2 || tools[0].Spec().Name != "http" || tools[1].Spec().Name != "search" {
		t.Fatalf("%v", tools)
	}
	reg := gate.NewRegistry()
	if err := reg.Register(tools...); err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools {
		if tool.Spec().ReadOnly {
			t.Errorf("%s must preview, not run, on a dry run", tool.Spec().Name)
		}
	}
}

// BenchmarkHTTPGet compares a GET through the gate (guarded client, fresh
// transport per call) with a plain net/http GET on a reused client.
func BenchmarkHTTPGet(b *testing.B) {
	srv := httpServe(b, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	g, _ := httpGate(b, httpNewTool(httpNewResolver(httpTestNames())), "net:allowed.test", "net:127.0.0.1")
	args := httpArgsJSON(b, map[string]any{"method": "GET", "url": srv.at("allowed.test", "/")})
	b.Run("tool_via_gate", func(b *testing.B) {
		for b.Loop() {
			if res := tooltest.Call(b, g, "http", args); !res.Success {
				b.Fatal(res.Error)
			}
		}
	})
	b.Run("net_http_baseline", func(b *testing.B) {
		c := &http.Client{}
		for b.Loop() {
			resp, err := c.Get(srv.URL)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
	b.Run("net_http_fresh_transport", func(b *testing.B) {
		for b.Loop() {
			tr := &http.Transport{}
			c := &http.Client{Transport: tr}
			resp, err := c.Get(srv.URL)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			tr.CloseIdleConnections()
		}
	})
}
