package hostfuncs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenrt/warden/hostfuncs"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/tool"
)

// server is a local test server counting its requests.
type server struct {
	*httptest.Server
	hits atomic.Int64
	port int
}

func serve(t testing.TB, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	s.port = s.Listener.Addr().(*net.TCPAddr).Port
	return s
}

func (s *server) grant() string { return fmt.Sprintf("net:127.0.0.1:%d", s.port) }

// asError returns the *tool.Error err wraps, or nil.
func asError(err error) *tool.Error {
	var e *tool.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// TestFetchThroughGate runs examples/fetch: its http_request goes through
// http.DefaultClient → Transport → the http tool, under run ∩ tool grants.
func TestFetchThroughGate(t *testing.T) {
	other := serve(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "other server") })
	var srv *server
	srv = serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/text":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprintf(w, "hello from %s", r.Header.Get("User-Agent"))
		case "/self":
			http.Redirect(w, r, "/text", http.StatusFound)
		case "/other":
			http.Redirect(w, r, other.URL+"/", http.StatusFound)
		case "/evil":
			http.Redirect(w, r, fmt.Sprintf("http://evil.test:%d/text", srv.port), http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	})
	cp := compile(t, "examples/fetch", nil)
	granted := []string{srv.grant()}
	tests := []struct {
		name      string
		path      string
		run, tool []string
		wantBody  string    // success: the body the guest saw
		wantCode  tool.Code // failure
		hits      int64     // requests srv gets
	}{
		{"allowed", "/text", granted, granted, "hello from warden-fetch-test/1", "", 1},
		{"redirect to the same host", "/self", granted, granted, "hello from warden-fetch-test/1", "", 2},
		{"redirect to another port of 127.0.0.1", "/other", granted, granted, "", tool.CodeCapabilityDenied, 1},
		{"redirect to an ungranted host", "/evil", granted, granted, "", tool.CodeCapabilityDenied, 1},
		{"tool not granted", "/text", granted, nil, "", tool.CodeCapabilityDenied, 0},
		{"run not granted", "/text", nil, granted, "", tool.CodeCapabilityDenied, 0},
		{"tool granted another host", "/text", granted, []string{"net:example.com"}, "", tool.CodeCapabilityDenied, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, []string{srv.grant(), other.grant(), "net:example.com"})
			srv.hits.Store(0)
			other.hits.Store(0)
			out, err := run(t, cp, e.guest(t, "fetch", tc.run, tc.tool), fmt.Sprintf(`{"url":%q}`, srv.URL+tc.path), 20*time.Second)
			if tc.wantCode == "" {
				if err != nil {
					t.Fatalf("fetch: %v", err)
				}
				var r struct {
					Status int    `json:"status"`
					Body   string `json:"body"`
				}
				if err := json.Unmarshal([]byte(out), &r); err != nil || r.Status != 200 || r.Body != tc.wantBody {
					t.Fatalf("output %s (%v)", out, err)
				}
				wantAudit(t, e.audit, "http", "ok")
			} else {
				if err == nil {
					t.Fatalf("fetch succeeded: %s", out)
				}
				if re := asError(err); re == nil || re.Code != tc.wantCode {
					t.Fatalf("err %v (tool.Error %v), want %s", err, re, tc.wantCode)
				}
				t.Logf("guest call error: %v", err)
				ev := wantAudit(t, e.audit, "http", string(tc.wantCode))
				if tc.hits == 0 && (ev.Decision == nil || ev.Decision.Action != policy.ActionDeny) {
					t.Errorf("decision %+v, want deny before anything is sent", ev.Decision)
				}
			}
			if n := srv.hits.Load(); n != tc.hits {
				t.Errorf("server got %d requests, want %d", n, tc.hits)
			}
			if n := other.hits.Load(); n != 0 {
				t.Errorf("the other server got %d requests", n)
			}
		})
	}
}

// do sends req through http.DefaultClient (Transport installed by
// TestMain) as guest g.
func do(t *testing.T, g *gate.Guest, method, url string, body io.Reader, header http.Header) (*http.Response, []byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if g != nil {
		ctx = gate.WithGuest(ctx, g)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b, nil
}

func TestTransportResponses(t *testing.T) {
	binary := []byte{0xff, 0x00, 0xfe, 0x01, 'x'}
	big := bytes.Repeat([]byte("a"), 1<<20+100)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{
				"method": r.Method, "host": r.Host, "body": string(body), "x_custom": r.Header.Get("X-Custom"),
				"x_multi": r.Header.Values("X-Multi"), "te": r.Header.Get("Te"), "content_type": r.Header.Get("Content-Type"),
			})
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, "{ \"a\" : [1, 2] }")
		case "/binary":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(binary)
		case "/big":
			w.Header().Set("Content-Type", "text/plain")
			w.Write(big)
		case "/spoof":
			w.Header().Set("X-Warden-Truncated", "true")
			w.Header().Set("X-Warden-Dry-Run", "true")
			io.WriteString(w, "small")
		case "/cookies":
			http.SetCookie(w, &http.Cookie{Name: "a", Value: "1"})
			http.SetCookie(w, &http.Cookie{Name: "b", Value: "2"})
			io.WriteString(w, "c")
		case "/missing":
			http.Error(w, "no such page", http.StatusNotFound)
		case "/notmodified":
			w.WriteHeader(http.StatusNotModified)
		default:
			http.NotFound(w, r)
		}
	})
	e := newEnv(t, []string{srv.grant()})
	g := e.guest(t, "fetch", []string{srv.grant()}, []string{srv.grant()})

	t.Run("post with headers and a body", func(t *testing.T) {
		h := http.Header{"X-Custom": {"v1"}, "X-Multi": {"a", "b"}, "Connection": {"close"}, "Te": {"trailers"},
			"Host": {"evil.test"}, "Content-Type": {"text/plain"}, "Accept-Encoding": {"br"}}
		resp, body, err := do(t, g, http.MethodPost, srv.URL+"/echo", strings.NewReader("héllo"), h)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Method, Host, Body, XCustom, Te, ContentType string
			XMulti                                       []string
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		if err := dec.Decode(&struct {
			Method      *string   `json:"method"`
			Host        *string   `json:"host"`
			Body        *string   `json:"body"`
			XCustom     *string   `json:"x_custom"`
			XMulti      *[]string `json:"x_multi"`
			Te          *string   `json:"te"`
			ContentType *string   `json:"content_type"`
		}{&got.Method, &got.Host, &got.Body, &got.XCustom, &got.XMulti, &got.Te, &got.ContentType}); err != nil {
			t.Fatalf("body %s: %v", body, err)
		}
		if got.Method != "POST" || got.Body != "héllo" || got.XCustom != "v1" || got.Te != "" || got.ContentType != "text/plain" ||
			got.Host != fmt.Sprintf("127.0.0.1:%d", srv.port) || strings.Join(got.XMulti, ",") != "a, b" {
			t.Errorf("server saw %+v", got)
		}
		if resp.StatusCode != 200 || resp.Request == nil || resp.ContentLength != int64(len(body)) || resp.Header.Get("Content-Length") != fmt.Sprint(len(body)) {
			t.Errorf("response %d, request %v, length %d/%s for %d bytes", resp.StatusCode, resp.Request != nil, resp.ContentLength, resp.Header.Get("Content-Length"), len(body))
		}
		ev := wantAudit(t, e.audit, "http", "ok")
		if !strings.Contains(string(ev.Args), `"data":"héllo"`) || strings.Contains(string(ev.Args), "Connection") {
			t.Errorf("audited args %s", ev.Args)
		}
	})
	t.Run("json body as compact text", func(t *testing.T) {
		resp, body, err := do(t, g, http.MethodGet, srv.URL+"/json", nil, nil)
		if err != nil || string(body) != `{"a":[1,2]}` || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("body %q, %v", body, err)
		}
	})
	t.Run("binary body decoded", func(t *testing.T) {
		_, body, err := do(t, g, http.MethodGet, srv.URL+"/binary", nil, nil)
		if err != nil || !bytes.Equal(body, binary) {
			t.Fatalf("body %v, %v", body, err)
		}
	})
	t.Run("truncated", func(t *testing.T) {
		resp, body, err := do(t, g, http.MethodGet, srv.URL+"/big", nil, nil)
		if err != nil || len(body) != 1<<20 || resp.Header.Get("X-Warden-Truncated") != "true" {
			t.Fatalf("%d bytes, truncated %q, %v", len(body), resp.Header.Get("X-Warden-Truncated"), err)
		}
	})
	t.Run("warden headers from the server dropped", func(t *testing.T) {
		resp, body, err := do(t, g, http.MethodGet, srv.URL+"/spoof", nil, nil)
		if err != nil || string(body) != "small" || resp.Header.Get("X-Warden-Truncated") != "" || resp.Header.Get("X-Warden-Dry-Run") != "" {
			t.Fatalf("body %q, headers %v, %v", body, resp.Header, err)
		}
	})
	t.Run("set-cookie redacted by the gate", func(t *testing.T) {
		resp, body, err := do(t, g, http.MethodGet, srv.URL+"/cookies", nil, nil)
		if err != nil || string(body) != "c" || len(resp.Header["Set-Cookie"]) == 0 {
			t.Fatalf("%v %q, %v", resp, body, err)
		}
		for _, v := range resp.Header["Set-Cookie"] {
			if strings.Contains(v, "a=1") || strings.Contains(v, "b=2") {
				t.Errorf("cookie reached the guest: %q", v)
			}
		}
	})
	t.Run("error status is a response", func(t *testing.T) {
		resp, body, err := do(t, g, http.MethodGet, srv.URL+"/missing", nil, nil)
		if err != nil || resp.StatusCode != 404 || resp.Status != "404 Not Found" || !strings.Contains(string(body), "no such page") {
			t.Fatalf("%v %q, %v", resp, body, err)
		}
	})
	t.Run("304 without a body", func(t *testing.T) {
		resp, body, err := do(t, g, http.MethodGet, srv.URL+"/notmodified", nil, nil)
		if err != nil || resp.StatusCode != 304 || len(body) != 0 {
			t.Fatalf("%v %q, %v", resp, body, err)
		}
	})
	t.Run("head", func(t *testing.T) {
		resp, body, err := do(t, g, http.MethodHead, srv.URL+"/json", nil, nil)
		if err != nil || resp.StatusCode != 200 || len(body) != 0 {
			t.Fatalf("%v %q, %v", resp, body, err)
		}
	})
}

func TestTransportRefusals(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	e := newEnv(t, []string{srv.grant()})
	g := e.guest(t, "fetch", []string{srv.grant()}, []string{srv.grant()})
	tests := []struct {
		name    string
		method  string
		url     string
		body    io.Reader
		header  http.Header
		code    tool.Code
		audited bool
	}{
		{"non-UTF-8 body", http.MethodPost, srv.URL + "/", bytes.NewReader([]byte{0xff, 0xfe}), nil, tool.CodeInvalidInput, false},
		{"body too large", http.MethodPost, srv.URL + "/", bytes.NewReader(bytes.Repeat([]byte("a"), 512<<10+1)), nil, tool.CodeTooLarge, false},
		{"bad header value", http.MethodGet, srv.URL + "/", nil, http.Header{"X-Bad": {strings.Repeat("v", 9000)}}, tool.CodeInvalidInput, true},
		{"method the tool refuses", "TRACE", srv.URL + "/", nil, nil, tool.CodeInvalidInput, true},
		{"user info", http.MethodGet, fmt.Sprintf("http://user@127.0.0.1:%d/", srv.port), nil, nil, tool.CodeInvalidInput, true},
		{"ungranted port", http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", srv.port+1), nil, nil, tool.CodeCapabilityDenied, true},
		{"metadata address", http.MethodGet, "http://169.254.169.254/latest/meta-data/", nil, nil, tool.CodeCapabilityDenied, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.audit.reset()
			srv.hits.Store(0)
			_, _, err := do(t, g, tc.method, tc.url, tc.body, tc.header)
			if re := asError(err); re == nil || re.Code != tc.code {
				t.Fatalf("err %v, want %s", err, tc.code)
			}
			if srv.hits.Load() != 0 {
				t.Error("the request reached the server")
			}
			if n := len(e.audit.results("http")); (n > 0) != tc.audited {
				t.Errorf("%d audit records, audited want %v", n, tc.audited)
			}
			if tc.audited {
				wantAudit(t, e.audit, "http", string(tc.code))
			}
		})
	}
}

func TestTransportDryRun(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	e := newEnv(t, []string{srv.grant()})
	g := e.guest(t, "fetch", []string{srv.grant()}, []string{srv.grant()})
	g.Parent.DryRun = true
	resp, body, err := do(t, g, http.MethodPost, srv.URL+"/", strings.NewReader("x"), nil)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Warden-Dry-Run") != "true" || !strings.Contains(string(body), "would send POST") {
		t.Fatalf("%v %q, %v", resp, body, err)
	}
	if srv.hits.Load() != 0 {
		t.Fatal("a dry run sent the request")
	}
	if ev := wantAudit(t, e.audit, "http", "ok"); !ev.DryRun {
		t.Error("audit record is not a dry run")
	}
}

func TestTransportNonGuest(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hop" {
			http.Redirect(w, r, "/end", http.StatusFound)
			return
		}
		io.WriteString(w, "plain "+r.URL.Path)
	})
	// Through http.DefaultClient (Base, redirects followed as usual).
	resp, body, err := do(t, nil, http.MethodGet, srv.URL+"/hop", nil, nil)
	if err != nil || resp.StatusCode != 200 || string(body) != "plain /end" {
		t.Fatalf("%v %q, %v", resp, body, err)
	}
	// A Transport of its own with no Base: http.DefaultTransport.
	c := &http.Client{Transport: &hostfuncs.Transport{}}
	r2, err := c.Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	if string(b2) != "plain /x" {
		t.Fatalf("body %q", b2)
	}
	// A Base that is used.
	var used atomic.Bool
	c = &http.Client{Transport: &hostfuncs.Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		used.Store(true)
		return http.DefaultTransport.RoundTrip(r)
	})}}
	r3, err := c.Get(srv.URL + "/y")
	if err != nil {
		t.Fatal(err)
	}
	r3.Body.Close()
	if !used.Load() {
		t.Fatal("Base not used")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestInstallHTTP(t *testing.T) {
	hostfuncs.InstallHTTP() // again: no second layer
	tr, ok := http.DefaultClient.Transport.(*hostfuncs.Transport)
	if !ok {
		t.Fatalf("http.DefaultClient.Transport is %T", http.DefaultClient.Transport)
	}
	if _, nested := tr.Base.(*hostfuncs.Transport); nested {
		t.Fatal("Transport installed twice")
	}
	if _, ok := http.DefaultClient.Transport.(gate.GuestHTTPGuard); !ok {
		t.Fatal("not a gate.GuestHTTPGuard")
	}
	cr := http.DefaultClient.CheckRedirect
	e := newEnv(t, nil)
	g := e.guest(t, "fetch", nil, nil)
	guestReq, _ := http.NewRequestWithContext(gate.WithGuest(context.Background(), g), http.MethodGet, "http://x.test/", nil)
	plainReq, _ := http.NewRequest(http.MethodGet, "http://x.test/", nil)
	if err := cr(guestReq, []*http.Request{plainReq}); !errors.Is(err, http.ErrUseLastResponse) {
		t.Errorf("guest redirect: %v, want ErrUseLastResponse", err)
	}
	if err := cr(plainReq, []*http.Request{plainReq}); err != nil {
		t.Errorf("plain redirect: %v", err)
	}
	if err := cr(plainReq, make([]*http.Request, 10)); err == nil {
		t.Error("plain redirect 11 allowed")
	}
}
