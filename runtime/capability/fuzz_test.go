package capability

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// The starting corpora are in testdata/fuzz/FuzzParse and testdata/fuzz/FuzzMatch.

func FuzzParse(f *testing.F) {
	f.Add("fs.read:**")
	f.Add("net:[::ffff:127.0.0.1]:80")
	f.Fuzz(func(t *testing.T, s string) {
		g, err := Parse(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) error %T is not a *ParseError", s, err)
			}
			if pe.Input != s || pe.Offset < 0 || pe.Offset > len(s) || pe.Reason == "" {
				t.Fatalf("Parse(%q): bad ParseError %+v", s, pe)
			}
			if g != (Grant{}) {
				t.Fatalf("Parse(%q) failed but returned %v", s, g)
			}
			return
		}
		if !g.Kind().known() {
			t.Fatalf("Parse(%q) returned unknown kind %q", s, g.Kind())
		}
		again, err := Parse(g.String())
		if err != nil {
			t.Fatalf("Parse(%q) = %q, which does not parse: %v", s, g.String(), err)
		}
		if again != g {
			t.Fatalf("round trip of %q: %#v != %#v", s, again, g)
		}
		if g.Kind().isFS() && !strings.HasPrefix(g.Scope(), "/") && g.Base("/ws") != "/ws" && !strings.HasPrefix(g.Base("/ws"), "/ws/") {
			t.Fatalf("relative grant %s has base %q outside the workspace", g, g.Base("/ws"))
		}
		_ = g.Broad()
	})
}

func FuzzMatch(f *testing.F) {
	f.Add("net:*.example.com", uint8(3), "example.com:443")
	f.Add("fs.read:**", uint8(0), "/ws/notes/../../etc/passwd")
	f.Fuzz(func(t *testing.T, spec string, kind uint8, resource string) {
		const ws = "/ws"
		g, err := Parse(spec)
		if err != nil {
			return
		}
		n := Need{Kind: allKinds[int(kind)%len(allKinds)], Resource: resource}
		s := NewSet(ws, g)
		allowed := s.Allows(n)

		if n.Kind == Net && g.Kind() == Net && !g.prefix.IsValid() && allowed && needIsIP(resource) {
			t.Fatalf("host grant %s allows IP need %v", g, n)
		}
		if n.Kind.isFS() && allowed && hasDotDot(resource) {
			t.Fatalf("%s allows %v, which has a .. element", g, n)
		}
		if suffix, ok := strings.CutPrefix(g.host, "*."); ok {
			for _, bare := range []string{suffix, strings.ToUpper(suffix) + ".", suffix + ":443", suffix + ":1"} {
				if s.Allows(Need{Net, bare}) {
					t.Fatalf("%s allows the bare domain %q", g, bare)
				}
			}
		}
		if g.Kind() == Net && !g.prefix.IsValid() {
			for _, ip := range []string{"127.0.0.1:80", "[::1]:80", "169.254.169.254:80", "2130706433:80"} {
				if s.Allows(Need{Net, ip}) {
					t.Fatalf("%s allows %s", g, ip)
				}
			}
			if a, err := netip.ParseAddr("127.0.0.1"); err == nil && s.AllowsAddr(a, 80) {
				t.Fatalf("%s allows loopback by address", g)
			}
		}

		// The hint is a grant that allows the need; a need with no hint is
		// one nothing allows.
		hint := n.Hint(ws)
		if hint == "" {
			if allowed {
				t.Fatalf("%s allows %v, which has no hint", g, n)
			}
			return
		}
		hg, err := Parse(hint)
		if err != nil {
			t.Fatalf("hint %q for %v does not parse: %v", hint, n, err)
		}
		hs := NewSet(ws, hg)
		if !hs.Allows(n) {
			t.Fatalf("hint %s does not allow %v", hint, n)
		}
		if got := s.Intersect(hs).Allows(n); got != allowed {
			t.Fatalf("(%s ∩ %s).Allows(%v) = %v, want %v", g, hg, n, got, allowed)
		}
		if !s.Union(hs).Allows(n) {
			t.Fatalf("(%s ∪ %s) does not allow %v", g, hg, n)
		}
		// Whatever an intersection lists as its grants, it allows.
		for _, lg := range s.Intersect(hs).Grants() {
			if NewSet(ws, lg).Allows(n) && !allowed {
				t.Fatalf("%s ∩ %s lists %s, which allows %v, but the intersection does not", g, hg, lg, n)
			}
		}
	})
}

// needIsIP decides independently of the matcher whether a net resource
// names an IP address.
func needIsIP(resource string) bool {
	host := resource
	if h, _, err := net.SplitHostPort(resource); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	_, isIP := CanonicalHost(host)
	return isIP
}

func hasDotDot(p string) bool {
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return true
		}
	}
	return false
}
