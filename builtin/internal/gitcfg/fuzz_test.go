package gitcfg

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParse: whatever git prints (a repository's configuration is the
// attacker's), Parse, Overrides and Includes do not panic, every setting
// has a key, and Env renders one GIT_CONFIG_COUNT that matches.
func FuzzParse(f *testing.F) {
	f.Add([]byte("local\x00file:/ws/.git/config\x00filter.x.clean\nrm -rf src\x00local\x00file:/ws/.git/config\x00include.path\n../x.cfg\x00"), true, true)
	f.Add([]byte("filter.a.b.c.smudge\nx\x00remote.o.uploadpack\nevil\x00credential.helper\x00"), false, false)
	f.Add([]byte("worktree\x00diff.x\x00.textconv\n\x00"), true, false)
	f.Fuzz(func(t *testing.T, out []byte, scope, origin bool) {
		entries, err := Format{Scope: scope, Origin: origin}.Parse(out)
		if err != nil {
			return
		}
		for _, mode := range []Mode{Repository, All} {
			pairs := Overrides(entries, mode)
			for _, p := range pairs {
				if p.Key == "" || strings.HasSuffix(p.Key, ".") {
					t.Fatalf("setting without a key: %+v", p)
				}
			}
			if env := Env(pairs); len(pairs) > 0 && (len(env) != 1+2*len(pairs) || env[0] != "GIT_CONFIG_COUNT="+strconv.Itoa(len(pairs))) {
				t.Fatalf("%d settings, env %q", len(pairs), env)
			}
		}
		if includes, err := Includes(entries, "/home/u"); err == nil {
			for _, in := range includes {
				if !strings.HasPrefix(in.Path, "/") {
					t.Fatalf("include %+v is not absolute", in)
				}
			}
		}
	})
}
