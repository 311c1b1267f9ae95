package git

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/tool"
)

// Policies for the git tests.
const (
	policyRead = "version: 1\ngrants: [\"git.read\"]\n"
	// policyWrite allows commits: git.write and a rule for git_commit.
	policyWrite = "version: 1\ngrants: [\"git.read\", \"git.write\", \"fs.write:**\"]\nrules:\n  - {tool: git_commit, action: allow}\n"
)

func read(t testing.TB, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newGate(t testing.TB, policy, ws string) (*gate.Gate, *runtimetest.Audit) {
	t.Helper()
	return tooltest.Gate(t, policy, ws, Tools(Config{})...)
}

func gitHead(t testing.TB, ws string) string {
	t.Helper()
	return strings.TrimSpace(tooltest.GitPlain(t, ws, "rev-parse", "HEAD"))
}

func TestGitToolsRegister(t *testing.T) {
	tools := Tools(Config{})
	names := map[string]bool{}
	for _, tool := range tools {
		names[tool.Spec().Name] = true
	}
	for _, n := range []string{"git_status", "git_diff", "git_show", "git_branches", "git_apply_patch", "git_commit"} {
		if !names[n] {
			t.Errorf("missing %s", n)
		}
	}
	reg := gate.NewRegistry()
	if err := reg.Register(tools...); err != nil {
		t.Fatal(err)
	}
}

func TestGitStatus(t *testing.T) {
	ws := tooltest.GitFixture(t)
	tooltest.GitPlain(t, ws, "branch", "base", "HEAD~1")
	tooltest.GitPlain(t, ws, "branch", "--set-upstream-to=base")
	runtimetest.WriteFile(t, ws, "a.txt", "changed\n")               // unstaged
	runtimetest.WriteFile(t, ws, "new.txt", "new\n")                 // untracked
	runtimetest.WriteFile(t, ws, "debug.log", "x\n")                 // ignored
	tooltest.GitPlain(t, ws, "mv", "dir/b.txt", "dir/renamed b.txt") // staged rename, name with a space
	g, _ := newGate(t, policyRead, ws)

	res := tooltest.Call(t, g, "git_status", `{}`)
	tooltest.WantOK(t, res)
	st := tooltest.Decode[Status](t, res)
	if st.Branch.Head != "main" || st.Branch.Upstream != "base" || st.Branch.Ahead != 1 || st.Branch.Behind != 0 || len(st.Branch.OID) != 40 {
		t.Fatalf("branch %+v", st.Branch)
	}
	byPath := map[string]StatusEntry{}
	for _, e := range st.Entries {
		byPath[e.Path] = e
	}
	if e := byPath["a.txt"]; e.Kind != "changed" || e.XY != ".M" || e.Unstaged != "modified" || e.Staged != "unmodified" {
		t.Errorf("a.txt %+v", e)
	}
	if e := byPath["dir/renamed b.txt"]; e.Kind != "renamed" || e.OrigPath != "dir/b.txt" || e.XY != "R." || e.Score != "R100" {
		t.Errorf("rename %+v", e)
	}
	if e := byPath["new.txt"]; e.Kind != "untracked" {
		t.Errorf("new.txt %+v", e)
	}
	if _, ok := byPath["debug.log"]; ok || st.Clean || st.Staged != 1 || st.Unstaged != 1 || st.Untracked != 1 {
		t.Errorf("status %+v", st)
	}
	if !strings.Contains(res.Output, "## main...base [ahead 1, behind 0]") || !strings.Contains(res.Output, " M a.txt") {
		t.Errorf("output %s", res.Output)
	}

	tooltest.WantCode(t, tooltest.Call(t, g, "git_status", `{"ignored":"yes"}`), tool.CodeInvalidInput)
	tooltest.WantCode(t, tooltest.Call(t, g, "git_status", `{"path":"."}`), tool.CodeInvalidInput)

	res = tooltest.Call(t, g, "git_status", `{"ignored":true}`)
	tooltest.WantOK(t, res)
	if st := tooltest.Decode[Status](t, res); st.Ignored != 1 {
		t.Errorf("ignored %+v", st)
	}

	// A fresh repository: no commit yet.
	fresh, _ := filepath.EvalSymlinks(t.TempDir())
	tooltest.GitPlain(t, fresh, "init", "-q", "-b", "trunk")
	g2, _ := newGate(t, policyRead, fresh)
	res = tooltest.Call(t, g2, "git_status", `{}`)
	tooltest.WantOK(t, res)
	if st := tooltest.Decode[Status](t, res); !st.Branch.Initial || st.Branch.Head != "trunk" || !st.Clean {
		t.Fatalf("fresh %+v", st)
	}

	// Detached HEAD.
	tooltest.GitPlain(t, ws, "stash", "-q", "-u")
	tooltest.GitPlain(t, ws, "checkout", "-q", "--detach", "HEAD~1")
	res = tooltest.Call(t, g, "git_status", `{}`)
	if st := tooltest.Decode[Status](t, res); !st.Branch.Detached || !st.Clean {
		t.Fatalf("detached %+v", st)
	}
}

// TestGitErrors covers the codes every tool shares: NOT_FOUND outside a
// repository, COMMAND_NOT_FOUND without git, COMMAND_TIMEOUT, COMMAND_FAILED,
// and CAPABILITY_DENIED without git.read.
func TestGitErrors(t *testing.T) {
	calls := []struct{ tool, args string }{
		{"git_status", `{}`},
		{"git_diff", `{}`},
		{"git_show", `{"ref":"HEAD"}`},
		{"git_branches", `{}`},
		{"git_apply_patch", `{"patch":"--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+uno\n"}`},
		{"git_commit", `{"message":"m"}`},
	}
	notRepo := t.TempDir()
	repo := tooltest.GitFixture(t)
	sub := filepath.Join(repo, "dir")
	slow := filepath.Join(t.TempDir(), "git")
	// A shell loop, not sleep: the sandbox lets git's box execute git
	// (here this script and its shell), not other programs.
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nwhile :; do :; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	failing := filepath.Join(t.TempDir(), "git")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'fatal: something broke' >&2\nexit 128\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		ws     string
		opts   Config
		policy string
		code   tool.Code
	}{
		{"not a repository", notRepo, Config{}, policyWrite, tool.CodeNotFound},
		{"a subdirectory of a repository", sub, Config{}, policyWrite, tool.CodeNotFound},
		{"no git", repo, Config{Binary: "/nonexistent/git"}, policyWrite, tool.CodeCommandNotFound},
		{"relative git", repo, Config{Binary: "git"}, policyWrite, tool.CodeCommandNotFound},
		{"timeout", repo, Config{Binary: slow, Timeout: 300 * time.Millisecond}, policyWrite, tool.CodeCommandTimeout},
		{"git fails", repo, Config{Binary: failing}, policyWrite, tool.CodeCommandFailed},
		{"no grant", repo, Config{}, "version: 1\ngrants: []\n", tool.CodeCapabilityDenied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := tooltest.Gate(t, tc.policy, tc.ws, Tools(tc.opts)...)
			for _, c := range calls {
				if tc.code == tool.CodeCapabilityDenied && c.tool == "git_apply_patch" {
					continue // needs fs.write too; covered in TestGitApplyPatch
				}
				res := tooltest.Call(t, g, c.tool, c.args)
				tooltest.WantCode(t, res, tc.code)
				if tc.code == tool.CodeNotFound && !strings.Contains(res.Error.Hint, "--workspace") {
					t.Errorf("%s: hint %q", c.tool, res.Error.Hint)
				}
			}
		})
	}
	// A corrupt index: git's own failure, with its message.
	bad := tooltest.GitFixture(t)
	if err := os.WriteFile(filepath.Join(bad, ".git", "index"), []byte("garbage, not an index"), 0o644); err != nil {
		t.Fatal(err)
	}
	g, _ := newGate(t, policyRead, bad)
	res := tooltest.Call(t, g, "git_status", `{}`)
	tooltest.WantCode(t, res, tool.CodeCommandFailed)
	if !strings.Contains(res.Error.Message, "index") {
		t.Errorf("message %q", res.Error.Message)
	}
}

func TestGitDiff(t *testing.T) {
	ws := tooltest.GitFixture(t)
	runtimetest.WriteFile(t, ws, "a.txt", "one\nTWO\nthree\nfour\n")
	runtimetest.WriteFile(t, ws, "dir/b.txt", "bee\nsting\n")
	tooltest.GitPlain(t, ws, "add", "dir/b.txt") // staged: shown against HEAD too
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(ws, ".gitignore"), past, past) // stat data only: not a change
	g, _ := newGate(t, policyRead, ws)

	res := tooltest.Call(t, g, "git_diff", `{}`)
	tooltest.WantOK(t, res)
	d := tooltest.Decode[Diff](t, res)
	if d.Rev != "HEAD" || len(d.Files) != 2 || d.Added != 2 || d.Deleted != 1 || d.Truncated {
		t.Fatalf("diff %+v", d)
	}
	if !strings.Contains(res.Output, "diff --git a/a.txt b/a.txt") || !strings.Contains(res.Output, "+TWO") || !strings.Contains(res.Output, "+sting") {
		t.Fatalf("output %s", res.Output)
	}

	tests := []struct {
		name  string
		args  any
		code  tool.Code
		files []string
		want  string
	}{
		{"paths", map[string]any{"paths": []string{"dir"}}, "", []string{"dir/b.txt"}, "+sting"},
		{"absolute path inside", map[string]any{"paths": []string{filepath.Join(ws, "a.txt")}}, "", []string{"a.txt"}, "+TWO"},
		{"rev", map[string]any{"rev": "HEAD~1", "paths": []string{"a.txt"}}, "", []string{"a.txt"}, "+four"},
		{"range", map[string]any{"rev": "HEAD~1..HEAD"}, "", []string{"a.txt"}, "+four"},
		{"no differences", map[string]any{"rev": "HEAD..HEAD"}, "", []string{}, "no differences"},
		{"path outside", map[string]any{"paths": []string{"../x"}}, tool.CodePathEscape, nil, ""},
		{"absolute outside", map[string]any{"paths": []string{"/etc/passwd"}}, tool.CodePathEscape, nil, ""},
		{"through a symlink", map[string]any{"paths": []string{"out/secret"}}, tool.CodePathEscape, nil, ""},
		{"rev option", map[string]any{"rev": "--output=/tmp/x"}, tool.CodeInvalidInput, nil, ""},
		{"rev control", map[string]any{"rev": "HEAD\nx"}, tool.CodeInvalidInput, nil, ""},
		{"unknown rev", map[string]any{"rev": "no-such-branch"}, tool.CodeNotFound, nil, ""},
		{"unknown field", map[string]any{"revs": "HEAD"}, tool.CodeInvalidInput, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := tooltest.Call(t, g, "git_diff", tooltest.JSON(t, tc.args))
			if tc.code != "" {
				tooltest.WantCode(t, res, tc.code)
				return
			}
			tooltest.WantOK(t, res)
			d := tooltest.Decode[Diff](t, res)
			var got []string
			for _, f := range d.Files {
				got = append(got, f.Path)
			}
			if strings.Join(got, ",") != strings.Join(tc.files, ",") || !strings.Contains(res.Output, tc.want) {
				t.Fatalf("files %v output %s", got, res.Output)
			}
		})
	}

	// Before the first commit, the default diff shows what is staged.
	fresh, _ := filepath.EvalSymlinks(t.TempDir())
	tooltest.GitPlain(t, fresh, "init", "-q")
	runtimetest.WriteFile(t, fresh, "n.txt", "new\n")
	tooltest.GitPlain(t, fresh, "add", "n.txt")
	g2, _ := newGate(t, policyRead, fresh)
	res = tooltest.Call(t, g2, "git_diff", `{}`)
	tooltest.WantOK(t, res)
	if d := tooltest.Decode[Diff](t, res); len(d.Files) != 1 || d.Files[0].Status != "A" || !strings.Contains(res.Output, "+new") {
		t.Fatalf("unborn %+v %s", d, res.Output)
	}
}

func TestGitDiffTruncated(t *testing.T) {
	ws := tooltest.GitFixture(t)
	runtimetest.WriteFile(t, ws, "a.txt", strings.Repeat("a long changed line\n", 2000))
	g, _ := tooltest.Gate(t, policyRead, ws, Tools(Config{MaxOutput: 1000})...)
	res := tooltest.Call(t, g, "git_diff", `{}`)
	tooltest.WantOK(t, res)
	d := tooltest.Decode[Diff](t, res)
	if !d.Truncated || len(res.Output) > 1200 || !strings.Contains(res.Output, "truncated") || len(d.Files) != 1 || d.Files[0].Added != 2000 {
		t.Fatalf("%+v %d", d, len(res.Output))
	}
}

func TestGitShow(t *testing.T) {
	ws := tooltest.GitFixture(t)
	if err := os.WriteFile(filepath.Join(ws, "bin.dat"), []byte{0, 1, 2, 0xff}, 0o644); err != nil {
		t.Fatal(err)
	}
	tooltest.GitPlain(t, ws, "add", "bin.dat")
	tooltest.GitPlain(t, ws, "commit", "-q", "-m", "binary")
	tooltest.GitPlain(t, ws, "tag", "-a", "v1", "-m", "release one", "HEAD~1")
	g, _ := newGate(t, policyRead, ws)

	res := tooltest.Call(t, g, "git_show", `{"ref":"HEAD~1"}`)
	tooltest.WantOK(t, res)
	sh := tooltest.Decode[Show](t, res)
	if sh.Type != "commit" || sh.Subject != "second: add four" || sh.Author != "Fixture <fixture@example.com>" || len(sh.Parents) != 1 || len(sh.OID) != 40 {
		t.Fatalf("%+v", sh)
	}
	if !strings.Contains(res.Output, "+four") || !strings.Contains(res.Output, "second: add four") {
		t.Fatalf("output %s", res.Output)
	}

	tests := []struct {
		ref, typ, want string
		code           tool.Code
	}{
		{"HEAD:a.txt", "blob", "one\ntwo\nthree\nfour\n", ""},
		{"HEAD~1:dir", "tree", "b.txt", ""},
		{"v1", "tag", "release one", ""},
		{"HEAD:bin.dat", "blob", "binary blob", ""},
		{"no-such-ref", "", "", tool.CodeNotFound},
		{"no such ref", "", "", tool.CodeNotFound},
		{"HEAD~99", "", "", tool.CodeNotFound},
		{"HEAD:missing.txt", "", "", tool.CodeNotFound},
		{"--output=/tmp/x", "", "", tool.CodeInvalidInput},
		{"-p", "", "", tool.CodeInvalidInput},
	}
	for _, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			res := tooltest.Call(t, g, "git_show", tooltest.JSON(t, map[string]string{"ref": tc.ref}))
			if tc.code != "" {
				tooltest.WantCode(t, res, tc.code)
				return
			}
			tooltest.WantOK(t, res)
			if sh := tooltest.Decode[Show](t, res); sh.Type != tc.typ || !strings.Contains(res.Output, tc.want) {
				t.Fatalf("%+v %q", sh, res.Output)
			}
		})
	}
}

func TestGitBranches(t *testing.T) {
	ws := tooltest.GitFixture(t)
	tooltest.GitPlain(t, ws, "branch", "feature", "HEAD~1")
	tooltest.GitPlain(t, ws, "update-ref", "refs/remotes/origin/main", "HEAD~1")
	tooltest.GitPlain(t, ws, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
	tooltest.GitPlain(t, ws, "config", "remote.origin.url", "https://example.invalid/repo.git")
	tooltest.GitPlain(t, ws, "config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*")
	tooltest.GitPlain(t, ws, "config", "branch.main.remote", "origin")
	tooltest.GitPlain(t, ws, "config", "branch.main.merge", "refs/heads/main")
	g, _ := newGate(t, policyRead, ws)

	res := tooltest.Call(t, g, "git_branches", `{}`)
	tooltest.WantOK(t, res)
	bs := tooltest.Decode[Branches](t, res)
	if bs.Current != "main" || bs.Detached || len(bs.Branches) != 2 {
		t.Fatalf("%+v", bs)
	}
	main := bs.Branches[1]
	if bs.Branches[0].Name != "feature" || main.Name != "main" || !main.Current || main.Upstream != "origin/main" || main.Ahead != 1 || main.Subject != "second: add four" {
		t.Fatalf("%+v", bs.Branches)
	}
	if !strings.Contains(res.Output, "* main") || !strings.Contains(res.Output, "[origin/main: ahead 1, behind 0]") {
		t.Fatalf("output %s", res.Output)
	}

	res = tooltest.Call(t, g, "git_branches", `{"all":true}`)
	tooltest.WantOK(t, res)
	bs = tooltest.Decode[Branches](t, res)
	if len(bs.Branches) != 3 || !bs.Branches[2].Remote || bs.Branches[2].Name != "origin/main" {
		t.Fatalf("all %+v", bs.Branches)
	}
	tooltest.WantCode(t, tooltest.Call(t, g, "git_branches", `{"all":"yes"}`), tool.CodeInvalidInput)

	tooltest.GitPlain(t, ws, "checkout", "-q", "--detach")
	bs = tooltest.Decode[Branches](t, tooltest.Call(t, g, "git_branches", `{}`))
	if !bs.Detached || bs.Current != "" {
		t.Fatalf("detached %+v", bs)
	}
}

// unoPatch changes the fixture's a.txt.
const unoPatch = "--- a/a.txt\n+++ b/a.txt\n@@ -1,4 +1,4 @@\n-one\n+uno\n two\n three\n four\n"

const goodPatch = `diff --git a/a.txt b/a.txt
index 0000000..1111111 100644
--- a/a.txt
+++ b/a.txt
@@ -1,4 +1,4 @@
 one
--- two
+two!
 three
 four
diff --git a/dir/b.txt b/dir/c.txt
similarity index 100%
rename from dir/b.txt
rename to dir/c.txt
diff --git a/"sp ace".txt b/"sp ace".txt
new file mode 100644
--- /dev/null
+++ "b/\"sp ace\".txt"
@@ -0,0 +1 @@
+hello
`

func TestGitApplyPatch(t *testing.T) {
	ws := tooltest.GitFixture(t)
	// A line that starts with "-- " inside a hunk is content, not a header.
	runtimetest.WriteFile(t, ws, "a.txt", "one\n-- two\nthree\nfour\n")
	g, _ := newGate(t, policyWrite, ws)

	// check only: nothing changes.
	before := tooltest.TreeChecksum(t, ws)
	res := tooltest.Call(t, g, "git_apply_patch", tooltest.JSON(t, map[string]any{"patch": goodPatch, "check": true}))
	tooltest.WantOK(t, res)
	pr := tooltest.Decode[PatchResult](t, res)
	if !pr.CheckOnly || pr.Applied || !pr.Applies || len(pr.Files) != 3 {
		t.Fatalf("%+v", pr)
	}
	if tooltest.TreeChecksum(t, ws) != before {
		t.Fatal("check:true changed the tree")
	}

	res = tooltest.Call(t, g, "git_apply_patch", tooltest.JSON(t, map[string]any{"patch": goodPatch}))
	tooltest.WantOK(t, res)
	pr = tooltest.Decode[PatchResult](t, res)
	if !pr.Applied || pr.ReturnCode != 0 || len(pr.Files) != 3 {
		t.Fatalf("%+v", pr)
	}
	want := map[string]string{"a.txt": "modify", "dir/c.txt": "rename", `"sp ace".txt`: "create"}
	for _, f := range pr.Files {
		if want[f.Path] != f.Action {
			t.Errorf("file %+v", f)
		}
	}
	if read(t, ws, "a.txt") != "one\ntwo!\nthree\nfour\n" || read(t, ws, "dir/c.txt") != "bee\n" || read(t, ws, `"sp ace".txt`) != "hello\n" {
		t.Fatal("patch not applied as expected")
	}
	if _, err := os.Stat(filepath.Join(ws, "dir/b.txt")); !os.IsNotExist(err) {
		t.Fatal("rename source still there")
	}
	if len(res.Warnings) < 2 {
		t.Errorf("warnings %v", res.Warnings)
	}

	// Applying it again does not apply: git's message, PATCH_REJECTED.
	res = tooltest.Call(t, g, "git_apply_patch", tooltest.JSON(t, map[string]any{"patch": goodPatch}))
	tooltest.WantCode(t, res, tool.CodePatchRejected)
	if !strings.Contains(res.Error.Message, "does not apply") && !strings.Contains(res.Error.Message, "already exists") {
		t.Fatalf("message %q", res.Error.Message)
	}

	// A traditional diff -u patch, one leading directory.
	trad := "--- orig/a.txt\t2024-01-01 00:00:00\n+++ new/a.txt\t2024-01-01 00:00:01\n@@ -1,4 +1,4 @@\n-one\n+ONE\n two!\n three\n four\n"
	tooltest.WantOK(t, tooltest.Call(t, g, "git_apply_patch", tooltest.JSON(t, map[string]any{"patch": trad})))
	if !strings.HasPrefix(read(t, ws, "a.txt"), "ONE\n") {
		t.Fatal("traditional patch not applied")
	}

	// Delete.
	del := "diff --git a/.gitignore b/.gitignore\ndeleted file mode 100644\n--- a/.gitignore\n+++ /dev/null\n@@ -1 +0,0 @@\n-*.log\n"
	res = tooltest.Call(t, g, "git_apply_patch", tooltest.JSON(t, map[string]any{"patch": del}))
	tooltest.WantOK(t, res)
	if _, err := os.Stat(filepath.Join(ws, ".gitignore")); !os.IsNotExist(err) || !strings.Contains(strings.Join(res.Warnings, ";"), "deletes .gitignore") {
		t.Fatalf("delete: %v %v", err, res.Warnings)
	}

	// Malformed arguments.
	tooltest.WantCode(t, tooltest.Call(t, g, "git_apply_patch", `{}`), tool.CodeInvalidInput)
	tooltest.WantCode(t, tooltest.Call(t, g, "git_apply_patch", `{"patch":""}`), tool.CodeInvalidInput)
	tooltest.WantCode(t, tooltest.Call(t, g, "git_apply_patch", `{"patch":"x","check":1}`), tool.CodeInvalidInput)
	// Not a patch at all.
	tooltest.WantCode(t, tooltest.Call(t, g, "git_apply_patch", `{"patch":"hello world\n"}`), tool.CodePatchRejected)
}

func TestGitApplyPatchCapabilities(t *testing.T) {
	ws := tooltest.GitFixture(t)
	patch := unoPatch
	tests := []struct {
		name, policy string
		check        bool
		code         tool.Code
		hint         string
	}{
		{"check needs git.read only", policyRead, true, "", ""},
		{"apply needs git.write", "version: 1\ngrants: [\"git.read\", \"fs.write:**\"]\n", false, tool.CodeCapabilityDenied, "needs the grant git.write"},
		{"apply needs fs.write on the file", "version: 1\ngrants: [\"git.read\", \"git.write\", \"fs.write:docs/**\"]\n", false, tool.CodeCapabilityDenied, "needs the grant fs.write:a.txt"},
		{"apply with both", "version: 1\ngrants: [\"git.write\", \"fs.write:a.txt\"]\n", false, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := newGate(t, tc.policy, ws)
			res := tooltest.Call(t, g, "git_apply_patch", tooltest.JSON(t, map[string]any{"patch": patch, "check": tc.check}))
			if tc.code != "" {
				tooltest.WantCode(t, res, tc.code)
				if !strings.Contains(res.Error.Hint, tc.hint) {
					t.Fatalf("hint %q", res.Error.Hint)
				}
				return
			}
			tooltest.WantOK(t, res)
		})
	}
	if !strings.HasPrefix(read(t, ws, "a.txt"), "uno\n") {
		t.Fatal("the allowed apply did not happen")
	}
}

func TestGitCommit(t *testing.T) {
	ws := tooltest.GitFixture(t)
	head := gitHead(t, ws)

	// Commits need git.write and a rule written for git_commit. Without
	// either: success, one warning naming exactly what is missing, nothing
	// committed.
	runtimetest.WriteFile(t, ws, "a.txt", "rewritten\n")
	tooltest.GitPlain(t, ws, "add", "a.txt")
	grants := "version: 1\ngrants: [\"git.read\", \"git.write\"]\n"
	for _, tc := range []struct {
		name, policy string
		want, not    []string
	}{
		{"neither", policyRead, []string{"git.write grant", "no rule matches", commitRuleExample}, nil},
		{"grant, no rule", grants, []string{"no rule matches it", commitRuleExample}, []string{"grant"}},
		{"grant, catch-all rule", grants + "rules:\n  - {tool: \"*\", action: allow}\n",
			[]string{"broad pattern", "tool * → allow", "before it", commitRuleExample}, []string{"grant"}},
		{"grant, another catch-all", grants + "rules:\n  - {tool: \"?*\", action: allow}\n", []string{"broad pattern"}, []string{"grant"}},
		{"grant, rule not naming git", grants + "rules:\n  - {tool: \"*commit\", action: allow}\n", []string{"does not name the git tools"}, []string{"grant"}},
		{"rule, no grant", policyRead + "rules:\n  - {tool: git_commit, action: allow}\n", []string{"git.write grant"}, []string{"rule"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := newGate(t, tc.policy, ws)
			res := tooltest.Call(t, g, "git_commit", `{"message":"not allowed"}`)
			tooltest.WantOK(t, res)
			cr := tooltest.Decode[CommitResult](t, res)
			if cr.Committed || cr.Allowed || len(res.Warnings) != 1 || gitHead(t, ws) != head || !strings.HasPrefix(res.Warnings[0], "no commit made") {
				t.Fatalf("%+v %v", cr, res.Warnings)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Warnings[0], w) {
					t.Errorf("warning lacks %q: %s", w, res.Warnings[0])
				}
			}
			for _, w := range tc.not {
				if strings.Contains(res.Warnings[0], w) {
					t.Errorf("warning names %q, which is not missing: %s", w, res.Warnings[0])
				}
			}
			if wantN := 1 + strings.Count(res.Warnings[0], "; and "); len(cr.Missing) != wantN {
				t.Errorf("missing %v", cr.Missing)
			}
		})
	}
	// A deny rule is the gate's: POLICY_DENIED, nothing committed.
	gd, _ := newGate(t, grants+"rules:\n  - {tool: git_commit, action: deny}\n", ws)
	tooltest.WantCode(t, tooltest.Call(t, gd, "git_commit", `{"message":"denied"}`), tool.CodePolicyDenied)
	if gitHead(t, ws) != head {
		t.Fatal("a denied commit was made")
	}
	// A rule for the git family counts, and so does the default policy's
	// rule with git.write added (approval is automatic in these tests).
	defYAML, err := os.ReadFile(filepath.Join("..", "..", "runtime", "policy", "default_policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	withWrite := strings.Replace(string(defYAML), "grants:\n", "grants:\n  - \"git.write\"\n", 1)
	gdef, _ := newGate(t, withWrite, ws)
	res := tooltest.CallReq(t, gdef, gate.Request{Tool: "git_commit", Args: json.RawMessage(`{"message":"m"}`), Principal: []string{"test"}, DryRun: true})
	tooltest.WantOK(t, res)
	if cr := tooltest.Decode[CommitResult](t, res); !cr.Allowed || strings.Contains(strings.Join(res.Warnings, ";"), "no commit") {
		t.Fatalf("default policy + git.write: %+v %v", cr, res.Warnings)
	}
	gf, _ := newGate(t, grants+"rules:\n  - {tool: \"git_*\", action: allow}\n", ws)
	res = tooltest.CallReq(t, gf, gate.Request{Tool: "git_commit", Args: json.RawMessage(`{"message":"m"}`), Principal: []string{"test"}, DryRun: true})
	tooltest.WantOK(t, res)
	if cr := tooltest.Decode[CommitResult](t, res); !cr.Allowed || len(cr.Missing) != 0 || strings.Contains(strings.Join(res.Warnings, ";"), "no commit") {
		t.Fatalf("git_* rule: %+v %v", cr, res.Warnings)
	}

	gw, _ := newGate(t, policyWrite, ws)
	res = tooltest.Call(t, gw, "git_commit", `{"message":"third: rewrite a\n\nbody line\n# not a comment"}`)
	tooltest.WantOK(t, res)
	cr := tooltest.Decode[CommitResult](t, res)
	if !cr.Committed || cr.Branch != "main" || len(cr.Commit) != 40 || cr.Commit == head || len(cr.Files) != 1 || cr.Files[0].Path != "a.txt" {
		t.Fatalf("%+v", cr)
	}
	if gitHead(t, ws) != cr.Commit || !strings.Contains(res.Output, "third: rewrite a") {
		t.Fatalf("output %s", res.Output)
	}
	msg := tooltest.GitPlain(t, ws, "log", "-1", "--format=%B%x00%an <%ae>")
	if !strings.Contains(msg, "# not a comment") || !strings.Contains(msg, "Repo User <repo@example.com>") {
		t.Fatalf("commit %q", msg)
	}

	// Nothing staged: COMMAND_FAILED with a hint; all:true commits tracked changes.
	runtimetest.WriteFile(t, ws, "dir/b.txt", "changed\n")
	res = tooltest.Call(t, gw, "git_commit", `{"message":"nothing staged"}`)
	tooltest.WantCode(t, res, tool.CodeCommandFailed)
	if !strings.Contains(res.Error.Hint, "all:true") {
		t.Fatalf("hint %q", res.Error.Hint)
	}
	res = tooltest.Call(t, gw, "git_commit", `{"message":"all","all":true}`)
	tooltest.WantOK(t, res)
	if cr := tooltest.Decode[CommitResult](t, res); !cr.Committed || len(cr.Files) != 1 || cr.Files[0].Path != "dir/b.txt" {
		t.Fatalf("%+v", cr)
	}

	for _, args := range []string{`{"message":"   \n"}`, `{"message":""}`, `{"message":"a\u0000b"}`, `{}`, `{"message":"m","amend":true}`} {
		tooltest.WantCode(t, tooltest.Call(t, gw, "git_commit", args), tool.CodeInvalidInput)
	}

	// No identity in the repository's config (the global one is ignored).
	tooltest.GitPlain(t, ws, "config", "--unset", "user.name")
	tooltest.GitPlain(t, ws, "config", "--unset", "user.email")
	tooltest.GitPlain(t, ws, "config", "user.useConfigOnly", "true")
	runtimetest.WriteFile(t, ws, "a.txt", "again\n")
	res = tooltest.Call(t, gw, "git_commit", `{"message":"who","all":true}`)
	tooltest.WantCode(t, res, tool.CodeCommandFailed)
	if !strings.Contains(res.Error.Hint, "user.name") {
		t.Fatalf("hint %q", res.Error.Hint)
	}
}

// TestGitDryRun: side-effecting calls return their preview and change
// nothing, and read calls (run normally in a dry run) change nothing either,
// .git included.
func TestGitDryRun(t *testing.T) {
	ws := tooltest.GitFixture(t)
	runtimetest.WriteFile(t, ws, "a.txt", "one\ntwo\nthree\nfour\nfive\n")
	runtimetest.WriteFile(t, ws, "dir/b.txt", "staged\n")
	tooltest.GitPlain(t, ws, "add", "dir/b.txt")
	// Make the index stat data stale, so a status that could refresh the
	// index would write it.
	past := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(ws, "a.txt"), past, past)
	os.Chtimes(filepath.Join(ws, ".gitignore"), past, past) // same content, new stat data
	gw, _ := newGate(t, policyWrite, ws)
	gr, _ := newGate(t, policyRead, ws)
	patch := "--- a/a.txt\n+++ b/a.txt\n@@ -1,5 +1,5 @@\n-one\n+uno\n two\n three\n four\n five\n"
	tests := []struct {
		name, tool, args string
		g                *gate.Gate
		want             []string
		warn             string
	}{
		{"apply", "git_apply_patch", tooltest.JSON(t, map[string]any{"patch": patch}), gw, []string{"would apply", "modify a.txt", "1 file changed", "+uno", "git --no-pager"}, ""},
		{"apply check", "git_apply_patch", tooltest.JSON(t, map[string]any{"patch": patch, "check": true}), gr, []string{"would check"}, ""},
		{"commit", "git_commit", `{"message":"preview me"}`, gw, []string{"would run", "commit --no-verify --no-gpg-sign --file=-", "preview me", "dir/b.txt", "1 file(s) would be committed"}, ""},
		{"commit all", "git_commit", `{"message":"all","all":true}`, gw, []string{"--all", "a.txt", "dir/b.txt", "2 file(s)"}, ""},
		{"commit not allowed", "git_commit", `{"message":"m"}`, gr, []string{"no commit would be made"}, "no commit would be made"},
		{"status", "git_status", `{}`, gr, []string{"M  dir/b.txt", " M a.txt"}, ""},
		{"diff", "git_diff", `{}`, gr, []string{"+five"}, ""},
		{"show", "git_show", `{"ref":"HEAD"}`, gr, []string{"second"}, ""},
		{"branches", "git_branches", `{}`, gr, []string{"* main"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := tooltest.TreeChecksum(t, ws)
			res := tooltest.CallReq(t, tc.g, gate.Request{Tool: tc.tool, Args: json.RawMessage(tc.args), Principal: []string{"test"}, DryRun: true})
			tooltest.WantOK(t, res)
			if !res.DryRun {
				t.Fatal("not a dry run")
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Output, w) {
					t.Errorf("preview lacks %q:\n%s", w, res.Output)
				}
			}
			if tc.warn != "" && !strings.Contains(strings.Join(res.Warnings, ";"), tc.warn) {
				t.Errorf("warnings %v", res.Warnings)
			}
			if after := tooltest.TreeChecksum(t, ws); after != before {
				t.Fatal("the dry run changed the workspace")
			}
		})
	}
	// A patch that does not apply fails its preview too.
	res := tooltest.CallReq(t, gw, gate.Request{Tool: "git_apply_patch", Args: json.RawMessage(tooltest.JSON(t, map[string]any{"patch": strings.Replace(patch, "-one", "-uno", 1)})), Principal: []string{"test"}, DryRun: true})
	tooltest.WantCode(t, res, tool.CodePatchRejected)
}

// TestGitRedaction: a secret in the arguments reaches neither the result nor
// the audit log, whether the tool echoes it (commit message, patch), git
// reports it in an error (an unknown ref), or a preview shows it.
func TestGitRedaction(t *testing.T) {
	ws := tooltest.GitFixture(t)
	runtimetest.WriteFile(t, ws, "a.txt", "changed\n")
	gw, audit := newGate(t, policyWrite, ws)
	patch := "--- a/dir/b.txt\n+++ b/dir/b.txt\n@@ -1 +1 @@\n-bee\n+token=" + tooltest.Canary + "\n"
	calls := []struct {
		tool string
		args any
		dry  bool
	}{
		{"git_commit", map[string]any{"message": "add token " + tooltest.Canary, "all": true}, true},
		{"git_apply_patch", map[string]any{"patch": patch}, true},
		{"git_apply_patch", map[string]any{"patch": patch}, false},
		{"git_diff", map[string]any{}, false},
		{"git_commit", map[string]any{"message": "add token " + tooltest.Canary, "all": true}, false},
		{"git_show", map[string]any{"ref": "HEAD"}, false},
		{"git_show", map[string]any{"ref": tooltest.Canary}, false},
		{"git_diff", map[string]any{"rev": tooltest.Canary}, false},
		{"git_diff", map[string]any{"paths": []string{tooltest.Canary + ".txt"}}, false},
	}
	for _, c := range calls {
		res := tooltest.CallReq(t, gw, gate.Request{Tool: c.tool, Args: json.RawMessage(tooltest.JSON(t, c.args)), Principal: []string{"test"}, DryRun: c.dry})
		tooltest.AssertNoSecret(t, res, audit, tooltest.Canary)
	}
	if !strings.Contains(tooltest.GitPlain(t, ws, "log", "-1", "--format=%s"), tooltest.Canary) {
		t.Fatal("the commit itself should hold the message as given")
	}
}

func TestGitParsePatchNames(t *testing.T) {
	tests := []struct {
		name, patch string
		written     []string
		reject      string
	}{
		{"git modify", "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", []string{"x"}, ""},
		{"unquoted spaces", "diff --git a/a b c b/a b c\nnew file mode 100644\n", []string{"a b c"}, ""},
		{"quoted octal", "diff --git \"a/caf\\303\\251\" \"b/caf\\303\\251\"\n--- \"a/caf\\303\\251\"\n+++ \"b/caf\\303\\251\"\n@@ -1 +1 @@\n-a\n+b\n", []string{"café"}, ""},
		{"copy writes the copy only", "diff --git a/x b/y\nsimilarity index 100%\ncopy from x\ncopy to y\n", []string{"y"}, ""},
		{"rename writes both", "diff --git a/x b/y\nrename from x\nrename to y\n", []string{"x", "y"}, ""},
		{"content lines are not headers", "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n--- ../../etc/passwd\n+++ /etc/shadow\n-rename to .git/config\n+new mode 120000\n", []string{"x"}, ""},
		{"email preamble", "From 1 Mon\nSubject: [PATCH] x\n\nmessage\n---\n x | 2 +-\n\ndiff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n-- \n2.39.5\n", []string{"x"}, ""},
		{"no files", "just text\n", nil, "changes no file"},
		{"quoted .git", "--- \"a/\\056git/config\"\n+++ \"b/\\056git/config\"\n@@ -1 +1 @@\n-a\n+b\n", nil, ".git"},
		{"case .GIT", "--- a/.GIT/config\n+++ b/.GIT/config\n@@ -1 +1 @@\n-a\n+b\n", nil, ".git"},
		{"NTFS .git.", "--- a/.git./hooks/x\n+++ b/.git./hooks/x\n@@ -1 +1 @@\n-a\n+b\n", nil, ".git"},
		{"short name", "--- a/GIT~1/config\n+++ b/GIT~1/config\n@@ -1 +1 @@\n-a\n+b\n", nil, ".git"},
		{"warden policy", "--- /dev/null\n+++ b/.warden/policy.yaml\n@@ -0,0 +1 @@\n+grants: [\"exec:*\"]\n", nil, ".warden"},
		{"nested .git", "--- a/sub/.git/config\n+++ b/sub/.git/config\n@@ -1 +1 @@\n-a\n+b\n", nil, ".git"},
		{"copy to .git", "diff --git a/x b/.git/hooks/post-commit\ncopy from x\ncopy to .git/hooks/post-commit\n", nil, ".git"},
		{"rename to ..", "diff --git a/x b/y\nrename from x\nrename to ../y\n", nil, ".."},
		{"submodule", "diff --git a/m b/m\nnew file mode 160000\nindex 0000000..1234567\n--- /dev/null\n+++ b/m\n@@ -0,0 +1 @@\n+Subproject commit 1234567\n", nil, "submodule"},
		{"index line symlink", "diff --git a/l b/l\nindex 1234567..89abcde 120000\n--- a/l\n+++ b/l\n@@ -1 +1 @@\n-x\n+/etc\n", nil, "symlink"},
		{"mode change to symlink", "diff --git a/l b/l\nold mode 100644\nnew mode 120000\n", nil, "symlink"},
		{"binary", "diff --git a/b b/b\nindex 1..2 100644\nGIT binary patch\nliteral 3\nKcmZQz\n", nil, "binary"},
		{"binary files differ", "diff --git a/b b/b\nindex 1..2 100644\nBinary files a/b and b/b differ\n", nil, "binary"},
		{"NUL", "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\x00\n+b\n", nil, "NUL"},
		{"control char in name", "--- a/x\r\n+++ b/x\r\n@@ -1 +1 @@\n-a\n+b\n", nil, "control"},
		{"bad hunk", "--- a/x\n+++ b/x\n@@ -1 +1\n-a\n+b\n", nil, "hunk"},
		// Both found by FuzzParsePatch; git refuses them as inconsistent too.
		{"rename and copy", "diff --git a/x b/y\nrename from x/.gi\ncopy from t/config\nrename to y\n", nil, "both renames and copies"},
		{"rename from /dev/null", "rename from 0\nrename to 0\n--- /dev/null\n", nil, "/dev/null"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, e := parsePatch(tc.patch)
			if tc.reject != "" {
				if e == nil || e.Code != tool.CodePatchRejected || !strings.Contains(e.Message, tc.reject) {
					t.Fatalf("want rejection %q, got %+v", tc.reject, e)
				}
				return
			}
			if e != nil {
				t.Fatal(e)
			}
			if strings.Join(p.Written, "|") != strings.Join(tc.written, "|") {
				t.Fatalf("written %q", p.Written)
			}
		})
	}
}
