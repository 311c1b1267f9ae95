package capability

import "testing"

// TestPathMatcherAgreesWithSet: a PathMatcher matches exactly what a set of
// the same fs grants allows, and names the first scope that matches.
func TestPathMatcherAgreesWithSet(t *testing.T) {
	const ws = "/home/u/proj"
	scopes := []string{"**/.env", "secrets/**", "docs/*.md", "/etc/nginx/**", ".", "a[b]c/**", "src/**/*_test.go", "x?y", "build"}
	paths := []string{
		"/home/u/proj/.env", "/home/u/proj/a/b/.env", "/home/u/proj/secrets", "/home/u/proj/secrets/k", "/home/u/proj/secretsx",
		"/home/u/proj/docs/a.md", "/home/u/proj/docs/sub/a.md", "/etc/nginx", "/etc/nginx/n.conf", "/etc/other", "/home/u/proj",
		"/home/u/proj/abc/x", "/home/u/proj/src/a/b_test.go", "/home/u/proj/src/b.go", "/home/u/proj/xzy", "/home/u/proj/build",
		"/home/u/proj/build/x", "/home/u", "/",
	}
	var grants []Grant
	for _, s := range scopes {
		g, err := Parse("fs.read:" + s)
		if err != nil {
			t.Fatal(err)
		}
		grants = append(grants, g)
	}
	m := NewPathMatcher(ws, grants...)
	for _, p := range paths {
		first := -1
		for i, g := range grants {
			if NewSet(ws, g).Allows(Need{Kind: FSRead, Resource: p}) {
				first = i
				break
			}
		}
		if got := m.Match(p); got != first {
			t.Errorf("%s: Match = %d, the sets say %d", p, got, first)
		}
	}
}
