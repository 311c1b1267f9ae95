package gitcfg

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	full := Format{Scope: true, Origin: true}
	out := "global\x00file:/home/u/.gitconfig\x00filter.lfs.clean\ngit-lfs clean -- %f\x00" +
		"local\x00file:/ws/.git/config\x00core.bare\nfalse\x00" +
		"local\x00file:/ws/.git/config\x00core.novalue\x00" +
		"local\x00file:/ws/.git/config\x00diff.A.b.textconv\nsh -c 'x\ny'\x00" +
		"command\x00command line:\x00core.pager\ncat\x00"
	got, err := full.Parse([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{"global", "file:/home/u/.gitconfig", "filter.lfs.clean", "git-lfs clean -- %f"},
		{"local", "file:/ws/.git/config", "core.bare", "false"},
		{"local", "file:/ws/.git/config", "core.novalue", ""},
		{"local", "file:/ws/.git/config", "diff.A.b.textconv", "sh -c 'x\ny'"},
		{"command", "command line:", "core.pager", "cat"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
	}
	if got, err := (Format{}).Parse([]byte("filter.x.clean\nc\x00core.bare\nfalse\x00")); err != nil || len(got) != 2 || got[0].Scope != "" || !got[0].Repository() {
		t.Fatalf("%#v %v", got, err)
	}
	for _, bad := range []string{"local\x00file:/x\x00", "local\x00file:/x\x00\nvalue\x00"} {
		if _, err := full.Parse([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if a := full.Args(); !slices.Equal(a, []string{"config", "-z", "--list", "--show-scope", "--show-origin"}) {
		t.Fatal(a)
	}
	if a := (Format{Origin: true, Only: "local"}).Args(); !slices.Equal(a, []string{"config", "-z", "--list", "--local", "--includes", "--show-origin"}) {
		t.Fatal(a)
	}
}

func TestOverrides(t *testing.T) {
	e := func(scope, key, val string) Entry {
		return Entry{Scope: scope, Origin: "file:/x", Key: key, Value: val}
	}
	entries := []Entry{
		e("global", "filter.lfs.clean", "git-lfs clean -- %f"),
		e("global", "diff.external", "difft"),
		e("local", "filter.lfs.required", "true"),
		e("local", "filter.A.b.smudge", "evil"),
		e("local", "filter.A.b.clean", "evil"),
		e("worktree", "diff.x.textconv", "evil"),
		e("local", "diff.x.xfuncname", "^f"),
		e("local", "diff.y.command", "evil"),
		e("local", "merge.m.driver", "evil"),
		e("local", "merge.m.name", "a merge driver"),
		e("local", "tar.tar.xz.command", "evil"),
		e("local", "credential.https://example.com.helper", "evil"),
		e("local", "credential.helper", "store"),
		e("local", "remote.origin.uploadpack", "git-upload-pack"),
		e("local", "remote.origin.receivepack", "git-receive-pack"),
		e("local", "interactive.difffilter", "evil"),
		e("local", "gpg.ssh.defaultkeycommand", "evil"),
		e("command", "filter.c.clean", "from the command line"),
	}
	want := []Pair{
		{"filter.A.b.process", ""}, {"filter.A.b.clean", ""}, {"filter.A.b.smudge", ""}, {"filter.A.b.required", "false"},
		{"diff.x.textconv", ""}, {"diff.y.command", ""}, {"merge.m.driver", ""}, {"tar.tar.xz.command", ""},
		{"credential.https://example.com.helper", ""}, {"interactive.difffilter", ""}, {"gpg.ssh.defaultkeycommand", ""},
	}
	if got := Overrides(entries, Repository); !reflect.DeepEqual(got, want) {
		t.Fatalf("Repository:\n got %v\nwant %v", got, want)
	}
	// All: the user's entries too, and every filter any key names.
	got := Overrides(entries, All)
	for _, p := range []Pair{{"filter.lfs.process", ""}, {"filter.lfs.required", "false"}, {"diff.external", ""}} {
		if !slices.Contains(got, p) {
			t.Errorf("All lacks %v: %v", p, got)
		}
	}
	if slices.ContainsFunc(got, func(p Pair) bool { return strings.HasPrefix(p.Key, "filter.c.") }) {
		t.Errorf("All overrides the command line's own: %v", got)
	}
	// Another upload-pack: the transports that would run it are refused.
	planted := append(entries, e("local", "remote.o.uploadpack", "evil"), e("local", "remote.p.receivepack", "evil"))
	got = Overrides(planted, Repository)
	if !slices.Contains(got, Pair{"protocol.file.allow", "never"}) || !slices.Contains(got, Pair{"protocol.ssh.allow", "never"}) || len(got) != len(want)+2 {
		t.Fatalf("%v", got)
	}
	env := Env([]Pair{{"a.b", "x=y"}, {"c.d", ""}})
	if !slices.Equal(env, []string{"GIT_CONFIG_COUNT=2", "GIT_CONFIG_KEY_0=a.b", "GIT_CONFIG_VALUE_0=x=y", "GIT_CONFIG_KEY_1=c.d", "GIT_CONFIG_VALUE_1="}) || Env(nil) != nil {
		t.Fatal(env)
	}
}

func TestIncludes(t *testing.T) {
	e := func(scope, origin, key, val string) Entry { return Entry{scope, origin, key, val} }
	got, err := Includes([]Entry{
		e("local", "file:/ws/.git/config", "include.path", "../common.cfg"),
		e("local", "file:/ws/.git/config", "includeif.gitdir:/ws/.path", "~/x.cfg"),
		e("worktree", "file:/ws/.git/config.worktree", "includeif.onbranch:a.b.path", "/etc/x.cfg"),
		e("local", "file:/ws/.git/inc/a.cfg", "include.path", "b.cfg"),
		e("global", "file:/home/u/.gitconfig", "include.path", "~/.gitconfig.local"),
		e("local", "file:/ws/.git/config", "include.path", ""),
		e("local", "file:/ws/.git/config", "include.other", "x"),
		e("command", "command line:", "include.path", "/x"),
	}, "/home/u")
	want := []Include{
		{"include.path", "/ws/.git/config", "/ws/.git/../common.cfg"},
		{"includeif.gitdir:/ws/.path", "/ws/.git/config", "/home/u/x.cfg"},
		{"includeif.onbranch:a.b.path", "/ws/.git/config.worktree", "/etc/x.cfg"},
		{"include.path", "/ws/.git/inc/a.cfg", "/ws/.git/inc/b.cfg"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%v\n%#v", err, got)
	}
	for _, bad := range []Entry{
		e("local", "file:/ws/.git/config", "include.path", "~root/x"),
		e("local", "file:/ws/.git/config", "include.path", "%(prefix)/etc/x"),
		e("local", "blob:HEAD:x", "include.path", "rel"),
		e("local", "file:.git/config", "include.path", "rel"),
	} {
		if _, err := Includes([]Entry{bad}, "/home/u"); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	if _, err := Includes([]Entry{e("local", "file:/x", "include.path", "~/x")}, ""); err == nil {
		t.Error("~/ without HOME: no error")
	}
}

func TestChain(t *testing.T) {
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(d, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ln := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(d, name)); err != nil {
			t.Fatal(err)
		}
	}
	mk("a/b")
	mk("c")
	ln("../c", "a/up")      // relative
	ln(d+"/a/b", "abs")     // absolute
	ln("a/b/..", "dots")    // .. inside a target
	ln("up/../x", "a/deep") // .. after a symlink: the parent of its target
	ln("loop2", "loop1")
	ln("loop1", "loop2")
	for _, tc := range []struct {
		p    string
		want []string
	}{
		{d + "/a/b", []string{d + "/a/b"}},
		{d + "/a/b/missing/x.cfg", []string{d + "/a/b/missing/x.cfg"}},
		{d + "/a/../a/b", []string{d + "/a/b"}},
		{d + "/a/up/f", []string{d + "/a/up", d + "/c/f"}},
		{d + "/abs/../c", []string{d + "/abs", d + "/a/c"}},
		{d + "/dots", []string{d + "/dots", d + "/a"}},
		{d + "/a/deep", []string{d + "/a/deep", d + "/a/up", d + "/x"}},
	} {
		got, err := Chain(tc.p)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Chain(%s) = %q %v, want %q", tc.p, got, err, tc.want)
		}
	}
	if _, err := Chain(d + "/loop1"); err == nil {
		t.Error("a symlink loop: no error")
	}
	if _, err := Chain("rel/x"); err == nil {
		t.Error("a relative path: no error")
	}
}
