package capability

import (
	"fmt"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

// maxGrantLen bounds a grant's length (and so the cost of matching it).
const maxGrantLen = 8192

// ParseError is the error Parse returns: Input is the text given, Offset the
// byte offset in it of the offending part, Reason what is wrong with it and
// what the valid form is.
type ParseError struct {
	Input  string
	Offset int
	Reason string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("capability %q: %s", e.Input, e.Reason)
}

// scopeError is a scope parser's complaint; off is relative to the scope.
type scopeError struct {
	off    int
	reason string
}

func scopeErr(off int, format string, args ...any) *scopeError {
	return &scopeError{off: off, reason: fmt.Sprintf(format, args...)}
}

// MustParse is Parse for constants and tests: it panics on an error.
func MustParse(s string) Grant {
	g, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return g
}

// Parse validates a grant written as KIND or KIND:SCOPE and returns it in
// canonical form (see the package documentation for the grammar). Every
// error is a *ParseError naming the offending part and the valid form.
func Parse(s string) (Grant, error) {
	fail := func(off int, format string, args ...any) (Grant, error) {
		return Grant{}, &ParseError{Input: s, Offset: off, Reason: fmt.Sprintf(format, args...)}
	}
	if s == "" {
		return fail(0, "empty capability; the form is KIND:SCOPE or KIND, e.g. fs.read:** or git.read")
	}
	if len(s) > maxGrantLen {
		return fail(maxGrantLen, "longer than %d bytes", maxGrantLen)
	}
	if i, r, bad := firstBadRune(s); bad {
		if r == utf8.RuneError {
			return fail(i, "invalid UTF-8 at byte %d", i)
		}
		return fail(i, "control or formatting character %U at byte %d is not allowed", r, i)
	}
	if strings.TrimSpace(s) != s {
		return fail(0, "leading or trailing white space is not allowed")
	}
	kindText, scope, hasScope := strings.Cut(s, ":")
	k := Kind(kindText)
	if !k.known() {
		return fail(0, "unknown kind %q%s (known: %s)", kindText, suggestKind(kindText), kindList())
	}
	if !k.scoped() {
		if hasScope {
			return fail(len(kindText), "%s takes no scope; write it alone: %s", k, k)
		}
		return Grant{kind: k}, nil
	}
	if scope == "" {
		return fail(len(s), "%s needs a scope: %s", k, scopeForm(k))
	}
	base := len(kindText) + 1
	if r, _ := utf8.DecodeRuneInString(scope); unicode.IsSpace(r) {
		return fail(base, "the scope starts with white space; %s takes %s", k, scopeForm(k))
	}
	var (
		g   Grant
		err *scopeError
	)
	switch {
	case k.isFS():
		g, err = parseFS(k, scope)
	case k == Exec:
		g, err = parseExec(scope)
	case k == Env:
		g, err = parseEnv(scope)
	case k.isMemory():
		g, err = parseMemory(k, scope)
	case k == Net:
		g, err = parseNet(scope)
	}
	if err != nil {
		return fail(base+err.off, "%s", err.reason)
	}
	return g, nil
}

// firstBadRune finds invalid UTF-8 and control or formatting characters
// (including bidirectional overrides and zero-width characters, which could
// make a grant read differently from what it is).
func firstBadRune(s string) (int, rune, bool) {
	for i, r := range s {
		if badRune(r, s[i:]) {
			return i, r, true
		}
	}
	return 0, 0, false
}

func badRune(r rune, at string) bool {
	if r == utf8.RuneError {
		_, size := utf8.DecodeRuneInString(at)
		return size <= 1
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

func kindList() string {
	names := make([]string, len(allKinds))
	for i, k := range allKinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// suggestKind returns ` (did you mean "x"?)` for a near miss.
func suggestKind(s string) string {
	best, bestD := Kind(""), 3
	ls := strings.ToLower(s)
	for _, k := range allKinds {
		if d := editDistance(ls, string(k)); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance, for short strings.
func editDistance(a, b string) int {
	if len(a) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func scopeForm(k Kind) string {
	switch k {
	case FSRead, FSWrite:
		return fmt.Sprintf("a path glob, relative to the workspace (%s:notes/**) or absolute (%s:/etc/nginx/**)", k, k)
	case Exec:
		return "a program name (exec:git) or * for any program"
	case Net:
		return "a host (net:api.github.com), *.domain for its subdomains or * for any host name, each with an optional :PORT; or an IP address or CIDR (net:127.0.0.1:8080, net:[::1], net:10.0.0.0/8)"
	case Env:
		return "a variable name (env:GOPATH) or a prefix ending in * (env:GO*)"
	case MemoryRead, MemoryWrite:
		return fmt.Sprintf("a namespace glob (%s:notes, %s:project/*, %s:*)", k, k, k)
	}
	return "no scope"
}

func parseFS(k Kind, scope string) (Grant, *scopeError) {
	if i := strings.IndexByte(scope, '\\'); i >= 0 {
		return Grant{}, scopeErr(i, "backslash escapes are not supported in path globs; use ? or [] to match a literal meta character")
	}
	off := 0
	for _, e := range strings.Split(scope, "/") {
		if e == ".." {
			return Grant{}, scopeErr(off, `".." is not allowed in a path grant; name the directory itself (relative scopes are under the workspace, absolute ones start with /)`)
		}
		off += len(e) + 1
	}
	if !doublestar.ValidatePattern(scope) {
		return Grant{}, scopeErr(0, "invalid glob %q: unbalanced [ ] or { }, or an empty [] class", scope)
	}
	clean := path.Clean(scope)
	if strings.HasPrefix(clean, "~") {
		return Grant{}, scopeErr(0, "~ is not expanded; write an absolute path (%s:/home/me/...) or one relative to the workspace", k)
	}
	if strings.TrimSpace(clean) != clean {
		return Grant{}, scopeErr(0, "a path grant may not start or end with white space")
	}
	return Grant{kind: k, scope: clean}, nil
}

// validProgram reports whether name can be an exec grant's or need's
// program: a base name without glob meta characters or white space.
func validProgram(name string) (int, string) {
	if name == "." || name == ".." {
		return 0, fmt.Sprintf("%q is not a program name", name)
	}
	for i, r := range name {
		switch {
		case r == '/' || r == '\\':
			return i, fmt.Sprintf("exec takes a program name, not a path: write exec:%s", path.Base(strings.ReplaceAll(name, `\`, "/")))
		case strings.ContainsRune("*?[]{}", r):
			return i, "exec takes a program name or * alone; globs are not supported"
		case unicode.IsSpace(r):
			return i, "white space is not allowed in a program name"
		case badRune(r, name[i:]):
			return i, "control character in a program name"
		}
	}
	return -1, ""
}

func parseExec(scope string) (Grant, *scopeError) {
	if scope != "*" {
		if off, why := validProgram(scope); off >= 0 {
			return Grant{}, scopeErr(off, "%s", why)
		}
	}
	return Grant{kind: Exec, scope: scope}, nil
}

// validEnvName reports whether s is [A-Za-z_][A-Za-z0-9_]*, returning the
// offset of the first bad byte or -1.
func validEnvName(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return i
	}
	return -1
}

func parseEnv(scope string) (Grant, *scopeError) {
	name := strings.TrimSuffix(scope, "*")
	if i := strings.IndexByte(name, '*'); i >= 0 {
		return Grant{}, scopeErr(i, "env takes a variable name with at most one * at the end (env:GO*)")
	}
	if i := validEnvName(name); i >= 0 {
		return Grant{}, scopeErr(i, "%q is not a variable name: letters, digits and _, not starting with a digit; a trailing * makes it a prefix", name)
	}
	return Grant{kind: Env, scope: scope}, nil
}

// validNamespace checks the characters of a memory namespace or pattern.
func validNamespace(s string) (int, string) {
	for i, r := range s {
		switch {
		case r == '\\':
			return i, "backslash escapes are not supported in namespace globs"
		case unicode.IsSpace(r):
			return i, "white space is not allowed in a namespace"
		case badRune(r, s[i:]):
			return i, "control character in a namespace"
		}
	}
	return -1, ""
}

func parseMemory(k Kind, scope string) (Grant, *scopeError) {
	if off, why := validNamespace(scope); off >= 0 {
		return Grant{}, scopeErr(off, "%s", why)
	}
	if !doublestar.ValidatePattern(scope) {
		return Grant{}, scopeErr(0, "invalid namespace glob %q: unbalanced [ ] or { }, or an empty [] class", scope)
	}
	return Grant{kind: k, scope: scope}, nil
}

// parsePort parses a decimal port 1-65535.
func parsePort(s string) (uint16, bool) {
	if s == "" || len(s) > 5 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, false
	}
	return uint16(n), true
}

func parseNet(scope string) (Grant, *scopeError) {
	var hostPart, portPart string
	hasPort := false
	bracketed := strings.HasPrefix(scope, "[")
	switch {
	case bracketed:
		end := strings.IndexByte(scope, ']')
		if end < 0 {
			return Grant{}, scopeErr(0, "missing ] after an IPv6 address; write net:[::1] or net:[::1]:8080")
		}
		hostPart = scope[1:end]
		rest := scope[end+1:]
		if rest != "" {
			if rest[0] != ':' {
				return Grant{}, scopeErr(end+1, "only :PORT may follow ]; write net:[::1]:8080")
			}
			portPart, hasPort = rest[1:], true
		}
	case strings.Count(scope, ":") >= 2:
		hostPart = scope // bare IPv6, no port
	default:
		hostPart, portPart, hasPort = strings.Cut(scope, ":")
	}
	var port uint16
	if hasPort {
		p, ok := parsePort(portPart)
		if !ok {
			return Grant{}, scopeErr(len(scope)-len(portPart), "bad port %q: a number from 1 to 65535", portPart)
		}
		port = p
	}
	portSuffix := ""
	if port != 0 {
		portSuffix = ":" + strconv.Itoa(int(port))
	}

	// IP addresses and CIDRs.
	if bracketed || strings.ContainsAny(hostPart, ":/") || isCanonicalIPv4(hostPart) {
		p, why := parseIPScope(hostPart)
		if why != "" {
			off := 0
			if bracketed {
				off = 1
			}
			return Grant{}, scopeErr(off, "%s", why)
		}
		if bracketed && !strings.Contains(hostPart, ":") {
			return Grant{}, scopeErr(0, "brackets are for IPv6 only; write net:%s%s", ipScope(p), portSuffix)
		}
		return Grant{kind: Net, scope: ipScope(p) + portSuffix, prefix: p, port: port}, nil
	}

	// Host names and patterns.
	h := strings.ToLower(hostPart)
	if strings.HasSuffix(h, ".") && h != "." {
		h = h[:len(h)-1]
	}
	switch {
	case h == "*":
	case strings.Contains(h, "**"):
		return Grant{}, scopeErr(strings.Index(h, "**"), "** is not allowed in host names; use *.example.com for subdomains or * for any host name")
	case strings.HasPrefix(h, "*."):
		if i := strings.IndexByte(h[2:], '*'); i >= 0 {
			return Grant{}, scopeErr(2+i, "a wildcard is allowed only as the whole first label (*.example.com) or alone (*)")
		}
		if why := hostNameError(h[2:]); why != "" {
			return Grant{}, scopeErr(2, "%s", why)
		}
	default:
		if i := strings.IndexByte(h, '*'); i >= 0 {
			return Grant{}, scopeErr(i, "a wildcard is allowed only as the whole first label (*.example.com) or alone (*)")
		}
		if v4, isIP := parseIPv4Loose(h); isIP {
			if !v4.IsValid() {
				return Grant{}, scopeErr(0, "%q is not a valid IP address, and a host name cannot end in a numeric label", hostPart)
			}
			return Grant{}, scopeErr(0, "%q is a non-canonical form of the IP address %s; write net:%s%s", hostPart, v4, v4, portSuffix)
		}
		if why := hostNameError(h); why != "" {
			return Grant{}, scopeErr(0, "%s", why)
		}
	}
	return Grant{kind: Net, scope: h + portSuffix, host: h, port: port}, nil
}

// isCanonicalIPv4 reports whether s is an IPv4 address in dotted form.
func isCanonicalIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4()
}

// parseIPScope parses an IP address or CIDR in a grant, canonicalised:
// IPv4-mapped addresses become IPv4, a full-length prefix means one
// address. Host bits and zones are refused.
func parseIPScope(s string) (netip.Prefix, string) {
	if strings.Contains(s, "%") {
		return netip.Prefix{}, "zone identifiers (%eth0) are not allowed in a grant"
	}
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		p, err = netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Sprintf("bad CIDR %q: %s", s, errText(err))
		}
		if m := p.Masked(); m != p {
			return netip.Prefix{}, fmt.Sprintf("bad CIDR %q: bits are set after the prefix length; did you mean %s?", s, ipScope(m))
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Sprintf("bad IP address %q: %s", s, errText(err))
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p, ""
}

func errText(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}

// ipScope writes an IP grant's host part: IPv4 bare, IPv6 in brackets, a
// single address without its prefix length.
func ipScope(p netip.Prefix) string {
	s := p.Addr().String()
	if !p.IsSingleIP() {
		s += "/" + strconv.Itoa(p.Bits())
	}
	if p.Addr().Is6() {
		return "[" + s + "]"
	}
	return s
}

// hostNameError explains why h (lower case, no trailing dot) is not a
// DNS name warden accepts, or returns "".
func hostNameError(h string) string {
	if h == "" {
		return "empty host name"
	}
	if len(h) > 253 {
		return "host name longer than 253 bytes"
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" {
			return fmt.Sprintf("empty label in host name %q", h)
		}
		if len(l) > 63 {
			return fmt.Sprintf("label %q is longer than 63 bytes", l)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if c >= utf8.RuneSelf {
				return fmt.Sprintf("%q is not ASCII; write the punycode (xn--) form", h)
			}
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return fmt.Sprintf("%q is not allowed in a host name", string(c))
			}
		}
	}
	if isNumericLabel(labels[len(labels)-1]) {
		return fmt.Sprintf("host name %q ends in a numeric label, which URL parsers read as an IP address", h)
	}
	return ""
}
