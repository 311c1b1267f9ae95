package capability

import (
	"strings"
	"testing"
)

const ws = "/home/u/proj"

func TestAllows(t *testing.T) {
	tests := []struct {
		grant string
		need  Need
		want  bool
	}{
		// fs, relative to the workspace
		{"fs.read:**", Need{FSRead, ws + "/notes/a.txt"}, true},
		{"fs.read:**", Need{FSRead, ws}, true},
		{"fs.read:**", Need{FSRead, "/etc/passwd"}, false},
		{"fs.read:**", Need{FSRead, "/home/u/proj2/x"}, false},
		{"fs.read:**", Need{FSRead, "/home/u"}, false},
		{"fs.read:notes/**", Need{FSRead, ws + "/notes"}, true},
		{"fs.read:notes/**", Need{FSRead, ws + "/notes/deep/er/a.md"}, true},
		{"fs.read:notes/**", Need{FSRead, ws + "/notesx"}, false},
		{"fs.read:notes/**", Need{FSRead, ws + "/other/notes/a"}, false},
		{"fs.read:notes/*.md", Need{FSRead, ws + "/notes/a.md"}, true},
		{"fs.read:notes/*.md", Need{FSRead, ws + "/notes/sub/a.md"}, false},
		{"fs.read:notes/a.txt", Need{FSRead, ws + "/notes/a.txt"}, true},
		{"fs.read:notes/a.txt", Need{FSRead, ws + "/notes/a.txt.bak"}, false},
		{"fs.read:.", Need{FSRead, ws}, true},
		{"fs.read:.", Need{FSRead, ws + "/a"}, false},
		{"fs.read:src/**/*.{go,mod}", Need{FSRead, ws + "/src/a/b.go"}, true},
		{"fs.read:src/**/*.{go,mod}", Need{FSRead, ws + "/src/b.sum"}, false},
		{"fs.read:**/.env", Need{FSRead, ws + "/a/.env"}, true},
		// fs, absolute
		{"fs.read:/etc/nginx/**", Need{FSRead, "/etc/nginx"}, true},
		{"fs.read:/etc/nginx/**", Need{FSRead, "/etc/nginx/sites/default"}, true},
		{"fs.read:/etc/nginx/**", Need{FSRead, "/etc/nginx.conf"}, false},
		{"fs.read:/etc/nginx/**", Need{FSRead, "/etc"}, false},
		{"fs.read:/**", Need{FSRead, "/"}, true},
		{"fs.read:/**", Need{FSRead, "/etc/shadow"}, true},
		// fs: kinds are separate, needs must be clean and absolute
		{"fs.write:**", Need{FSRead, ws + "/a"}, false},
		{"fs.read:**", Need{FSWrite, ws + "/a"}, false},
		{"fs.read:**", Need{FSRead, ws + "/notes/../../etc/passwd"}, false},
		{"fs.read:**", Need{FSRead, ws + "/notes/.."}, false},
		{"fs.read:**", Need{FSRead, ws + "/./a"}, false},
		{"fs.read:**", Need{FSRead, ws + "/a/"}, false},
		{"fs.read:/**", Need{FSRead, "notes/a"}, false},
		{"fs.read:**", Need{FSRead, ""}, false},
		{"fs.read:/**", Need{FSRead, "/a\x00b"}, false},
		// exec
		{"exec:git", Need{Exec, "git"}, true},
		{"exec:git", Need{Exec, "gitk"}, false},
		{"exec:git", Need{Exec, "Git"}, false},
		{"exec:git", Need{Exec, "/usr/bin/git"}, false},
		{"exec:*", Need{Exec, "anything"}, true},
		{"exec:*", Need{Exec, "/bin/sh"}, false},
		{"exec:*", Need{Exec, "./x"}, false},
		{"exec:*", Need{Exec, ""}, false},
		{"exec:*", Need{Exec, ".."}, false},
		// env
		{"env:GOPATH", Need{Env, "GOPATH"}, true},
		{"env:GOPATH", Need{Env, "GOPATHX"}, false},
		{"env:GOPATH", Need{Env, "gopath"}, false},
		{"env:GO*", Need{Env, "GOFLAGS"}, true},
		{"env:GO*", Need{Env, "GO"}, true},
		{"env:GO*", Need{Env, "XGO"}, false},
		{"env:*", Need{Env, "AWS_SECRET_ACCESS_KEY"}, true},
		{"env:*", Need{Env, "A=B"}, false},
		// memory
		{"memory.read:notes", Need{MemoryRead, "notes"}, true},
		{"memory.read:notes", Need{MemoryRead, "notes/x"}, false},
		{"memory.read:notes", Need{MemoryWrite, "notes"}, false},
		{"memory.read:project/*", Need{MemoryRead, "project/a"}, true},
		{"memory.read:project/*", Need{MemoryRead, "project/a/b"}, false},
		{"memory.read:project/**", Need{MemoryRead, "project/a/b"}, true},
		{"memory.read:*", Need{MemoryRead, "a/b/c"}, true},
		{"memory.read:*", Need{MemoryRead, ""}, false},
		// scope-less
		{"git.read", Need{GitRead, ""}, true},
		{"git.read", Need{GitWrite, ""}, false},
		{"git.read", Need{GitRead, "x"}, false},
		{"llm", Need{LLM, ""}, true},
		{"llm", Need{"bogus", ""}, false},
		// net: host names on label boundaries
		{"net:api.github.com", Need{Net, "api.github.com:443"}, true},
		{"net:api.github.com", Need{Net, "API.GitHub.COM.:443"}, true},
		{"net:api.github.com", Need{Net, "api.github.com"}, true},
		{"net:api.github.com", Need{Net, "github.com:443"}, false},
		{"net:api.github.com", Need{Net, "x.api.github.com:443"}, false},
		{"net:*.example.com", Need{Net, "a.example.com:443"}, true},
		{"net:*.example.com", Need{Net, "a.b.example.com:443"}, true},
		{"net:*.example.com", Need{Net, "example.com:443"}, false},
		{"net:*.example.com", Need{Net, "badexample.com:443"}, false},
		{"net:*.example.com", Need{Net, "example.com.evil.io:443"}, false},
		{"net:*.host.com", Need{Net, "evilhost.com"}, false},
		{"net:*", Need{Net, "example.org:80"}, true},
		{"net:*", Need{Net, "localhost:80"}, false},
		{"net:*", Need{Net, "db.localhost:80"}, false},
		{"net:*.localhost", Need{Net, "db.localhost:80"}, true},
		{"net:localhost", Need{Net, "localhost:8080"}, true},
		// net: ports
		{"net:api.github.com:443", Need{Net, "api.github.com:443"}, true},
		{"net:api.github.com:443", Need{Net, "api.github.com:80"}, false},
		{"net:api.github.com:443", Need{Net, "api.github.com"}, false},
		{"net:*:443", Need{Net, "any.where:443"}, true},
		{"net:*:443", Need{Net, "any.where:444"}, false},
		{"net:example.com", Need{Net, "example.com:0"}, false},
		{"net:example.com", Need{Net, "example.com:70000"}, false},
		// net: IP addresses only through IP grants
		{"net:*", Need{Net, "127.0.0.1:80"}, false},
		{"net:*", Need{Net, "8.8.8.8:53"}, false},
		{"net:*", Need{Net, "[::1]:80"}, false},
		{"net:*", Need{Net, "2130706433:80"}, false},
		{"net:*", Need{Net, "0x7f.1:80"}, false},
		{"net:*", Need{Net, "[::ffff:127.0.0.1]:80"}, false},
		{"net:*.in-addr.arpa", Need{Net, "1.0.0.127.in-addr.arpa"}, true},
		{"net:127.0.0.1", Need{Net, "127.0.0.1:8080"}, true},
		{"net:127.0.0.1", Need{Net, "2130706433:8080"}, true},
		{"net:127.0.0.1", Need{Net, "0177.0.0.1:8080"}, true},
		{"net:127.0.0.1", Need{Net, "127.1:8080"}, true},
		{"net:127.0.0.1", Need{Net, "[::ffff:7f00:1]:8080"}, true},
		{"net:127.0.0.1", Need{Net, "127.0.0.2:8080"}, false},
		{"net:127.0.0.1", Need{Net, "localhost:8080"}, false},
		{"net:127.0.0.1:8080", Need{Net, "127.0.0.1:8081"}, false},
		{"net:10.0.0.0/8", Need{Net, "10.200.3.4:5432"}, true},
		{"net:10.0.0.0/8", Need{Net, "11.0.0.1:5432"}, false},
		{"net:[::1]:8080", Need{Net, "[::1]:8080"}, true},
		{"net:[::1]:8080", Need{Net, "[0:0::1]:8080"}, true},
		{"net:[::1]", Need{Net, "::1"}, true},
		{"net:[fe80::/10]", Need{Net, "[fe80::1%eth0]:80"}, false},
		{"net:[fd00::/8]", Need{Net, "[fd12::1]:443"}, true},
		{"net:0.0.0.0/0", Need{Net, "example.com:80"}, false},
		// net: malformed needs
		{"net:*", Need{Net, ""}, false},
		{"net:*", Need{Net, "exa mple.com"}, false},
		{"net:*", Need{Net, "example.com:80:90"}, false},
		{"net:*", Need{Net, "user@example.com"}, false},
		{"net:*", Need{Net, "foo.123:80"}, false},
		{"net:*", Need{Net, "[example.com]:80"}, false},
		{"net:*", Need{Net, "http://example.com"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.grant+"/"+tt.need.String(), func(t *testing.T) {
			s := NewSet(ws, MustParse(tt.grant))
			if got := s.Allows(tt.need); got != tt.want {
				t.Errorf("NewSet(%q, %s).Allows(%+v) = %v, want %v", ws, tt.grant, tt.need, got, tt.want)
			}
		})
	}
}

func TestAllowsWorkspaceEdgeCases(t *testing.T) {
	tests := []struct {
		name, ws, grant string
		need            Need
		want            bool
	}{
		{"meta characters in the workspace are literal", "/tmp/a*b", "fs.read:**", Need{FSRead, "/tmp/a*b/x"}, true},
		{"meta characters in the workspace do not glob", "/tmp/a*b", "fs.read:**", Need{FSRead, "/tmp/aXb/x"}, false},
		{"brackets in the workspace", "/tmp/p[1]", "fs.read:**", Need{FSRead, "/tmp/p[1]/x"}, true},
		{"brackets in the workspace do not glob", "/tmp/p[1]", "fs.read:**", Need{FSRead, "/tmp/p1/x"}, false},
		{"root workspace", "/", "fs.read:etc/**", Need{FSRead, "/etc/hosts"}, true},
		{"root workspace dot", "/", "fs.read:.", Need{FSRead, "/"}, true},
		{"unclean workspace is cleaned", "/home/u/proj/../proj/", "fs.read:**", Need{FSRead, ws + "/a"}, true},
		{"relative workspace: relative grants match nothing", "proj", "fs.read:**", Need{FSRead, "/proj/a"}, false},
		{"relative workspace: absolute grants still work", "proj", "fs.read:/etc/**", Need{FSRead, "/etc/hosts"}, true},
		{"empty workspace", "", "fs.read:**", Need{FSRead, "/a"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewSet(tt.ws, MustParse(tt.grant)).Allows(tt.need); got != tt.want {
				t.Errorf("Allows = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNeedString(t *testing.T) {
	tests := []struct {
		need Need
		want string
	}{
		{Need{FSWrite, "/abs/path"}, "fs.write:/abs/path"},
		{Need{Net, "api.example.com:443"}, "net:api.example.com:443"},
		{Need{GitWrite, ""}, "git.write"},
	}
	for _, tt := range tests {
		if got := tt.need.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.need, got, tt.want)
		}
	}
}

func TestHint(t *testing.T) {
	tests := []struct {
		need Need
		ws   string
		want string
	}{
		{Need{FSWrite, ws + "/notes/a.txt"}, ws, "fs.write:notes/a.txt"},
		{Need{FSRead, ws}, ws, "fs.read:."},
		{Need{FSRead, ws + "2/a"}, ws, "fs.read:" + ws + "2/a"},
		{Need{FSRead, "/etc/hosts"}, ws, "fs.read:/etc/hosts"},
		{Need{FSRead, "/etc/hosts"}, "/", "fs.read:/etc/hosts"},
		{Need{FSRead, "/etc/hosts"}, "", "fs.read:/etc/hosts"},
		{Need{FSRead, ws + "/a*b[1].txt"}, ws, "fs.read:a?b?1?.txt"},
		{Need{FSRead, ws + "/~/x"}, ws, "fs.read:?/x"},
		{Need{FSRead, ws + "/ lead/trail "}, ws, "fs.read:?lead/trail?"},
		{Need{FSRead, ws + "/tab\tname"}, ws, "fs.read:tab?name"},
		{Need{FSRead, ws + "/bad\xffbyte"}, ws, "fs.read:bad?byte"},
		{Need{FSRead, ws + "/../x"}, ws, ""},
		{Need{Net, "api.example.com:443"}, ws, "net:api.example.com:443"},
		{Need{Net, "API.example.com."}, ws, "net:api.example.com"},
		{Need{Net, "2130706433:80"}, ws, "net:127.0.0.1:80"},
		{Need{Net, "[::1]:8080"}, ws, "net:[::1]:8080"},
		{Need{Net, "bad host"}, ws, ""},
		{Need{Exec, "git"}, ws, "exec:git"},
		{Need{Exec, "/usr/bin/git"}, ws, ""},
		{Need{Env, "HOME"}, ws, "env:HOME"},
		{Need{MemoryWrite, "notes"}, ws, "memory.write:notes"},
		{Need{MemoryWrite, "a*b"}, ws, "memory.write:a?b"},
		{Need{GitWrite, ""}, ws, "git.write"},
		{Need{GitWrite, "x"}, ws, ""},
		{Need{"bogus", ""}, ws, ""},
	}
	for _, tt := range tests {
		t.Run(tt.need.String(), func(t *testing.T) {
			got := tt.need.Hint(tt.ws)
			if got != tt.want {
				t.Fatalf("Hint(%q) = %q, want %q", tt.ws, got, tt.want)
			}
			if got == "" {
				return
			}
			g, err := Parse(got)
			if err != nil {
				t.Fatalf("the hint does not parse: %v", err)
			}
			if !NewSet(tt.ws, g).Allows(tt.need) {
				t.Errorf("the hint %s does not allow %+v", got, tt.need)
			}
		})
	}
}

func TestCanonicalHost(t *testing.T) {
	tests := []struct {
		in   string
		want string
		isIP bool
	}{
		{"Example.COM", "example.com", false},
		{"example.com.", "example.com", false},
		{"xn--bcher-kva.example", "xn--bcher-kva.example", false},
		{"localhost", "localhost", false},
		{"127.0.0.1", "127.0.0.1", true},
		{"2130706433", "127.0.0.1", true},
		{"0x7f000001", "127.0.0.1", true},
		{"0X7F000001", "127.0.0.1", true},
		{"0177.0.0.1", "127.0.0.1", true},
		{"0177.0.0.01", "127.0.0.1", true},
		{"127.1", "127.0.0.1", true},
		{"127.0.1", "127.0.0.1", true},
		{"0x7f.1", "127.0.0.1", true},
		{"0", "0.0.0.0", true},
		{"0x", "0.0.0.0", true},
		{"169.254.169.254.", "169.254.169.254", true},
		{"0xA9.0xFE.0xA9.0xFE", "169.254.169.254", true},
		{"4294967295", "255.255.255.255", true},
		{"::1", "::1", true},
		{"[::1]", "::1", true},
		{"[0:0:0:0:0:0:0:1]", "::1", true},
		{"::ffff:127.0.0.1", "127.0.0.1", true},
		{"[::ffff:7f00:1]", "127.0.0.1", true},
		{"[2001:DB8::1]", "2001:db8::1", true},
		// invalid
		{"", "", false},
		{".", "", false},
		{"4294967296", "", false},
		{"256.0.0.1", "", false},
		{"1.2.3.4.5", "", false},
		{"08.0.0.1", "", false},
		{"1..2", "", false},
		{"foo.123", "", false},
		{"fe80::1%eth0", "", false},
		{"[fe80::1%25eth0]", "", false},
		{"[127.0.0.1]", "", false},
		{"[::1", "", false},
		{"bücher.example", "", false},
		{"exa mple.com", "", false},
		{"user@example.com", "", false},
		{"example.com..", "", false},
		{"a/b", "", false},
		{strings.Repeat("a.", 127) + "com", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, isIP := CanonicalHost(tt.in)
			if got != tt.want || isIP != tt.isIP {
				t.Errorf("CanonicalHost(%q) = %q, %v; want %q, %v", tt.in, got, isIP, tt.want, tt.isIP)
			}
		})
	}
}

func TestNetNeed(t *testing.T) {
	tests := []struct {
		host    string
		port    int
		want    string
		wantErr bool
	}{
		{"API.example.com", 443, "api.example.com:443", false},
		{"::1", 8080, "[::1]:8080", false},
		{"[::1]", 0, "[::1]", false},
		{"2130706433", 80, "127.0.0.1:80", false},
		{"example.com", 0, "example.com", false},
		{"bad host", 80, "", true},
		{"example.com", 65536, "", true},
		{"example.com", -1, "", true},
	}
	for _, tt := range tests {
		n, err := NetNeed(tt.host, tt.port)
		if (err != nil) != tt.wantErr {
			t.Errorf("NetNeed(%q, %d) error = %v, wantErr %v", tt.host, tt.port, err, tt.wantErr)
			continue
		}
		if err == nil && (n.Kind != Net || n.Resource != tt.want) {
			t.Errorf("NetNeed(%q, %d) = %+v, want resource %q", tt.host, tt.port, n, tt.want)
		}
	}
}
