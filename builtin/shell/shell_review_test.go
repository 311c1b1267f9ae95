//go:build unix

// The second hostile review of git from the shell (issue 17): each test
// is a way a command the policy allows made git run a program a
// configuration warden never read names — git --bare, git under another
// name (a link in the workspace), the submodule section of a diff from
// history, a clone's checkout racing its new configuration, an index
// warden read otherwise than git — and failed (the marker made, or src
// removed under a rule denying rm -r) before its fix.

package shell

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/tool"
)

// markRun runs cmd (MARK replaced) in a fresh workspace made by setup, with
// the given grants, and reports whether the marker was made.
func markRun(t *testing.T, setup func(t *testing.T, ws, mark string), cmd string, grants ...string) (tool.Result, bool) {
	t.Helper()
	ws := cleanDir(t)
	mark := filepath.Join(ws, "marker")
	gitDriverRepo(t, ws, "", "")
	if setup != nil {
		setup(t, ws, mark)
	}
	if len(grants) == 0 {
		grants = []string{"fs.read:**", "fs.write:**", "exec:git", "exec:sh", "exec:touch", "exec:cat", "exec:rm", "exec:cp", "exec:printf", "exec:mkdir"}
	}
	sh := tool.Adapt[Args](&Shell{Environ: func() []string { return []string{"HOME=/nonexistent"} }})
	gate, _ := tooltest.ShellGate(t, sh, ws, grants...)
	res := tooltest.ShellDo(t, gate, map[string]any{"command": strings.ReplaceAll(cmd, "MARK", mark), "timeout_ms": 20000})
	if res.Error != nil {
		t.Logf("%s: %s (%s)", res.Error.Code, res.Error.Message, res.Error.Hint)
	}
	t.Logf("data: %s", res.Data)
	_, err := os.Lstat(mark)
	return res, err == nil
}

// historyGitlink: a commit in the workspace's history records lib as a
// gitlink (to the first commit), and a later one removes it: the index
// holds no gitlink.
func historyGitlink(t *testing.T, ws, _ string) {
	head := strings.TrimSpace(tooltest.GitPlain(t, ws, "rev-parse", "HEAD"))
	tooltest.GitPlain(t, ws, "update-index", "--add", "--cacheinfo", "160000,"+head+",lib")
	tooltest.GitPlain(t, ws, "commit", "-q", "-m", "add lib")
	tooltest.GitPlain(t, ws, "rm", "-q", "--cached", "lib")
	tooltest.GitPlain(t, ws, "commit", "-q", "-m", "drop lib")
}

func TestShellHostileSubmoduleDiffFromHistory(t *testing.T) {
	tooltest.GitBinary(t)
	cmd := "git init -q lib && printf '[diff]\\n\\texternal = \"touch MARK; true\"\\n' > cfg && cp cfg lib/.git/config && " +
		"printf '%s\\n' \"$PWD/.git/objects\" > alt && cp alt lib/.git/objects/info/alternates && mkdir tmp && TMPDIR=$PWD/tmp git log -p --submodule=diff"
	res, made := markRun(t, historyGitlink, cmd)
	t.Logf("code %q made=%v", tooltest.Code(res), made)
	if made {
		t.Errorf("BYPASS: the marker was made")
	}
}

// rulesPolicy is the owner's policy of the scenarios: git, sh, cat, cp and rm
// granted, recursive rm denied.
const rulesPolicy = `version: 1
grants: ["fs.read:**", "fs.write:**", "exec:rm", "exec:sh", "exec:git", "exec:cat", "exec:cp", "exec:timeout", "exec:env", "exec:xargs", "exec:nice"]
rules:
  - {name: no-recursive-rm, tool: shell, command: ["rm ** -*r*", "rm ** -*R*", "rm ** --recursive*"], action: deny}
  - {tool: shell, action: allow}
`

// rulesRun runs cmd under rulesPolicy in a workspace repository holding
// src/main.go and the hostile files given, after setup; it reports whether
// src survived.
func rulesRun(t *testing.T, files map[string]string, setup func(t *testing.T, ws string), cmd string) (tool.Result, bool) {
	t.Helper()
	return policyRun(t, rulesPolicy, files, setup, cmd)
}

// policyRun runs cmd under policy in a workspace repository holding
// src/main.go and files, after setup, once the policy is seen to refuse
// rm -rf src itself; it reports whether src survived. The review tests
// share it.
func policyRun(t *testing.T, policy string, files map[string]string, setup func(t *testing.T, ws string), cmd string) (tool.Result, bool) {
	t.Helper()
	ws := cleanDir(t)
	tooltest.WriteFile(t, filepath.Join(ws, "src", "main.go"), "package main\n", 0o644)
	for name, body := range files {
		tooltest.WriteFile(t, filepath.Join(ws, name), body, 0o644)
	}
	gitDriverRepo(t, ws, "", "")
	if setup != nil {
		setup(t, ws)
	}
	sh := tool.Adapt[Args](&Shell{Environ: func() []string { return []string{"HOME=/nonexistent"} }})
	g, _ := tooltest.Gate(t, policy, ws, sh)
	if r := tooltest.ShellDo(t, g, map[string]any{"command": "rm -rf src"}); r.Error == nil {
		t.Fatalf("rm -rf src was not refused: %s", r.Data)
	}
	res := tooltest.ShellDo(t, g, map[string]any{"command": cmd, "timeout_ms": 20000})
	if res.Error != nil {
		t.Logf("%s: %s (%s)", res.Error.Code, res.Error.Message, res.Error.Hint)
	}
	t.Logf("data: %s", res.Data)
	_, err := os.Stat(filepath.Join(ws, "src", "main.go"))
	return res, err == nil
}

func TestShellHostileGitBare(t *testing.T) {
	tooltest.GitBinary(t)
	files := map[string]string{"setup/config": "[diff]\n\texternal = \"rm -rf ../../src; true\"\n", "b.txt": "two\n"}
	_, ok := rulesRun(t, files, nil, "git init -q lib && cp setup/config lib/.git/config && cd lib/.git && git --bare diff --no-index ../../a.txt ../../b.txt")
	if !ok {
		t.Errorf("BYPASS: src was removed")
	}
}

func TestShellHostileSubmoduleDiffUnderRules(t *testing.T) {
	tooltest.GitBinary(t)
	files := map[string]string{"setup/config": "[diff]\n\texternal = \"rm -rf ../src; true\"\n", "setup/alternates": "../../../.git/objects\n"}
	_, ok := rulesRun(t, files, func(t *testing.T, ws string) { historyGitlink(t, ws, "") },
		"git init -q lib && cp setup/config lib/.git/config && cp setup/alternates lib/.git/objects/info/alternates && TMPDIR=$PWD git log -p --submodule=diff")
	if !ok {
		t.Errorf("BYPASS: src was removed")
	}
}

// patchIndex rewrites the workspace's (version 2) index with edit applied
// to each entry (its offset and name), then its checksum.
func patchIndex(t *testing.T, ws string, edit func(b []byte, off int, name string)) {
	t.Helper()
	p := filepath.Join(ws, ".git", "index")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	n := int(binary.BigEndian.Uint32(b[8:]))
	off := 12
	for i := 0; i < n; i++ {
		nul := bytes.IndexByte(b[off+62:], 0)
		name := string(b[off+62 : off+62+nul])
		edit(b, off, name)
		off += (62 + nul + 8) &^ 7
	}
	sum := sha1.Sum(b[:len(b)-20])
	copy(b[len(b)-20:], sum[:])
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func hostileSubmodule(t *testing.T, ws, mark string) {
	nestedRepo(t, filepath.Join(ws, "lib"), strings.ReplaceAll("[filter \"x\"]\n\tclean = \"touch MARK; cat\"\n", "MARK", mark))
	tooltest.GitPlain(t, ws, "add", "lib")
	tooltest.GitPlain(t, ws, "commit", "-q", "-m", "lib as a submodule")
}

func TestShellHostileIndexModeHighBits(t *testing.T) {
	tooltest.GitBinary(t)
	setup := func(t *testing.T, ws, mark string) {
		hostileSubmodule(t, ws, mark)
		patchIndex(t, ws, func(b []byte, off int, name string) {
			if name == "lib" {
				binary.BigEndian.PutUint32(b[off+24:], 0x1000e000)
			}
		})
		t.Logf("git ls-files -s: %s", tooltest.GitPlain(t, ws, "ls-files", "-s"))
	}
	res, made := markRun(t, setup, "git status --short")
	t.Logf("code %q made=%v", tooltest.Code(res), made)
	if made {
		t.Errorf("BYPASS: the marker was made")
	}
}

// indexEntry is one version-2 index entry: mode, object name, the name length
// in its flags, and the name bytes written (NUL-padded after).
func indexEntry(mode uint32, oid []byte, flagLen int, name []byte) []byte {
	e := make([]byte, 62)
	binary.BigEndian.PutUint32(e[24:], mode)
	copy(e[40:], oid)
	binary.BigEndian.PutUint16(e[60:], uint16(flagLen))
	e = append(e, name...)
	size := (62 + flagLen + 8) &^ 7
	for len(e) < size {
		e = append(e, 0)
	}
	return e
}

func hexOID(t *testing.T, s string) []byte {
	b := make([]byte, 20)
	for i := range b {
		var v byte
		for _, c := range s[2*i : 2*i+2] {
			v <<= 4
			switch {
			case c >= '0' && c <= '9':
				v |= byte(c - '0')
			default:
				v |= byte(c-'a') + 10
			}
		}
		b[i] = v
	}
	return b
}

// TestShellHostileIndexNameLength: the first entry's name holds a NUL before the
// length its flags give (git skips by the flags, warden's parser by the
// NUL): the parser reads the gitlink that follows from the wrong offset
// and never sees its mode.
func TestShellHostileIndexNameLength(t *testing.T) {
	tooltest.GitBinary(t)
	long := "lib/" + strings.Repeat("x", 253) // 257 bytes: both flag bytes non-zero
	setup := func(t *testing.T, ws, mark string) {
		nestedRepo(t, filepath.Join(ws, long), strings.ReplaceAll("[filter \"x\"]\n\tclean = \"touch MARK; cat\"\n", "MARK", mark))
		sub := strings.TrimSpace(tooltest.GitPlain(t, filepath.Join(ws, long), "rev-parse", "HEAD"))
		blob := strings.TrimSpace(tooltest.GitPlain(t, ws, "rev-parse", "HEAD:a.txt"))
		oid := hexOID(t, sub)
		t.Logf("submodule head %s: byte12&0x40=%x bytes14..19=%x", sub, oid[12]&0x40, oid[14:])
		b := []byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x02")
		b = append(b, indexEntry(0o100644, hexOID(t, blob), 10, []byte("a.txt\x00XXXX"))...)
		b = append(b, indexEntry(0o160000, oid, len(long), []byte(long))...)
		sum := sha1.Sum(b)
		b = append(b, sum[:]...)
		if err := os.WriteFile(filepath.Join(ws, ".git", "index"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("git ls-files -s: %s", tooltest.GitPlain(t, ws, "ls-files", "-s"))
	}
	res, made := markRun(t, setup, "git status --short")
	t.Logf("code %q made=%v", tooltest.Code(res), made)
	if made {
		t.Errorf("BYPASS: the marker was made")
	}
}

func TestShellHostileOwnershipKnobKept(t *testing.T) {
	tooltest.GitBinary(t)
	vendored := func(t *testing.T, ws, mark string) {
		nestedRepo(t, filepath.Join(ws, "vendor", "lib"), strings.ReplaceAll("[filter \"x\"]\n\tclean = \"touch MARK; cat\"\n", "MARK", mark))
	}
	K := "GIT_TEST_ASSUME_DIFFERENT_OWNER"
	for _, cmd := range []string{
		"sh -c 'unset " + K + "; cd vendor/lib && git status --short'",
		"bash -c 'export -n " + K + "; cd vendor/lib && git status --short'",
		"bash -c 'declare +x " + K + "; cd vendor/lib && git status --short'",
		"bash -c 'for " + K + " in 0; do cd vendor/lib && git status --short; done'",
		"bash -c 'read " + K + " <<< 0; cd vendor/lib && git status --short'",
		"bash -c 'printf -v " + K + " 0; cd vendor/lib && git status --short'",
		"env -u " + K + " sh -c 'cd vendor/lib && git status --short'",
		"env --unset=" + K + " sh -c 'cd vendor/lib && git status --short'",
		"env -S '-u " + K + " sh -c \"cd vendor/lib && git status --short\"'",
		K + "=0 sh -c 'cd vendor/lib && git status --short'",
		"sh -c '" + K + "=0 git status --short'",
		"bash -c 'exec -c git status --short'",
		"bash -c 'f(){ local " + K + "=0; cd vendor/lib && git status --short; }; f'",
		"bash -c 'x=" + K + "; unset $x; cd vendor/lib && git status --short'",
		"bash -c 'unset \"${!GIT_TEST@}\"; cd vendor/lib && git status --short'",
		"bash -c 'unset -v GIT_TEST_ASSUME_DIFFERENT_OWNE\\R; cd vendor/lib && git status --short'",
		"bash -c 'select " + K + " in 0; do cd vendor/lib && git status --short; break; done <<< 1'",
		"bash -c 'declare -n r=" + K + "; r=0; cd vendor/lib && git status --short'",
		"bash -c 'mapfile -t " + K + " <<< 0; cd vendor/lib && git status --short'",
		"bash -c 'alias u=unset; u " + K + "; cd vendor/lib && git status --short'",
		"bash -c 'cd vendor/lib && " + K + "=0 exec git status --short'",
	} {
		t.Run(cmd, func(t *testing.T) {
			res, made := markRun(t, vendored, cmd, "fs.read:**", "fs.write:**", "exec:git", "exec:sh", "exec:bash", "exec:touch", "exec:cat", "exec:env")
			t.Logf("code %q made=%v", tooltest.Code(res), made)
			if made {
				t.Errorf("BYPASS: the marker was made")
			}
		})
	}
}

func TestShellHostileAliasUnderRules(t *testing.T) {
	tooltest.GitBinary(t)
	files := map[string]string{"setup/config": "[filter \"tidy\"]\n\tclean = \"rm -rf ../src; cat\"\n", "setup/attributes": "*.txt filter=tidy\n", "setup/evil.cfg": "[filter \"tidy\"]\n\tclean = \"rm -rf src; cat\"\n"}
	for _, cmd := range []string{
		"git init -q scratch && cp setup/config scratch/.git/config && cp setup/attributes scratch/.gitattributes && cp setup/attributes scratch/a.txt && sh -c 'alias u=unset\nu GIT_TEST_ASSUME_DIFFERENT_OWNER\ncd scratch && git add a.txt'",
		"cp setup/attributes .gitattributes && cp setup/attributes n.txt && sh -c 'alias x=export\nx GIT_CONFIG_GLOBAL=setup/evil.cfg\ngit add n.txt'",
	} {
		t.Run(cmd, func(t *testing.T) {
			_, ok := rulesRun(t, files, nil, cmd)
			if !ok {
				t.Errorf("BYPASS: src was removed")
			}
		})
	}
}

func TestShellHostileSymlinkedDotGit(t *testing.T) {
	tooltest.GitBinary(t)
	files := map[string]string{"setup/config": "[diff]\n\texternal = \"rm -rf src; true\"\n", "setup/gitfile": "gitdir: lib/.git\n", "setup/alternates": "../../../real.git/objects\n"}
	link := func(t *testing.T, ws string) {
		if err := os.Rename(filepath.Join(ws, ".git"), filepath.Join(ws, "real.git")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("real.git", filepath.Join(ws, ".git")); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s", tooltest.GitPlain(t, ws, "status", "--short"))
	}
	_, ok := rulesRun(t, files, link, "git init -q lib && cp setup/config lib/.git/config && rm .git && cp setup/gitfile .git && TMPDIR=$PWD git diff --no-index a.txt setup/gitfile")
	if !ok {
		t.Errorf("BYPASS: src was removed")
	}
}

func TestShellHostileCloneCheckoutRace(t *testing.T) {
	tooltest.GitBinary(t)
	files := map[string]string{"setup/config": "[filter \"tidy\"]\n\tsmudge = \"rm -rf ../src; cat\"\n", "docs/a.txt": "hello\n", ".gitattributes": "*.txt filter=tidy\n"}
	loop := "for a in 0 1 2 3 4 5 6 7 8 9; do for b in 0 1 2 3 4 5 6 7 8 9; do for c in 0 1 2 3; do cp setup/config dest/.git/config 2>/dev/null; done; done; done"
	for i := 0; i < 3; i++ {
		_, ok := rulesRun(t, files, func(t *testing.T, ws string) {
			tooltest.WriteFile(t, filepath.Join(ws, ".gitattributes"), "*.txt filter=tidy\n", 0o644)
			tooltest.GitPlain(t, ws, "add", "-A")
			tooltest.GitPlain(t, ws, "commit", "-q", "-m", "attrs")
		}, "git bundle create -q x.bundle HEAD && { "+loop+" & } ; git clone -q x.bundle dest; wait")
		if !ok {
			t.Errorf("BYPASS (try %d): src was removed", i)
			return
		}
	}
}

func TestShellHostileGitByOtherName(t *testing.T) {
	tooltest.GitBinary(t)
	for _, cmd := range []string{
		"cp -s /usr/bin/git g && ./g status --short",
		"cp -s /usr/bin/git g && sh -c './g status --short'",
		"cp -s /usr/bin/git g && PATH=$PWD:$PATH g status --short",
	} {
		t.Run(cmd, func(t *testing.T) {
			res, made := markRun(t, hostileSubmodule, cmd)
			t.Logf("code %q made=%v", tooltest.Code(res), made)
			if made {
				t.Errorf("BYPASS: the marker was made")
			}
		})
	}
}

func TestShellHostileGitLinkUnderRules(t *testing.T) {
	tooltest.GitBinary(t)
	files := map[string]string{"setup/config": "[filter \"tidy\"]\n\tclean = \"rm -rf ../src; cat\"\n", "setup/attributes": "*.txt filter=tidy\n"}
	sub := func(t *testing.T, ws string) {
		nestedRepo(t, filepath.Join(ws, "lib"), "")
		tooltest.GitPlain(t, ws, "add", "lib")
		tooltest.GitPlain(t, ws, "commit", "-q", "-m", "lib as a submodule")
	}
	for _, tc := range []struct {
		name, cmd string
		setup     func(t *testing.T, ws string)
	}{
		{"submodule via a symlinked git", "cp setup/config lib/.git/config && cp setup/attributes lib/.gitattributes && cp lib/notes.txt n2 && cp n2 lib/notes.txt && cp -s /usr/bin/git g && sh -c './g status --short'", sub},
		{"git -c via a symlinked git", "cp -s /usr/bin/git g && sh -c \"./g -c 'alias.x=!rm -rf src' x\"", nil},
		{"git -C nested via a symlinked git", "git init -q lib && cp setup/config lib/.git/config && cp setup/attributes lib/.gitattributes && cp setup/attributes lib/n.txt && cp -s /usr/bin/git g && sh -c './g -C lib -c safe.directory=* add n.txt'", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ok := rulesRun(t, files, tc.setup, tc.cmd)
			if !ok {
				t.Errorf("BYPASS: src was removed")
			}
		})
	}
}

func TestShellHostileGitLinkLaunched(t *testing.T) {
	tooltest.GitBinary(t)
	link := func(t *testing.T, ws string) {
		if err := os.Symlink("/usr/bin/git", filepath.Join(ws, "g")); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range []string{
		"timeout 20 ./g -c 'alias.x=!rm -rf src' x",
		"env ./g -c 'alias.x=!rm -rf src' x",
		"nice ./g -c 'alias.x=!rm -rf src' x",
		"echo x | xargs ./g -c 'alias.x=!rm -rf src'",
		"$PWD/g -c 'alias.x=!rm -rf src' x",
		"timeout 20 $PWD/g -c 'alias.x=!rm -rf src' x",
		"bash -c './g -c \"alias.x=!rm -rf src\" x'",
	} {
		t.Run(cmd, func(t *testing.T) {
			_, ok := rulesRun(t, nil, link, cmd)
			if !ok {
				t.Errorf("BYPASS: src was removed")
			}
		})
	}
}

// TestShellHostileLaunchedGuards: the argument guards hold for what other
// programs launch — a launcher's subject, an inner script's program, what
// xargs builds from its input — and for a repository's own
// diff.submodule=diff (overridden at command scope).
func TestShellHostileLaunchedGuards(t *testing.T) {
	tooltest.GitBinary(t)
	for _, tc := range []struct {
		cmd   string
		setup func(t *testing.T, ws string)
	}{
		{cmd: `timeout 20 git -c 'alias.x=!rm -rf src' x`},
		{cmd: `sh -c "git -c 'alias.x=!rm -rf src' x"`},
		{cmd: `env git -c 'alias.x=!rm -rf src' x`},
		{cmd: `printf '%s\n' '-Orm -rf src' | xargs git grep -e main`},
		{cmd: `sh -c 'o=-Orm; git grep $o -e main'`},
		{cmd: "git init -q lib && cp setup/config lib/.git/config && cp setup/alternates lib/.git/objects/info/alternates && TMPDIR=$PWD git log -p",
			setup: func(t *testing.T, ws string) {
				historyGitlink(t, ws, "")
				shellAppend(t, filepath.Join(ws, ".git", "config"), "[diff]\n\tsubmodule = diff\n")
			}},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			files := map[string]string{"setup/config": "[diff]\n\texternal = \"rm -rf ../src; true\"\n", "setup/alternates": "../../../.git/objects\n"}
			if _, ok := rulesRun(t, files, tc.setup, tc.cmd); !ok {
				t.Errorf("src was removed")
			}
		})
	}
}
