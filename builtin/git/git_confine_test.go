//go:build unix

package git

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/tool"
)

// The confinement suite: a workspace whose repository reaches another
// repository outside it — .git as a "gitdir:" file or a symlink, a
// commondir, alternates, symlinks inside .git — is refused with PATH_ESCAPE
// by every git tool, with git.read alone and with commits fully allowed; the
// outside repository is neither changed (checksum) nor read (an object only
// it holds is not shown). Each case first shows that plain git, in the same
// workspace, does use the outside repository, so the test is armed.

// gitOutside is a repository outside the workspace, with a commit and a
// blob the workspace's own repository does not have.
type gitOutside struct {
	dir, head, blob, secret string
}

func newGitOutside(t *testing.T) gitOutside {
	t.Helper()
	dir := tooltest.GitFixture(t)
	secret := "OUTSIDE-ONLY-CONTENT-7f3a\n"
	runtimetest.WriteFile(t, dir, "secret.txt", secret)
	tooltest.GitPlain(t, dir, "add", "secret.txt")
	tooltest.GitPlain(t, dir, "commit", "-q", "-m", "outside only")
	return gitOutside{
		dir: dir, head: gitHead(t, dir), secret: secret,
		blob: strings.TrimSpace(tooltest.GitPlain(t, dir, "rev-parse", "HEAD:secret.txt")),
	}
}

// confineRefused calls every git tool on ws, with git.read only and with
// commits allowed, and wants PATH_ESCAPE from each, the outside repository
// unchanged, and none of its content in any result.
func confineRefused(t *testing.T, ws string, out gitOutside, why string) {
	t.Helper()
	before := tooltest.TreeChecksum(t, out.dir)
	// Something to commit, should a commit get through.
	runtimetest.WriteFile(t, ws, "a.txt", "changed in the workspace\n")
	gr, _ := newGate(t, policyRead, ws)
	gw, _ := newGate(t, policyWrite, ws)
	patch := tooltest.JSON(t, map[string]any{"patch": "--- a/dir/b.txt\n+++ b/dir/b.txt\n@@ -1 +1 @@\n-bee\n+BEE\n"})
	calls := []struct {
		tool, args string
		g          *gate.Gate
		dry        bool
	}{
		{"git_status", `{}`, gr, false},
		{"git_diff", `{}`, gr, false},
		{"git_diff", `{"rev":"` + out.head + `"}`, gr, false},
		{"git_show", `{"ref":"` + out.head + `"}`, gr, false},
		{"git_show", `{"ref":"` + out.blob + `"}`, gr, false},
		{"git_show", `{"ref":"HEAD"}`, gr, false},
		{"git_branches", `{"all":true}`, gr, false},
		{"git_apply_patch", patch, gw, true},
		{"git_apply_patch", patch, gw, false},
		{"git_commit", `{"message":"escape","all":true}`, gw, true},
		{"git_commit", `{"message":"escape","all":true}`, gw, false},
		{"git_status", `{}`, gw, false},
		{"git_show", `{"ref":"` + out.blob + `"}`, gw, false},
	}
	for _, c := range calls {
		res := tooltest.CallReq(t, c.g, gate.Request{Tool: c.tool, Args: json.RawMessage(c.args), Principal: []string{"test"}, DryRun: c.dry})
		if res.Success || res.Error == nil || res.Error.Code != tool.CodePathEscape {
			t.Fatalf("%s: %s %s (dry run %v): want PATH_ESCAPE, got success=%v error=%+v output=%.300s", why, c.tool, c.args, c.dry, res.Success, res.Error, res.Output)
		}
		if !strings.Contains(res.Error.Hint, "workspace's own repository") {
			t.Errorf("%s: %s: hint %q", why, c.tool, res.Error.Hint)
		}
		blob, _ := json.Marshal(res)
		if strings.Contains(string(blob), strings.TrimSpace(out.secret)) || strings.Contains(string(blob), "outside only") {
			t.Fatalf("%s: %s showed the outside repository's content: %s", why, c.tool, blob)
		}
	}
	if after := tooltest.TreeChecksum(t, out.dir); after != before {
		t.Fatalf("%s: the outside repository changed", why)
	}
	if gitHead(t, out.dir) != out.head {
		t.Fatalf("%s: the outside repository has a new commit", why)
	}
}

// workspaceTree is a workspace with the fixture's files and no .git.
func workspaceTree(t *testing.T) string {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	runtimetest.WriteFile(t, ws, "a.txt", "one\ntwo\nthree\nfour\n")
	runtimetest.WriteFile(t, ws, "dir/b.txt", "bee\n")
	return ws
}

// gitArmed asserts that plain git in ws sees the outside repository's
// commit (or object), so the refusal below is not vacuous.
func gitArmed(t *testing.T, ws string, out gitOutside) {
	t.Helper()
	if got := tooltest.GitPlain(t, ws, "cat-file", "-p", out.blob); got != out.secret {
		t.Fatalf("fixture not armed: plain git in the workspace does not read the outside object (%q)", got)
	}
}

// TestGitConfineDotGitFile: .git is "gitdir: /outside/.git" (what a linked
// worktree or a submodule checkout has).
func TestGitConfineDotGitFile(t *testing.T) {
	out := newGitOutside(t)
	ws := workspaceTree(t)
	runtimetest.WriteFile(t, ws, ".git", "gitdir: "+filepath.Join(out.dir, ".git")+"\n")
	gitArmed(t, ws, out)
	confineRefused(t, ws, out, ".git file")
	res := tooltest.Call(t, mustGitGate(t, policyRead, ws), "git_status", `{}`)
	if !strings.Contains(res.Error.Message, "is a file") || !strings.Contains(res.Error.Message, "gitdir:") {
		t.Errorf("message %q", res.Error.Message)
	}
	// A relative gitdir is refused the same way.
	runtimetest.WriteFile(t, ws, ".git", "gitdir: ../"+filepath.Base(out.dir)+"/.git\n")
	confineRefused(t, ws, out, "relative .git file")
}

// TestGitConfineDotGitSymlink: .git is a symlink to an outside repository's
// .git.
func TestGitConfineDotGitSymlink(t *testing.T) {
	out := newGitOutside(t)
	ws := workspaceTree(t)
	if err := os.Symlink(filepath.Join(out.dir, ".git"), filepath.Join(ws, ".git")); err != nil {
		t.Fatal(err)
	}
	gitArmed(t, ws, out)
	confineRefused(t, ws, out, ".git symlink")
	res := tooltest.Call(t, mustGitGate(t, policyRead, ws), "git_status", `{}`)
	if !strings.Contains(res.Error.Message, "is a symlink") {
		t.Errorf("message %q", res.Error.Message)
	}
}

// TestGitConfineCommondir: .git is a real directory, but its commondir file
// moves objects, refs and config to the outside repository (what a linked
// worktree's git directory has).
func TestGitConfineCommondir(t *testing.T) {
	out := newGitOutside(t)
	for _, relative := range []bool{false, true} {
		t.Run(map[bool]string{false: "absolute", true: "relative"}[relative], func(t *testing.T) {
			ws := workspaceTree(t)
			commondir := filepath.Join(out.dir, ".git")
			if relative {
				var err error
				if commondir, err = filepath.Rel(filepath.Join(ws, ".git"), commondir); err != nil {
					t.Fatal(err)
				}
			}
			runtimetest.WriteFile(t, ws, ".git/HEAD", "ref: refs/heads/main\n")
			runtimetest.WriteFile(t, ws, ".git/commondir", commondir+"\n")
			gitArmed(t, ws, out)
			confineRefused(t, ws, out, "commondir")
			res := tooltest.Call(t, mustGitGate(t, policyRead, ws), "git_status", `{}`)
			// warden's check names the common directory; under the
			// sandbox git cannot even read it to report where it is.
			if !strings.Contains(res.Error.Message, "common directory") && !strings.Contains(res.Error.Message, "lies outside the workspace") {
				t.Errorf("message %q", res.Error.Message)
			}
		})
	}
}

// TestGitConfineAlternates: the workspace's own repository, whose
// objects/info/alternates lets git read the outside repository's objects —
// directly, by a relative path, or through a store inside the workspace
// that chains to the outside one.
func TestGitConfineAlternates(t *testing.T) {
	out := newGitOutside(t)
	outObjs := filepath.Join(out.dir, ".git", "objects")
	for _, tc := range []struct {
		name  string
		setup func(ws string)
	}{
		{"absolute", func(ws string) { runtimetest.WriteFile(t, ws, ".git/objects/info/alternates", outObjs+"\n") }},
		{"after a comment and a blank line", func(ws string) {
			runtimetest.WriteFile(t, ws, ".git/objects/info/alternates", "# shared\n\n"+outObjs+"\n")
		}},
		{"relative", func(ws string) {
			rel, err := filepath.Rel(filepath.Join(ws, ".git", "objects"), outObjs)
			if err != nil {
				t.Fatal(err)
			}
			runtimetest.WriteFile(t, ws, ".git/objects/info/alternates", rel+"\n")
		}},
		{"chained through the workspace", func(ws string) {
			store := filepath.Join(ws, "store", "objects")
			runtimetest.WriteFile(t, ws, "store/objects/info/alternates", outObjs+"\n")
			runtimetest.WriteFile(t, ws, ".git/objects/info/alternates", store+"\n")
		}},
		{"through a symlink in the workspace", func(ws string) {
			if err := os.Symlink(outObjs, filepath.Join(ws, "objlink")); err != nil {
				t.Fatal(err)
			}
			runtimetest.WriteFile(t, ws, ".git/objects/info/alternates", filepath.Join(ws, "objlink")+"\n")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := tooltest.GitFixture(t)
			tc.setup(ws)
			gitArmed(t, ws, out)
			confineRefused(t, ws, out, "alternates")
		})
	}

	// A quoted entry is refused (warden does not parse git's quoting), and
	// an alternates FIFO is refused without hanging.
	ws := tooltest.GitFixture(t)
	runtimetest.WriteFile(t, ws, ".git/objects/info/alternates", `"`+outObjs+`"`+"\n")
	gitArmed(t, ws, out)
	confineRefused(t, ws, out, "quoted alternates")
	ws = tooltest.GitFixture(t)
	os.MkdirAll(filepath.Join(ws, ".git", "objects", "info"), 0o755)
	if err := syscall.Mkfifo(filepath.Join(ws, ".git", "objects", "info", "alternates"), 0o644); err != nil {
		t.Skip("no FIFOs here")
	}
	tooltest.WantCode(t, tooltest.Call(t, mustGitGate(t, policyRead, ws), "git_status", `{}`), tool.CodePathEscape)
}

// TestGitConfineAlternatesInside: an alternate object store inside the
// workspace is the workspace's own data, and is allowed.
func TestGitConfineAlternatesInside(t *testing.T) {
	ws := tooltest.GitFixture(t)
	// Move the repository's objects into a store in the workspace, and
	// point alternates at it.
	src := filepath.Join(ws, ".git", "objects")
	store := filepath.Join(ws, "store")
	os.MkdirAll(store, 0o755)
	if err := os.Rename(src, filepath.Join(store, "objects")); err != nil {
		t.Fatal(err)
	}
	runtimetest.WriteFile(t, ws, ".git/objects/info/alternates", "../../store/objects\n")
	os.MkdirAll(filepath.Join(ws, ".git", "objects", "pack"), 0o755)
	g, _ := newGate(t, policyRead, ws)
	res := tooltest.Call(t, g, "git_show", `{"ref":"HEAD"}`)
	tooltest.WantOK(t, res)
	if !strings.Contains(res.Output, "second") {
		t.Fatalf("output %s", res.Output)
	}
}

// TestGitConfineSymlinksInGitDir: symlinks inside a real .git — objects or
// refs to the outside repository's, a file to an outside file — are
// refused; a symlink to a regular file inside the workspace is allowed.
func TestGitConfineSymlinksInGitDir(t *testing.T) {
	out := newGitOutside(t)
	relink := func(t *testing.T, ws, rel, target string) {
		t.Helper()
		p := filepath.Join(ws, ".git", rel)
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("objects", func(t *testing.T) {
		ws := tooltest.GitFixture(t)
		relink(t, ws, "objects", filepath.Join(out.dir, ".git", "objects"))
		gitArmed(t, ws, out)
		confineRefused(t, ws, out, "objects symlink")
	})
	t.Run("refs", func(t *testing.T) {
		ws := tooltest.GitFixture(t)
		relink(t, ws, "refs", filepath.Join(out.dir, ".git", "refs"))
		if got := strings.TrimSpace(tooltest.GitPlain(t, ws, "rev-parse", "refs/heads/main")); got != out.head {
			t.Fatalf("fixture not armed: plain git reads refs/heads/main as %s, not the outside %s", got, out.head)
		}
		confineRefused(t, ws, out, "refs symlink")
	})
	t.Run("loose object directory", func(t *testing.T) {
		ws := tooltest.GitFixture(t)
		dir := out.blob[:2]
		src := filepath.Join(out.dir, ".git", "objects", dir)
		if _, err := os.Stat(src); err != nil {
			t.Skip("the outside blob is packed")
		}
		relink(t, ws, filepath.Join("objects", dir), src)
		gitArmed(t, ws, out)
		confineRefused(t, ws, out, "objects/xx symlink")
	})
	t.Run("index to an outside file", func(t *testing.T) {
		ws := tooltest.GitFixture(t)
		relink(t, ws, "index", filepath.Join(out.dir, ".git", "index"))
		confineRefused(t, ws, out, "index symlink")
	})
	t.Run("HEAD to a file inside", func(t *testing.T) {
		ws := tooltest.GitFixture(t)
		relink(t, ws, "HEAD", "refs/heads/main") // core.preferSymlinkRefs' form
		g, _ := newGate(t, policyRead, ws)
		tooltest.WantOK(t, tooltest.Call(t, g, "git_status", `{}`))
	})
}

// TestGitConfineBareWorkspace: a workspace laid out as a bare repository
// (with alternates leading out) and an empty .git is not taken for a
// repository: plain git skips the broken .git and uses the workspace itself.
func TestGitConfineBareWorkspace(t *testing.T) {
	out := newGitOutside(t)
	ws := workspaceTree(t)
	tooltest.GitPlain(t, ws, "init", "-q", "--bare", "-b", "main")
	runtimetest.WriteFile(t, ws, "objects/info/alternates", filepath.Join(out.dir, ".git", "objects")+"\n")
	if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	gitArmed(t, ws, out)
	g, _ := newGate(t, policyRead, ws)
	for _, c := range []struct{ tool, args string }{{"git_show", `{"ref":"` + out.blob + `"}`}, {"git_status", `{}`}} {
		res := tooltest.Call(t, g, c.tool, c.args)
		tooltest.WantCode(t, res, tool.CodeNotFound)
		if strings.Contains(res.Output, "OUTSIDE") {
			t.Fatalf("%s read the outside object", c.tool)
		}
	}
}

func mustGitGate(t *testing.T, policy, ws string) *gate.Gate {
	t.Helper()
	g, _ := newGate(t, policy, ws)
	return g
}
