//go:build unix

package shell

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/tool"
)

// nestedRepo makes dir a repository with notes.txt and a .gitattributes
// naming filter x committed, then appends config to its .git/config and
// moves notes.txt's times so that git reads it again (through the filter)
// the next time it looks.
func nestedRepo(t *testing.T, dir, config string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tooltest.GitPlain(t, dir, "init", "-q", "-b", "main")
	tooltest.WriteFile(t, filepath.Join(dir, "notes.txt"), "notes\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(dir, ".gitattributes"), "*.txt filter=x\n", 0o644)
	tooltest.GitPlain(t, dir, "add", "-A")
	tooltest.GitPlain(t, dir, "commit", "-q", "-m", "lib")
	shellAppend(t, filepath.Join(dir, ".git", "config"), config)
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "notes.txt"), later, later); err != nil {
		t.Fatal(err)
	}
}

// TestShellHostileNestedRepositories: git started from the shell in
// another repository of the workspace — a vendored one, one the command
// makes and configures, a submodule — does not run the programs that
// repository's configuration names. Each would run `touch MARK`; before
// the fix, every case made the marker.
func TestShellHostileNestedRepositories(t *testing.T) {
	tooltest.GitBinary(t)
	filter := "[filter \"x\"]\n\tclean = \"touch MARK; cat\"\n"
	vendored := func(t *testing.T, ws, mark string) {
		nestedRepo(t, filepath.Join(ws, "vendor", "lib"), strings.ReplaceAll(filter, "MARK", mark))
	}
	submodule := func(t *testing.T, ws, mark string) {
		nestedRepo(t, filepath.Join(ws, "lib"), strings.ReplaceAll(filter, "MARK", mark))
		tooltest.GitPlain(t, ws, "add", "lib")
		tooltest.GitPlain(t, ws, "commit", "-q", "-m", "lib as a submodule")
	}
	denied, failed := tool.CodePolicyDenied, tool.CodeCommandFailed
	for _, tc := range []struct {
		name, cmd string
		setup     func(t *testing.T, ws, mark string)
		code      tool.Code
	}{
		{name: "a vendored repository", setup: vendored, code: failed,
			cmd: "cd vendor/lib && git status --short"},
		{name: "a vendored repository, from an inner script", setup: vendored, code: failed,
			cmd: "sh -c 'cd vendor/lib && git status --short'"},
		{name: "a vendored repository, found through eval", setup: vendored, code: failed,
			cmd: "d=vendor/lib; c='git status --short'; cd $d && eval \"$c\""},
		{name: "a repository the command makes and configures", code: failed,
			cmd: "git init -q lib && printf '[filter \"x\"]\\n\\tclean = \"touch MARK; cat\"\\n' > cfg && cp cfg lib/.git/config && " +
				"echo '*.txt filter=x' > lib/.gitattributes && echo n > lib/n.txt && cd lib && git add n.txt"},
		{name: "a submodule whose git directory is in the work tree", setup: submodule, code: denied,
			cmd: "git status --short"},
		{name: "a submodule's git file the command points at its own repository", code: denied,
			setup: func(t *testing.T, ws, mark string) {
				submodule(t, ws, "")
				nestedRepo(t, filepath.Join(ws, "evil"), strings.ReplaceAll(filter, "MARK", mark))
			},
			cmd: "rm -rf lib/.git && echo 'gitdir: ../evil/.git' > gitfile && cp gitfile lib/.git && git status --short"},
		{name: "a submodule, git through a launcher", setup: submodule, code: denied,
			cmd: "timeout 20 git diff-files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := cleanDir(t)
			mark := filepath.Join(ws, "marker")
			gitDriverRepo(t, ws, "", "")
			if tc.setup != nil {
				tc.setup(t, ws, mark)
			}
			sh := tool.Adapt[Args](&Shell{Environ: func() []string { return []string{"HOME=/nonexistent"} }})
			gate, _ := tooltest.ShellGate(t, sh, ws, "fs.read:**", "fs.write:**", "exec:git", "exec:sh", "exec:touch", "exec:cat", "exec:rm", "exec:cp", "exec:timeout")
			res := tooltest.ShellDo(t, gate, map[string]any{"command": strings.ReplaceAll(tc.cmd, "MARK", mark), "timeout_ms": 20000})
			if res.Error != nil {
				t.Logf("%s: %s (%s)", res.Error.Code, res.Error.Message, res.Error.Hint)
			}
			absent(t, mark)
			if tooltest.Code(res) != tc.code {
				t.Fatalf("want %q, got %+v\n%s", tc.code, res.Error, res.Data)
			}
			if tc.code == denied && res.Error.Hint == "" {
				t.Fatalf("no hint: %+v", res.Error)
			}
		})
	}
}

// TestShellSubmodulesWithoutGit: a repository with submodules refuses
// only the shell calls that start git; others run.
func TestShellSubmodulesWithoutGit(t *testing.T) {
	tooltest.GitBinary(t)
	ws := cleanDir(t)
	gitDriverRepo(t, ws, "", "")
	nestedRepo(t, filepath.Join(ws, "lib"), "")
	tooltest.GitPlain(t, ws, "add", "lib")
	tooltest.GitPlain(t, ws, "commit", "-q", "-m", "lib as a submodule")
	sh := tool.Adapt[Args](&Shell{Environ: func() []string { return []string{"HOME=/nonexistent"} }})
	gate, _ := tooltest.ShellGate(t, sh, ws, "fs.read:**", "fs.write:**", "exec:git", "exec:cat")
	res := tooltest.ShellDo(t, gate, map[string]any{"command": "cat lib/notes.txt"})
	if res.Error != nil || !strings.Contains(string(res.Data), "notes") {
		t.Fatalf("got %+v\n%s", res.Error, res.Data)
	}
}
