package web

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// The hostile suite of the http tool: every way a request could reach a host
// or an address its grants do not name, and every way a response could flood
// the caller.

func httpGet(t *testing.T, g *gate.Gate, url string) tool.Result {
	t.Helper()
	return tooltest.Call(t, g, "http", httpArgsJSON(t, map[string]any{"method": "GET", "url": url, "timeout": 10}))
}

// Issue case 1: a redirect to a host the grants do not name.
func TestHTTPHostileRedirectToUngrantedHost(t *testing.T) {
	evil := httpServe(t, httpEcho)
	origin := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, evil.at("evil.test", "/steal"), http.StatusFound)
	})
	g, _ := httpGate(t, httpNewTool(httpNewResolver(httpTestNames())), "net:allowed.test", "net:127.0.0.1")
	res := httpGet(t, g, origin.at("allowed.test", "/"))
	httpWantError(t, res, tool.CodeCapabilityDenied, "redirect to evil.test refused", fmt.Sprintf("needs the grant net:evil.test:%d", evil.port))
	if origin.hits.Load() != 1 || evil.hits.Load() != 0 {
		t.Fatalf("origin %d, evil %d hits", origin.hits.Load(), evil.hits.Load())
	}
}

// Issue case 2: a granted host redirects to a loopback literal (another
// service on this machine).
func TestHTTPHostileRedirectToLoopback(t *testing.T) {
	internal := httpServe(t, httpEcho)
	origin := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusTemporaryRedirect)
	})
	// The origin is reachable on its own port only.
	g, _ := httpGate(t, httpNewTool(httpNewResolver(httpTestNames())), "net:allowed.test", fmt.Sprintf("net:127.0.0.1:%d", origin.port))
	for _, to := range []string{
		fmt.Sprintf("http://127.0.0.1:%d/admin", internal.port),
		fmt.Sprintf("http://2130706433:%d/admin", internal.port), // the same, spelt as a decimal
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/admin", internal.port),
		fmt.Sprintf("http://localhost:%d/admin", internal.port),
	} {
		t.Run(to, func(t *testing.T) {
			res := httpGet(t, g, origin.at("allowed.test", "/?to="+to))
			httpWantError(t, res, tool.CodeCapabilityDenied, "refused", "needs the grant net:")
		})
	}
	if internal.hits.Load() != 0 {
		t.Fatalf("the internal service got %d requests", internal.hits.Load())
	}
}

// Issue case 3: a redirect to the cloud metadata address, literally or
// through a name that resolves to it (checked at connect time).
func TestHTTPHostileRedirectToMetadata(t *testing.T) {
	origin := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	res := httpNewResolver(httpTestNames())
	// net:* allows every DNS name, never an address it resolves to.
	g, _ := httpGate(t, httpNewTool(res), "net:*", fmt.Sprintf("net:127.0.0.1:%d", origin.port))
	cases := []struct{ to, msg, hint string }{
		{"http://169.254.169.254/latest/meta-data/", "redirect to 169.254.169.254 refused", "needs the grant net:169.254.169.254:80"},
		{"http://0xa9fea9fe/latest/meta-data/", "redirect to 169.254.169.254 refused", "needs the grant net:169.254.169.254:80"},
		{"http://metadata.test/latest/meta-data/", "resolved to 169.254.169.254 (cloud metadata)", "needs the grant net:169.254.169.254:80"},
		{"http://private.test/", "resolved to 10.0.0.1 (private (RFC 1918))", "needs the grant net:10.0.0.1:80"},
	}
	for _, tc := range cases {
		t.Run(tc.to, func(t *testing.T) {
			r := httpGet(t, g, origin.at("allowed.test", "/?to="+tc.to))
			httpWantError(t, r, tool.CodeCapabilityDenied, tc.msg, tc.hint)
		})
	}
	if res.count("metadata.test") != 1 {
		t.Fatalf("metadata.test resolved %d times", res.count("metadata.test"))
	}
}

// Issue case 4: user info makes `allowed.test@evil.test` name the host
// evil.test. User info is refused outright, before anything is resolved.
func TestHTTPHostileUserInfo(t *testing.T) {
	srv := httpServe(t, httpEcho)
	res := httpNewResolver(httpTestNames())
	g, _ := httpGate(t, httpNewTool(res), "net:allowed.test", "net:127.0.0.1")
	for _, u := range []string{
		srv.at("allowed.test@evil.test", "/"),
		fmt.Sprintf("http://allowed.test:%d@evil.test:%d/", srv.port, srv.port),
		fmt.Sprintf("http://allowed.test:secret@evil.test:%d/", srv.port),
		fmt.Sprintf("http://allowed.test%%40x@evil.test:%d/", srv.port),
		srv.at("user@allowed.test", "/"), // even when the host is the granted one
	} {
		t.Run(u, func(t *testing.T) {
			r := httpGet(t, g, u)
			httpWantError(t, r, tool.CodeInvalidInput, "user info", "Authorization")
			if strings.Contains(u, "evil.test") && !strings.Contains(r.Error.Message, `its host is "evil.test"`) {
				t.Errorf("message %q does not name the real host", r.Error.Message)
			}
			if strings.Contains(r.Error.Message, "secret") {
				t.Errorf("message %q repeats the password", r.Error.Message)
			}
		})
	}
	// A redirect carrying user info is refused too.
	origin := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srv.at("allowed.test@evil.test", "/"), http.StatusFound)
	})
	r := httpGet(t, g, origin.at("allowed.test", "/"))
	httpWantError(t, r, tool.CodeNetworkError, "user info", "")
	if srv.hits.Load() != 0 || res.count("evil.test") != 0 {
		t.Fatalf("server hits %d, evil.test lookups %d", srv.hits.Load(), res.count("evil.test"))
	}
}

// Issue case 5: IPv4 spelt as a decimal, hex, octal or short number is the
// loopback address; the need names 127.0.0.1 and what is dialled is
// 127.0.0.1, never a name handed to the resolver.
func TestHTTPHostileNumericIP(t *testing.T) {
	srv := httpServe(t, httpEcho)
	res := httpNewResolver(httpTestNames())
	spellings := []string{"2130706433", "0x7f000001", "0177.0.0.1", "0x7f.0.0.1", "127.1", "017700000001", "[::ffff:7f00:1]"}

	deny, _ := httpGate(t, httpNewTool(res), "net:allowed.test", "net:*")
	for _, host := range spellings {
		t.Run("denied/"+host, func(t *testing.T) {
			r := httpGet(t, deny, srv.at(host, "/"))
			httpWantError(t, r, tool.CodeCapabilityDenied, fmt.Sprintf("net:127.0.0.1:%d", srv.port), fmt.Sprintf("needs the grant net:127.0.0.1:%d", srv.port))
		})
	}
	if srv.hits.Load() != 0 {
		t.Fatalf("server hits %d", srv.hits.Load())
	}
	allow, _ := httpGate(t, httpNewTool(res), fmt.Sprintf("net:127.0.0.1:%d", srv.port))
	for _, host := range spellings {
		t.Run("granted/"+host, func(t *testing.T) {
			d := httpResult(t, httpGet(t, allow, srv.at(host, "/x")))
			if want := fmt.Sprintf("http://127.0.0.1:%d/x", srv.port); d.FinalURL != want {
				t.Fatalf("final URL %s, want %s", d.FinalURL, want)
			}
		})
	}
	for name, n := range res.calls {
		t.Errorf("resolver asked for %q %d times: numeric hosts must never reach DNS", name, n)
	}
}

// Issue case 6: an oversized body is capped and marked truncated, and so is
// a compressed one that inflates past the cap.
func TestHTTPHostileOversizedBody(t *testing.T) {
	const size = 3 << 20
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zw.Write(bytes.Repeat([]byte("A"), 16<<20))
	zw.Close()
	srv := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if r.URL.Path == "/gzip" {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(bomb.Bytes())
			return
		}
		chunk := strings.Repeat("é", 1000) // 2-byte runes after one byte: the cut falls inside one
		io.WriteString(w, "x")
		for n := 0; n < size; n += len(chunk) {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	})
	g, _ := httpGate(t, httpNewTool(httpNewResolver(httpTestNames())), "net:allowed.test", "net:127.0.0.1")
	for _, path := range []string{"/big", "/gzip"} {
		t.Run(path, func(t *testing.T) {
			r := httpGet(t, g, srv.at("allowed.test", path))
			d := httpResult(t, r)
			if !d.Truncated || d.BodyBytes != httpMaxBody || d.Body == nil || len(*d.Body) > httpMaxBody || d.BodyEncoding != "" {
				t.Fatalf("truncated %v, body_bytes %d, encoding %q", d.Truncated, d.BodyBytes, d.BodyEncoding)
			}
			if !strings.Contains(strings.SplitN(r.Output, "\n", 2)[0], "body truncated") {
				t.Fatalf("output's first line does not mark the truncation: %.200q", r.Output)
			}
			if !strings.Contains(strings.Join(r.Warnings, "|"), "truncated") {
				t.Fatalf("warnings %v", r.Warnings)
			}
		})
	}
}

// A flood of response headers is refused, not buffered.
func TestHTTPHostileHeaderFlood(t *testing.T) {
	srv := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 200; i++ {
			w.Header().Set(fmt.Sprintf("X-Flood-%d", i), strings.Repeat("h", 1024))
		}
	})
	g, _ := httpGate(t, httpNewTool(httpNewResolver(httpTestNames())), "net:allowed.test", "net:127.0.0.1")
	httpWantError(t, httpGet(t, g, srv.at("allowed.test", "/")), tool.CodeNetworkError, "headers exceeded", "")
}

// A granted name that resolves to loopback (DNS rebinding to this machine)
// is refused at connect time: the host grant never covers special addresses.
func TestHTTPHostileRebindingToLoopback(t *testing.T) {
	srv := httpServe(t, httpEcho)
	res := httpNewResolver(httpTestNames())
	g, _ := httpGate(t, httpNewTool(res), "net:allowed.test", "net:*.test")
	r := httpGet(t, g, srv.at("allowed.test", "/"))
	httpWantError(t, r, tool.CodeCapabilityDenied, "allowed.test port", "needs the grant net:127.0.0.1:")
	if !strings.Contains(r.Error.Message, "resolved to 127.0.0.1 (loopback)") {
		t.Fatalf("message %q", r.Error.Message)
	}
	if srv.hits.Load() != 0 || res.count("allowed.test") != 1 {
		t.Fatalf("hits %d lookups %d", srv.hits.Load(), res.count("allowed.test"))
	}
}

// Rebinding between connections: the first lookup answers a granted
// address, the next one (a new connection after a redirect) a private one.
// Every connection is checked, so the second is refused.
func TestHTTPHostileRebindingPerConnection(t *testing.T) {
	srv := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/first" {
			w.Header().Set("Connection", "close") // force a new connection, hence a new lookup
			http.Redirect(w, r, "/second", http.StatusFound)
			return
		}
		httpEcho(w, r)
	})
	names := httpTestNames()
	names["allowed.test"] = []string{"127.0.0.1", "10.1.2.3"}
	res := httpNewResolver(names)
	g, _ := httpGate(t, httpNewTool(res), "net:allowed.test", fmt.Sprintf("net:127.0.0.1:%d", srv.port))
	r := httpGet(t, g, srv.at("allowed.test", "/first"))
	httpWantError(t, r, tool.CodeCapabilityDenied, "resolved to 10.1.2.3", "needs the grant net:10.1.2.3:")
	if srv.hits.Load() != 1 || res.count("allowed.test") != 2 {
		t.Fatalf("hits %d lookups %d", srv.hits.Load(), res.count("allowed.test"))
	}
}

// file:, gopher: and other schemes are refused, as input and as redirects.
func TestHTTPHostileSchemes(t *testing.T) {
	origin := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	g, _ := httpGate(t, httpNewTool(httpNewResolver(httpTestNames())), "net:*", "net:127.0.0.1")
	for _, u := range []string{"file:///etc/passwd", "gopher://allowed.test:70/_stats", "ftp://allowed.test/", "dict://allowed.test:11211/", "javascript:alert(1)", "ws://allowed.test/"} {
		t.Run(u, func(t *testing.T) {
			httpWantError(t, httpGet(t, g, u), tool.CodeInvalidInput, "not supported", "http://")
		})
	}
	for _, to := range []string{"file:///etc/passwd", "gopher://allowed.test:70/_x"} {
		t.Run("redirect to "+to, func(t *testing.T) {
			httpWantError(t, httpGet(t, g, origin.at("allowed.test", "/?to="+to)), tool.CodeNetworkError, "redirect refused", "")
		})
	}
}

// A redirect loop stops after httpMaxRedirects hops.
func TestHTTPHostileRedirectLoop(t *testing.T) {
	srv := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	g, _ := httpGate(t, httpNewTool(httpNewResolver(httpTestNames())), "net:allowed.test", "net:127.0.0.1")
	httpWantError(t, httpGet(t, g, srv.at("allowed.test", "/loop")), tool.CodeNetworkError, "stopped after 5 redirects", "final URL")
	if n := srv.hits.Load(); n != httpMaxRedirects+1 {
		t.Fatalf("server hits %d, want %d", n, httpMaxRedirects+1)
	}
}

// Credentials are not forwarded when a redirect leaves the host, and the
// Host header cannot be set to front another site through a granted one.
func TestHTTPHostileCredentialsAndHostHeader(t *testing.T) {
	other := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "auth=%q referer=%q", r.Header.Get("Authorization"), r.Header.Get("Referer"))
	})
	origin := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.at("other.test", "/"), http.StatusFound)
	})
	g, _ := httpGate(t, httpNewTool(httpNewResolver(httpTestNames())), "net:allowed.test", "net:other.test", "net:127.0.0.1")
	r := tooltest.Call(t, g, "http", httpArgsJSON(t, map[string]any{"method": "GET", "url": origin.at("allowed.test", "/?q=private"),
		"headers": map[string]string{"Authorization": "Bearer abc"}}))
	d := httpResult(t, r)
	if *d.Body != `auth="" referer=""` {
		t.Fatalf("the other host got %s", *d.Body)
	}
	for _, name := range []string{"Host", "host", "Transfer-Encoding", "Content-Length", "Connection"} {
		r := tooltest.Call(t, g, "http", httpArgsJSON(t, map[string]any{"method": "GET", "url": origin.at("allowed.test", "/"),
			"headers": map[string]string{name: "evil.test"}}))
		httpWantError(t, r, tool.CodeInvalidInput, "cannot be set", "warden sets it")
	}
}

// IPv6 loopback and zone identifiers are refused like IPv4 ones.
func TestHTTPHostileIPv6(t *testing.T) {
	g, _ := httpGate(t, httpNewTool(httpNewResolver(httpTestNames())), "net:*")
	httpWantError(t, httpGet(t, g, "http://[::1]:8080/"), tool.CodeCapabilityDenied, "net:[::1]:8080", "needs the grant net:[::1]:8080")
	httpWantError(t, httpGet(t, g, "http://[fe80::1%25eth0]/"), tool.CodeInvalidInput, "", "")
	httpWantError(t, httpGet(t, g, "http://[fd00:ec2::254]/"), tool.CodeCapabilityDenied, "fd00:ec2::254", "")
}

// The dialer's Control check is the last line: whatever address reaches
// connect(2) is checked against the grants, so even a dial that bypassed
// resolution could not reach a special address.
func TestHTTPHostileControlChecksSocketAddress(t *testing.T) {
	g := &httpGuard{grants: capability.NewSet("/ws", capability.MustParse("net:*"), capability.MustParse("net:10.0.0.0/8:443"))}
	cases := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:80", false},
		{"169.254.169.254:80", false},
		{"[::1]:80", false},
		{"[::ffff:127.0.0.1]:80", false},
		{"10.2.3.4:80", false},
		{"10.2.3.4:443", true},
		{"93.184.216.34:443", true},
		{"not-an-address:80", false},
	}
	for _, tc := range cases {
		err := g.control(context.Background(), "tcp", tc.addr, nil)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want allowed=%v", tc.addr, err, tc.ok)
		}
	}
	// And dialContext refuses before connecting.
	if _, err := g.dialContext(context.Background(), "tcp", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("dial loopback: %v", err)
	}
	g.seams.resolve = func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("::ffff:169.254.169.254")}, nil
	}
	if _, err := g.dialContext(context.Background(), "tcp", "metadata.test:80"); err == nil || !strings.Contains(err.Error(), "cloud metadata") {
		t.Fatalf("dial mapped metadata: %v", err)
	}
}

// A compressed body is redacted as the text it carries: a secret inside a
// gzip or deflate body (the transport's own gzip, one sent unasked — the
// request carried a Range header, so the transport asked for none —, a
// deflate one, gzip applied twice) is masked in the outcome and the audit
// record, never shown as compressed bytes in base64 that hide it. An
// encoding warden does not decode (br) is refused, and so is a request
// that asks for one itself (Accept-Encoding: warden asks for gzip and
// decodes it).
func TestHTTPHostileCompressedBody(t *testing.T) {
	const key, pw = "AKIAZ3MHQXE7RJ5TWV2K", "Xk7vQ2mR9tLp4"
	text := "config:\npassword=" + pw + "\naws_key: " + key + "\n"
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	var zl bytes.Buffer
	zw := zlib.NewWriter(&zl)
	io.WriteString(zw, text)
	zw.Close()
	srv := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		body := []byte(text)
		switch r.URL.Path {
		case "/gzip":
			w.Header().Set("Content-Encoding", "gzip")
			body = gz(body)
		case "/deflate":
			w.Header().Set("Content-Encoding", "deflate")
			body = zl.Bytes()
		case "/twice":
			w.Header().Set("Content-Encoding", "gzip, gzip")
			body = gz(gz(body))
		case "/br":
			w.Header().Set("Content-Encoding", "br")
			body = gz(body) // not brotli: it is refused unread
		case "/twolines": // two header lines: the transport read the first only
			w.Header()["Content-Encoding"] = []string{"gzip", "gzip"}
			body = gz(gz(body))
		case "/empties": // gzip members that decode to nothing, past the wire cap
			w.Header().Set("Content-Encoding", "gzip")
			empty := gz(nil)
			for n := 0; n < (17<<20)/len(empty); n++ {
				w.Write(empty)
			}
			return
		case "/twolinesbr":
			w.Header()["Content-Encoding"] = []string{"gzip", "br"}
			body = gz(gz(body))
		}
		w.Write(body)
	})
	g, audit := httpGate(t, httpNewTool(httpNewResolver(httpTestNames())), "net:allowed.test", "net:127.0.0.1")
	get := func(path string, headers map[string]string) tool.Result {
		args := map[string]any{"method": "GET", "url": srv.at("allowed.test", path)}
		if headers != nil {
			args["headers"] = headers
		}
		return tooltest.Call(t, g, "http", httpArgsJSON(t, args))
	}
	for _, c := range []struct {
		path    string
		headers map[string]string
	}{{"/gzip", nil}, {"/gzip", map[string]string{"Range": "bytes=0-"}}, {"/deflate", nil}, {"/twice", nil}, {"/twolines", nil}} {
		res := get(c.path, c.headers)
		tooltest.AssertNoSecret(t, res, audit, key)
		tooltest.AssertNoSecret(t, res, audit, pw)
		d := httpResult(t, res)
		if d.BodyEncoding != "" || !strings.Contains(res.Output, "[REDACTED:aws-access-key:") || !strings.Contains(res.Output, "password=[REDACTED:password:") {
			t.Errorf("%s %v: body encoding %q, output %.300q", c.path, c.headers, d.BodyEncoding, res.Output)
		}
		if ce := d.Headers["Content-Encoding"]; ce != "" {
			t.Errorf("%s %v: the decoded body is said to be %s", c.path, c.headers, ce)
		}
	}
	httpWantError(t, get("/empties", nil), tool.CodeTooLarge, "MiB", "")
	for _, path := range []string{"/br", "/twolinesbr"} {
		httpWantError(t, get(path, nil), tool.CodeOperationNotSupported, "br", "")
	}
	for _, ae := range []string{"gzip", "br", "gzip, deflate, br"} {
		res := get("/gzip", map[string]string{"Accept-Encoding": ae})
		httpWantError(t, res, tool.CodeInvalidInput, "Accept-Encoding", "warden")
	}
}
