package capability

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func set(ws string, specs ...string) Set {
	gs := make([]Grant, len(specs))
	for i, s := range specs {
		gs[i] = MustParse(s)
	}
	return NewSet(ws, gs...)
}

func grantStrings(gs []Grant) []string {
	out := []string{}
	for _, g := range gs {
		out = append(out, g.String())
	}
	return out
}

func TestZeroSet(t *testing.T) {
	var s Set
	if s.Allows(Need{GitRead, ""}) || s.AllowsAddr(netip.MustParseAddr("1.1.1.1"), 443) {
		t.Error("the zero Set allows something")
	}
	if s.String() != "" || s.Workspace() != "" || len(s.Grants()) != 0 {
		t.Errorf("zero Set: String %q, Workspace %q, Grants %v", s.String(), s.Workspace(), s.Grants())
	}
	if got := s.Union(set(ws, "llm")); !got.Allows(Need{LLM, ""}) {
		t.Error("zero ∪ {llm} does not allow llm")
	}
	if got := set(ws, "llm").Intersect(s); got.Allows(Need{LLM, ""}) {
		t.Error("{llm} ∩ zero allows llm")
	}
}

func TestNewSetDedupes(t *testing.T) {
	s := set(ws, "git.read", "fs.read:**", "git.read", "fs.read:./**")
	if got, want := grantStrings(s.Grants()), []string{"git.read", "fs.read:**"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Grants = %v, want %v", got, want)
	}
	if s.String() != "git.read, fs.read:**" {
		t.Errorf("String = %q", s.String())
	}
	if s.Workspace() != ws {
		t.Errorf("Workspace = %q", s.Workspace())
	}
}

func TestCheck(t *testing.T) {
	s := set(ws, "fs.read:**", "exec:git")
	needs := []Need{
		{FSRead, ws + "/a"},
		{FSWrite, ws + "/a"},
		{Exec, "git"},
		{Exec, "sh"},
		{Net, "example.com:443"},
	}
	got := s.Check(needs...)
	want := []Need{needs[1], needs[3], needs[4]}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Check = %v, want %v", got, want)
	}
	if m := s.Check(needs[0], needs[2]); m != nil {
		t.Errorf("Check of allowed needs = %v, want nil", m)
	}
}

func TestParseSet(t *testing.T) {
	s, err := ParseSet(ws, []string{"fs.read:**", "git.read"})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Allows(Need{FSRead, ws + "/x"}) || !s.Allows(Need{GitRead, ""}) {
		t.Error("ParseSet lost a grant")
	}

	_, err = ParseSet(ws, []string{"fs.read:**", "fs.raed:**", "git.read:x", "exec:git"})
	if err == nil {
		t.Fatal("ParseSet accepted bad grants")
	}
	msg := err.Error()
	for _, frag := range []string{`grant 1: capability "fs.raed:**": unknown kind`, `grant 2: capability "git.read:x": git.read takes no scope`} {
		if !strings.Contains(msg, frag) {
			t.Errorf("error %q does not contain %q", msg, frag)
		}
	}
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Input != "fs.raed:**" {
		t.Errorf("errors.As(*ParseError) = %v", pe)
	}
	if strings.Contains(msg, "grant 0") || strings.Contains(msg, "grant 3") {
		t.Errorf("error %q names a good grant", msg)
	}

	if _, err := ParseSet("relative", []string{"git.read"}); err == nil || !strings.Contains(err.Error(), "not an absolute path") {
		t.Errorf("ParseSet with a relative workspace: %v", err)
	}
}

func TestIntersect(t *testing.T) {
	run := set(ws, "fs.read:**", "fs.write:notes/**", "net:*.example.com", "exec:git", "llm")
	tool := set(ws, "fs.read:notes/**", "fs.write:**", "net:api.example.com:443", "exec:git", "exec:curl")
	both := run.Intersect(tool)

	tests := []struct {
		need Need
		want bool
	}{
		{Need{FSRead, ws + "/notes/a"}, true},
		{Need{FSRead, ws + "/src/a"}, false}, // run only
		{Need{FSWrite, ws + "/notes/a"}, true},
		{Need{FSWrite, ws + "/src/a"}, false}, // tool only
		{Need{Net, "api.example.com:443"}, true},
		{Need{Net, "api.example.com:80"}, false},
		{Need{Net, "www.example.com:443"}, false},
		{Need{Exec, "git"}, true},
		{Need{Exec, "curl"}, false},
		{Need{LLM, ""}, false},
	}
	for _, tt := range tests {
		if got := both.Allows(tt.need); got != tt.want {
			t.Errorf("(run ∩ tool).Allows(%v) = %v, want %v", tt.need, got, tt.want)
		}
		if got, want := both.Allows(tt.need), run.Allows(tt.need) && tool.Allows(tt.need); got != want {
			t.Errorf("(run ∩ tool).Allows(%v) = %v, but run && tool = %v", tt.need, got, want)
		}
	}
	if want := "(fs.read:**, fs.write:notes/**, net:*.example.com, exec:git, llm) ∩ (fs.read:notes/**, fs.write:**, net:api.example.com:443, exec:git, exec:curl)"; both.String() != want {
		t.Errorf("String = %q, want %q", both.String(), want)
	}
	if both.Workspace() != ws {
		t.Errorf("Workspace = %q", both.Workspace())
	}
	// Intersecting never widens, even with a third set.
	wide := set(ws, "fs.read:/**", "exec:*", "net:*", "llm")
	if got := both.Intersect(wide); got.Allows(Need{FSRead, ws + "/src/a"}) || got.Allows(Need{LLM, ""}) {
		t.Error("(run ∩ tool) ∩ wide widened the set")
	}
}

func TestIntersectGrants(t *testing.T) {
	tests := []struct {
		name        string
		left, right []string
		want        []string
	}{
		{"same grant on both sides", []string{"exec:git", "llm"}, []string{"exec:git"}, []string{"exec:git"}},
		{"exec:* contains a program", []string{"exec:*"}, []string{"exec:git", "exec:make"}, []string{"exec:git", "exec:make"}},
		{"fs.read:** contains a subtree", []string{"fs.read:**"}, []string{"fs.read:notes/**", "fs.read:/etc/**"}, []string{"fs.read:notes/**"}},
		{"fs globs that only overlap are not listed", []string{"fs.read:notes/**"}, []string{"fs.read:**/*.md"}, []string{}},
		{"an exact path inside a glob", []string{"fs.write:notes/*.md"}, []string{"fs.write:notes/a.md", "fs.write:notes/b.txt"}, []string{"fs.write:notes/a.md"}},
		{"fs.write does not contain fs.read", []string{"fs.write:**"}, []string{"fs.read:a"}, []string{}},
		{"host wildcard contains hosts and narrower wildcards", []string{"net:*.example.com"}, []string{"net:api.example.com:443", "net:*.eu.example.com", "net:example.com"}, []string{"net:api.example.com:443", "net:*.eu.example.com"}},
		{"a wider wildcard on the other side keeps the narrower one", []string{"net:*.example.com"}, []string{"net:*"}, []string{"net:*.example.com"}},
		{"net:* does not contain localhost", []string{"net:*"}, []string{"net:localhost", "net:example.org:80"}, []string{"net:example.org:80"}},
		{"ports narrow", []string{"net:*:443"}, []string{"net:a.example.com", "net:b.example.com:443"}, []string{"net:b.example.com:443"}},
		{"CIDR contains CIDR", []string{"net:10.0.0.0/8"}, []string{"net:10.1.0.0/16", "net:10.1.2.3:22", "net:11.0.0.0/8"}, []string{"net:10.1.0.0/16", "net:10.1.2.3:22"}},
		{"host grants do not contain IPs", []string{"net:*"}, []string{"net:127.0.0.1"}, []string{}},
		{"env prefix", []string{"env:GO*"}, []string{"env:GOPATH", "env:GOFL*", "env:HOME", "env:G"}, []string{"env:GOPATH", "env:GOFL*"}},
		{"env all", []string{"env:GO*"}, []string{"env:*"}, []string{"env:GO*"}},
		{"memory all", []string{"memory.read:*"}, []string{"memory.read:notes", "memory.read:x/**", "memory.write:notes"}, []string{"memory.read:notes", "memory.read:x/**"}},
		{"both directions", []string{"exec:*", "fs.read:notes/x"}, []string{"exec:git", "fs.read:**"}, []string{"fs.read:notes/x", "exec:git"}},
		{"scope-less", []string{"git.read", "git.write"}, []string{"git.read"}, []string{"git.read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := set(ws, tt.left...).Intersect(set(ws, tt.right...))
			got := grantStrings(s.Grants())
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Grants = %v, want %v", got, tt.want)
			}
			// Every grant listed is allowed in full: spot-check with the
			// exact resources the grants' own sets allow.
			for _, g := range s.Grants() {
				for _, n := range sampleNeeds(g) {
					if NewSet(ws, g).Allows(n) && !s.Allows(n) {
						t.Errorf("Grants lists %s, which allows %v, but the intersection does not", g, n)
					}
				}
			}
		})
	}
}

// sampleNeeds returns needs of g's kind for spot checks.
func sampleNeeds(g Grant) []Need {
	var res []string
	switch g.Kind() {
	case FSRead, FSWrite:
		res = []string{ws, ws + "/notes", ws + "/notes/x", ws + "/notes/a.md", ws + "/a/b.md", "/etc/hosts"}
	case Exec:
		res = []string{"git", "make", "sh"}
	case Net:
		res = []string{"api.example.com:443", "a.eu.example.com:443", "example.com:443", "b.example.com:443", "b.example.com:80", "localhost:80", "10.1.2.3:22", "10.1.9.9:80", "127.0.0.1:80"}
	case Env:
		res = []string{"GOPATH", "GOFLAGS", "HOME"}
	case MemoryRead, MemoryWrite:
		res = []string{"notes", "x/y", "other"}
	default:
		res = []string{""}
	}
	out := make([]Need, len(res))
	for i, r := range res {
		out[i] = Need{g.Kind(), r}
	}
	return out
}

func TestUnion(t *testing.T) {
	policy := set(ws, "fs.read:**", "exec:git")
	flags := set(ws, "fs.write:notes/**", "exec:git")
	u := policy.Union(flags)
	if got, want := u.String(), "fs.read:**, exec:git, fs.write:notes/**"; got != want {
		t.Errorf("plain union String = %q, want %q", got, want)
	}
	if !u.Allows(Need{FSWrite, ws + "/notes/a"}) || !u.Allows(Need{FSRead, ws + "/a"}) {
		t.Error("the union lost a grant")
	}
	if u.Allows(Need{FSWrite, ws + "/a"}) {
		t.Error("the union allows what neither side does")
	}

	// Different workspaces: each side keeps its anchoring.
	other := set("/other", "fs.read:**")
	u2 := set(ws, "fs.write:**").Union(other)
	for _, tt := range []struct {
		need Need
		want bool
	}{
		{Need{FSWrite, ws + "/a"}, true},
		{Need{FSRead, "/other/a"}, true},
		{Need{FSRead, ws + "/a"}, false},
		{Need{FSWrite, "/other/a"}, false},
	} {
		if got := u2.Allows(tt.need); got != tt.want {
			t.Errorf("union of workspaces: Allows(%v) = %v, want %v", tt.need, got, tt.want)
		}
	}
	if got, want := u2.String(), "(fs.write:**) ∪ (fs.read:**)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}

	// A union with an intersection keeps the intersection's meaning and
	// adds the other side.
	inter := set(ws, "exec:*").Intersect(set(ws, "exec:git"))
	u3 := inter.Union(set(ws, "llm"))
	if !u3.Allows(Need{Exec, "git"}) || u3.Allows(Need{Exec, "sh"}) || !u3.Allows(Need{LLM, ""}) {
		t.Error("(exec:* ∩ exec:git) ∪ llm is wrong")
	}
	if got, want := grantStrings(u3.Grants()), []string{"exec:git", "llm"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Grants = %v, want %v", got, want)
	}
	if got, want := u3.String(), "((exec:*) ∩ (exec:git)) ∪ (llm)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestAllowsAddr(t *testing.T) {
	hostGrant := set(ws, "net:example.com")
	wildcard := set(ws, "net:*")
	named := set(ws, "net:127.0.0.1", "net:[::1]", "net:10.0.0.0/8", "net:169.254.169.254:80", "net:[fd00:ec2::254]")
	tests := []struct {
		addr       string
		port       int
		host, wild bool // allowed by a host grant, by net:*
		named      bool // allowed by the IP grants above
	}{
		{"93.184.216.34", 443, true, true, false},
		{"2606:2800:220:1:248:1893:25c8:1946", 443, true, true, false},
		{"127.0.0.1", 80, false, false, true},
		{"127.0.0.2", 80, false, false, false},
		{"::1", 80, false, false, true},
		{"::ffff:127.0.0.1", 80, false, false, true},
		{"10.1.2.3", 80, false, false, true},
		{"172.16.0.1", 80, false, false, false},
		{"192.168.1.1", 80, false, false, false},
		{"fd12:3456::1", 80, false, false, false},
		{"169.254.1.1", 80, false, false, false},
		{"fe80::1", 80, false, false, false},
		{"100.64.0.1", 80, false, false, false},
		{"100.100.100.200", 80, false, false, false},
		{"0.0.0.0", 80, false, false, false},
		{"::", 80, false, false, false},
		{"224.0.0.1", 80, false, false, false},
		{"ff02::1", 80, false, false, false},
		{"255.255.255.255", 80, false, false, false},
		{"169.254.169.254", 80, false, false, true},
		{"169.254.169.254", 8080, false, false, false},
		{"fd00:ec2::254", 80, false, false, true},
		{"168.63.129.16", 80, false, false, false},
		{"64:ff9b::7f00:1", 80, false, false, false},
		{"64:ff9b::808:808", 80, true, true, false},
		{"2002:7f00:1::1", 80, false, false, false},
		{"::7f00:1", 80, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			a := netip.MustParseAddr(tt.addr)
			if got := hostGrant.AllowsAddr(a, tt.port); got != tt.host {
				t.Errorf("net:example.com AllowsAddr = %v, want %v", got, tt.host)
			}
			if got := wildcard.AllowsAddr(a, tt.port); got != tt.wild {
				t.Errorf("net:* AllowsAddr = %v, want %v", got, tt.wild)
			}
			if got := named.AllowsAddr(a, tt.port); got != tt.named {
				t.Errorf("IP grants AllowsAddr = %v, want %v", got, tt.named)
			}
			if (SpecialAddr(a) == "") != tt.wild {
				t.Errorf("SpecialAddr = %q, but net:* allowing it is %v", SpecialAddr(a), tt.wild)
			}
		})
	}

	t.Run("ports", func(t *testing.T) {
		s := set(ws, "net:example.com:443")
		a := netip.MustParseAddr("93.184.216.34")
		if !s.AllowsAddr(a, 443) || s.AllowsAddr(a, 80) || s.AllowsAddr(a, 0) {
			t.Error("a port grant does not restrict AllowsAddr")
		}
	})
	t.Run("no net grant", func(t *testing.T) {
		if set(ws, "fs.read:**").AllowsAddr(netip.MustParseAddr("93.184.216.34"), 443) {
			t.Error("a set without net grants allows an address")
		}
	})
	t.Run("zone and invalid", func(t *testing.T) {
		s := set(ws, "net:[fe80::/10]", "net:*")
		if s.AllowsAddr(netip.MustParseAddr("fe80::1%eth0"), 80) || s.AllowsAddr(netip.Addr{}, 80) {
			t.Error("a zoned or invalid address is allowed")
		}
		if !s.AllowsAddr(netip.MustParseAddr("fe80::1"), 80) {
			t.Error("net:[fe80::/10] does not allow fe80::1")
		}
	})
	t.Run("intersection", func(t *testing.T) {
		s := set(ws, "net:*").Intersect(set(ws, "net:127.0.0.1"))
		if s.AllowsAddr(netip.MustParseAddr("127.0.0.1"), 80) {
			t.Error("net:* ∩ net:127.0.0.1 allows loopback, but net:* does not")
		}
		s = set(ws, "net:0.0.0.0/0").Intersect(set(ws, "net:127.0.0.1"))
		if !s.AllowsAddr(netip.MustParseAddr("127.0.0.1"), 80) || s.AllowsAddr(netip.MustParseAddr("127.0.0.2"), 80) {
			t.Error("net:0.0.0.0/0 ∩ net:127.0.0.1 is wrong")
		}
	})
}

func TestSpecialAddr(t *testing.T) {
	tests := []struct{ addr, want string }{
		{"127.0.0.1", "loopback"},
		{"::1", "loopback"},
		{"10.0.0.1", "private (RFC 1918)"},
		{"172.31.255.255", "private (RFC 1918)"},
		{"172.32.0.1", ""},
		{"192.168.0.1", "private (RFC 1918)"},
		{"fc00::1", "unique local (private)"},
		{"169.254.169.254", "cloud metadata"},
		{"fd00:ec2::254", "cloud metadata"},
		{"169.254.0.1", "link-local"},
		{"fe80::1", "link-local"},
		{"100.64.0.1", "carrier-grade NAT (RFC 6598)"},
		{"0.0.0.0", "unspecified (this network)"},
		{"::", "unspecified"},
		{"239.1.1.1", "multicast"},
		{"ff05::1", "multicast"},
		{"64:ff9b::a00:1", "NAT64 of private (RFC 1918)"},
		{"2002:a9fe:a9fe::", "6to4 of cloud metadata"},
		{"8.8.8.8", ""},
		{"2001:4860:4860::8888", ""},
		{"fe80::1%eth0", "invalid"},
	}
	for _, tt := range tests {
		if got := SpecialAddr(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("SpecialAddr(%s) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}

func TestAllowedBy(t *testing.T) {
	ws := "/ws"
	a := NewSet(ws, MustParse("fs.read:docs/**"), MustParse("fs.read:**"), MustParse("exec:git"))
	b := NewSet(ws, MustParse("fs.read:**"))
	need := Need{Kind: FSRead, Resource: "/ws/docs/a.md"}
	if got := a.AllowedBy(need); len(got) != 1 || got[0].String() != "fs.read:docs/**" {
		t.Fatalf("plain: %v", got)
	}
	if got := a.Intersect(b).AllowedBy(need); len(got) != 2 || got[1].String() != "fs.read:**" {
		t.Fatalf("intersection: %v", got)
	}
	if got := a.Intersect(NewSet(ws, MustParse("exec:git"))).AllowedBy(need); got != nil {
		t.Fatalf("an intersection one side of which refuses: %v", got)
	}
	if got := a.AllowedBy(Need{Kind: Exec, Resource: "rm"}); got != nil {
		t.Fatalf("not allowed: %v", got)
	}
	if got := NewSet(ws).Union(a).AllowedBy(Need{Kind: Exec, Resource: "git"}); len(got) != 1 || got[0].String() != "exec:git" {
		t.Fatalf("union: %v", got)
	}
}
