package web

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wardenrt/warden/builtin/internal/netguard"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// The guarded HTTP client shared by the http and search tools. Every request
// they make goes through it, so the net grants are checked
//
//   - on the URL's host before anything runs (the tool's Needs, checked by
//     the gate),
//   - on every redirect hop (CheckRedirect re-computes the hop's need),
//   - on every address actually connected to (the dialer resolves the name
//     itself, checks each address with Set.AllowsAddr, dials the address, and
//     its Control function checks the socket's address once more), so a name
//     that resolves — or re-resolves, as in DNS rebinding — to loopback,
//     private, link-local or metadata addresses is refused unless a grant
//     names that address.
//
// A client is built per call and bound to that call's grants: a fresh
// Transport (no connection outlives the call), no proxy from the environment,
// no cookie jar, TLS verified against the system roots.

const (
	// httpMaxRedirects is how many redirects a call follows.
	httpMaxRedirects = 5
	// httpMaxHeaderBytes caps a response's header block.
	httpMaxHeaderBytes = 64 << 10
)

// httpSeams are what tests replace. The zero value is production: names
// resolved by the system resolver, certificates verified against the
// system's roots.
type httpSeams struct {
	// resolve maps a canonical host name to its addresses (tests map
	// allowed.test and friends to 127.0.0.1 without DNS).
	resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// rootCAs replaces the system roots (tests trust an httptest server's
	// certificate). Verification itself is never turned off.
	rootCAs *x509.CertPool
}

// httpHop is one redirect followed.
type httpHop struct {
	StatusCode int    `json:"status_code"`
	URL        string `json:"url"`
}

// httpGuard is one call's view of the network: its grants and the hops it
// followed.
type httpGuard struct {
	grants    capability.Set
	workspace string
	seams     httpSeams
	hops      []httpHop
}

// httpDeniedError is a connection or redirect the grants refuse.
type httpDeniedError = netguard.DeniedError

// httpRefusedError is a redirect refused for a reason no grant changes
// (too many hops, a non-http scheme, user info, an invalid host).
type httpRefusedError struct {
	msg, hint string
}

func (e *httpRefusedError) Error() string { return e.msg }

// httpCanonicalURL checks a URL the guarded client may fetch and returns it
// with its host in canonical form (decimal, hex and octal IPv4 spellings made
// dotted, names lower-cased, no fragment), together with the net need of its
// host and port. Only http and https are accepted; user info is refused,
// since `http://allowed@evil/` names the host evil. Errors are
// INVALID_INPUT.
func httpCanonicalURL(u *url.URL) (*url.URL, capability.Need, *tool.Error) {
	const urlHint = "give an absolute http:// or https:// URL, such as https://example.com/path"
	bad := func(hint, format string, args ...any) (*url.URL, capability.Need, *tool.Error) {
		return nil, capability.Need{}, tool.Errorf(tool.CodeInvalidInput, hint, format, args...)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		if u.Scheme == "" {
			return bad(urlHint, "URL %q has no scheme", u.Redacted())
		}
		return bad(urlHint, "scheme %q is not supported: only http and https URLs are fetched", u.Scheme)
	}
	if u.Opaque != "" {
		return bad(urlHint, "URL %q is not hierarchical", u.Redacted())
	}
	host := u.Hostname()
	if u.User != nil {
		return bad("remove the user info; send credentials in an Authorization header",
			"URL carries user info before '@' (%q): its host is %q, and URLs with user info are refused", u.User.Username()+"@", host)
	}
	if host == "" {
		return bad(urlHint, "URL %q has no host", u.Redacted())
	}
	canon, isIP := capability.CanonicalHost(host)
	if canon == "" {
		return bad("use a DNS name (punycode for non-ASCII) or an IP address without a zone", "host %q is not a valid host name or IP address", host)
	}
	port := 80
	if scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return bad(urlHint, "port %q is out of range", p)
		}
		port = n
	}
	need, err := capability.NetNeed(canon, port)
	if err != nil {
		return bad(urlHint, "%v", err)
	}
	out := *u
	out.Scheme = scheme
	out.Fragment, out.RawFragment = "", ""
	hostPart := canon
	if isIP && strings.Contains(canon, ":") {
		hostPart = "[" + canon + "]"
	}
	if u.Port() != "" {
		hostPart += ":" + u.Port()
	}
	out.Host = hostPart
	return &out, need, nil
}

// client returns an HTTP client bound to the guard: a fresh transport whose
// dialer checks every address, and a redirect policy that checks every hop.
// The caller closes idle connections when done (httpCloseClient).
func (g *httpGuard) client() *http.Client {
	tr := &http.Transport{
		Proxy:       nil, // never a proxy from the environment
		DialContext: g.dialContext,
		TLSClientConfig: &tls.Config{
			RootCAs:    g.seams.rootCAs, // nil: the system roots
			MinVersion: tls.VersionTLS12,
		},
		ForceAttemptHTTP2: true,
		// warden asks for gzip itself (the http tool) and decodes every
		// Content-Encoding line: the transport's own gzip reads the first
		// line only and deletes the others (a second gzip, a br, would be
		// shown as compressed bytes redaction cannot read).
		DisableCompression:     true,
		TLSHandshakeTimeout:    15 * time.Second,
		MaxResponseHeaderBytes: httpMaxHeaderBytes,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        30 * time.Second,
	}
	return &http.Client{Transport: tr, CheckRedirect: g.checkRedirect, Jar: nil}
}

// httpCloseClient releases a client's connections.
func httpCloseClient(c *http.Client) {
	if tr, ok := c.Transport.(*http.Transport); ok {
		tr.CloseIdleConnections()
	}
}

// checkRedirect re-checks every hop: its URL as httpCanonicalURL accepts it,
// its net need against the call's grants, and the number of hops. The hop's
// host is rewritten to canonical form so what was checked is what is dialled.
func (g *httpGuard) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > httpMaxRedirects {
		return &httpRefusedError{
			msg:  fmt.Sprintf("stopped after %d redirects (the last one to %s): a redirect loop or too long a chain", httpMaxRedirects, req.URL.Redacted()),
			hint: "request the final URL directly",
		}
	}
	canon, need, uerr := httpCanonicalURL(req.URL)
	if uerr != nil {
		return &httpRefusedError{msg: "redirect refused: " + uerr.Message, hint: "the server redirected to a URL warden does not follow; request another URL"}
	}
	req.URL = canon
	status := 0
	if req.Response != nil {
		status = req.Response.StatusCode
	}
	g.hops = append(g.hops, httpHop{StatusCode: status, URL: canon.String()})
	if !g.grants.Allows(need) {
		return &httpDeniedError{Host: canon.Hostname(), Need: need, Redirect: true}
	}
	// The client adds a Referer naming the previous URL (with its query);
	// keep it only if the caller set one.
	if via[0].Header.Get("Referer") == "" {
		req.Header.Del("Referer")
	}
	return nil
}

// dialer is the guard's netguard.Dialer: the call's grants, the tests'
// resolver.
func (g *httpGuard) dialer() *netguard.Dialer {
	return &netguard.Dialer{Grants: g.grants, Resolve: g.seams.resolve}
}

// dialContext resolves the host itself, checks the host and every address
// against the grants, and dials the addresses allowed, in order. Called by
// the transport for every new connection, redirects included.
func (g *httpGuard) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return g.dialer().DialContext(ctx, network, address)
}

// control is the last check, on the socket's own address right before
// connect(2).
func (g *httpGuard) control(ctx context.Context, network, address string, c syscall.RawConn) error {
	return g.dialer().Control(ctx, network, address, c)
}

// httpClassify turns an error of the guarded client into a tool error:
// CAPABILITY_DENIED for a refused hop or address (the hint names the grant),
// TIMEOUT, or NETWORK_ERROR (connection, DNS, TLS, refused redirects).
func httpClassify(err error, workspace string, timeout time.Duration) *tool.Error {
	var denied *httpDeniedError
	if errors.As(err, &denied) {
		if h := denied.Need.Hint(workspace); h != "" {
			e := tool.NeedsGrants([]string{h}, "%s", denied.Error())
			e.Hint += ", if that is intended"
			return e
		}
		return tool.Errorf(tool.CodeCapabilityDenied, "the grants decide which hosts and addresses are reachable", "%s", denied.Error())
	}
	var refused *httpRefusedError
	if errors.As(err, &refused) {
		return tool.Errorf(tool.CodeNetworkError, refused.hint, "%s", refused.msg)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return tool.Errorf(tool.CodeTimeout, "raise timeout (at most 120 seconds) or try again later", "no complete answer within %s", timeout)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return tool.Errorf(tool.CodeTimeout, "raise timeout (at most 120 seconds) or try again later", "no complete answer within %s", timeout)
	}
	if errors.Is(err, context.Canceled) {
		return tool.Errorf(tool.CodeNetworkError, "", "the request was cancelled")
	}
	var certErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	if errors.As(err, &certErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &invalid) {
		return tool.Errorf(tool.CodeNetworkError, "the server's certificate is not valid for this host or not signed by a trusted authority; warden never skips TLS verification",
			"TLS verification failed: %s", httpErrText(err))
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return tool.Errorf(tool.CodeNetworkError, "check the host name", "cannot resolve %s: %s", dnsErr.Name, dnsErr.Err)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return tool.Errorf(tool.CodeNetworkError, "check the host and port, and that the server is running", "%s", httpErrText(err))
	}
	return tool.Errorf(tool.CodeNetworkError, "check the URL and the network", "%s", httpErrText(err))
}

// httpErrText is an error's text without net/http's `Get "url": ` prefix.
func httpErrText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}
