package capability

import (
	"net/netip"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Need is one concrete resource a call touches, computed from its arguments
// before anything runs. Resource forms:
//
//	fs.read, fs.write   an absolute, cleaned path, symlinks resolved (ResolvePath)
//	exec                the program's base name
//	net                 "host:port" or "host" (see NetNeed): the host lower-case,
//	                    IPv6 in brackets, IPv4 in dotted form
//	env                 the variable name
//	memory.*            the namespace (non-empty)
//	scope-less kinds    ""
//
// A need that is not in its form (a relative or unclean path, a program
// path, an unknown kind, a resource on a scope-less kind, …) is never
// allowed, and its Hint is "".
type Need struct {
	Kind     Kind
	Resource string
}

// String returns "kind:resource", or the kind alone when the resource is
// empty. Paths stay absolute; Hint gives the grant to suggest.
func (n Need) String() string {
	if n.Resource == "" {
		return string(n.Kind)
	}
	return string(n.Kind) + ":" + n.Resource
}

// Hint returns the narrowest grant that allows n, in the form a grant
// takes: fs paths under workspace relative to it ("fs.write:notes/a.txt",
// "fs.read:." for the workspace itself), others absolute; characters a
// grant cannot spell (glob meta characters, control characters, white space
// at either end) are replaced by ?, which matches them. "net:host:port",
// "exec:git", "env:HOME", "memory.read:ns", "git.write". It returns "" for a
// need no grant can allow.
func (n Need) Hint(workspace string) string {
	cn, ok := canonNeed(n)
	if !ok {
		return ""
	}
	switch {
	case n.Kind.isFS():
		scope := n.Resource
		if ws := cleanWorkspace(workspace); ws != "" && ws != "/" {
			if scope == ws {
				return string(n.Kind) + ":."
			}
			if rel, ok := strings.CutPrefix(scope, ws+"/"); ok {
				scope = rel
			}
		}
		return string(n.Kind) + ":" + globSafe(scope)
	case n.Kind.isMemory():
		return string(n.Kind) + ":" + globSafe(n.Resource)
	case n.Kind == Net:
		return "net:" + cn.netResource()
	case n.Kind.scoped():
		return n.String()
	default:
		return string(n.Kind)
	}
}

// globSafe replaces what a glob grant cannot spell with ?, which matches
// it: meta characters, control and formatting characters, invalid UTF-8,
// a leading ~ and white space at either end.
func globSafe(s string) string {
	var b strings.Builder
	for i, r := range s {
		if strings.ContainsRune(metaChars, r) || badRune(r, s[i:]) || i == 0 && (r == '~' || unicode.IsSpace(r)) {
			b.WriteByte('?')
		} else {
			b.WriteRune(r)
		}
	}
	out := b.String()
	trimmed := strings.TrimRightFunc(out, unicode.IsSpace)
	return trimmed + strings.Repeat("?", utf8.RuneCountInString(out[len(trimmed):]))
}

// need is a validated, canonical need.
type need struct {
	kind Kind
	res  string // canonical resource (for net: the host)

	// net
	ip   netip.Addr // valid when the host is an IP address
	port int        // 0 = unknown
}

func (n need) netResource() string {
	h := n.res
	if n.ip.IsValid() && n.ip.Is6() {
		h = "[" + h + "]"
	}
	if n.port != 0 {
		h += ":" + strconv.Itoa(n.port)
	}
	return h
}

// maxNeedLen bounds a need's resource; longer ones are never allowed.
const maxNeedLen = maxGrantLen - 64

// canonNeed validates n and returns its canonical form.
func canonNeed(n Need) (need, bool) {
	r := n.Resource
	if len(r) > maxNeedLen {
		return need{}, false
	}
	switch {
	case !n.Kind.known():
		return need{}, false
	case !n.Kind.scoped():
		return need{kind: n.Kind}, r == ""
	case n.Kind.isFS():
		if !strings.HasPrefix(r, "/") || path.Clean(r) != r || strings.IndexByte(r, 0) >= 0 {
			return need{}, false
		}
		return need{kind: n.Kind, res: r}, true
	case n.Kind == Exec:
		if r == "" || r == "*" {
			return need{}, false
		}
		if off, _ := validProgram(r); off >= 0 {
			return need{}, false
		}
		return need{kind: Exec, res: r}, true
	case n.Kind == Env:
		if r == "" || validEnvName(r) >= 0 {
			return need{}, false
		}
		return need{kind: Env, res: r}, true
	case n.Kind.isMemory():
		if r == "" {
			return need{}, false
		}
		if off, _ := validNamespace(r); off >= 0 {
			return need{}, false
		}
		return need{kind: n.Kind, res: r}, true
	case n.Kind == Net:
		return canonNetNeed(r)
	}
	return need{}, false
}

// canonNetNeed parses "host", "host:port", "[v6]", "[v6]:port" (and, for
// leniency, a bare IPv6 address without port).
func canonNetNeed(r string) (need, bool) {
	host, portText, hasPort := r, "", false
	switch {
	case strings.HasPrefix(r, "["):
		end := strings.IndexByte(r, ']')
		if end < 0 {
			return need{}, false
		}
		host = r[:end+1]
		if rest := r[end+1:]; rest != "" {
			if rest[0] != ':' {
				return need{}, false
			}
			portText, hasPort = rest[1:], true
		}
	case strings.Count(r, ":") == 1:
		host, portText, hasPort = strings.Cut(r, ":")
	}
	port := 0
	if hasPort {
		p, ok := parsePort(portText)
		if !ok {
			return need{}, false
		}
		port = int(p)
	}
	h, isIP := CanonicalHost(host)
	if h == "" {
		return need{}, false
	}
	n := need{kind: Net, res: h, port: port}
	if isIP {
		n.ip = netip.MustParseAddr(h)
	}
	return n, true
}

// cleanWorkspace returns the cleaned, slash-separated workspace, or "" if
// it is not absolute.
func cleanWorkspace(ws string) string {
	if ws == "" {
		return ""
	}
	ws = filepath.ToSlash(filepath.Clean(ws))
	if !strings.HasPrefix(ws, "/") {
		return ""
	}
	return ws
}
