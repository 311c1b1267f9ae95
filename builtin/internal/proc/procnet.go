package proc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/netip"
	"slices"
	"sync"

	"github.com/wardenrt/warden/builtin/egress"
	"github.com/wardenrt/warden/builtin/internal/netguard"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/tool"
)

// Net is the way out for the programs one call starts, when the call
// has net grants: an egress proxy (egress.Proxy) bound to the call's
// grants, whose every connection is recorded with the call.
//
// With namespaces (level full) each program's network namespace has only
// loopback, where the launcher listens for warden on the proxy port
// (HTTP_PROXY and friends point there) and on each granted single IP:port
// (a bridge: a local database stays reachable at its own address). A
// program that ignores the proxy reaches nothing.
//
// Without (fallback and below), the proxy listens on a loopback port of
// the machine and asks for a token (in the proxy URL programs get), and
// Landlock holds TCP to the granted ports and the proxy's: ports, not
// hosts — what sandbox check says.
type Net struct {
	ns    bool // the programs have network namespaces
	proxy *egress.Proxy

	bridges   []netip.AddrPort // single IP:port grants
	proxyPort uint16           // in the namespace
	ports     []uint16         // the net grants' ports (fallback)
	anyTCP    bool             // a net grant without a port (fallback)

	host    net.Listener // without namespaces: the proxy on the machine's loopback
	hostURL string       // and its URL, with the token
}

// procNetProxyPort is the port the proxy listens on inside a program's
// namespace, unless a bridge takes it.
const procNetProxyPort = 3128

// NewNet returns the call's way out, or nil when it has no net grant
// (its programs then reach no network). resolve, when set, replaces the
// system resolver (tests).
func NewNet(ctx context.Context, c *tool.Call, resolve func(context.Context, string) ([]netip.Addr, error)) (*Net, error) {
	var nets []capability.Grant
	for _, g := range c.Grants.Grants() {
		if g.Kind() == capability.Net {
			nets = append(nets, g)
		}
	}
	if len(nets) == 0 {
		return nil, nil
	}
	n := &Net{}
	for _, g := range nets {
		if g.Port() == 0 {
			n.anyTCP = true
		} else if !slices.Contains(n.ports, uint16(g.Port())) {
			n.ports = append(n.ports, uint16(g.Port()))
		}
		if a, ok := g.SingleAddr(); ok && g.Port() != 0 && bridgeable(a) {
			ap := netip.AddrPortFrom(a, uint16(g.Port()))
			if !slices.Contains(n.bridges, ap) {
				n.bridges = append(n.bridges, ap)
			}
		}
	}
	n.proxyPort = procNetProxyPort
	for slices.ContainsFunc(n.bridges, func(b netip.AddrPort) bool { return b.Port() == n.proxyPort && b.Addr().Is4() && b.Addr().IsLoopback() }) {
		n.proxyPort++
	}
	o := egress.Options{
		Dialer: &netguard.Dialer{Grants: c.Grants, Resolve: resolve},
		Record: func(r egress.Record) {
			gate.NoteConnection(ctx, tool.Connection{
				Program: r.Program, Via: r.Via, Method: r.Method, Host: r.Host, Port: r.Port, Addr: r.Addr,
				Verdict: r.Verdict, Reason: r.Reason, Sent: r.Sent, Received: r.Received,
			})
		},
	}
	n.ns = sandbox.Detect().Namespaces
	if !n.ns {
		// The proxy listens on the machine's loopback, where any
		// process could reach it: it asks for a token only the call's
		// programs are given.
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		o.Token = hex.EncodeToString(b)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		n.host = l
		n.hostURL = "http://warden:" + o.Token + "@" + l.Addr().String()
	}
	n.proxy = egress.New(ctx, o)
	if n.host != nil {
		n.proxy.Serve(n.host, "")
	}
	return n, nil
}

// bridgeable: an address a bridge can stand in for inside a namespace
// (one lo can carry).
func bridgeable(a netip.Addr) bool {
	return a.IsLoopback() || a.IsGlobalUnicast() || a.Is4() && a.IsLinkLocalUnicast()
}

// box fills the network part of a program's sandbox.
func (n *Net) box(b *sandbox.Spec) error {
	if n.ns {
		proxy := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), n.proxyPort)
		b.Listen = append([]netip.AddrPort{proxy}, n.bridges...)
		b.Proxy = "http://" + proxy.String()
		return nil
	}
	b.Proxy = n.hostURL
	b.AnyTCP = n.anyTCP
	b.ConnectTCP = append(slices.Clone(n.ports), uint16(n.host.Addr().(*net.TCPAddr).Port))
	return nil
}

// serve takes the listeners the launcher made in the program's namespace
// and serves them until the returned function is called (when the
// program has ended).
func (n *Net) serve(l *sandbox.Launch, program string) (stop func()) {
	var mu sync.Mutex
	var ls []net.Listener
	done := make(chan struct{})
	go func() {
		defer close(done)
		files, err := l.Listeners()
		if err != nil || len(files) == 0 {
			return
		}
		for i, f := range files {
			ln, err := net.FileListener(f)
			f.Close()
			if err != nil {
				continue
			}
			mu.Lock()
			ls = append(ls, ln)
			mu.Unlock()
			if i == 0 {
				n.proxy.Serve(ln, program)
			} else {
				n.proxy.Bridge(ln, n.bridges[i-1], program)
			}
		}
	}()
	return func() {
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, ln := range ls {
			ln.Close()
		}
	}
}

// Close ends every connection of the call's programs (their records are
// then all made).
func (n *Net) Close() {
	if n == nil {
		return
	}
	n.proxy.Close()
}
