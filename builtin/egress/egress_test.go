package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenrt/warden/builtin/internal/netguard"
	"github.com/wardenrt/warden/runtime/capability"
)

// proxyFor starts a proxy with the grants on a loopback listener and
// returns its address and the records it made.
func proxyFor(t *testing.T, token string, grants ...string) (string, *Proxy, func() []Record) {
	t.Helper()
	var gs []capability.Grant
	for _, g := range grants {
		gs = append(gs, capability.MustParse(g))
	}
	var mu sync.Mutex
	var recs []Record
	names := map[string][]netip.Addr{
		"allowed.test": {netip.MustParseAddr("127.0.0.1")},
		"rebind.test":  {netip.MustParseAddr("127.0.0.1")},
	}
	p := New(context.Background(), Options{
		Dialer: &netguard.Dialer{Grants: capability.NewSet("/ws", gs...), Resolve: func(_ context.Context, h string) ([]netip.Addr, error) {
			if a, ok := names[h]; ok {
				return a, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: h, IsNotFound: true}
		}},
		Token:         token,
		Record:        func(r Record) { mu.Lock(); recs = append(recs, r); mu.Unlock() },
		HeaderTimeout: time.Second,
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Serve(ln, "prog")
	t.Cleanup(p.Close)
	return ln.Addr().String(), p, func() []Record {
		p.Close()
		mu.Lock()
		defer mu.Unlock()
		return append([]Record(nil), recs...)
	}
}

// client is an http.Client through the proxy.
func client(proxy string, user *url.Userinfo) *http.Client {
	u := &url.URL{Scheme: "http", Host: proxy, User: user}
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}, Timeout: 10 * time.Second}
}

func TestProxyForwardsGrantedAndRefusesTheRest(t *testing.T) {
	var hits sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Store(r.URL.Path, r.Header.Get("Proxy-Authorization"))
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "hello %s %s", r.URL.Path, body)
	}))
	defer srv.Close()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "tls "+r.URL.Path) }))
	defer tlsSrv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	tlsPort := tlsSrv.Listener.Addr().(*net.TCPAddr).Port

	addr, _, records := proxyFor(t, "", fmt.Sprintf("net:127.0.0.1:%d", port), fmt.Sprintf("net:127.0.0.1:%d", tlsPort),
		fmt.Sprintf("net:rebind.test:%d", port+3), fmt.Sprintf("net:allowed.test:%d", port+1))
	c := client(addr, nil)

	// Plain HTTP, with a body, to a granted address.
	res, err := c.Post(srv.URL+"/ok", "text/plain", strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(b) != "hello /ok body" {
		t.Fatalf("%d %q", res.StatusCode, b)
	}
	// A CONNECT tunnel (TLS) to a granted address.
	res, err = c.Get(tlsSrv.URL + "/tunnel")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if string(b) != "tls /tunnel" {
		t.Fatalf("%q", b)
	}
	// Refused: a granted name that resolves to loopback; a port not
	// granted; a name not granted; https in a plain request.
	for _, u := range []string{
		fmt.Sprintf("http://rebind.test:%d/rebind", port+3), // granted by name, resolves to loopback
		fmt.Sprintf("http://127.0.0.1:%d/other-port", port+2),
		fmt.Sprintf("http://evil.test:%d/name", port),
	} {
		res, err := c.Get(u)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "refused") {
			t.Errorf("%s: %d %q", u, res.StatusCode, b)
		}
	}
	if _, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/x", port+2)); err == nil {
		t.Error("a CONNECT to a port not granted succeeded")
	}
	for _, p := range []string{"/rebind", "/other-port", "/name"} {
		if _, ok := hits.Load(p); ok {
			t.Errorf("%s reached the server", p)
		}
	}
	recs := records()
	var allowed, refused int
	for _, r := range recs {
		switch r.Verdict {
		case Allowed:
			allowed++
			if r.Received == 0 || r.Program != "prog" || r.Via != "proxy" {
				t.Errorf("allowed record %+v", r)
			}
		case Refused:
			refused++
			if r.Reason == "" || r.Host == "" {
				t.Errorf("refused record %+v", r)
			}
		}
	}
	if allowed != 2 || refused != 4 {
		t.Errorf("allowed %d refused %d: %+v", allowed, refused, recs)
	}
}

// TestProxyToken: a proxy listening where other processes can reach it
// forwards nothing without its token, and never passes the token on.
func TestProxyToken(t *testing.T) {
	var got sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store("auth", r.Header.Get("Proxy-Authorization"))
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	addr, _, records := proxyFor(t, "s3cret", fmt.Sprintf("net:127.0.0.1:%d", port))
	for _, user := range []*url.Userinfo{nil, url.UserPassword("warden", "wrong")} {
		res, err := client(addr, user).Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusProxyAuthRequired {
			t.Fatalf("%v: %d", user, res.StatusCode)
		}
	}
	if _, ok := got.Load("auth"); ok {
		t.Fatal("a request without the token reached the server")
	}
	res, err := client(addr, url.UserPassword("warden", "s3cret")).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("%d", res.StatusCode)
	}
	if a, _ := got.Load("auth"); a != "" {
		t.Fatalf("the token was passed on: %q", a)
	}
	if n := len(records()); n != 3 {
		t.Errorf("%d records", n)
	}
}

// TestProxyMalformed: what is not a proxy request is answered 400 and
// goes nowhere.
func TestProxyMalformed(t *testing.T) {
	addr, _, records := proxyFor(t, "", "net:*")
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",               // origin form
		"CONNECT nohost HTTP/1.1\r\nHost: nohost\r\n\r\n", // no port
		"GET ftp://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"\x16\x03\x01\x00\x05hello", // TLS to the proxy
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, req)
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if !strings.Contains(line, "400") {
			t.Errorf("%q: %q", req, line)
		}
	}
	for _, r := range records() {
		if r.Verdict == Allowed {
			t.Errorf("%+v", r)
		}
	}
}

// TestBridge: a bridge forwards to its granted address, and refuses
// (recording it) when the grants do not allow it.
func TestBridge(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	to := netip.MustParseAddrPort(echo.Addr().String())
	_, p, records := proxyFor(t, "", "net:"+to.String())
	in, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Bridge(in, to, "psql")
	c, err := net.Dial("tcp", in.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "ping")
	c.(*net.TCPConn).CloseWrite()
	b, _ := io.ReadAll(c)
	c.Close()
	if string(b) != "ping" {
		t.Fatalf("%q", b)
	}
	// A bridge to an address the grants do not name.
	in2, _ := net.Listen("tcp", "127.0.0.1:0")
	p.Bridge(in2, netip.AddrPortFrom(to.Addr(), to.Port()+1), "psql")
	c2, _ := net.Dial("tcp", in2.Addr().String())
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _ := c2.Read(make([]byte, 1)); n != 0 {
		t.Fatal("read from a refused bridge")
	}
	c2.Close()
	recs := records()
	if len(recs) != 2 || recs[0].Verdict != Allowed || recs[0].Sent != 4 || recs[0].Received != 4 || recs[1].Verdict != Refused {
		t.Fatalf("%+v", recs)
	}
}

func TestProxyAuthHeader(t *testing.T) {
	p := &Proxy{o: Options{Token: "t"}}
	for v, ok := range map[string]bool{
		"Basic " + base64.StdEncoding.EncodeToString([]byte("warden:t")):  true,
		"Basic " + base64.StdEncoding.EncodeToString([]byte("x:t")):       true,
		"Basic " + base64.StdEncoding.EncodeToString([]byte("warden:tt")): false,
		"Bearer t": false, "": false, "Basic !!": false,
	} {
		r := &http.Request{Header: http.Header{"Proxy-Authorization": {v}}}
		if p.authorized(r) != ok {
			t.Errorf("%q: %v", v, !ok)
		}
	}
}
