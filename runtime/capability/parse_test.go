package capability

import (
	"errors"
	"strings"
	"testing"
)

func TestParseValid(t *testing.T) {
	tests := []struct {
		in        string
		kind      Kind
		canonical string
	}{
		{"fs.read:**", FSRead, "fs.read:**"},
		{"fs.write:notes/**", FSWrite, "fs.write:notes/**"},
		{"fs.write:./notes//a.txt", FSWrite, "fs.write:notes/a.txt"},
		{"fs.write:notes/", FSWrite, "fs.write:notes"},
		{"fs.read:.", FSRead, "fs.read:."},
		{"fs.read:/etc/nginx/**", FSRead, "fs.read:/etc/nginx/**"},
		{"fs.read:/", FSRead, "fs.read:/"},
		{"fs.read://etc/./hosts", FSRead, "fs.read:/etc/hosts"},
		{"fs.read:src/**/*.{go,mod}", FSRead, "fs.read:src/**/*.{go,mod}"},
		{"fs.read:My Documents/*.txt", FSRead, "fs.read:My Documents/*.txt"},
		{"fs.read:[ab]?.md", FSRead, "fs.read:[ab]?.md"},
		{"exec:git", Exec, "exec:git"},
		{"exec:*", Exec, "exec:*"},
		{"exec:g++-12", Exec, "exec:g++-12"},
		{"net:api.github.com", Net, "net:api.github.com"},
		{"net:API.GitHub.com.", Net, "net:api.github.com"},
		{"net:api.github.com:443", Net, "net:api.github.com:443"},
		{"net:api.github.com:0443", Net, "net:api.github.com:443"},
		{"net:*.example.com", Net, "net:*.example.com"},
		{"net:*.example.com:8443", Net, "net:*.example.com:8443"},
		{"net:*", Net, "net:*"},
		{"net:*:443", Net, "net:*:443"},
		{"net:xn--bcher-kva.example", Net, "net:xn--bcher-kva.example"},
		{"net:_acme.example.com", Net, "net:_acme.example.com"},
		{"net:localhost:8080", Net, "net:localhost:8080"},
		{"net:127.0.0.1", Net, "net:127.0.0.1"},
		{"net:127.0.0.1/32", Net, "net:127.0.0.1"},
		{"net:127.0.0.1:8080", Net, "net:127.0.0.1:8080"},
		{"net:10.0.0.0/8", Net, "net:10.0.0.0/8"},
		{"net:10.0.0.0/8:5432", Net, "net:10.0.0.0/8:5432"},
		{"net:[::1]", Net, "net:[::1]"},
		{"net:::1", Net, "net:[::1]"},
		{"net:[::1]:8080", Net, "net:[::1]:8080"},
		{"net:[::FFFF:127.0.0.1]", Net, "net:127.0.0.1"},
		{"net:fd00::/8", Net, "net:[fd00::/8]"},
		{"net:[fd00::/8]:443", Net, "net:[fd00::/8]:443"},
		{"net:0.0.0.0/0", Net, "net:0.0.0.0/0"},
		{"env:GOPATH", Env, "env:GOPATH"},
		{"env:GO*", Env, "env:GO*"},
		{"env:*", Env, "env:*"},
		{"env:_private", Env, "env:_private"},
		{"memory.read:notes", MemoryRead, "memory.read:notes"},
		{"memory.write:project/*", MemoryWrite, "memory.write:project/*"},
		{"memory.read:*", MemoryRead, "memory.read:*"},
		{"git.read", GitRead, "git.read"},
		{"git.write", GitWrite, "git.write"},
		{"system.info", SystemInfo, "system.info"},
		{"user.ask", UserAsk, "user.ask"},
		{"llm", LLM, "llm"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			g, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if g.Kind() != tt.kind {
				t.Errorf("Kind = %q, want %q", g.Kind(), tt.kind)
			}
			if g.String() != tt.canonical {
				t.Errorf("String = %q, want %q", g.String(), tt.canonical)
			}
			if want := strings.TrimPrefix(strings.TrimPrefix(tt.canonical, string(tt.kind)), ":"); g.Scope() != want {
				t.Errorf("Scope = %q, want %q", g.Scope(), want)
			}
			again, err := Parse(g.String())
			if err != nil || again != g {
				t.Errorf("round trip: Parse(%q) = %v, %v; want %v", g.String(), again, err, g)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		in     string
		offset int
		want   string // fragment of the message
	}{
		{"", 0, "empty capability"},
		{"fs.raed:**", 0, `unknown kind "fs.raed" (did you mean "fs.read"?) (known: fs.read, fs.write, exec, net, env, memory.read, memory.write, git.read, git.write, system.info, user.ask, llm)`},
		{"FS.READ:**", 0, `unknown kind "FS.READ" (did you mean "fs.read"?)`},
		{"network:example.com", 0, `unknown kind "network"`},
		{"fs.read", 7, "fs.read needs a scope: a path glob, relative to the workspace (fs.read:notes/**)"},
		{"fs.write:", 9, "fs.write needs a scope"},
		{"exec", 4, "exec needs a scope: a program name (exec:git) or * for any program"},
		{"net:", 4, "net needs a scope: a host"},
		{"env", 3, "env needs a scope"},
		{"memory.read:", 12, "memory.read needs a scope: a namespace glob"},
		{"git.read:repo", 8, "git.read takes no scope; write it alone: git.read"},
		{"llm:gpt-4", 3, "llm takes no scope"},
		{"user.ask:", 8, "user.ask takes no scope"},
		{"fs.read:a\x00b", 9, "control or formatting character U+0000"},
		{"exec:git\n", 8, "control or formatting character U+000A"},
		{"fs.read:notes/\u202e**", 14, "U+202E"},
		{"fs.read:\xff", 8, "invalid UTF-8"},
		{" fs.read:**", 0, "leading or trailing white space"},
		{"fs.read: notes", 8, "scope starts with white space"},
		{"fs.read:../secrets", 8, `".." is not allowed in a path grant`},
		{"fs.read:notes/../../etc", 14, `".." is not allowed`},
		{"fs.write:/etc/../root/**", 14, `".." is not allowed`},
		{"fs.read:notes/[abc", 8, "invalid glob"},
		{"fs.read:notes/{a,b", 8, "invalid glob"},
		{"fs.read:notes/[]", 8, "invalid glob"},
		{`fs.read:a\*b`, 9, "backslash escapes are not supported"},
		{"fs.read:~/.ssh/**", 8, "~ is not expanded"},
		{"fs.read:./~/x", 8, "~ is not expanded"},
		{"fs.read:./ 0", 8, "may not start or end with white space"},
		{"fs.read:a /", 8, "may not start or end with white space"},
		{"exec:/usr/bin/git", 5, "not a path: write exec:git"},
		{"exec:./run.sh", 6, "not a path: write exec:run.sh"},
		{"exec:py*", 7, "globs are not supported"},
		{"exec:..", 5, `".." is not a program name`},
		{"exec:git status", 8, "white space is not allowed"},
		{"net:**.example.com", 4, "** is not allowed in host names"},
		{"net:api.*.com", 8, "only as the whole first label"},
		{"net:*example.com", 4, "only as the whole first label"},
		{"net:*.*.example.com", 6, "only as the whole first label"},
		{"net:example.com:0", 16, `bad port "0"`},
		{"net:example.com:65536", 16, `bad port "65536"`},
		{"net:example.com:", 16, `bad port ""`},
		{"net:example.com:http", 16, `bad port "http"`},
		{"net:example.com:-1", 16, `bad port "-1"`},
		{"net:[::1]:99999", 10, `bad port "99999"`},
		{"net:10.0.0.1/8", 4, "bits are set after the prefix length; did you mean 10.0.0.0/8?"},
		{"net:10.0.0.0/33", 4, `bad CIDR "10.0.0.0/33"`},
		{"net:300.1.2.3", 4, `"300.1.2.3" is not a valid IP address`},
		{"net:[::1", 4, "missing ]"},
		{"net:[::1]x", 9, "only :PORT may follow ]"},
		{"net:[127.0.0.1]", 4, "brackets are for IPv6 only; write net:127.0.0.1"},
		{"net:fe80::1%eth0", 4, "zone identifiers"},
		{"net:::1:8080x", 4, "bad IP address"},
		{"net:2130706433", 4, `"2130706433" is a non-canonical form of the IP address 127.0.0.1; write net:127.0.0.1`},
		{"net:0x7f000001:80", 4, "write net:127.0.0.1:80"},
		{"net:127.1", 4, "non-canonical form of the IP address 127.0.0.1"},
		{"net:foo.123", 4, "a host name cannot end in a numeric label"},
		{"net:foo.0x1f", 4, "not a valid IP address"},
		{"net:*.123", 6, "ends in a numeric label"},
		{"net:api.example.123", 4, "a host name cannot end in a numeric label"},
		{"net:bücher.example", 4, "write the punycode (xn--) form"},
		{"net:exa mple.com", 4, `" " is not allowed in a host name`},
		{"net:a..b", 4, "empty label"},
		{"net:" + strings.Repeat("a", 64) + ".com", 4, "longer than 63 bytes"},
		{"env:GO*PATH", 6, "at most one * at the end"},
		{"env:1PATH", 4, "is not a variable name"},
		{"env:PATH-X", 8, "is not a variable name"},
		{"env:**", 4, "at most one * at the end"},
		{"memory.read:notes/[x", 12, "invalid namespace glob"},
		{"memory.read:my notes", 14, "white space is not allowed in a namespace"},
		{"fs.read:" + strings.Repeat("a", maxGrantLen), maxGrantLen, "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			g, err := Parse(tt.in)
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want an error", tt.in, g)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *ParseError", err)
			}
			if pe.Input != tt.in {
				t.Errorf("Input = %q, want %q", pe.Input, tt.in)
			}
			if pe.Offset != tt.offset {
				t.Errorf("Offset = %d, want %d (%v)", pe.Offset, tt.offset, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "capability ") {
				t.Errorf("error %q does not start with `capability \"…\"`", err)
			}
			if g != (Grant{}) {
				t.Errorf("a failed Parse returned a non-zero grant %v", g)
			}
		})
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustParse of an invalid grant did not panic")
		}
	}()
	MustParse("fs.raed:**")
}

func TestKinds(t *testing.T) {
	ks := Kinds()
	if len(ks) != 12 {
		t.Fatalf("Kinds() has %d kinds, want 12", len(ks))
	}
	ks[0] = "mutated"
	if Kinds()[0] != FSRead {
		t.Error("Kinds() returns the package's own slice")
	}
	for _, k := range Kinds() {
		spec := string(k)
		if k.scoped() {
			spec += ":x"
		}
		if _, err := Parse(spec); err != nil {
			t.Errorf("Parse(%q): %v", spec, err)
		}
	}
}

func TestBroad(t *testing.T) {
	tests := []struct {
		grant string
		want  string // fragment; "" = not broad
	}{
		{"exec:*", "any program"},
		{"exec:sh", "runs any code it is given (sh is a shell)"},
		{"exec:bash", "a shell"},
		{"exec:python3", "an interpreter"},
		{"exec:python3.12", "an interpreter"},
		{"exec:node", "an interpreter"},
		{"exec:perl", "starting only programs exec: grants name"},
		{"exec:env", ""},
		{"exec:xargs", ""},
		{"exec:timeout", ""},
		{"exec:sudo", ""},
		{"exec:busybox", "includes a shell"},
		{"exec:awk", "an interpreter"},
		{"exec:make", "build tool"},
		{"exec:go", "go run and go test execute what they build"},
		{"exec:ssh", "beyond warden's sandbox"},
		{"exec:git", ""},
		{"exec:find", ""},
		{"exec:ls", ""},
		{"exec:shellcheck", ""},
		{"fs.write:**", ".git/hooks/pre-commit"},
		{"fs.write:**", "read-only to them at sandbox level full"},
		{"fs.write:.git/**", ".git/hooks/pre-commit"},
		{"fs.write:.warden/policy.yaml", ".warden/policy.yaml"},
		{"fs.write:**/*.yaml", ".warden/policy.yaml"},
		{"fs.write:/**", "anywhere on the system"},
		{"fs.write:/*/**", "anywhere on the system"},
		{"fs.write:notes/**", ""},
		{"fs.write:/etc/nginx/**", ""},
		{"fs.write:/etc", ""},
		{"fs.read:**", ""},
		{"fs.read:/**", ""},
		{"net:*", "every host name"},
		{"net:*:443", "every host name"},
		{"net:*.com", "top-level domain"},
		{"net:*.example.com", ""},
		{"net:0.0.0.0/0", "every address"},
		{"net:[::/0]", "every address"},
		{"net:10.0.0.0/8", ""},
		{"env:*", ""},
		{"git.write", ""},
	}
	for _, tt := range tests {
		t.Run(tt.grant, func(t *testing.T) {
			got := MustParse(tt.grant).Broad()
			if tt.want == "" {
				if got != "" {
					t.Errorf("Broad() = %q, want \"\"", got)
				}
				return
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("Broad() = %q, want it to mention %q", got, tt.want)
			}
		})
	}
}

func TestBase(t *testing.T) {
	tests := []struct {
		grant, ws, want string
	}{
		{"fs.read:/etc/nginx/**", "/ws", "/etc/nginx"},
		{"fs.read:notes/**", "/ws", "/ws/notes"},
		{"fs.read:**", "/ws", "/ws"},
		{"fs.read:notes/*.md", "/home/u/proj", "/home/u/proj/notes"},
		{"fs.read:notes/a.txt", "/ws", "/ws/notes"},
		{"fs.read:.", "/ws", "/ws"},
		{"fs.read:a", "/ws", "/ws"},
		{"fs.read:/**", "/ws", "/"},
		{"fs.read:/etc/{nginx,apache2}/*.conf", "/ws", "/etc"},
		{"fs.write:src/**/x", "/ws/", "/ws/src"},
		{"fs.read:notes/**", "/tmp/a*b", "/tmp/a*b/notes"},
		{"fs.read:notes/**", "relative/ws", ""},
		{"fs.read:/abs/**", "", "/abs"},
		{"exec:git", "/ws", ""},
		{"git.read", "/ws", ""},
	}
	for _, tt := range tests {
		t.Run(tt.grant+"@"+tt.ws, func(t *testing.T) {
			if got := MustParse(tt.grant).Base(tt.ws); got != tt.want {
				t.Errorf("Base(%q) = %q, want %q", tt.ws, got, tt.want)
			}
		})
	}
}

func TestZeroGrant(t *testing.T) {
	var g Grant
	if g.String() != "" || g.Kind() != "" || g.Broad() != "" || g.Base("/ws") != "" {
		t.Errorf("zero Grant = %q/%q/%q", g.String(), g.Kind(), g.Broad())
	}
	s := NewSet("/ws", g)
	if len(s.Grants()) != 0 || s.Allows(Need{Kind: GitRead}) {
		t.Error("a set kept the zero Grant")
	}
}
