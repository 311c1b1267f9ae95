package capability

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// CanonicalHost returns host in the form net needs and grants use, and
// whether it is an IP address. It lower-cases DNS names and strips one
// trailing dot (punycode is left as it is); it turns every IPv4 spelling URL
// parsers and inet_aton accept into dotted form — decimal 2130706433, hex
// 0x7f000001, octal 0177.0.0.1, short 127.1 all become 127.0.0.1 — and
// IPv4-mapped IPv6 (::ffff:127.0.0.1) into IPv4. IPv6 is returned without
// brackets (which it accepts). It returns "", false for anything that is
// not a valid host: empty, zone identifiers (fe80::1%eth0), characters
// outside [a-z0-9_-.], non-ASCII names (use punycode), empty or over-long
// labels, and names ending in a numeric label that is not a valid IPv4
// address (foo.123, 1.2.3.4.5, 256.1.1.1).
//
// Callers that dial (the http tool) must canonicalise the URL's host with
// it before building the net need, and dial the canonical form.
func CanonicalHost(host string) (string, bool) {
	h := host
	if strings.HasPrefix(h, "[") {
		if !strings.HasSuffix(h, "]") {
			return "", false
		}
		h = h[1 : len(h)-1]
		if !strings.Contains(h, ":") {
			return "", false
		}
	}
	if strings.Contains(h, ":") {
		a, err := netip.ParseAddr(h)
		if err != nil || a.Zone() != "" || !a.Is6() {
			return "", false
		}
		return a.Unmap().String(), true
	}
	h = strings.ToLower(h)
	if strings.HasSuffix(h, ".") {
		h = h[:len(h)-1]
	}
	if a, isIP := parseIPv4Loose(h); isIP {
		if !a.IsValid() {
			return "", false
		}
		return a.String(), true
	}
	if hostNameError(h) != "" {
		return "", false
	}
	return h, false
}

// NetNeed builds the net need for host and port, canonicalised with
// CanonicalHost (IPv6 in brackets). Port 0 means the port is not known,
// which only grants without a port allow.
func NetNeed(host string, port int) (Need, error) {
	h, isIP := CanonicalHost(host)
	if h == "" {
		return Need{}, fmt.Errorf("capability: %q is not a valid host", host)
	}
	if port < 0 || port > 65535 {
		return Need{}, fmt.Errorf("capability: port %d out of range", port)
	}
	if isIP && strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if port != 0 {
		h += ":" + strconv.Itoa(port)
	}
	return Need{Kind: Net, Resource: h}, nil
}

// isNumericLabel reports whether a host label is a number to URL parsers:
// decimal digits, or 0x followed by hex digits (possibly none).
func isNumericLabel(l string) bool {
	if l == "" {
		return false
	}
	digits := l
	isHex := len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X')
	if isHex {
		digits = l[2:]
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if '0' <= c && c <= '9' || isHex && ('a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			continue
		}
		return false
	}
	return true
}

// parseIPv4Loose reads h the way the WHATWG URL parser and inet_aton do.
// isIP is true when h's last label is numeric, which makes it an IPv4
// address to them; the address is then invalid if h is not a valid one.
func parseIPv4Loose(h string) (addr netip.Addr, isIP bool) {
	parts := strings.Split(h, ".")
	if !isNumericLabel(parts[len(parts)-1]) {
		return netip.Addr{}, false
	}
	if len(parts) > 4 {
		return netip.Addr{}, true
	}
	var vals [4]uint64
	for i, p := range parts {
		v, ok := parseIPv4Part(p)
		if !ok {
			return netip.Addr{}, true
		}
		vals[i] = v
	}
	n := len(parts)
	var ip uint64
	for i := 0; i < n-1; i++ {
		if vals[i] > 255 {
			return netip.Addr{}, true
		}
		ip |= vals[i] << (8 * (3 - i))
	}
	if vals[n-1] >= 1<<(8*(5-n)) {
		return netip.Addr{}, true
	}
	ip |= vals[n-1]
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}), true
}

func parseIPv4Part(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base, digits := uint64(10), p
	switch {
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, digits = 16, p[2:]
	case len(p) >= 2 && p[0] == '0':
		base, digits = 8, p[1:]
	}
	var v uint64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		var d uint64
		switch {
		case '0' <= c && c <= '9':
			d = uint64(c - '0')
		case 'a' <= c && c <= 'f':
			d = uint64(c-'a') + 10
		case 'A' <= c && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		v = v*base + d
		if v > 0xFFFFFFFF {
			return 0, false
		}
	}
	return v, true
}

// specialRanges are the addresses that only an IP or CIDR grant naming
// them makes reachable. Cloud metadata endpoints lie inside them
// (169.254.169.254 in link-local, fd00:ec2::254 in unique local,
// Alibaba's 100.100.100.200 in CGNAT) except Azure's 168.63.129.16, listed
// on its own.
var specialRanges = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified (this network)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT (RFC 6598)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.169.254/32"), "cloud metadata"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (RFC 1918)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (RFC 1918)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved or broadcast"},
	{netip.MustParsePrefix("168.63.129.16/32"), "cloud metadata (Azure)"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible (deprecated)"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata"},
	{netip.MustParsePrefix("fc00::/7"), "unique local (private)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local (deprecated)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	nat64Priv = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// SpecialAddr says why addr is reachable only through an IP or CIDR grant
// naming it — "loopback", "private (RFC 1918)", "link-local", "cloud
// metadata", … — or returns "" for a public unicast address. IPv4-mapped
// addresses are judged as IPv4; NAT64 (64:ff9b::/96, 64:ff9b:1::/48) and
// 6to4 (2002::/16) addresses are judged by the IPv4 address they embed.
// The invalid Addr and addresses with a zone are "invalid".
func SpecialAddr(addr netip.Addr) string {
	if !addr.IsValid() || addr.Zone() != "" {
		return "invalid"
	}
	a := addr.Unmap()
	for _, r := range specialRanges {
		if r.prefix.Contains(a) {
			return r.what
		}
	}
	b := a.As16()
	switch {
	case nat64.Contains(a) || nat64Priv.Contains(a):
		if w := SpecialAddr(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})); w != "" {
			return "NAT64 of " + w
		}
	case sixToFour.Contains(a):
		if w := SpecialAddr(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})); w != "" {
			return "6to4 of " + w
		}
	}
	return ""
}

// isLocalhostName reports whether a DNS name is localhost or under it
// (RFC 6761: such names resolve to loopback).
func isLocalhostName(h string) bool {
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// hostGrantMatches reports whether host grant pattern pat ("*", "*.domain"
// or a name) matches DNS name h. Both are canonical.
func hostGrantMatches(pat, h string) bool {
	switch {
	case pat == "*":
		return !isLocalhostName(h)
	case strings.HasPrefix(pat, "*."):
		suffix := pat[1:]
		if len(h) <= len(suffix) || !strings.HasSuffix(h, suffix) {
			return false
		}
		return !isLocalhostName(h) || isLocalhostName(pat[2:])
	default:
		return pat == h
	}
}
