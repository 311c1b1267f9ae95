package git

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/tool"
)

// The hostile suite: a repository whose .git/config, .gitattributes and
// hooks try to make git run programs, patches that try to write outside the
// working tree, and refs that try to become options. Each planted program
// writes a marker file; every case first shows that plain git (no warden)
// does run it — so the test is armed — then that no git tool does.

// markers is a directory for marker files and the scripts that make them.
type markers struct {
	t   *testing.T
	dir string
}

func newGitMarkers(t *testing.T) *markers {
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &markers{t: t, dir: d}
}

// script writes an executable that creates the marker <name> and then runs
// body (default: pass stdin through).
func (m *markers) script(name, body string) string {
	m.t.Helper()
	if body == "" {
		body = "cat"
	}
	p := filepath.Join(m.dir, "bin-"+name)
	src := "#!/bin/sh\ntouch '" + filepath.Join(m.dir, "MARK-"+name) + "'\n" + body + "\n"
	if err := os.WriteFile(p, []byte(src), 0o755); err != nil {
		m.t.Fatal(err)
	}
	return p
}

// fired lists the markers present.
func (m *markers) fired() []string {
	m.t.Helper()
	ents, err := os.ReadDir(m.dir)
	if err != nil {
		m.t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "MARK-") {
			out = append(out, strings.TrimPrefix(e.Name(), "MARK-"))
		}
	}
	return out
}

func (m *markers) clear() {
	for _, f := range m.fired() {
		os.Remove(filepath.Join(m.dir, "MARK-"+f))
	}
}

// armed asserts that plain git ran the planted program(s), then clears.
func (m *markers) armed(what string) {
	m.t.Helper()
	if len(m.fired()) == 0 {
		m.t.Fatalf("fixture not armed: plain git did not run the planted %s", what)
	}
	m.clear()
}

// none asserts that no planted program ran.
func (m *markers) none(after string) {
	m.t.Helper()
	if f := m.fired(); len(f) > 0 {
		m.t.Fatalf("%s ran planted program(s): %v", after, f)
	}
}

// callAll calls every git tool once (commit and apply allowed), so a
// planted program has every chance to run.
func callAll(t *testing.T, g *gate.Gate, ws string, m *markers) {
	t.Helper()
	runtimetest.WriteFile(t, ws, "a.txt", "ONE\ntwo\nthree\nfour\n") // same size: git must look at the content
	past := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(ws, "a.txt"), past, past)
	calls := []struct {
		tool, args string
		dry        bool
	}{
		{"git_status", `{}`, false},
		{"git_status", `{"ignored":true}`, false},
		{"git_diff", `{}`, false},
		{"git_diff", `{"rev":"HEAD~1"}`, false},
		{"git_diff", `{"paths":["a.txt"]}`, false},
		{"git_show", `{"ref":"HEAD"}`, false},
		{"git_show", `{"ref":"HEAD:a.txt"}`, false},
		{"git_branches", `{"all":true}`, false},
		{"git_commit", `{"message":"preview","all":true}`, true},
		{"git_apply_patch", tooltest.JSON(t, map[string]any{"patch": "--- a/dir/b.txt\n+++ b/dir/b.txt\n@@ -1 +1 @@\n-bee\n+BEE\n"}), true},
		{"git_apply_patch", tooltest.JSON(t, map[string]any{"patch": "--- a/dir/b.txt\n+++ b/dir/b.txt\n@@ -1 +1 @@\n-bee\n+BEE\n"}), false},
		{"git_commit", `{"message":"hostile","all":true}`, false},
		{"git_show", `{"ref":"HEAD"}`, false},
	}
	for _, c := range calls {
		res := tooltest.CallReq(t, g, gate.Request{Tool: c.tool, Args: json.RawMessage(c.args), Principal: []string{"test"}, DryRun: c.dry})
		if !res.Success {
			t.Fatalf("%s %s: %+v", c.tool, c.args, res.Error)
		}
		m.none(c.tool + " " + c.args)
	}
}

func TestGitHostileFSMonitor(t *testing.T) {
	ws := tooltest.GitFixture(t)
	m := newGitMarkers(t)
	tooltest.GitPlain(t, ws, "config", "core.fsmonitor", m.script("fsmonitor", "exit 0"))
	tooltest.GitPlain(t, ws, "status")
	m.armed("core.fsmonitor")
	g, _ := newGate(t, policyWrite, ws)
	callAll(t, g, ws, m)
}

func TestGitHostileHooks(t *testing.T) {
	hooks := []string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-checkout",
		"post-index-change", "reference-transaction", "pre-auto-gc", "post-rewrite", "pre-applypatch", "post-applypatch"}
	for _, via := range []string{".git/hooks", "core.hooksPath"} {
		t.Run(via, func(t *testing.T) {
			ws := tooltest.GitFixture(t)
			m := newGitMarkers(t)
			dir := filepath.Join(ws, ".git", "hooks")
			if via == "core.hooksPath" {
				dir = filepath.Join(m.dir, "hooks")
				tooltest.GitPlain(t, ws, "config", "core.hooksPath", dir)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, h := range hooks {
				if err := os.Rename(m.script(h, "exit 0"), filepath.Join(dir, h)); err != nil {
					t.Fatal(err)
				}
			}
			runtimetest.WriteFile(t, ws, "arm.txt", "x\n")
			tooltest.GitPlain(t, ws, "add", "arm.txt")
			tooltest.GitPlain(t, ws, "commit", "-q", "-m", "arm")
			m.armed("hooks in " + via)
			g, _ := newGate(t, policyWrite, ws)
			callAll(t, g, ws, m)
			if !strings.Contains(tooltest.GitPlain(t, ws, "log", "-1", "--format=%s"), "hostile") {
				t.Fatal("the commit should have been made, without its hooks")
			}
		})
	}
}

// TestGitHostileFilters: clean/smudge/process filters named by
// .gitattributes and defined in .git/config (one through an include, one
// with "=" in its name, all required) never run; the tools still work.
func TestGitHostileFilters(t *testing.T) {
	ws := tooltest.GitFixture(t)
	m := newGitMarkers(t)
	runtimetest.WriteFile(t, ws, ".gitattributes", "*.txt filter=evil\n*.dat filter=a=b\n*.md filter=inc\n")
	runtimetest.WriteFile(t, ws, "x.dat", "dat\n")
	runtimetest.WriteFile(t, ws, "x.md", "md\n")
	tooltest.GitPlain(t, ws, "add", "-A")
	tooltest.GitPlain(t, ws, "commit", "-q", "-m", "attributes, before the filters are planted")
	extra := filepath.Join(ws, ".git", "extra.config")
	if err := os.WriteFile(extra, []byte("[filter \"inc\"]\n\tclean = "+m.script("inc-clean", "")+"\n\trequired = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := "[filter \"evil\"]\n\tclean = " + m.script("clean", "") + "\n\tsmudge = " + m.script("smudge", "") + "\n\trequired = true\n" +
		"[filter \"a=b\"]\n\tprocess = " + m.script("process", "exit 1") + "\n\trequired = true\n" +
		"[include]\n\tpath = extra.config\n"
	f, err := os.OpenFile(filepath.Join(ws, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(cfg)
	f.Close()
	for _, name := range []string{"a.txt", "x.dat", "x.md"} {
		runtimetest.WriteFile(t, ws, name, strings.ToUpper(read(t, ws, name)))
		plainMayFail(t, ws, "diff", "--", name)
	}
	if got := strings.Join(m.fired(), ","); got != "clean,inc-clean,process" {
		t.Fatalf("fixture not fully armed: plain git ran %q", got)
	}
	m.clear()
	g, _ := newGate(t, policyWrite, ws)
	callAll(t, g, ws, m)
	// The filters being off, git sees the files as they are.
	st := tooltest.Decode[Status](t, tooltest.Call(t, g, "git_status", `{}`))
	if !st.Clean {
		t.Fatalf("after commit -a the tree should be clean: %+v", st.Entries)
	}
	m.none("git_status")
}

// plainMayFail runs plain git and ignores its failure (a planted program
// may make it fail after it ran).
func plainMayFail(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(tooltest.GitBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = tooltest.GitPlainEnv()
	_ = cmd.Run()
}

// TestGitHostileSubmodule: a submodule whose own config plants a clean
// filter and an fsmonitor, with a modified file inside it. Plain git status
// starts git in the submodule (which runs them); the tools never start git
// there (submodule dirtiness is not inspected).
func TestGitHostileSubmodule(t *testing.T) {
	m := newGitMarkers(t)
	lib := filepath.Join(m.dir, "lib")
	os.Mkdir(lib, 0o755)
	tooltest.GitPlain(t, lib, "init", "-q", "-b", "main")
	runtimetest.WriteFile(t, lib, "l.txt", "lib\n")
	runtimetest.WriteFile(t, lib, ".gitattributes", "*.txt filter=subevil\n")
	tooltest.GitPlain(t, lib, "add", "-A")
	tooltest.GitPlain(t, lib, "commit", "-q", "-m", "lib")
	ws := tooltest.GitFixture(t)
	tooltest.GitPlain(t, ws, "-c", "protocol.file.allow=always", "submodule", "-q", "add", lib, "sub")
	tooltest.GitPlain(t, ws, "commit", "-q", "-m", "add submodule")
	subGit := filepath.Join(ws, ".git", "modules", "sub")
	tooltest.GitPlain(t, subGit, "config", "filter.subevil.clean", m.script("sub-clean", ""))
	tooltest.GitPlain(t, subGit, "config", "core.fsmonitor", m.script("sub-fsmonitor", "exit 0"))
	runtimetest.WriteFile(t, ws, "sub/l.txt", "LIB\n")
	past := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(ws, "sub/l.txt"), past, past)
	tooltest.GitPlain(t, ws, "status")
	m.armed("filter and fsmonitor in a submodule")
	g, _ := newGate(t, policyWrite, ws)
	callAll(t, g, ws, m)
}

// TestGitHostileDiffDrivers: diff.external, a diff driver's command and
// textconv never run for git_diff, git_show or a commit preview.
func TestGitHostileDiffDrivers(t *testing.T) {
	ws := tooltest.GitFixture(t)
	m := newGitMarkers(t)
	tooltest.GitPlain(t, ws, "config", "diff.external", m.script("external", "exit 0"))
	tooltest.GitPlain(t, ws, "config", "diff.evil.command", m.script("command", "exit 0"))
	tooltest.GitPlain(t, ws, "config", "diff.evil.textconv", m.script("textconv", `cat "$1"`))
	runtimetest.WriteFile(t, ws, ".gitattributes", "*.txt diff=evil\n")
	tooltest.GitPlain(t, ws, "add", ".gitattributes")
	tooltest.GitPlain(t, ws, "commit", "-q", "--no-verify", "-m", "attributes")
	runtimetest.WriteFile(t, ws, "a.txt", "changed\n")
	tooltest.GitPlain(t, ws, "diff")
	tooltest.GitPlain(t, ws, "show", "HEAD:a.txt")
	m.armed("diff drivers")
	runtimetest.WriteFile(t, ws, "a.txt", "one\ntwo\nthree\nfour\n")
	g, _ := newGate(t, policyWrite, ws)
	callAll(t, g, ws, m)
	res := tooltest.Call(t, g, "git_show", `{"ref":"HEAD~2"}`)
	tooltest.WantOK(t, res)
	if !strings.Contains(res.Output, "+four") {
		t.Fatalf("show without the drivers should be a plain patch: %s", res.Output)
	}
	m.none("git_show")
}

// TestGitHostilePager: pagers in the config never run (git only pages to a
// terminal, so plain git cannot arm this one without one; the tools also
// pass --no-pager and set GIT_PAGER=cat).
func TestGitHostilePager(t *testing.T) {
	ws := tooltest.GitFixture(t)
	m := newGitMarkers(t)
	tooltest.GitPlain(t, ws, "config", "core.pager", m.script("core-pager", ""))
	for _, c := range []string{"diff", "show", "status", "branch", "log", "apply", "commit"} {
		tooltest.GitPlain(t, ws, "config", "pager."+c, m.script("pager-"+c, ""))
	}
	tooltest.GitPlain(t, ws, "config", "core.editor", m.script("editor", "exit 0"))
	g, _ := newGate(t, policyWrite, ws)
	callAll(t, g, ws, m)
}

// TestGitHostileSigning: commit.gpgSign with a planted gpg.program, and
// log.showSignature on a signed-looking commit.
func TestGitHostileSigning(t *testing.T) {
	ws := tooltest.GitFixture(t)
	m := newGitMarkers(t)
	tooltest.GitPlain(t, ws, "config", "gpg.program", m.script("gpg", "exit 1"))
	tooltest.GitPlain(t, ws, "config", "gpg.ssh.program", m.script("gpg-ssh", "exit 1"))
	tooltest.GitPlain(t, ws, "config", "commit.gpgSign", "true")
	tooltest.GitPlain(t, ws, "config", "log.showSignature", "true")
	// A commit carrying a (fake) signature, so show would verify it.
	raw := tooltest.GitPlain(t, ws, "cat-file", "commit", "HEAD")
	signed := strings.Replace(raw, "\n\n", "\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n AAAA\n -----END PGP SIGNATURE-----\n\n", 1)
	path := filepath.Join(m.dir, "commit")
	os.WriteFile(path, []byte(signed), 0o644)
	oid := strings.TrimSpace(tooltest.GitPlain(t, ws, "hash-object", "-t", "commit", "-w", path))
	tooltest.GitPlain(t, ws, "update-ref", "refs/heads/main", oid)
	tooltest.GitPlain(t, ws, "show", "-s", "HEAD")
	m.armed("gpg.program via log.showSignature")
	g, _ := newGate(t, policyWrite, ws)
	callAll(t, g, ws, m)
	if strings.Contains(tooltest.GitPlain(t, ws, "cat-file", "commit", "HEAD"), "gpgsig") {
		t.Fatal("git_commit signed the commit")
	}
}

// TestGitHostileLazyFetch: a partial clone whose promisor remote runs a
// planted upload-pack; a tool reading a missing object must not fetch.
func TestGitHostileLazyFetch(t *testing.T) {
	m := newGitMarkers(t)
	origin := filepath.Join(m.dir, "origin")
	os.Mkdir(origin, 0o755)
	tooltest.GitPlain(t, origin, "init", "-q", "-b", "main")
	runtimetest.WriteFile(t, origin, "h.txt", "hello\n")
	tooltest.GitPlain(t, origin, "add", ".")
	tooltest.GitPlain(t, origin, "commit", "-q", "-m", "one")
	tooltest.GitPlain(t, origin, "config", "uploadpack.allowFilter", "true")
	clone := func() string {
		ws, _ := filepath.EvalSymlinks(t.TempDir())
		tooltest.GitPlain(t, ws, "clone", "-q", "--no-local", "--filter=blob:none", "--no-checkout", "file://"+origin, ".")
		tooltest.GitPlain(t, ws, "config", "remote.origin.uploadpack", m.script("upload-pack", "exec git-upload-pack \"$@\""))
		return ws
	}
	armed := clone()
	tooltest.GitPlain(t, armed, "show", "HEAD:h.txt")
	m.armed("remote.origin.uploadpack by a lazy fetch")
	ws := clone()
	g, _ := newGate(t, policyRead, ws)
	res := tooltest.Call(t, g, "git_show", `{"ref":"HEAD:h.txt"}`)
	if res.Success {
		t.Fatalf("the object should be missing, not fetched: %s", res.Output)
	}
	m.none("git_show of a missing object")
	for _, tool := range []string{"git_status", "git_diff", "git_branches"} {
		tooltest.Call(t, g, tool, `{}`)
		m.none(tool)
	}
}

// TestGitHostileWorktree: core.worktree in the repository's config cannot
// move the work tree out of the workspace.
func TestGitHostileWorktree(t *testing.T) {
	ws := tooltest.GitFixture(t)
	outside := t.TempDir()
	runtimetest.WriteFile(t, outside, "a.txt", "one\ntwo\nthree\nfour\n")
	tooltest.GitPlain(t, ws, "config", "core.worktree", outside)
	if !strings.Contains(tooltest.GitPlain(t, ws, "rev-parse", "--show-toplevel"), outside) {
		t.Fatal("fixture not armed: core.worktree is not honoured by plain git")
	}
	before := tooltest.TreeChecksum(t, outside)
	g, _ := newGate(t, policyWrite, ws)
	tooltest.WantOK(t, tooltest.Call(t, g, "git_apply_patch", tooltest.JSON(t, map[string]any{"patch": unoPatch})))
	if tooltest.TreeChecksum(t, outside) != before || !strings.HasPrefix(read(t, ws, "a.txt"), "uno\n") {
		t.Fatal("the patch went to core.worktree, not the workspace")
	}
	st := tooltest.Decode[Status](t, tooltest.Call(t, g, "git_status", `{}`))
	if len(st.Entries) != 1 || st.Entries[0].Path != "a.txt" {
		t.Fatalf("status %+v", st.Entries)
	}
}

// TestGitHostileEnvironment: warden's own environment (GIT_DIR,
// GIT_CONFIG_PARAMETERS, GIT_EXTERNAL_DIFF, …) never reaches git.
func TestGitHostileEnvironment(t *testing.T) {
	ws := tooltest.GitFixture(t)
	other := tooltest.GitFixture(t)
	m := newGitMarkers(t)
	t.Setenv("GIT_DIR", filepath.Join(other, ".git"))
	t.Setenv("GIT_WORK_TREE", other)
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='"+m.script("env-fsmonitor", "exit 0")+"'")
	t.Setenv("GIT_EXTERNAL_DIFF", m.script("env-external", "exit 0"))
	t.Setenv("GIT_PAGER", m.script("env-pager", ""))
	t.Setenv("GIT_SSH_COMMAND", m.script("env-ssh", ""))
	t.Setenv("PATH", m.dir+":"+os.Getenv("PATH"))
	os.WriteFile(filepath.Join(m.dir, "git"), []byte("#!/bin/sh\ntouch "+filepath.Join(m.dir, "MARK-path-git")+"\n"), 0o755)
	otherHead := gitHead(t, other)
	g, _ := newGate(t, policyWrite, ws)
	callAll(t, g, ws, m)
	if gitHead(t, other) != otherHead || !strings.Contains(tooltest.GitPlain(t, ws, "log", "-1", "--format=%s"), "hostile") {
		t.Fatal("the tools worked on GIT_DIR instead of the workspace")
	}
}

// TestGitHostilePatches: every patch that reaches outside the working tree,
// into .git/ or .warden/, or plants a symlink is PATCH_REJECTED — applied or
// only checked — and nothing is written, in the workspace or outside it.
func TestGitHostilePatches(t *testing.T) {
	ws := tooltest.GitFixture(t)
	outside, _ := filepath.EvalSymlinks(t.TempDir())
	runtimetest.WriteFile(t, outside, "target.txt", "one\ntwo\nthree\nfour\n")
	// A directory symlink and a file symlink planted in the working tree.
	os.Symlink(outside, filepath.Join(ws, "linkdir"))
	os.Symlink(filepath.Join(outside, "target.txt"), filepath.Join(ws, "linkfile.txt"))
	mod := func(path string) string {
		return "--- a/" + path + "\n+++ b/" + path + "\n@@ -1,4 +1,4 @@\n-one\n+pwned\n two\n three\n four\n"
	}
	create := func(path string) string {
		return "diff --git a/" + path + " b/" + path + "\nnew file mode 100644\n--- /dev/null\n+++ b/" + path + "\n@@ -0,0 +1 @@\n+pwned\n"
	}
	patches := []struct{ name, patch, reason string }{
		{"dotdot", create("../escape.txt"), ".."},
		{"dotdot deep", create("dir/../../escape.txt"), ".."},
		{"dotdot traditional", "--- a.txt\n+++ ../../../" + filepath.Base(outside) + "/target.txt\n@@ -1 +1 @@\n-one\n+pwned\n", ".."},
		{"git config", mod(".git/config"), ".git"},
		{"git hook", create(".git/hooks/post-commit"), ".git"},
		{"git quoted", "--- \"a/\\056git/config\"\n+++ \"b/\\056git/config\"\n@@ -1 +1 @@\n-a\n+b\n", ".git"},
		{"git nested", create("sub/.git/hooks/pre-commit"), ".git"},
		{"symlink new", "diff --git a/evil b/evil\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n+++ b/evil\n@@ -0,0 +1 @@\n+" + outside + "\n\\ No newline at end of file\n", "symlink"},
		{"symlink mode change", "diff --git a/a.txt b/a.txt\nold mode 100644\nnew mode 120000\n", "symlink"},
		{"absolute", "--- " + outside + "/target.txt\n+++ " + outside + "/target.txt\n@@ -1 +1 @@\n-one\n+pwned\n", "absolute"},
		{"absolute in git header", "diff --git a/x b//etc/cron.d/x\nnew file mode 100644\n--- /dev/null\n+++ b//etc/cron.d/x\n@@ -0,0 +1 @@\n+pwned\n", "absolute"},
		{"rename out", "diff --git a/a.txt b/../a.txt\nsimilarity index 100%\nrename from a.txt\nrename to ../a.txt\n", ".."},
		{"rename into git", "diff --git a/a.txt b/.git/a.txt\nsimilarity index 100%\nrename from a.txt\nrename to .git/a.txt\n", ".git"},
		{"copy into git", "diff --git a/a.txt b/.git/hooks/pre-commit\nsimilarity index 100%\ncopy from a.txt\ncopy to .git/hooks/pre-commit\n", ".git"},
		{"through a symlinked dir", mod("linkdir/target.txt"), "symlink"},
		{"through a symlinked file", mod("linkfile.txt"), "symlink"},
		{"warden policy", create(".warden/policy.yaml"), ".warden"},
		{"binary", "diff --git a/bin b/bin\nnew file mode 100644\nindex 0000000..1111111\nGIT binary patch\nliteral 5\nMcmZQzU|?VZ000\n\nliteral 0\nKcmV+b0RR6000031\n", "binary"},
	}
	g, audit := newGate(t, policyWrite, ws)
	for _, tc := range patches {
		for _, check := range []bool{false, true} {
			wsBefore, outBefore := tooltest.TreeChecksum(t, ws), tooltest.TreeChecksum(t, outside)
			res := tooltest.Call(t, g, "git_apply_patch", tooltest.JSON(t, map[string]any{"patch": tc.patch, "check": check}))
			if res.Success || res.Error.Code != tool.CodePatchRejected || !strings.Contains(res.Error.Message, tc.reason) {
				t.Errorf("%s (check=%v): want PATCH_REJECTED (%s), got %+v", tc.name, check, tc.reason, res.Error)
			}
			if tooltest.TreeChecksum(t, ws) != wsBefore || tooltest.TreeChecksum(t, outside) != outBefore {
				t.Fatalf("%s (check=%v): something was written", tc.name, check)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "escape.txt")); err == nil {
		t.Fatal("escape.txt was created")
	}
	// Refused before anything ran: the audit log has no intent for them.
	if n := tooltest.Count(audit, `"phase":"intent"`); n != 0 {
		t.Fatalf("%d rejected patches reached execution", n)
	}
}

// TestGitHostileOptionRefs: a ref or rev that starts with '-' is refused
// (INVALID_INPUT) and git never writes the file the option names.
func TestGitHostileOptionRefs(t *testing.T) {
	ws := tooltest.GitFixture(t)
	out := filepath.Join(t.TempDir(), "x")
	g, _ := newGate(t, policyRead, ws)
	calls := []struct{ tool, args string }{
		{"git_show", tooltest.JSON(t, map[string]string{"ref": "--output=" + out})},
		{"git_show", tooltest.JSON(t, map[string]string{"ref": "-o" + out})},
		{"git_diff", tooltest.JSON(t, map[string]string{"rev": "--output=" + out})},
		{"git_diff", tooltest.JSON(t, map[string]any{"rev": "--no-index", "paths": []string{"/etc/passwd", out}})},
		{"git_diff", tooltest.JSON(t, map[string]any{"paths": []string{"/etc/passwd", "/etc/hostname"}})},
	}
	for _, c := range calls {
		res := tooltest.Call(t, g, c.tool, c.args)
		if res.Success || (res.Error.Code != tool.CodeInvalidInput && res.Error.Code != tool.CodePathEscape) {
			t.Errorf("%s %s: %+v", c.tool, c.args, res.Error)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%s %s created %s", c.tool, c.args, out)
		}
	}
	// A path that merely looks like an option is a path (after --).
	for _, p := range []string{"--output=x", "--output=" + out} {
		res := tooltest.Call(t, g, "git_diff", tooltest.JSON(t, map[string]any{"paths": []string{p}}))
		tooltest.WantOK(t, res)
		if _, err := os.Stat(filepath.Join(ws, "x")); err == nil {
			t.Fatalf("%s was read as an option", p)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%s was read as an option", p)
		}
	}
}
