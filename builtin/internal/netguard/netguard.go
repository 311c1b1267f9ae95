// Package netguard is the one dialer every outbound connection warden makes
// for a call goes through — the http and search tools' requests, and the
// connections the egress proxy makes for the programs a call starts — so
// the net grants are applied the same way to all of them:
//
//   - the host and port are checked against the grants (names as
//     capability matches them: wildcards never match localhost);
//   - a name is resolved by the dialer itself, and every address it
//     resolved to is checked with Set.AllowsAddr, so a name that resolves
//     — or re-resolves, as in DNS rebinding — to loopback, private,
//     link-local or cloud metadata addresses is refused unless a grant
//     names that address;
//   - the socket's own address is checked once more right before
//     connect(2) (Control).
package netguard

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wardenrt/warden/runtime/capability"
)

// Dialer connects to what Grants allow, and to nothing else.
type Dialer struct {
	Grants capability.Set
	// Resolve maps a canonical host name to its addresses; nil uses the
	// system resolver (tests map names without DNS).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Timeout bounds one connection attempt (0: 15 s).
	Timeout time.Duration
}

// DeniedError is a connection the grants refuse.
type DeniedError struct {
	Host string          // canonical host asked for
	Port int             // port
	Addr netip.Addr      // the resolved address refused (zero: the host itself was refused)
	Need capability.Need // the need a grant would have to allow
	// Redirect: refused while following a redirect (the http tool).
	Redirect bool
}

func (e *DeniedError) Error() string {
	switch {
	case e.Addr.IsValid():
		why := capability.SpecialAddr(e.Addr)
		if why == "" {
			why = "not covered by a net grant with this port"
		}
		if e.Addr.String() == strings.Trim(e.Host, "[]") {
			return fmt.Sprintf("connection to %s port %d refused: the address is %s and no grant names it", e.Addr, e.Port, why)
		}
		return fmt.Sprintf("connection to %s port %d refused: it resolved to %s (%s), which only a grant naming that address allows", e.Host, e.Port, e.Addr, why)
	case e.Redirect:
		return fmt.Sprintf("redirect to %s refused: the grants do not allow %s", e.Host, e.Need)
	default:
		return fmt.Sprintf("connection to %s refused: the grants do not allow %s", e.Host, e.Need)
	}
}

// Check checks host and port against the grants, before anything is
// resolved: the need, or a *DeniedError.
func (d *Dialer) Check(host string, port int) (capability.Need, error) {
	need, err := capability.NetNeed(host, port)
	if err != nil {
		return capability.Need{}, err
	}
	if !d.Grants.Allows(need) {
		canon, _ := capability.CanonicalHost(host)
		return need, &DeniedError{Host: canon, Port: port, Need: need}
	}
	return need, nil
}

// DialContext resolves the host itself, checks the host and every address
// against the grants, and dials the addresses allowed, in order.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	conn, _, err := d.Dial(ctx, network, address)
	return conn, err
}

// Dial is DialContext that also returns the address connected to.
func (d *Dialer) Dial(ctx context.Context, network, address string) (net.Conn, netip.AddrPort, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, netip.AddrPort{}, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, netip.AddrPort{}, fmt.Errorf("bad port in %q", address)
	}
	if _, err := d.Check(host, port); err != nil {
		return nil, netip.AddrPort{}, err
	}
	canon, isIP := capability.CanonicalHost(host)
	var addrs []netip.Addr
	if isIP {
		a, err := netip.ParseAddr(canon)
		if err != nil {
			return nil, netip.AddrPort{}, err
		}
		addrs = []netip.Addr{a}
	} else {
		addrs, err = d.lookup(ctx, canon)
		if err != nil {
			return nil, netip.AddrPort{}, err
		}
	}
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	nd := &net.Dialer{Timeout: timeout, ControlContext: d.Control}
	var denied, lastErr error
	for _, a := range addrs {
		a = a.Unmap()
		if !d.Grants.AllowsAddr(a, port) {
			if denied == nil {
				n, _ := capability.NetNeed(a.String(), port)
				denied = &DeniedError{Host: canon, Port: port, Addr: a, Need: n}
			}
			continue
		}
		ap := netip.AddrPortFrom(a, uint16(port))
		conn, err := nd.DialContext(ctx, network, ap.String())
		if err == nil {
			return conn, ap, nil
		}
		lastErr = err
	}
	if lastErr != nil {
		return nil, netip.AddrPort{}, lastErr
	}
	if denied != nil {
		return nil, netip.AddrPort{}, denied
	}
	return nil, netip.AddrPort{}, &net.DNSError{Err: "no addresses", Name: canon, IsNotFound: true}
}

// Control is the last check, on the socket's own address right before
// connect(2): whatever resolved it, only an address the grants allow is
// connected to.
func (d *Dialer) Control(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refusing to connect to %q: not an address", address)
	}
	a := ap.Addr().Unmap()
	if !d.Grants.AllowsAddr(a, int(ap.Port())) {
		n, _ := capability.NetNeed(a.String(), int(ap.Port()))
		return &DeniedError{Host: a.String(), Port: int(ap.Port()), Addr: a, Need: n}
	}
	return nil
}

func (d *Dialer) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if d.Resolve != nil {
		return d.Resolve(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}
