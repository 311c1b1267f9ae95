//go:build unix

// The third hostile review of git from the shell (issue 17). Each test
// runs a command under reviewPolicy — exec grants for git, sh, bash, cp,
// cat, rm, timeout, env, xargs, find, make, printf, recursive rm denied by
// a rule, everything else allowed — in a workspace repository holding
// src/main.go, and fails when src is removed; each failed before its fix.

package shell

import (
	"crypto/sha1"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/tool"
)

const reviewPolicy = `version: 1
grants: ["fs.read:**", "fs.write:**", "exec:git", "exec:sh", "exec:bash", "exec:cp", "exec:cat", "exec:rm", "exec:timeout", "exec:env", "exec:xargs", "exec:find", "exec:make", "exec:printf"]
rules:
  - {name: no-recursive-rm, tool: shell, command: ["rm ** -*r*", "rm ** -*R*", "rm ** --recursive*"], action: deny}
  - {tool: shell, action: allow}
`

// reviewRun runs cmd under reviewPolicy in a
// workspace repository holding src/main.go and files, after setup; it
// reports whether src survived.
func reviewRun(t *testing.T, files map[string]string, setup func(t *testing.T, ws string), cmd string) (tool.Result, bool) {
	t.Helper()
	return policyRun(t, reviewPolicy, files, setup, cmd)
}

func reviewCases(t *testing.T, cmds []string, setup func(t *testing.T, ws string)) {
	for _, cmd := range cmds {
		t.Run(cmd, func(t *testing.T) {
			if _, ok := reviewRun(t, nil, setup, cmd); !ok {
				t.Errorf("BYPASS: src was removed")
			}
		})
	}
}

// launchedArgsRefusal let a guarded program take words known
// only at run time after a "--" among its static words. find's "--" ends
// only its -H/-L/-P options (the expression follows), and a "--" can be an
// option's value (git grep -e --), after which git reads options again.
func TestShellHostileRunTimeWordsAfterDashDash(t *testing.T) {
	tooltest.GitBinary(t)
	reviewCases(t, []string{
		`printf '%s\n' . -exec rm -rf src ';' | xargs find --`,
		`sh -c 'x="-exec rm -rf src ;"; find -- . $x'`,
		`printf 'x -- y\n' > f; printf '%s\n' '"-Orm -rf src"' | xargs git grep --no-index -e --`,
		`printf 'x -- y\n' > f; sh -c 'o="-Orm -rf src"; git grep --no-index -e -- "$o"'`,
	}, nil)
}

// git runs the builtin its argv[0] names (git-<command>); bash's
// exec -a sets argv[0] in an inner script, where the analyzer sees
// "git show …" (an allowed command) and git runs difftool --extcmd.
func TestShellHostileExecArgv0(t *testing.T) {
	tooltest.GitBinary(t)
	reviewCases(t, []string{
		`bash -c 'printf "a\n" > show; printf "b\n" > t; exec -a git-difftool git show --no-index -y -x "rm -rf src; :" t'`,
	}, nil)
}

// compgen -C runs its command; the analyzer takes compgen for a
// builtin that runs nothing.
func TestShellHostileCompgen(t *testing.T) {
	reviewCases(t, []string{`bash -c 'compgen -C "rm -rf src" x'`}, nil)
}

// sh is dash, which reads ((…)) as two nested subshells; the
// analyzer parses sh's script as bash's, an arithmetic command.
func TestShellHostileDashSubshells(t *testing.T) {
	reviewCases(t, []string{`sh -c 'rm=1 rf=1 src=1; ((rm -rf *src))'`}, nil)
}

// reviewSubmodule makes dir a submodule of the workspace whose own
// configuration names the filter x (clean = rm -rf up/src) for *.txt.
func reviewSubmodule(t *testing.T, ws, dir, up string) {
	nestedRepo(t, filepath.Join(ws, dir), "[filter \"x\"]\n\tclean = \"rm -rf "+up+"src; cat\"\n")
	tooltest.GitPlain(t, ws, "add", dir)
	tooltest.GitPlain(t, ws, "commit", "-q", "-m", dir+" as a submodule")
}

func writeIndex(t *testing.T, ws string, b []byte) {
	if err := os.WriteFile(filepath.Join(ws, ".git", "index"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("git ls-files -s: %q", tooltest.GitPlain(t, ws, "ls-files", "-s"))
}

// a (planted) SHA-1 index git reads — an entry with the
// extended flag in version 2, which git accepts — that the 20-byte reading
// refuses while the 32-byte reading succeeds and steps over the gitlink:
// warden's own index reading counted no gitlink, git status entered lib (gitlinks are now listed by git itself).
func TestShellHostileIndexGitReads(t *testing.T) {
	tooltest.GitBinary(t)
	setup := func(t *testing.T, ws string) {
		reviewSubmodule(t, ws, "lib", "../")
		oid := func(dir, rev string) []byte {
			return hexOID(t, strings.TrimSpace(tooltest.GitPlain(t, filepath.Join(ws, dir), "rev-parse", rev)))
		}
		writeIndex(t, ws, craftedIndex(oid(".", "HEAD:a.txt"), oid("lib", "HEAD")))
	}
	reviewCases(t, []string{"git status --short"}, setup)
}

// craftedIndex builds a version 2 SHA-1 index of two entries: a file whose
// entry carries the extended flag (flags2 = 0) and a 16-byte name whose
// bytes 8 and 9, read as a 32-byte reading's flags, give a name length
// spanning the gitlink entry "lib" after it; then an optional extension
// ZZZZ (git ignores it) whose payload is the 32-byte reading's second
// entry, ending where that reading's checksum starts.
func craftedIndex(blob, sub []byte) []byte {
	b := []byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x02")
	e0 := make([]byte, 64)
	binary.BigEndian.PutUint32(e0[24:], 0o100644)
	copy(e0[40:], blob)
	binary.BigEndian.PutUint16(e0[60:], 0x4000|16)
	e0 = append(e0, "aaaaaaaa\x80\x50zzzzzz"...) // bytes 8-9: 0x8050, a length of 0x50
	for len(e0) < 88 {
		e0 = append(e0, 0)
	}
	e1 := make([]byte, 62)
	binary.BigEndian.PutUint32(e1[24:], 0o160000)
	copy(e1[40:], sub)
	binary.BigEndian.PutUint16(e1[60:], 3)
	e1 = append(e1, "lib"...)
	for len(e1) < 72 {
		e1 = append(e1, 0)
	}
	b = append(append(b, e0...), e1...)
	p := make([]byte, 84)
	binary.BigEndian.PutUint32(p[16:], 0o100644)
	binary.BigEndian.PutUint16(p[64:], 5)
	b = append(b, "ZZZZ"...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
	b = append(b, p...)
	sum := sha1.Sum(b)
	return append(b, sum[:]...)
}

// a (planted) sparse index records dir/ as a sparse directory
// (mode 040000, a tree); the gitlink dir/lib is inside that tree, where
// warden's own index reading did not look. With sparse checkout on (configuration that
// names no program), git expands the index, clears skip-worktree for
// dir/lib (present in the work tree) and git status enters it.
func TestShellHostileSparseIndex(t *testing.T) {
	tooltest.GitBinary(t)
	setup := func(t *testing.T, ws string) {
		reviewSubmodule(t, ws, "dir/lib", "../../")
		oid := func(rev string) []byte {
			return hexOID(t, strings.TrimSpace(tooltest.GitPlain(t, ws, "rev-parse", rev)))
		}
		writeIndex(t, ws, sparseIndex([][2][]byte{{[]byte(".gitattributes"), oid("HEAD:.gitattributes")}, {[]byte("a.txt"), oid("HEAD:a.txt")}}, []byte("dir/"), oid("HEAD:dir")))
		shellAppend(t, filepath.Join(ws, ".git", "config"), "[core]\n\tsparseCheckout = true\n\tsparseCheckoutCone = true\n[index]\n\tsparse = true\n")
		tooltest.WriteFile(t, filepath.Join(ws, ".git", "info", "sparse-checkout"), "/*\n!/*/\n", 0o644)
	}
	reviewCases(t, []string{"git status --short"}, setup)
}

// sparseIndex builds a version 3 index: files (name, blob), one sparse
// directory entry (mode 040000, the directory's tree, skip-worktree) and
// the "sdir" extension.
func sparseIndex(files [][2][]byte, dir, tree []byte) []byte {
	ent := func(mode uint32, oid, name []byte, flags2 uint16) []byte {
		e := make([]byte, 40)
		binary.BigEndian.PutUint32(e[24:], mode)
		e = append(e, oid...)
		fl := uint16(len(name))
		if flags2 != 0 {
			fl |= 0x4000
		}
		e = binary.BigEndian.AppendUint16(e, fl)
		if flags2 != 0 {
			e = binary.BigEndian.AppendUint16(e, flags2)
		}
		size := (len(e) + len(name) + 8) &^ 7
		e = append(e, name...)
		for len(e) < size {
			e = append(e, 0)
		}
		return e
	}
	b := []byte("DIRC\x00\x00\x00\x03")
	b = binary.BigEndian.AppendUint32(b, uint32(len(files)+1))
	for _, f := range files {
		b = append(b, ent(0o100644, f[1], f[0], 0)...)
	}
	b = append(b, ent(0o040000, tree, dir, 0x4000)...)
	b = append(b, "sdir\x00\x00\x00\x00"...)
	sum := sha1.Sum(b)
	return append(b, sum[:]...)
}

// the workspace repository's own (planted) configuration names
// a man viewer command; git log --help passes the argument guard (help is
// refused as a command, --help is not) and git runs it: warden's overrides
// cover filters, diff and merge drivers, tar filters and credential
// helpers, not man.<tool>.cmd (nor browser.<tool>.cmd, reached the same
// way with help.format=web where git's HTML pages are installed).
func TestShellHostileHelpViewer(t *testing.T) {
	tooltest.GitBinary(t)
	cfg := "[help]\n\tformat = man\n[man]\n\tviewer = evil\n[man \"evil\"]\n\tcmd = \"rm -rf src; :\"\n"
	reviewCases(t, []string{"git log --help"}, func(t *testing.T, ws string) { shellAppend(t, filepath.Join(ws, ".git", "config"), cfg) })
}

// TestShellHostileReviewHeld: what was tried and held (src survives each).
func TestShellHostileReviewHeld(t *testing.T) {
	tooltest.GitBinary(t)
	reviewCases(t, []string{
		`printf '%s\n' -c 'alias.x=!rm -rf src' x | xargs git --`,                                                 // git rejects a global "--"
		`cp -s /usr/bin/rm git && $PWD/git -rf src`,                                                               // not the PATH's git
		`sh -c 'cd /usr/bin && ./git status'`,                                                                     // relative path
		`env -S "git -c alias.x=!rm\_-rf\_src x"`,                                                                 // -S split, guard applied
		`nice -n 5 timeout 20 env git -c 'alias.x=!rm -rf src' x`,                                                 // three launchers
		`printf 'all:\n\trm -rf src\n' > Makefile; make`,                                                          // opaque: strictest rule
		`compgen -C "rm -rf src" x`,                                                                               // warden's interpreter has no compgen
		`printf "a\n" > show; printf "b\n" > t; exec -a git-difftool git show --no-index -y -x "rm -rf src; :" t`, // warden's exec has no -a
		`git worktree add ../wt2`,                                                                                 // .git read-only
		`git init -q --separate-git-dir=moved .`,                                                                  // .git is a mount point: EBUSY
		`printf 'x\n' | xargs -a /dev/stdin git`,                                                                  // run-time words refused
		`bash -c 'o=-Orm; git grep "$o" -e main'`,                                                                 // run-time words refused
		`find . -maxdepth 0 -execdir rm -rf src ';'`,                                                              // find guard
		`sh -c '((rm -rf src))'`,                                                                                  // unknown variables in arithmetic refused
		`git init -q o && printf '[tar "e"]\n\tcommand = "rm -rf ../src; cat"\n\tremote = true\n' > c && cp c o/.git/config && git archive --remote=o --format=e HEAD`, // upload-archive checks ownership
	}, nil)
}
