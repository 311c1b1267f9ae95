package argguard

import (
	"strings"
	"testing"
)

// TestCheck: what each guard refuses, and the files sed -i writes.
func TestCheck(t *testing.T) {
	tests := []struct {
		argv    string
		refused bool
		writes  string
	}{
		{"git status --short", false, ""},
		{"git --no-pager log -p --stat", false, ""},
		{"git diff --no-ext-diff --no-textconv HEAD", false, ""},
		{"git -p log", false, ""},
		{"git --version", false, ""},
		{"git log -- --output=x", false, ""},
		{"git grep -n foo", false, ""},
		{"git config --get user.name", false, ""},
		{"git config get user.name", false, ""},
		{"git config -l", false, ""},
		{"git rebase -i HEAD~2", false, ""},
		{"git clone --depth 1 -n ../a b", false, ""},
		{"git clone --depth 1 ../a b", true, ""},
		{"git clone -qn ../a b", false, ""},
		{"git clone --bare ../a b", false, ""},
		{"git clone --mirror ../a b", false, ""},
		{"git clone -onorigin ../a b", true, ""},
		{"git clone -n --recurse-submodules ../a b", true, ""},
		{"git --bare diff", true, ""},
		{"git --bare=x log", true, ""},
		{"git --no-pager log", false, ""},
		{"git -P --literal-pathspecs log", false, ""},
		{"git log -p --submodule=diff", true, ""},
		{"git log -p --submodule=log", false, ""},
		{"git diff --submodule", false, ""},
		{"git grep --recurse-submodules x", true, ""},
		{"git ls-files --recurse-submodules", true, ""},
		{"git fetch --recurse-submodules=on-demand", true, ""},
		{"git fetch --recurse-submodules=no", false, ""},
		{"git checkout --recurse-submodules main", true, ""},
		{"git ls-files --recurse-sub", true, ""},
		{"git log -p --submod=diff", true, ""},
		{"git format-patch --subject-prefix=x HEAD~1", false, ""},
		{"git format-patch -o /tmp/p HEAD~1", true, ""},
		{"git format-patch --output-dir=/tmp/p HEAD~1", true, ""},
		{"git format-patch --stdout HEAD~1", false, ""},
		{"git archive -o x.tar HEAD", true, ""},
		{"git archive --format=tar HEAD", false, ""},
		{"git log --help", true, ""},
		{"git log -h", false, ""},
		{"sed -n :a\\ e\\ rm\\ -rf\\ src a.txt", true, ""},
		{"sed -n tx\\ e\\ date a.txt", true, ""},
		{"sed -n b\\ \\ end\\ e\\ date a.txt", true, ""},
		{"sed :a;s/x/y/;ta a.txt", false, ""},
		{"sed -e :a -e N a.txt", false, ""},
		{"git -c core.pager=less log", true, ""},
		{"git -ccore.pager=less log", true, ""},
		{"git --config-env=a=B log", true, ""},
		{"git --exec-path=/tmp status", true, ""},
		{"git -C /etc status", true, ""},
		{"git --git-dir=/x/.git status", true, ""},
		{"git --work-tree /x status", true, ""},
		{"git st", true, ""},
		{"git difftool", true, ""},
		{"git submodule foreach ls", true, ""},
		{"git help log", true, ""},
		{"git diff --ext-diff", true, ""},
		{"git log --textconv", true, ""},
		{"git log --output=/tmp/x", true, ""},
		{"git push --receive-pack=x origin", true, ""},
		{"git fetch --upload-pack x", true, ""},
		{"git archive --exec=x --remote=r HEAD", true, ""},
		{"git grep -O foo", true, ""},
		{"git grep --open-files-in-pager=x foo", true, ""},
		{"git rebase -x make HEAD~3", true, ""},
		{"git rebase --exec=make HEAD~3", true, ""},
		{"git clone -u x a b", true, ""},
		{"git clone --config core.x=y a b", true, ""},
		{"git clone -c core.x=y a b", true, ""},
		{"git init --template=/x", true, ""},
		{"git bisect run make", true, ""},
		{"git config core.pager less", true, ""},
		{"git config --add alias.x !ls", true, ""},
		{"git config get -e", true, ""},
		{"find . -name x -print", false, ""},
		{"find . -exec ls ;", true, ""},
		{"find . -execdir ls ;", true, ""},
		{"find . -okdir ls ;", true, ""},
		{"find . -delete", true, ""},
		{"find . -fprintf f %p", true, ""},
		{"find . -fls f", true, ""},
		{"rg foo", false, ""},
		{"rg --pre-glob *.gz foo", false, ""},
		{"rg --pre cat foo", true, ""},
		{"rg --pre=cat foo", true, ""},
		{"rg -- --pre=cat", false, ""},
		{"sed -n /x/p f", false, ""},
		{"sed s/a/b/g;s|c|d|2 f", false, ""},
		{"sed -E -e s/(a|b)/x/ -e 1d f", false, ""},
		{"sed y/abc/xyz/ f", false, ""},
		{"sed :a;N;$!ba;s/\\n/,/g f", false, ""},
		{"sed 0,/re/{s//x/;p} f", false, ""},
		{"sed -i.bak s/a/b/ f g", false, "f g"},
		{"sed --in-place -e s/a/b/ f", false, "f"},
		{"sed -ni p f", false, "f"},
		{"sed 1e\\ date f", true, ""},
		{"sed s/a/b/e f", true, ""},
		{"sed s/a/b/gw out f", true, ""},
		{"sed -n w\\ out f", true, ""},
		{"sed /x/W out f", true, ""},
		{"sed -e p -e e f", true, ""},
		{"sed -f s.sed f", true, ""},
		{"sed --file=s.sed f", true, ""},
		{"sed s/a/b f", true, ""},
		{"sed ?x f", true, ""},
		{"tar -xzf a.tgz", false, ""},
		{"tar czf a.tgz .", false, ""},
		{"tar -xf a.tar --to-command=sh", true, ""},
		{"tar -I zstd -xf a", true, ""},
		{"tar xIf zstd a", true, ""},
		{"tar --checkpoint-action=exec=sh -cf a .", true, ""},
		{"sort -u f", false, ""},
		{"sort --compress-program=gzip f", true, ""},
		{"rsync -av a b", false, ""},
		{"rsync -e ssh a b", true, ""},
		{"rsync --rsync-path=x a b", true, ""},
		{"scp -P 22 a h:b", false, ""},
		{"scp -o ProxyCommand=x a h:b", true, ""},
		{"scp -S x a h:b", true, ""},
		{"zip -TT cmd a.zip f", true, ""},
		{"ls -la", false, ""},
		// Long options by an unambiguous prefix (getopt_long, git).
		{"git ls-remote --upload-pa=x .", true, ""},
		{"git ls-remote --u x .", true, ""},
		{"git grep --open=x -e y", true, ""},
		{"git grep --open-files-in-pa=x -e y", true, ""},
		{"git rebase --exe=make HEAD~1", true, ""},
		{"git clone --upl=x a b", true, ""},
		{"git clone --conf core.x=y a b", true, ""},
		{"git init --templ=/x", true, ""},
		{"git push --rec=x origin", true, ""},
		{"git log --outp=x", true, ""},
		{"git diff --ext", true, ""},
		{"git diff --text --stat", false, ""},
		{"git log --oneline", false, ""},
		{"git log -- --outp=x", false, ""},
		{"tar --to-com=x -xf a", true, ""},
		{"tar cf /dev/null --checkpoint=1 --checkpoint-ac=exec=x .", true, ""},
		{"tar --use-compress-prog=x -cf b .", true, ""},
		{"tar --rsh=x -cf h:b .", true, ""},
		{"tar --checkpoint=1 -cf b .", false, ""},
		{"sort --compress=sh f", true, ""},
		{"sort --co sh f", true, ""},
		{"sort --check f", false, ""},
		{"sed --expr=1e\\ date p", true, ""},
		{"sed --expr s/a/b/w\\ out p", true, ""},
		{"sed --expr=s/a/b/ p", false, ""},
		{"sed --expression s/a/b/ p", false, ""},
		{"sed --in-pl -e s/a/b/ f", false, "f"},
		{"sed --in-pl=.bak s/a/b/ f", false, "f"},
		{"sed --fil=x p", true, ""},
		{"sed --bogus p", true, ""},
		{"sed --quiet=1 p", true, ""},
		{"rsync --rs=x a b", true, ""},
		{"zip --unzip-c=x a.zip f", true, ""},
		{"split --fil=x f", true, ""},
		{"split --filter x f", true, ""},
		{"split -l 10 f", false, ""},
	}
	for _, tt := range tests {
		argv := strings.Fields(strings.ReplaceAll(tt.argv, "\\ ", "\x00"))
		for i := range argv {
			argv[i] = strings.ReplaceAll(argv[i], "\x00", " ")
		}
		g := Check(argv[0], argv[1:])
		if (g.Reason != "") != tt.refused || strings.Join(g.Writes, " ") != tt.writes {
			t.Errorf("%s: refused=%v (%s) writes=%q", tt.argv, g.Reason != "", g.Reason, g.Writes)
		}
		if g.Reason != "" && g.Hint == "" {
			t.Errorf("%s: no hint", tt.argv)
		}
	}
}

func TestSedScripts(t *testing.T) {
	tests := []struct {
		script  string
		refused bool
	}{
		{"$a\\\nend with w and e", false},
		{"1i\\\n  text w here; e", false},
		{"/x/{\np\n}", false},
		{"/a\\/b/d", false},
		{"\\|x|d", false},
		{"s/a\\/b/c\\/d/g", false},
		{"# comment w x\np", false},
		{"2q5", false},
		{"1~3d;$!N", false},
		{"s/a/b/;w x", true},
		{"/x/ !e", true},
		{"1,3 s/a/b/pe", true},
		{"{s/a/b/\nW x\n}", true},
		{"s/a/b", true},
		{"/unterminated", true},
	}
	for _, tt := range tests {
		if got := SedScriptRefusal(tt.script); (got != "") != tt.refused {
			t.Errorf("%q: %q", tt.script, got)
		}
	}
}
