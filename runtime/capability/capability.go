// Package capability is warden's grant language: what a call may touch.
//
// Everything is denied by default. A grant is KIND or KIND:SCOPE, made only
// by [Parse], so every [Grant] in the program has been validated. A call
// states what it touches as [Need]s, computed from its arguments before
// anything runs; a [Set] of grants allows or refuses each need.
//
// # Kinds and scopes
//
//	fs.read, fs.write   path glob (doublestar syntax, ** allowed). Relative
//	                    scopes are anchored to the workspace, absolute ones
//	                    (/etc/nginx/**) name the host file system. No "..",
//	                    no "~", no backslash escapes.
//	exec                a program base name (exec:git), or * for any program
//	net                 host (net:api.github.com), *.domain (its subdomains,
//	                    never the bare domain), * (any DNS name), each with an
//	                    optional :PORT; or an IP address or CIDR (net:127.0.0.1,
//	                    net:[::1]:8080, net:10.0.0.0/8). IPv6 is written in
//	                    brackets when it has a port; the canonical form always
//	                    brackets it.
//	env                 a variable name (env:GOPATH) or a prefix ending in *
//	                    (env:GO*, env:* for every variable)
//	memory.read,        namespace glob; * alone means every namespace,
//	memory.write        including nested ones (project/a)
//	git.read, git.write, system.info, user.ask, llm
//	                    no scope
//
// # Matching
//
// File system needs carry absolute, cleaned paths (resolve symlinks with
// [ResolvePath] first). They are matched with doublestar against the grant's
// absolute pattern; "dir/**" also matches dir itself. fs.read:** is the
// whole workspace and nothing outside it. fs.write does not imply fs.read: a
// tool that reads back what it wrote needs both. A need path that is relative
// or not clean (contains ".." or "." elements) is never allowed.
//
// Host names match case-insensitively, one trailing dot ignored, punycode
// left as it is. A grant without a port allows every port; a grant with a
// port does not allow a need whose port is unknown. Wildcard host grants (*
// and *.domain) never match "localhost" or names under it unless the
// wildcard itself is under localhost; name them explicitly (net:localhost).
//
// A net need whose host is an IP address (in any form [CanonicalHost]
// recognises, e.g. 2130706433 or 0x7f.1) is allowed only by an IP or CIDR
// grant that contains it, never by * or a host name. Callers should still
// pass canonical hosts (see [NetNeed]) so that what is checked is what is
// dialled, and check every resolved address with [Set.AllowsAddr].
//
// exec matches the exact base name; a need containing "/" is never allowed.
// env matches the exact name or a granted prefix. memory namespaces are
// matched as "/"-separated globs.
package capability

import (
	"net/netip"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Kind is the kind of resource a grant or a need is about.
type Kind string

// The kinds of capability.
const (
	FSRead      Kind = "fs.read"
	FSWrite     Kind = "fs.write"
	Exec        Kind = "exec"
	Net         Kind = "net"
	Env         Kind = "env"
	MemoryRead  Kind = "memory.read"
	MemoryWrite Kind = "memory.write"
	GitRead     Kind = "git.read"
	GitWrite    Kind = "git.write"
	SystemInfo  Kind = "system.info"
	UserAsk     Kind = "user.ask"
	LLM         Kind = "llm"
)

var allKinds = []Kind{FSRead, FSWrite, Exec, Net, Env, MemoryRead, MemoryWrite, GitRead, GitWrite, SystemInfo, UserAsk, LLM}

// Kinds returns every kind, in a fixed order.
func Kinds() []Kind { return append([]Kind(nil), allKinds...) }

func (k Kind) known() bool {
	for _, x := range allKinds {
		if k == x {
			return true
		}
	}
	return false
}

// scoped reports whether grants of kind k take a scope.
func (k Kind) scoped() bool {
	switch k {
	case FSRead, FSWrite, Exec, Net, Env, MemoryRead, MemoryWrite:
		return true
	}
	return false
}

func (k Kind) isFS() bool     { return k == FSRead || k == FSWrite }
func (k Kind) isMemory() bool { return k == MemoryRead || k == MemoryWrite }

// Grant is one validated permission. The zero Grant is not a permission:
// it allows nothing, and sets ignore it. Grants are comparable with ==;
// two grants are equal exactly when their canonical forms are.
type Grant struct {
	kind  Kind
	scope string // canonical scope; "" for scope-less kinds

	// net only: host is "*", "*.domain" or a DNS name for host grants and
	// "" for IP grants; prefix is valid for IP grants only; port 0 = any.
	host   string
	prefix netip.Prefix
	port   uint16
}

// Kind returns the grant's kind.
func (g Grant) Kind() Kind { return g.kind }

// Port returns a net grant's port (0: any port, and for other kinds).
func (g Grant) Port() int { return int(g.port) }

// SingleAddr returns, for a net grant of one IP address (net:10.0.0.5,
// net:[::1]:5432 — not a wider CIDR), that address.
func (g Grant) SingleAddr() (netip.Addr, bool) {
	if g.kind != Net || !g.prefix.IsValid() || !g.prefix.IsSingleIP() {
		return netip.Addr{}, false
	}
	return g.prefix.Addr(), true
}

// Scope returns the canonical scope ("" for scope-less kinds).
func (g Grant) Scope() string { return g.scope }

// String returns the canonical form; Parse(g.String()) returns g.
func (g Grant) String() string {
	if g.scope == "" {
		return string(g.kind)
	}
	return string(g.kind) + ":" + g.scope
}

// Base returns, for fs grants, the absolute directory every path the grant
// can match lies in or is: the path elements before the first one holding a
// glob meta character ("/etc/nginx" for /etc/nginx/**, "<workspace>/notes"
// for notes/**, the workspace for **). For a grant without glob meta
// characters, which names exactly one path, it is that path's parent
// directory, except that fs.X:. (the workspace itself) has the workspace as
// its base: a relative grant's base is never above the workspace. It
// returns "" for other kinds, and for a relative grant when workspace is
// not absolute.
func (g Grant) Base(workspace string) string {
	if !g.kind.isFS() {
		return ""
	}
	ws := cleanWorkspace(workspace)
	pat := anchorFS(ws, g.scope)
	if pat == "" {
		return ""
	}
	if g.scope == "." {
		return ws // a relative grant's base is never above the workspace
	}
	return literalDir(pat)
}

// Exact returns, for an fs grant without glob meta characters, the one
// absolute path it names; ok is false for other grants (and for a relative
// grant when workspace is not absolute).
func (g Grant) Exact(workspace string) (path string, ok bool) {
	if !g.kind.isFS() {
		return "", false
	}
	pat := anchorFS(cleanWorkspace(workspace), g.scope)
	if pat == "" {
		return "", false
	}
	for _, e := range strings.Split(pat, "/") {
		if hasMeta(e) {
			return "", false
		}
	}
	return unescapeMeta(pat), true
}

// Pattern returns an fs grant's absolute doublestar pattern (a relative
// grant anchored at workspace, whose glob meta characters are escaped), or
// "" for other kinds.
func (g Grant) Pattern(workspace string) string {
	if !g.kind.isFS() {
		return ""
	}
	return anchorFS(cleanWorkspace(workspace), g.scope)
}

// Tree returns, for an fs grant of a whole directory tree (DIR/** with a
// literal DIR, or ** for the workspace), that directory.
func (g Grant) Tree(workspace string) (dir string, ok bool) {
	pat := g.Pattern(workspace)
	d, cut := strings.CutSuffix(pat, "/**")
	if !cut || pat == "" {
		return "", false
	}
	for _, e := range strings.Split(d, "/") {
		if hasMeta(e) {
			return "", false
		}
	}
	if d == "" {
		return "/", true
	}
	return unescapeMeta(d), true
}

// anchorFS returns the absolute doublestar pattern for an fs scope, or ""
// when the scope is relative and the workspace is not usable.
func anchorFS(ws, scope string) string {
	if strings.HasPrefix(scope, "/") {
		return scope
	}
	if ws == "" {
		return ""
	}
	ews := escapeMeta(ws)
	if scope == "." {
		return ews
	}
	if ws == "/" {
		return "/" + scope
	}
	return ews + "/" + scope
}

// literalDir returns the unescaped directory before the first path element
// that holds a glob meta character, or the parent of a pattern without any.
func literalDir(pat string) string {
	elems := strings.Split(pat, "/")
	for i, e := range elems {
		if hasMeta(e) {
			d := unescapeMeta(strings.Join(elems[:i], "/"))
			if d == "" {
				return "/"
			}
			return d
		}
	}
	return path.Dir(unescapeMeta(pat))
}

// hasMeta reports whether s holds an unescaped glob meta character.
func hasMeta(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '*', '?', '[', '{':
			return true
		}
	}
	return false
}

const metaChars = `*?[]{}\`

// escapeMeta escapes glob meta characters so that s matches only itself.
func escapeMeta(s string) string {
	if !strings.ContainsAny(s, metaChars) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(metaChars, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unescapeMeta(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// runsCode are programs that run code named in their arguments or input:
// shells, interpreters, and build tools and package managers that run
// recipes, scripts or what they build. Such a grant is not exec:* — under
// the sandbox a program can execute only the files the call's exec: grants
// name, whatever starts it — but the program computes anything itself,
// within the call's fs and net grants. go is in the list; git is not,
// though its -c options can name helper commands: exec:git is the grant
// the runtime is built around, and shell argument filtering is the shell
// tool's job.
var runsCode = map[string]string{
	// shells
	"sh": "a shell", "bash": "a shell", "dash": "a shell", "zsh": "a shell", "fish": "a shell",
	"ksh": "a shell", "mksh": "a shell", "ash": "a shell", "csh": "a shell", "tcsh": "a shell",
	"pwsh": "a shell", "powershell": "a shell", "cmd": "a shell", "busybox": "a multi-call binary that includes a shell",
	"toybox": "a multi-call binary that includes a shell",
	// interpreters
	"python": "an interpreter", "pypy": "an interpreter", "node": "an interpreter", "nodejs": "an interpreter",
	"deno": "an interpreter", "bun": "an interpreter", "perl": "an interpreter", "ruby": "an interpreter",
	"php": "an interpreter", "lua": "an interpreter", "luajit": "an interpreter", "tclsh": "an interpreter",
	"wish": "an interpreter", "rscript": "an interpreter", "julia": "an interpreter", "java": "a virtual machine that runs any class",
	"jshell": "an interpreter", "osascript": "an interpreter", "awk": "an interpreter",
	"gawk": "an interpreter", "mawk": "an interpreter", "nawk": "an interpreter",
	"expect": "an interpreter", "gdb": "a debugger that runs scripts",
	// build tools that run recipes, scripts or what they build
	"make": "a build tool that runs arbitrary recipes", "gmake": "a build tool that runs arbitrary recipes",
	"go":    "a toolchain that runs arbitrary code (go generate, build tags, cgo); go run and go test execute what they build, which only exec:* allows under the sandbox",
	"cargo": "a toolchain that runs arbitrary code (build scripts); cargo run and cargo test execute what they build, which only exec:* allows under the sandbox",
	"npm":   "a package manager that runs arbitrary scripts", "yarn": "a package manager that runs arbitrary scripts",
	"pnpm": "a package manager that runs arbitrary scripts", "uv": "a package manager that runs arbitrary code",
	"pip": "a package manager that runs arbitrary setup code", "npx": "a launcher that downloads and runs packages",
	"uvx": "a launcher that downloads and runs packages",
}

// remote are programs that run commands elsewhere — on other machines or
// in containers — where warden's sandbox does not reach.
var remote = map[string]string{
	"ssh": "runs commands on the machines it reaches", "kubectl": "runs commands in the pods it reaches (kubectl exec)",
	"docker": "runs containers, which can mount the host, through the daemon it reaches", "podman": "runs containers through the service it reaches",
	"systemd-run": "asks systemd to run a program outside the sandbox",
}

// progName is a program name without a version suffix: python3.12, node18
// and lua5.4 count as python, node and lua.
func progName(name string) string {
	n := strings.ToLower(name)
	if _, ok := runsCode[n]; ok {
		return n
	}
	if _, ok := remote[n]; ok {
		return n
	}
	return strings.TrimRight(n, "0123456789.-")
}

// Broad returns, for a grant that hands over more than its name says, an
// explanation of what it really allows; "" otherwise. What programs do is
// held by warden's sandbox (see `warden sandbox check`): a program can
// execute only the files the call's exec: grants name, never write .git/,
// .warden/ or the policy's protect: paths, and reach only the hosts the
// net grants name — at level full; below it, less (the explanations say
// which). Broad grants:
//
//   - exec:* (any program, and any program it starts);
//   - exec of a shell, an interpreter or a build tool (it computes
//     anything itself, within the call's other grants), or of a program
//     that runs commands on other machines or in containers;
//   - fs.write grants that can change the workspace's .git or .warden
//     (fs.write:**, fs.write:.git/**) — held off them at level full only —
//     or that start at / with a glob (fs.write:/**);
//   - net:* (any host name), net:*.tld (a whole top-level domain) and net
//     CIDRs of length 0 (every address, loopback and cloud metadata
//     included).
//
// Launchers (env, xargs, timeout, nice, nohup, setsid, stdbuf, …) are not
// broad: they start only programs the exec: grants name.
func (g Grant) Broad() string {
	switch g.kind {
	case Exec:
		if g.scope == "*" {
			return "exec:* lets the tool run any program, and every program it starts run any other"
		}
		n := progName(g.scope)
		if why, ok := runsCode[n]; ok {
			return g.String() + " runs any code it is given (" + g.scope + " is " + why + "): within the call's fs and net grants, and starting only programs exec: grants name"
		}
		if why, ok := remote[n]; ok {
			return g.String() + " " + why + ", beyond warden's sandbox"
		}
	case FSWrite:
		if strings.HasPrefix(g.scope, "/") {
			if hasMeta(g.scope) && literalDir(g.scope) == "/" {
				return g.String() + " lets the tool change files anywhere on the system"
			}
			return ""
		}
		for _, p := range []string{".git/hooks/pre-commit", ".warden/policy.yaml"} {
			if ok, _ := doublestar.Match(g.scope, p); ok {
				return g.String() + " lets programs change every file it names but .git/, .warden/ and the policy's protect: paths, which are read-only to them at sandbox level full; " +
					"at lower levels a program can change " + p + " (git hooks run code; the policy sets the grants). warden's own tools never change them"
			}
		}
	case Net:
		switch {
		case g.host == "*":
			return g.String() + " lets the tool reach every host name"
		case strings.HasPrefix(g.host, "*.") && !strings.Contains(g.host[2:], "."):
			return g.String() + " lets the tool reach every host under a top-level domain"
		case g.prefix.IsValid() && g.prefix.Bits() == 0:
			return g.String() + " lets the tool reach every address, including loopback, private networks and cloud metadata"
		}
	}
	return ""
}
