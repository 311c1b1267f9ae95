//go:build unix

package gitcfg

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOverridesWithGit checks each override against the git installed
// here: with the repository's configuration naming a program that makes a
// marker, the git command that would run it does so without the overrides
// (the case shows something) and does not with them.
func TestOverridesWithGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	for _, tc := range []struct {
		name, attrs, config, stdin string
		args                       []string
		setup                      func(t *testing.T, ws string, run func(...string) string)
	}{
		{name: "filter clean", attrs: "*.txt filter=x\n", config: "[filter \"x\"]\n\tclean = \"touch MARK; cat\"\n", args: []string{"diff", "--stat"}},
		{name: "filter process", attrs: "*.txt filter=x\n", config: "[filter \"x\"]\n\tprocess = \"touch MARK\"\n\trequired = true\n", args: []string{"diff", "--stat"}},
		{name: "textconv", attrs: "*.txt diff=x\n", config: "[diff \"x\"]\n\ttextconv = \"touch MARK; cat\"\n", args: []string{"diff"}},
		{name: "diff command", attrs: "*.txt diff=x\n", config: "[diff \"x\"]\n\tcommand = \"touch MARK; true\"\n", args: []string{"diff"}},
		{name: "diff.external", config: "[diff]\n\texternal = \"touch MARK; true\"\n", args: []string{"diff"}},
		{name: "merge driver", attrs: "*.txt merge=x\n", config: "[merge \"x\"]\n\tdriver = \"touch MARK; false\"\n",
			args: []string{"merge-tree", "--write-tree", "main", "side"},
			setup: func(t *testing.T, ws string, run func(...string) string) {
				run("checkout", "-q", "-b", "side")
				run("commit", "-q", "-am", "side")
				run("checkout", "-q", "main")
				write(t, filepath.Join(ws, "a.txt"), "one\nthree\n")
				run("commit", "-q", "-am", "main")
			}},
		{name: "upload-pack", config: "[remote \"o\"]\n\turl = ./up.git\n\tuploadpack = \"touch MARK; git-upload-pack\"\n", args: []string{"ls-remote", "o"},
			setup: func(t *testing.T, ws string, run func(...string) string) { run("init", "-q", "--bare", "up.git") }},
		{name: "receive-pack", config: "[remote \"o\"]\n\turl = ./up.git\n\treceivepack = \"touch MARK; git-receive-pack\"\n", args: []string{"push", "-q", "o", "main"},
			setup: func(t *testing.T, ws string, run func(...string) string) { run("init", "-q", "--bare", "up.git") }},
		{name: "credential helper of a URL", config: "[credential \"https://example.com\"]\n\thelper = \"!touch MARK; true\"\n",
			args: []string{"credential", "fill"}, stdin: "protocol=https\nhost=example.com\n\n"},
		{name: "archive filter", config: "[tar \"evil\"]\n\tcommand = \"touch MARK; cat\"\n", args: []string{"archive", "--format=evil", "HEAD"}},
		{name: "ssh signing key command", config: "[gpg]\n\tformat = ssh\n[gpg \"ssh\"]\n\tdefaultKeyCommand = \"touch MARK\"\n",
			args: []string{"commit-tree", "-S", "-m", "x", "HEAD^{tree}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ws, mark := filepath.Join(dir, "ws"), filepath.Join(dir, "marker")
			env := []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
				"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b"}
			cmd := func(extra []string, stdin string, args ...string) (string, error) {
				c := exec.Command(git, args...)
				c.Dir, c.Env, c.Stdin = ws, append(env, extra...), strings.NewReader(stdin)
				out, err := c.CombinedOutput()
				return string(out), err
			}
			run := func(args ...string) string {
				out, err := cmd(nil, "", args...)
				if err != nil {
					t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
				}
				return out
			}
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			run("init", "-q", "-b", "main")
			write(t, filepath.Join(ws, "a.txt"), "one\n")
			write(t, filepath.Join(ws, ".gitattributes"), tc.attrs)
			run("add", "-A")
			run("commit", "-q", "-m", "first")
			write(t, filepath.Join(ws, "a.txt"), "one\ntwo\n")
			if tc.setup != nil {
				tc.setup(t, ws, run)
			}
			f, err := os.OpenFile(filepath.Join(ws, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.WriteString(strings.ReplaceAll(tc.config, "MARK", mark))
			f.Close()
			if err != nil {
				t.Fatal(err)
			}

			out, _ := cmd(nil, tc.stdin, tc.args...)
			if _, err := os.Stat(mark); err != nil {
				t.Fatalf("without the overrides git did not run the program (this git: %v):\n%s", err, out)
			}
			os.Remove(mark)
			full := Format{Scope: true, Origin: true, Only: "local"}
			list := run(full.Args()...)
			entries, err := full.Parse([]byte(list))
			if err != nil {
				t.Fatal(err)
			}
			pairs := Overrides(entries, Repository)
			out, _ = cmd(Env(pairs), tc.stdin, tc.args...)
			if _, err := os.Stat(mark); err == nil {
				t.Fatalf("with the overrides %v git still ran the program:\n%s", pairs, out)
			}
		})
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
