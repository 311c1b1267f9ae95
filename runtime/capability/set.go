package capability

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Set is an immutable set of grants anchored to a workspace, or a
// combination of sets: an intersection (a wasm tool acts with run ∩ tool
// grants) or a union. The zero Set allows nothing. Sets are cheap to copy
// and safe for concurrent use.
type Set struct{ n *node }

type op uint8

const (
	opPlain op = iota
	opAnd
	opOr
)

type node struct {
	op op

	// opPlain
	ws     string   // cleaned workspace as given (Workspace)
	anchor string   // ws if absolute, else "": relative fs grants then match nothing
	grants []Grant  // distinct, in order
	fsPat  []string // absolute pattern per fs grant, "" if it cannot match

	// opAnd, opOr
	l, r *node
}

// NewSet returns the set of grants, with relative fs scopes anchored to
// workspace: an absolute path, cleaned here, whose symlinks the caller has
// resolved (ResolvePath(ws, ".") does that). If workspace is not absolute,
// relative fs grants allow nothing. Zero Grants are ignored, duplicates
// dropped.
func NewSet(workspace string, grants ...Grant) Set {
	n := &node{op: opPlain, anchor: cleanWorkspace(workspace)}
	n.ws = n.anchor
	if n.ws == "" && workspace != "" {
		n.ws = workspace
	}
	for _, g := range grants {
		n.add(g)
	}
	return Set{n}
}

func (n *node) add(g Grant) {
	if g.kind == "" {
		return
	}
	for _, h := range n.grants {
		if h == g {
			return
		}
	}
	n.grants = append(n.grants, g)
	pat := ""
	if g.kind.isFS() {
		pat = anchorFS(n.anchor, g.scope)
	}
	n.fsPat = append(n.fsPat, pat)
}

// ParseSet parses specs and returns their set (see NewSet). The errors of
// every bad spec are joined, each naming its index; workspace must be
// absolute.
func ParseSet(workspace string, specs []string) (Set, error) {
	var errs []error
	if cleanWorkspace(workspace) == "" {
		errs = append(errs, fmt.Errorf("capability: workspace %q is not an absolute path", workspace))
	}
	grants := make([]Grant, 0, len(specs))
	for i, s := range specs {
		g, err := Parse(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("grant %d: %w", i, err))
			continue
		}
		grants = append(grants, g)
	}
	if len(errs) > 0 {
		return Set{}, errors.Join(errs...)
	}
	return NewSet(workspace, grants...), nil
}

// Workspace returns the workspace relative fs grants are anchored to; for
// an intersection or union, the left-hand (receiver's) one.
func (s Set) Workspace() string {
	n := s.n
	for n != nil && n.op != opPlain {
		n = n.l
	}
	if n == nil {
		return ""
	}
	return n.ws
}

// Allows reports whether the set allows need n. Needs not in their
// documented form are never allowed.
func (s Set) Allows(n Need) bool {
	cn, ok := canonNeed(n)
	return ok && s.n.allows(cn)
}

// Check returns every need the set does not allow, in order (nil when all
// are allowed).
func (s Set) Check(needs ...Need) (missing []Need) {
	for _, n := range needs {
		if !s.Allows(n) {
			missing = append(missing, n)
		}
	}
	return missing
}

// Intersect returns the set that allows exactly what both s and o allow.
// Each side keeps its own workspace anchoring.
func (s Set) Intersect(o Set) Set {
	return Set{&node{op: opAnd, l: s.n, r: o.n}}
}

// Union returns the set that allows what s or o allows — for adding an
// invocation's own grants to the policy's grants. Two plain sets with the same
// workspace merge into one plain set (s's grants first, duplicates
// dropped); otherwise (different workspaces, or an intersection on either
// side) the result is a union node that keeps each side intact, so a union
// never changes what either side means. Note that a union with an
// intersection widens it: to add an invocation's grants to what a wasm tool may do,
// add them to the run's set before intersecting it with the tool's.
func (s Set) Union(o Set) Set {
	switch {
	case s.n.empty():
		return o
	case o.n.empty():
		return s
	case s.n.op == opPlain && o.n.op == opPlain && s.n.ws == o.n.ws:
		n := &node{op: opPlain, ws: s.n.ws, anchor: s.n.anchor}
		for _, g := range s.n.grants {
			n.add(g)
		}
		for _, g := range o.n.grants {
			n.add(g)
		}
		return Set{n}
	}
	return Set{&node{op: opOr, l: s.n, r: o.n}}
}

// Grants returns the plain grants. For a plain set they are its grants; for
// a union, the grants of both sides; for an intersection, the grants of
// either side that the other side allows in full (decided conservatively:
// the other side holds the same grant, allows the one resource an exact
// grant names, or holds a grant that plainly contains it — exec:*, env:GO*
// for env:GOPATH, fs.read:** for fs.read:notes/*.md, net:*.example.com for
// net:api.example.com:443, net:10.0.0.0/8 for net:10.1.2.3). Every grant
// returned is allowed in full by the set, but an intersection may allow
// more than its grants say (fs.read:notes/** ∩ fs.read:**/*.md allows
// notes/a.md, which neither grant states alone): String describes it
// exactly. Relative fs grants are returned as written; for sides with
// different workspaces they are anchored differently.
func (s Set) Grants() []Grant {
	var out []Grant
	for _, a := range s.n.anchoredGrants() {
		out = appendGrant(out, a.g)
	}
	return out
}

// String describes the set: "fs.read:**, git.read" for a plain set,
// "(a, b) ∩ (c)" for an intersection, "(a) ∪ (b)" for a union; "" for an
// empty plain set.
func (s Set) String() string { return s.n.String() }

// AllowsAddr reports whether the set lets a connection go to addr on port
// (0 = unknown port, which only grants without a port allow). It is for
// the addresses a host resolved to; the caller checks the host itself with
// Allows. A public unicast address (SpecialAddr returns "") is allowed when
// some net grant with a matching port exists: a host-name grant (the host
// check decides which names) or an IP/CIDR grant containing it. Loopback,
// private (RFC 1918, unique local fc00::/7), link-local (169.254.0.0/16,
// fe80::/10), carrier-grade NAT (100.64.0.0/10), unspecified, multicast,
// reserved and cloud metadata addresses (169.254.169.254, fd00:ec2::254,
// 168.63.129.16) — everything SpecialAddr names — are allowed only by an
// IP/CIDR grant that contains them. IPv4-mapped IPv6 is judged as IPv4;
// an address with a zone is never allowed.
func (s Set) AllowsAddr(addr netip.Addr, port int) bool {
	if !addr.IsValid() || addr.Zone() != "" || port < 0 || port > 65535 {
		return false
	}
	a := addr.Unmap()
	return s.n.allowsAddr(a, SpecialAddr(a) == "", port)
}

func (n *node) empty() bool { return n == nil || n.op == opPlain && len(n.grants) == 0 }

func (n *node) String() string {
	if n == nil {
		return ""
	}
	switch n.op {
	case opAnd:
		return "(" + n.l.String() + ") ∩ (" + n.r.String() + ")"
	case opOr:
		return "(" + n.l.String() + ") ∪ (" + n.r.String() + ")"
	}
	parts := make([]string, len(n.grants))
	for i, g := range n.grants {
		parts[i] = g.String()
	}
	return strings.Join(parts, ", ")
}

func (n *node) allows(nd need) bool {
	if n == nil {
		return false
	}
	switch n.op {
	case opAnd:
		return n.l.allows(nd) && n.r.allows(nd)
	case opOr:
		return n.l.allows(nd) || n.r.allows(nd)
	}
	for i, g := range n.grants {
		if g.kind == nd.kind && grantAllows(g, n.fsPat[i], nd) {
			return true
		}
	}
	return false
}

// grantAllows reports whether g (with fs pattern pat) allows nd of g's kind.
func grantAllows(g Grant, pat string, nd need) bool {
	switch {
	case !g.kind.scoped():
		return true
	case g.kind.isFS():
		return pat != "" && doublestar.MatchUnvalidated(pat, nd.res)
	case g.kind == Exec:
		return g.scope == "*" || g.scope == nd.res
	case g.kind == Env:
		if p, ok := strings.CutSuffix(g.scope, "*"); ok {
			return strings.HasPrefix(nd.res, p)
		}
		return g.scope == nd.res
	case g.kind.isMemory():
		return g.scope == "*" || doublestar.MatchUnvalidated(g.scope, nd.res)
	case g.kind == Net:
		if g.port != 0 && int(g.port) != nd.port {
			return false
		}
		if nd.ip.IsValid() {
			return g.prefix.IsValid() && g.prefix.Contains(nd.ip)
		}
		return g.host != "" && hostGrantMatches(g.host, nd.res)
	}
	return false
}

func (n *node) allowsAddr(a netip.Addr, public bool, port int) bool {
	if n == nil {
		return false
	}
	switch n.op {
	case opAnd:
		return n.l.allowsAddr(a, public, port) && n.r.allowsAddr(a, public, port)
	case opOr:
		return n.l.allowsAddr(a, public, port) || n.r.allowsAddr(a, public, port)
	}
	for _, g := range n.grants {
		if g.kind != Net || g.port != 0 && int(g.port) != port {
			continue
		}
		if g.prefix.IsValid() {
			if g.prefix.Contains(a) {
				return true
			}
		} else if public {
			return true
		}
	}
	return false
}

// anchoredGrant is a grant with the workspace its node anchors it to.
type anchoredGrant struct {
	g   Grant
	pat string // fs pattern ("" for other kinds or if it cannot match)
}

func (n *node) anchoredGrants() []anchoredGrant {
	if n == nil {
		return nil
	}
	switch n.op {
	case opOr:
		return append(n.l.anchoredGrants(), n.r.anchoredGrants()...)
	case opAnd:
		var out []anchoredGrant
		for _, a := range n.l.anchoredGrants() {
			if n.r.covers(a) {
				out = append(out, a)
			}
		}
		for _, a := range n.r.anchoredGrants() {
			if n.l.covers(a) {
				out = append(out, a)
			}
		}
		return out
	}
	out := make([]anchoredGrant, len(n.grants))
	for i, g := range n.grants {
		out[i] = anchoredGrant{g, n.fsPat[i]}
	}
	return out
}

func appendGrant(gs []Grant, g Grant) []Grant {
	for _, h := range gs {
		if h == g {
			return gs
		}
	}
	return append(gs, g)
}

// covers reports, conservatively, whether n allows everything a allows.
func (n *node) covers(a anchoredGrant) bool {
	if n == nil {
		return false
	}
	switch n.op {
	case opAnd:
		return n.l.covers(a) && n.r.covers(a)
	case opOr:
		return n.l.covers(a) || n.r.covers(a)
	}
	if a.g.kind.isFS() && a.pat == "" {
		return false // not anchored: listing it would mislead
	}
	if nd, ok := exactNeed(a); ok && n.allows(nd) {
		return true
	}
	for i, h := range n.grants {
		if h.kind == a.g.kind && subsumes(h, n.fsPat[i], a) {
			return true
		}
	}
	return false
}

// exactNeed returns the one need a grant allows, for grants that allow
// exactly one.
func exactNeed(a anchoredGrant) (need, bool) {
	g := a.g
	switch {
	case !g.kind.scoped():
		return need{kind: g.kind}, true
	case g.kind.isFS():
		if hasMeta(a.pat) {
			return need{}, false
		}
		return canonNeed(Need{Kind: g.kind, Resource: unescapeMeta(a.pat)})
	case g.kind.isMemory():
		if hasMeta(g.scope) {
			return need{}, false
		}
		return canonNeed(Need{Kind: g.kind, Resource: g.scope})
	case g.kind == Exec:
		return need{kind: Exec, res: g.scope}, g.scope != "*"
	case g.kind == Env:
		return need{kind: Env, res: g.scope}, !strings.HasSuffix(g.scope, "*")
	case g.kind == Net:
		if g.port == 0 {
			return need{}, false
		}
		if g.prefix.IsValid() {
			if !g.prefix.IsSingleIP() {
				return need{}, false
			}
			a := g.prefix.Addr()
			return need{kind: Net, res: a.String(), ip: a, port: int(g.port)}, true
		}
		if strings.HasPrefix(g.host, "*") {
			return need{}, false
		}
		return need{kind: Net, res: g.host, port: int(g.port)}, true
	}
	return need{}, false
}

// subsumes reports whether grant h (fs pattern hPat) plainly contains a.
func subsumes(h Grant, hPat string, a anchoredGrant) bool {
	g := a.g
	if h == g && (!h.kind.isFS() || hPat == a.pat) {
		return true
	}
	switch {
	case h.kind == Exec:
		return h.scope == "*"
	case h.kind == Env:
		p, ok := strings.CutSuffix(h.scope, "*")
		return ok && strings.HasPrefix(g.scope, p)
	case h.kind.isMemory():
		return h.scope == "*" || h.scope == "**"
	case h.kind.isFS():
		base, ok := strings.CutSuffix(hPat, "/**")
		if !ok || hasMeta(base) {
			return false
		}
		base = unescapeMeta(base)
		gBase := literalDir(a.pat)
		return base == "" || gBase == base || strings.HasPrefix(gBase, base+"/")
	case h.kind == Net:
		if h.port != 0 && h.port != g.port {
			return false
		}
		if h.prefix.IsValid() || g.prefix.IsValid() {
			return h.prefix.IsValid() && g.prefix.IsValid() &&
				h.prefix.Bits() <= g.prefix.Bits() && h.prefix.Contains(g.prefix.Addr())
		}
		// Host patterns: every name g matches must be one h matches.
		gName := strings.TrimPrefix(g.host, "*.")
		switch {
		case h.host == "*":
			return !isLocalhostName(gName)
		case strings.HasPrefix(h.host, "*.") && g.host != "*":
			s := h.host[2:]
			within := strings.HasSuffix(gName, "."+s) || strings.HasPrefix(g.host, "*.") && gName == s
			return within && (!isLocalhostName(gName) || isLocalhostName(s))
		}
	}
	return false
}

// AllowedBy returns the grants that allow n: for a plain set the first grant
// that does; for an intersection one from each side (both had to allow it);
// for a union the first side's that does. It returns nil when the set does not
// allow n. It is for explanations and audit records.
func (s Set) AllowedBy(n Need) []Grant {
	cn, ok := canonNeed(n)
	if !ok {
		return nil
	}
	return s.n.allowedBy(cn)
}

func (n *node) allowedBy(nd need) []Grant {
	if n == nil {
		return nil
	}
	switch n.op {
	case opAnd:
		l := n.l.allowedBy(nd)
		if l == nil {
			return nil
		}
		r := n.r.allowedBy(nd)
		if r == nil {
			return nil
		}
		return append(l, r...)
	case opOr:
		if l := n.l.allowedBy(nd); l != nil {
			return l
		}
		return n.r.allowedBy(nd)
	}
	for i, g := range n.grants {
		if g.kind == nd.kind && grantAllows(g, n.fsPat[i], nd) {
			return []Grant{g}
		}
	}
	return nil
}

// PathMatcher matches paths against fs scopes anchored to a workspace, as
// fs grants match them, and says which scope matched — for policy rules on
// paths, where one call is matched against many patterns. A pattern whose
// literal start the path does not share is skipped without globbing.
type PathMatcher struct {
	pats []string // absolute patterns, "" if one cannot match
	lits []string // each pattern's literal start
}

// NewPathMatcher anchors the scopes of fs grants to workspace (as NewSet
// does); grants of other kinds never match.
func NewPathMatcher(workspace string, scopes ...Grant) PathMatcher {
	ws := cleanWorkspace(workspace)
	m := PathMatcher{pats: make([]string, len(scopes)), lits: make([]string, len(scopes))}
	for i, g := range scopes {
		if !g.kind.isFS() {
			continue
		}
		pat := anchorFS(ws, g.scope)
		m.pats[i] = pat
		if j := strings.IndexAny(pat, `*?[{\`); j >= 0 {
			m.lits[i] = pat[:j]
		} else {
			m.lits[i] = pat
		}
	}
	return m
}

// Match returns the index of the first scope that matches p, or -1. p must
// be absolute and clean, as needs carry paths (see CleanPath).
func (m PathMatcher) Match(p string) int {
	for i, pat := range m.pats {
		if pat == "" {
			continue
		}
		lit := m.lits[i]
		// dir/** also matches dir itself: its literal start is "dir/".
		if !strings.HasPrefix(p, lit) && !(len(p)+1 == len(lit) && lit[len(p)] == '/' && strings.HasPrefix(lit, p)) {
			continue
		}
		if doublestar.MatchUnvalidated(pat, p) {
			return i
		}
	}
	return -1
}

// CleanPath reports whether p is absolute and clean: the form fs needs
// carry and PathMatcher matches.
func CleanPath(p string) bool {
	return strings.HasPrefix(p, "/") && path.Clean(p) == p
}
