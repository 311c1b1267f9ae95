//go:build unix

package shell

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wardenrt/warden/builtin/internal/gitcfg"
	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/tool"
)

// gitDriverRepo makes ws a repository with a.txt committed on main (and
// .gitattributes holding attrs), then appends config to .git/config and
// changes a.txt: the drivers it names exist only after the fixture's own
// commits.
func gitDriverRepo(t *testing.T, ws, attrs, config string) {
	t.Helper()
	tooltest.GitPlain(t, ws, "init", "-q", "-b", "main")
	tooltest.WriteFile(t, filepath.Join(ws, "a.txt"), "one\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, ".gitattributes"), attrs, 0o644)
	tooltest.GitPlain(t, ws, "add", "-A")
	tooltest.GitPlain(t, ws, "commit", "-q", "-m", "first")
	shellAppend(t, filepath.Join(ws, ".git", "config"), config)
	tooltest.WriteFile(t, filepath.Join(ws, "a.txt"), "one\ntwo\n", 0o644)
}

// TestShellHostileGitDrivers: git started from the shell does not run the
// programs the repository's own configuration names — filter, diff and
// merge drivers, diff.external, a remote's upload-pack, a git:// proxy, an
// archive filter, a signature program — nor one an included file names
// that the command itself could rewrite. Each would run `touch MARK`
// (MARK in the workspace, which the grants let programs write, and sh and
// touch granted): only warden's overrides keep the marker from being
// made. Before them, every case made it.
func TestShellHostileGitDrivers(t *testing.T) {
	tooltest.GitBinary(t)
	grants := []string{"fs.read:**", "fs.write:**", "exec:git", "exec:sh", "exec:touch", "exec:cat", "exec:true"}
	failed := tool.CodeCommandFailed
	for _, tc := range []struct {
		name, attrs, config, cmd string
		grants                   []string
		setup                    func(t *testing.T, ws, mark string)
		code                     tool.Code
		msg                      string
	}{
		{name: "clean and smudge filter", attrs: "*.txt filter=x\n",
			config: "[filter \"x\"]\n\tclean = \"touch MARK; cat\"\n\tsmudge = \"touch MARK; cat\"\n\trequired = true\n", cmd: "git diff --stat"},
		{name: "filter process", attrs: "*.txt filter=x\n",
			config: "[filter \"x\"]\n\tprocess = \"touch MARK\"\n", cmd: "git diff --stat"},
		{name: "textconv", attrs: "*.txt diff=x\n",
			config: "[diff \"x\"]\n\ttextconv = \"touch MARK; cat\"\n", cmd: "git diff", code: failed},
		{name: "diff driver command", attrs: "*.txt diff=x\n",
			config: "[diff \"x\"]\n\tcommand = \"touch MARK; true\"\n", cmd: "git diff", code: failed},
		{name: "diff.external", attrs: "",
			config: "[diff]\n\texternal = \"touch MARK; true\"\n", cmd: "git diff", code: failed},
		{name: "merge driver", attrs: "*.txt merge=x\n",
			config: "[merge \"x\"]\n\tdriver = \"touch MARK; false\"\n", cmd: "git merge-tree --write-tree main side", code: failed,
			setup: func(t *testing.T, ws, _ string) {
				tooltest.GitPlain(t, ws, "checkout", "-q", "-b", "side")
				tooltest.GitPlain(t, ws, "commit", "-q", "-am", "side")
				tooltest.GitPlain(t, ws, "checkout", "-q", "main")
				tooltest.WriteFile(t, filepath.Join(ws, "a.txt"), "one\nthree\n", 0o644)
				tooltest.GitPlain(t, ws, "commit", "-q", "-am", "main")
			}},
		{name: "remote upload-pack", attrs: "",
			config: "[remote \"o\"]\n\turl = ./up.git\n\tuploadpack = \"touch MARK; git-upload-pack\"\n", cmd: "git ls-remote o", code: failed,
			setup: func(t *testing.T, ws, _ string) {
				tooltest.GitPlain(t, ws, "init", "-q", "--bare", "up.git")
			}},
		{name: "git:// proxy", attrs: "",
			config: "[core]\n\tgitProxy = sh\n", cmd: "git ls-remote git://p.sh/x", code: failed,
			setup: func(t *testing.T, ws, mark string) {
				tooltest.WriteFile(t, filepath.Join(ws, "p.sh"), "touch '"+mark+"'\n", 0o644)
			}},
		{name: "ssh command", attrs: "",
			config: "[core]\n\tsshCommand = \"touch MARK; false\"\n", cmd: "git ls-remote ssh://example.invalid/x", code: failed},
		{name: "alternates' refs command", attrs: "",
			config: "[core]\n\talternateRefsCommand = \"touch MARK; true\"\n", cmd: "git fetch --dry-run -q ./up.git main",
			setup: func(t *testing.T, ws, _ string) {
				tooltest.GitPlain(t, ws, "clone", "-q", "--bare", ".", "alt.git")
				tooltest.GitPlain(t, ws, "init", "-q", "--bare", "up.git")
				tooltest.GitPlain(t, ws, "push", "-q", "up.git", "main")
				tooltest.WriteFile(t, filepath.Join(ws, ".git", "objects", "info", "alternates"), filepath.Join(ws, "alt.git", "objects")+"\n", 0o644)
			}},
		{name: "archive filter", attrs: "",
			config: "[tar \"evil\"]\n\tcommand = \"touch MARK; cat\"\n", cmd: "git archive --format=evil HEAD > /dev/null", code: failed},
		{name: "gpg.program with log.showSignature", attrs: "", grants: []string{"fs.read:**", "fs.write:**", "exec:*"},
			config: "[log]\n\tshowSignature = true\n[gpg]\n\tprogram = WS/gpg.sh\n", cmd: "git log -1",
			setup: func(t *testing.T, ws, mark string) {
				signedCommit(t, ws)
				tooltest.WriteFile(t, filepath.Join(ws, "gpg.sh"), "#!/bin/sh\ntouch '"+mark+"'\nexit 1\n", 0o755)
			}},
		{name: "include of a worktree file the command rewrites", attrs: "*.txt filter=x\n",
			config: "[include]\n\tpath = ../inc.cfg\n",
			cmd:    `printf '[filter "x"]\n\tclean = "touch MARK; cat"\n' > inc.cfg; git diff --stat`,
			code:   tool.CodePolicyDenied, msg: "reads WS/inc.cfg",
			setup: func(t *testing.T, ws, _ string) {
				tooltest.WriteFile(t, filepath.Join(ws, "inc.cfg"), "", 0o644)
			}},
		{name: "includeIf of a file the command creates", attrs: "*.txt filter=x\n",
			config: "[includeIf \"gitdir:WS/\"]\n\tpath = WS/new/inc.cfg\n",
			cmd:    `mkdir -p new; printf '[filter "x"]\n\tclean = "touch MARK; cat"\n' > new/inc.cfg; git diff --stat`,
			code:   tool.CodePolicyDenied, msg: "WS/new/inc.cfg",
			setup: func(t *testing.T, ws, _ string) {
				tooltest.WriteFile(t, filepath.Join(ws, "keep"), "", 0o644)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := cleanDir(t)
			mark := filepath.Join(ws, "marker")
			sub := func(s string) string {
				return strings.ReplaceAll(strings.ReplaceAll(s, "MARK", mark), "WS", ws)
			}
			gitDriverRepo(t, ws, tc.attrs, sub(tc.config))
			if tc.setup != nil {
				tc.setup(t, ws, mark)
			}
			// Temporary files (external diffs, textconv) go in the
			// workspace, which the programs may write.
			tmp := filepath.Join(ws, ".tmp")
			if err := os.Mkdir(tmp, 0o755); err != nil {
				t.Fatal(err)
			}
			sh := tool.Adapt[Args](&Shell{Environ: func() []string { return []string{"TMPDIR=" + tmp, "HOME=/nonexistent"} }})
			g := grants
			if tc.grants != nil {
				g = tc.grants
			}
			gate, _ := tooltest.ShellGate(t, sh, ws, append(g, "exec:mkdir")...)
			res := tooltest.ShellDo(t, gate, map[string]any{"command": sub(tc.cmd), "timeout_ms": 20000})
			if res.Error != nil {
				t.Logf("%s: %s (%s)", res.Error.Code, res.Error.Message, res.Error.Hint)
			}
			absent(t, mark)
			if tooltest.Code(res) != tc.code {
				t.Fatalf("want %q, got %+v\n%s", tc.code, res.Error, res.Data)
			}
			if tc.msg != "" && !strings.Contains(res.Error.Message, sub(tc.msg)) {
				t.Fatalf("error %+v lacks %q", res.Error, sub(tc.msg))
			}
			if tc.code == tool.CodePolicyDenied && res.Error.Hint == "" {
				t.Fatalf("no hint: %+v", res.Error)
			}
		})
	}
}

// signedCommit adds a commit carrying an (unverifiable) OpenPGP signature,
// made with a stand-in signing program.
func signedCommit(t *testing.T, ws string) {
	t.Helper()
	signer := filepath.Join(t.TempDir(), "sign.sh")
	tooltest.WriteFile(t, signer, "#!/bin/sh\ncat >/dev/null\nprintf '\\n[GNUPG:] SIG_CREATED D 1 8 00 0 X\\n' >&2\n"+
		"printf -- '-----BEGIN PGP SIGNATURE-----\\n\\nabc\\n-----END PGP SIGNATURE-----\\n'\n", 0o755)
	tooltest.GitPlain(t, ws, "-c", "gpg.program="+signer, "commit", "-q", "-S", "--allow-empty", "-m", "signed")
	if out := tooltest.GitPlain(t, ws, "cat-file", "commit", "HEAD"); !strings.Contains(out, "gpgsig ") {
		t.Fatalf("the fixture's commit is not signed:\n%s", out)
	}
}

// TestShellGitUserDriversKept: a filter only the user's own configuration
// (~/.gitconfig, as git-lfs installs itself) defines is left alone — it
// runs — even when the repository's configuration sets the driver's other,
// program-free keys (filter.lfs.required).
func TestShellGitUserDriversKept(t *testing.T) {
	tooltest.GitBinary(t)
	ws, home := cleanDir(t), cleanDir(t)
	mark := filepath.Join(ws, "marker")
	gitDriverRepo(t, ws, "*.txt filter=lfs\n", "[filter \"lfs\"]\n\trequired = true\n")
	tooltest.WriteFile(t, filepath.Join(home, ".gitconfig"), "[filter \"lfs\"]\n\tclean = \"touch '"+mark+"'; cat\"\n", 0o644)
	sh := tool.Adapt[Args](&Shell{Environ: func() []string { return []string{"HOME=" + home} }})
	g, _ := tooltest.ShellGate(t, sh, ws, "fs.read:**", "fs.write:**", "fs.read:"+home+"/**", "exec:git", "exec:sh", "exec:touch", "exec:cat", "exec:env")
	res := tooltest.ShellDo(t, g, map[string]any{"command": "git diff --stat; env"})
	if !res.Success {
		t.Fatalf("%+v\n%s", res.Error, res.Data)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("the user's own filter did not run: %v\n%s", err, res.Data)
	}
	if out := tooltest.Decode[Result](t, res).Stdout; strings.Contains(out, "filter.lfs") {
		t.Fatalf("the user's filter is overridden:\n%s", out)
	}
}

// TestShellGitIncludes: an include the command cannot change is read, and
// the programs it names turned off like the rest; one it could change —
// itself, or through a symlink it could replace, or anywhere once the
// sandbox does not hold .git read-only — refuses the call; a call whose
// programs cannot run git is not concerned.
func TestShellGitIncludes(t *testing.T) {
	tooltest.GitBinary(t)
	grants := []string{"fs.read:**", "fs.write:**", "exec:git", "exec:sh", "exec:touch", "exec:cat"}
	filter := "[filter \"x\"]\n\tclean = \"touch MARK; cat\"\n"
	for _, tc := range []struct {
		name, config string
		setup        func(t *testing.T, ws, outside, mark string)
		grants       []string
		fallback     bool // at the fallback level: no mount namespace holds .git read-only
		code         tool.Code
		cmd          string
	}{
		{name: "a file under .git", config: "[include]\n\tpath = common.cfg\n",
			setup: func(t *testing.T, ws, _, mark string) {
				tooltest.WriteFile(t, filepath.Join(ws, ".git", "common.cfg"), strings.ReplaceAll(filter, "MARK", mark), 0o644)
			}},
		{name: "a file outside the write grants", config: "[include]\n\tpath = OUT/common.cfg\n",
			setup: func(t *testing.T, _, outside, mark string) {
				tooltest.WriteFile(t, filepath.Join(outside, "common.cfg"), strings.ReplaceAll(filter, "MARK", mark), 0o644)
			},
			grants: []string{"fs.read:**", "fs.read:OUT/**", "fs.write:**", "exec:git", "exec:sh", "exec:touch", "exec:cat"}},
		{name: "a missing file under .git", config: "[include]\n\tpath = missing.cfg\n"},
		{name: "a symlink under .git to the working tree", config: "[include]\n\tpath = link.cfg\n", code: tool.CodePolicyDenied,
			setup: func(t *testing.T, ws, _, _ string) {
				tooltest.WriteFile(t, filepath.Join(ws, "common.cfg"), "", 0o644)
				if err := os.Symlink("../common.cfg", filepath.Join(ws, ".git", "link.cfg")); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "a symlink in the working tree to .git", config: "[include]\n\tpath = ../link.cfg\n", code: tool.CodePolicyDenied,
			setup: func(t *testing.T, ws, _, _ string) {
				tooltest.WriteFile(t, filepath.Join(ws, ".git", "common.cfg"), "", 0o644)
				if err := os.Symlink(".git/common.cfg", filepath.Join(ws, "link.cfg")); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "~/ of a home the command may write", config: "[include]\n\tpath = ~/x.cfg\n", code: tool.CodePolicyDenied},
		// Below full, .git is not read-only to programs: a file included
		// from it is no more changeable than .git/config itself (the limit
		// docs/sandbox.md states).
		{name: "a file under .git at the fallback level", config: "[include]\n\tpath = common.cfg\n", fallback: true,
			setup: func(t *testing.T, ws, _, mark string) {
				tooltest.WriteFile(t, filepath.Join(ws, ".git", "common.cfg"), strings.ReplaceAll(filter, "MARK", mark), 0o644)
			}},
		{name: "a working-tree file, git not granted", config: "[include]\n\tpath = ../inc.cfg\n",
			grants: []string{"fs.read:**", "fs.write:**", "exec:cat"}, cmd: "cat a.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fallback {
				defer sandbox.SimulateNoNamespaces()()
			}
			ws, outside := cleanDir(t), cleanDir(t)
			mark := filepath.Join(ws, "marker")
			sub := func(s string) string { return strings.ReplaceAll(s, "OUT", outside) }
			gitDriverRepo(t, ws, "*.txt filter=x\n", sub(tc.config))
			if tc.setup != nil {
				tc.setup(t, ws, outside, mark)
			}
			grants := grants
			if tc.grants != nil {
				grants = tc.grants
			}
			for i := range grants {
				grants[i] = sub(grants[i])
			}
			sh := tool.Adapt[Args](&Shell{Environ: func() []string { return []string{"HOME=" + ws} }})
			g, _ := tooltest.ShellGate(t, sh, ws, grants...)
			cmd := "git diff --stat"
			if tc.cmd != "" {
				cmd = tc.cmd
			}
			res := tooltest.ShellDo(t, g, map[string]any{"command": cmd, "timeout_ms": 20000})
			if res.Error != nil {
				t.Logf("%s: %s", res.Error.Code, res.Error.Message)
			}
			if tooltest.Code(res) != tc.code {
				t.Fatalf("want %q, got %+v\n%s", tc.code, res.Error, res.Data)
			}
			absent(t, mark)
		})
	}
}

// TestShellGitHardeningEnv: a program sees one GIT_CONFIG_COUNT, the
// hardening's settings first and then those of the repository's drivers;
// without a repository, or without git, the hardening alone.
func TestShellGitHardeningEnv(t *testing.T) {
	tooltest.GitBinary(t)
	ws := cleanDir(t)
	g, _ := tooltest.ShellGate(t, tool.Adapt[Args](&Shell{}), ws, "fs.read:**", "exec:git", "exec:env")
	static := tooltest.Decode[Result](t, tooltest.ShellDo(t, g, map[string]any{"command": "env"})).Stdout
	want := "GIT_CONFIG_COUNT=" + strconv.Itoa(len(gitcfg.Hardening)) + "\n"
	if !strings.Contains(static, want) || !strings.Contains(static, "GIT_CONFIG_KEY_0=core.fsmonitor\n") {
		t.Fatalf("without a repository:\n%s", static)
	}
	gitDriverRepo(t, ws, "*.txt filter=x diff=x\n", "[filter \"x\"]\n\tclean = c\n[diff \"x\"]\n\ttextconv = t\n")
	out := tooltest.Decode[Result](t, tooltest.ShellDo(t, g, map[string]any{"command": "env"})).Stdout
	n := len(gitcfg.Hardening)
	for _, w := range []string{
		"GIT_CONFIG_COUNT=" + strconv.Itoa(n+5) + "\n",
		"GIT_CONFIG_KEY_0=core.fsmonitor\n",
		"GIT_CONFIG_KEY_" + strconv.Itoa(n) + "=filter.x.process\n", "GIT_CONFIG_VALUE_" + strconv.Itoa(n) + "=\n",
		"GIT_CONFIG_KEY_" + strconv.Itoa(n+3) + "=filter.x.required\n", "GIT_CONFIG_VALUE_" + strconv.Itoa(n+3) + "=false\n",
		"GIT_CONFIG_KEY_" + strconv.Itoa(n+4) + "=diff.x.textconv\n",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("env lacks %q:\n%s", w, out)
		}
	}
	if c := strings.Count(out, "GIT_CONFIG_COUNT="); c != 1 {
		t.Errorf("%d GIT_CONFIG_COUNT:\n%s", c, out)
	}
	// Without git among the programs, the configuration is not read.
	g, _ = tooltest.ShellGate(t, tool.Adapt[Args](&Shell{}), ws, "fs.read:**", "exec:env")
	if out := tooltest.Decode[Result](t, tooltest.ShellDo(t, g, map[string]any{"command": "env"})).Stdout; !strings.Contains(out, want) {
		t.Fatalf("without git:\n%s", out)
	}
}

// TestShellGitRepositoryFound: the configuration read is that of the
// repository git finds from the workspace — one above it, or the one git
// falls back to past a broken .git — and a workspace that is itself laid
// out as a bare repository, whose config the command could rewrite,
// refuses the call.
func TestShellGitRepositoryFound(t *testing.T) {
	tooltest.GitBinary(t)
	grants := []string{"fs.read:**", "fs.write:**", "exec:git", "exec:sh", "exec:touch", "exec:cat"}
	filter := func(mark string) string { return "[filter \"x\"]\n\tclean = \"touch " + mark + "; cat\"\n" }
	t.Run("a repository above the workspace", func(t *testing.T) {
		top := cleanDir(t)
		ws := filepath.Join(top, "sub")
		mark := filepath.Join(ws, "marker")
		tooltest.WriteFile(t, filepath.Join(ws, "a.txt"), "one\n", 0o644)
		gitDriverRepo(t, top, "*.txt filter=x\n", filter(mark))
		tooltest.WriteFile(t, filepath.Join(ws, "a.txt"), "one\ntwo\n", 0o644)
		g, _ := tooltest.ShellGate(t, tool.Adapt[Args](&Shell{}), ws, append(grants, "fs.read:"+top+"/**")...)
		res := tooltest.ShellDo(t, g, map[string]any{"command": "git diff --stat", "timeout_ms": 20000})
		if !res.Success {
			t.Fatalf("%+v\n%s", res.Error, res.Data)
		}
		absent(t, mark)
	})
	t.Run("the workspace as a bare repository", func(t *testing.T) {
		ws := cleanDir(t)
		tooltest.GitPlain(t, ws, "init", "-q", "--bare")
		g, _ := tooltest.ShellGate(t, tool.Adapt[Args](&Shell{}), ws, grants...)
		res := tooltest.ShellDo(t, g, map[string]any{"command": "git log", "timeout_ms": 20000})
		if tooltest.Code(res) != tool.CodePolicyDenied || !strings.Contains(res.Error.Message, "reads "+filepath.Join(ws, "config")) {
			t.Fatalf("%+v", res.Error)
		}
	})
	t.Run("a linked worktree", func(t *testing.T) {
		top := cleanDir(t)
		main, ws := filepath.Join(top, "main"), filepath.Join(top, "wt")
		mark := filepath.Join(ws, "marker")
		if err := os.Mkdir(main, 0o755); err != nil {
			t.Fatal(err)
		}
		gitDriverRepo(t, main, "*.txt filter=x\n", filter(mark))
		tooltest.GitPlain(t, main, "worktree", "add", "-q", ws)
		tooltest.WriteFile(t, filepath.Join(ws, "a.txt"), "one\nthree\n", 0o644)
		g, _ := tooltest.ShellGate(t, tool.Adapt[Args](&Shell{}), ws, append(grants, "fs.read:"+top+"/**")...)
		res := tooltest.ShellDo(t, g, map[string]any{"command": "git diff --stat", "timeout_ms": 20000})
		if !res.Success {
			t.Fatalf("%+v\n%s", res.Error, res.Data)
		}
		absent(t, mark)
	})
	t.Run("a broken .git", func(t *testing.T) {
		top := cleanDir(t)
		ws := filepath.Join(top, "sub")
		mark := filepath.Join(ws, "marker")
		tooltest.WriteFile(t, filepath.Join(ws, "a.txt"), "one\n", 0o644)
		gitDriverRepo(t, top, "*.txt filter=x\n", filter(mark))
		tooltest.WriteFile(t, filepath.Join(ws, "a.txt"), "one\ntwo\n", 0o644)
		tooltest.WriteFile(t, filepath.Join(ws, ".git", "config"), "", 0o644) // no HEAD: not a repository
		g, _ := tooltest.ShellGate(t, tool.Adapt[Args](&Shell{}), ws, append(grants, "fs.read:"+top+"/**")...)
		res := tooltest.ShellDo(t, g, map[string]any{"command": "git diff --stat", "timeout_ms": 20000})
		if !res.Success {
			t.Fatalf("%+v\n%s", res.Error, res.Data)
		}
		absent(t, mark)
	})
}
