//go:build unix

package shell

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/tool"
)

// hostileCase is one hostile command: it must end with code (usually
// CAPABILITY_DENIED) and the marker file must not exist afterwards.
type hostileCase struct {
	name   string
	cmd    string // MARK is replaced by the marker's absolute path, OUT by a path outside the workspace
	env    map[string]string
	grants []string
	code   tool.Code // "" = success
	msg    string    // in the error message (optional)
	setup  func(t *testing.T, ws, mark string)
	check  func(t *testing.T, ws string, res tool.Result)
	// timeout in ms; 0 means 20 s
	timeout int
}

// plant writes an executable script that creates the marker.
func plant(t *testing.T, path, mark string) {
	t.Helper()
	tooltest.WriteFile(t, path, "#!/bin/sh\ntouch '"+mark+"'\n", 0o755)
}

func shellAppend(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

func TestShellHostile(t *testing.T) {
	base := []string{"fs.read:**", "fs.write:**", "exec:true", "exec:cat"}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	denied := tool.CodeCapabilityDenied
	commitCode := tool.Code("")
	if sandbox.Detect().Namespaces {
		commitCode = tool.CodeCommandFailed
	}
	cases := []hostileCase{
		// 1. An ungranted program after &&.
		{name: "after && (static)", cmd: "true && touch MARK", grants: base, code: denied, msg: "exec:touch"},
		{name: "after && (run time)", cmd: "true && $(printf touch) MARK", grants: base, code: denied, msg: "program touch is not granted"},
		{name: "after ;", cmd: "true; x=touch; $x MARK", grants: base, code: denied},
		// 2. In $(…).
		{name: "in $(…) (static)", cmd: "echo $(touch MARK)", grants: base, code: denied, msg: "exec:touch"},
		{name: "in $(…) (run time)", cmd: "x=touch; echo $($x MARK)", grants: base, code: denied},
		{name: "in nested $(…)", cmd: "echo $(echo $(t=touch; $t MARK))", grants: base, code: denied},
		// 3. In backticks.
		{name: "in backticks (static)", cmd: "echo `touch MARK`", grants: base, code: denied},
		{name: "in backticks (run time)", cmd: "x=touch; echo `$x MARK`", grants: base, code: denied},
		// 4. Via eval.
		{name: "eval (static)", cmd: `eval "touch MARK"`, grants: base, code: denied, msg: "exec:touch"},
		{name: "eval (run time)", cmd: `x=tou; eval "${x}ch MARK"`, grants: base, code: denied},
		{name: "eval nested", cmd: `eval 'eval "touch MARK"'`, grants: base, code: denied},
		// 5. In a pipe.
		{name: "in a pipe (static)", cmd: "echo hi | touch MARK", grants: base, code: denied},
		{name: "in a pipe (run time)", cmd: "x=touch; echo hi | $x MARK", grants: base, code: denied},
		{name: "in a subshell", cmd: "(x=touch; $x MARK)", grants: base, code: denied},
		{name: "in a background job", cmd: "x=touch; $x MARK & wait", grants: base, code: denied},
		{name: "process substitution (refused)", cmd: "x=touch; cat <($x MARK)", grants: base, code: tool.CodeInvalidInput, msg: "process substitution"},
		{name: "process substitution via eval", cmd: "p='<'; eval \"cat $p(touch MARK)\"", grants: with("exec:touch"),
			check: func(t *testing.T, ws string, res tool.Result) {
				if d := tooltest.Decode[Result](t, res); !strings.Contains(d.Stderr, "cannot create fifo") {
					t.Fatalf("%+v", d)
				}
			}},
		{name: "interpreter FIFO name in the temporary directory", cmd: "echo x > " + filepath.Join(os.TempDir(), "sh-interp-warden-test"), grants: base, code: denied,
			check: func(t *testing.T, ws string, _ tool.Result) {
				absent(t, filepath.Join(os.TempDir(), "sh-interp-warden-test"))
			}},
		{name: "interpreter FIFO name under TMPDIR (run time)", cmd: "echo x > $TMPDIR/sh-interp-warden-test", grants: base, code: denied},
		{name: "busy builtin loop stops at the deadline", cmd: "while :; do :; done", grants: base, code: tool.CodeCommandTimeout, timeout: 300},
		{name: "in an EXIT trap", cmd: "x=touch; trap '$x MARK' EXIT; true", grants: base, code: denied},
		{name: "in a function shadowing a granted name", cmd: "cat() { x=touch; $x MARK; }; cat", grants: base, code: denied},
		{name: "via source", cmd: "source s.sh", grants: base, code: denied, msg: "program touch",
			setup: func(t *testing.T, ws, mark string) {
				tooltest.WriteFile(t, filepath.Join(ws, "s.sh"), "touch '"+mark+"'\n", 0o644)
			}},
		{name: "via . ./file", cmd: ". ./s.sh", grants: base, code: denied,
			setup: func(t *testing.T, ws, mark string) {
				tooltest.WriteFile(t, filepath.Join(ws, "s.sh"), "touch '"+mark+"'\n", 0o644)
			}},
		{name: "via $0", cmd: "$0 -c 'touch MARK'", grants: base, code: denied},
		{name: "command builtin", cmd: "command touch MARK", grants: base, code: denied},
		{name: "exec builtin", cmd: "exec touch MARK", grants: base, code: denied},
		{name: "builtin builtin", cmd: "builtin touch MARK", grants: base, code: tool.CodeCommandFailed},
		{name: `backslash \touch`, cmd: `\touch MARK`, grants: base, code: denied, msg: "exec:touch"},
		{name: `quoted "tou"ch`, cmd: `"tou"ch MARK`, grants: base, code: denied, msg: "exec:touch"},
		{name: "alias (not expanded)", cmd: "alias t=true; t MARK", grants: with("exec:touch"), code: denied, msg: "exec:t"},
		{name: "absolute path of an ungranted program", cmd: "/usr/bin/touch MARK", grants: base, code: denied, msg: "exec:touch"},
		{name: "launcher xargs not granted", cmd: "echo MARK | xargs touch", grants: with("exec:touch"), code: denied, msg: "exec:xargs"},
		{name: "launcher env not granted", cmd: "env touch MARK", grants: with("exec:touch"), code: denied, msg: "exec:env"},
		{name: "a refusal stops the rest", cmd: "true; $(echo rm) x; touch MARK", grants: with("exec:touch"), code: denied},
		{name: "a refusal in the background stops the rest", cmd: "$(echo rm) x & wait; touch MARK", grants: with("exec:touch"), code: denied},

		// 6. Redirections outside the workspace.
		{name: "redirect to an absolute path outside", cmd: "echo x > OUT", grants: base, code: denied, msg: "fs.write"},
		{name: "redirect to ../x", cmd: "echo x > ../x", grants: base, code: denied,
			check: func(t *testing.T, ws string, _ tool.Result) { absent(t, filepath.Join(filepath.Dir(ws), "x")) }},
		{name: "redirect to ../x (run time)", cmd: "d=..; echo x > $d/x", grants: base, code: denied,
			check: func(t *testing.T, ws string, _ tool.Result) { absent(t, filepath.Join(filepath.Dir(ws), "x")) }},
		{name: "append outside", cmd: "echo x >> OUT", grants: base, code: denied},
		{name: "&> outside", cmd: "x=OUT; echo x &> $x", grants: base, code: denied},
		{name: "redirect through a symlink out", cmd: "echo x > link/f", grants: base, code: denied,
			setup: func(t *testing.T, ws, mark string) {
				if err := os.Symlink(filepath.Dir(mark), filepath.Join(ws, "link")); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, ws string, _ tool.Result) { absent(t, filepath.Join(filepath.Dir(ws), "f")) }},
		{name: "read outside", cmd: "cat < /etc/passwd", grants: base, code: denied, msg: "fs.read",
			check: func(t *testing.T, ws string, res tool.Result) {
				if strings.Contains(string(res.Data), "root:") {
					t.Fatal("read /etc/passwd")
				}
			}},
		{name: "read outside with $(<file)", cmd: "echo $(</etc/passwd)", grants: base, code: denied},
		{name: "write into .git", cmd: "echo x > .git/config", grants: base, code: denied, msg: ".git",
			setup: func(t *testing.T, ws, _ string) {
				tooltest.WriteFile(t, filepath.Join(ws, ".git", "config"), "[core]\n", 0o644)
			},
			check: func(t *testing.T, ws string, _ tool.Result) {
				if b, _ := os.ReadFile(filepath.Join(ws, ".git", "config")); string(b) != "[core]\n" {
					t.Fatal(".git/config changed")
				}
			}},
		{name: "write into .warden (run time)", cmd: "d=.warden; echo 'grants: [exec:*]' > $d/policy.yaml", grants: base, code: denied,
			setup: func(t *testing.T, ws, _ string) {
				tooltest.WriteFile(t, filepath.Join(ws, ".warden", "keep"), "", 0o644)
			},
			check: func(t *testing.T, ws string, _ tool.Result) {
				absent(t, filepath.Join(ws, ".warden", "policy.yaml"))
			}},
		{name: "cd out, then write", cmd: "cd .. && echo x > rel", grants: base, code: denied, msg: "fs.read",
			check: func(t *testing.T, ws string, _ tool.Result) {
				absent(t, filepath.Join(filepath.Dir(ws), "rel"))
				absent(t, filepath.Join(ws, "rel"))
			}},
		{name: "cd out (run time)", cmd: "d=..; cd $d; echo x > rel", grants: base, code: denied, msg: "cd to ..",
			check: func(t *testing.T, ws string, _ tool.Result) {
				absent(t, filepath.Join(filepath.Dir(ws), "rel"))
			}},
		{name: "pushd out (run time)", cmd: "d=/; pushd $d && touch MARK", grants: with("exec:touch"), code: denied, msg: "cd to /"},
		{name: "cd / ; then run", cmd: "cd /; touch MARK", grants: with("exec:touch"), code: denied},
		{name: "glob outside is not expanded", cmd: "echo /etc/pass*", grants: base,
			check: func(t *testing.T, ws string, res tool.Result) {
				if d := tooltest.Decode[Result](t, res); d.Stdout != "/etc/pass*\n" {
					t.Fatalf("stdout %q", d.Stdout)
				}
			}},

		// 7. LD_PRELOAD and friends in the environment.
		{name: "LD_PRELOAD in env", cmd: "touch MARK", env: map[string]string{"LD_PRELOAD": "/nonexistent.so"}, grants: with("exec:touch", "env:*"), code: denied, msg: "LD_PRELOAD"},
		{name: "LD_PRELOAD=… prefix", cmd: "LD_PRELOAD=/nonexistent.so touch MARK", grants: with("exec:touch"), code: denied},
		{name: "export LD_PRELOAD (run time)", cmd: "eval 'export LD_PRELOAD=/nonexistent.so'; touch MARK", grants: with("exec:touch"), code: denied, msg: "LD_PRELOAD"},
		{name: "export GIT_CONFIG_COUNT", cmd: "v=GIT_CONFIG_COUNT; export $v=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch MARK'; git status", grants: with("exec:git"), code: denied,
			setup: func(t *testing.T, ws, _ string) { tooltest.GitInit(t, ws) }},
		{name: "HOME moved to the workspace", cmd: "HOME=$PWD git status", grants: with("exec:git"), code: denied, msg: "HOME"},
		{name: "BASH_ENV in env", cmd: "true", env: map[string]string{"BASH_ENV": "s.sh"}, grants: base, code: denied},

		// 8. PATH smuggling.
		{name: "env PATH=.", cmd: "git status", env: map[string]string{"PATH": "."}, grants: with("exec:git"), code: tool.CodeInvalidInput,
			setup: func(t *testing.T, ws, mark string) { plant(t, filepath.Join(ws, "git"), mark) }},
		{name: "PATH=. git", cmd: "PATH=. git status", grants: with("exec:git"), code: denied, msg: "PATH",
			setup: func(t *testing.T, ws, mark string) { plant(t, filepath.Join(ws, "git"), mark) }},
		{name: "export PATH", cmd: "export PATH=.:$PATH; git status", grants: with("exec:git"), code: denied,
			setup: func(t *testing.T, ws, mark string) { plant(t, filepath.Join(ws, "git"), mark) }},
		{name: "PATH changed at run time", cmd: "eval 'PATH=.'; git status", grants: with("exec:git"), code: denied, msg: "PATH",
			setup: func(t *testing.T, ws, mark string) { plant(t, filepath.Join(ws, "git"), mark) }},

		// 9. A ./git planted in the workspace, exec:git granted.
		{name: "./git", cmd: "./git status", grants: with("exec:git"), code: denied, msg: "relative path",
			setup: func(t *testing.T, ws, mark string) { plant(t, filepath.Join(ws, "git"), mark) }},
		{name: "./git (run time)", cmd: "p=./git; $p status", grants: with("exec:git"), code: denied,
			setup: func(t *testing.T, ws, mark string) { plant(t, filepath.Join(ws, "git"), mark) }},
		{name: "absolute path of a planted git", cmd: "$PWD/git status", grants: with("exec:git"), code: denied, msg: "is not the git",
			setup: func(t *testing.T, ws, mark string) { plant(t, filepath.Join(ws, "git"), mark) }},
		{name: "plain git with a planted ./git runs the real one", cmd: "git --version", grants: with("exec:git"),
			setup: func(t *testing.T, ws, mark string) { plant(t, filepath.Join(ws, "git"), mark) }},

		// 10. git -c and other ways to make git run a program.
		{name: "git -c core.pager", cmd: "git -c core.pager='touch MARK' log", grants: with("exec:git"), code: denied, msg: "git -c"},
		{name: "git -c alias", cmd: "git -c alias.x='!touch MARK' x", grants: with("exec:git"), code: denied},
		{name: "git -c (run time)", cmd: "o=-c; git $o core.pager='touch MARK' log", grants: with("exec:git"), code: denied, msg: "git -c"},
		{name: "git --config-env", cmd: "git --config-env=core.pager=EDITOR log", grants: with("exec:git"), code: denied},
		{name: "git --exec-path", cmd: "git --exec-path=. status", grants: with("exec:git"), code: denied},
		{name: "git -C", cmd: "git -C / status", grants: with("exec:git"), code: denied},
		{name: "git diff --ext-diff", cmd: "git diff --ext-diff", grants: with("exec:git"), code: denied},
		{name: "git log --output", cmd: "git log --output=OUT", grants: with("exec:git"), code: denied},
		{name: "git fetch --upload-pack", cmd: "git fetch --upload-pack='touch MARK' origin", grants: with("exec:git"), code: denied},
		{name: "git rebase -x", cmd: "git rebase -x 'touch MARK' HEAD", grants: with("exec:git"), code: denied},
		{name: "git config write", cmd: "git config core.fsmonitor 'touch MARK'", grants: with("exec:git"), code: denied},
		{name: "git alias from .git/config", cmd: "git x", grants: with("exec:git"), code: denied, msg: "not a git command",
			setup: func(t *testing.T, ws, mark string) {
				tooltest.GitInit(t, ws)
				shellAppend(t, filepath.Join(ws, ".git", "config"), "[alias]\n\tx = !touch '"+mark+"'\n")
			}},
		{name: "fsmonitor planted in .git/config", cmd: "git status --short", grants: with("exec:git"),
			setup: func(t *testing.T, ws, mark string) {
				tooltest.GitInit(t, ws)
				plant(t, filepath.Join(filepath.Dir(mark), "evil.sh"), mark)
				shellAppend(t, filepath.Join(ws, ".git", "config"), "[core]\n\tfsmonitor = "+filepath.Join(filepath.Dir(mark), "evil.sh")+"\n\tpager = "+filepath.Join(filepath.Dir(mark), "evil.sh")+"\n")
			}},
		// With namespaces .git is read-only to programs: the commit fails
		// (git_commit is the way to commit); either way no hook runs.
		{name: "hook planted, commit runs without it", cmd: "git commit -q --allow-empty -m x", grants: with("exec:git"), code: commitCode,
			env: map[string]string{"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@b"},
			setup: func(t *testing.T, ws, mark string) {
				tooltest.GitInit(t, ws)
				plant(t, filepath.Join(ws, ".git", "hooks", "pre-commit"), mark)
			}},

		// 11. find -exec and friends.
		{name: "find -exec", cmd: `find . -exec touch MARK \;`, grants: with("exec:find"), code: denied, msg: "find -exec"},
		{name: "find -execdir (run time)", cmd: `x=-execdir; find . $x touch MARK \;`, grants: with("exec:find"), code: denied},
		{name: "find -ok", cmd: `find . -ok touch MARK \;`, grants: with("exec:find"), code: denied},
		{name: "find -delete", cmd: `find . -name keep -delete`, grants: with("exec:find"), code: denied,
			setup: func(t *testing.T, ws, _ string) { tooltest.WriteFile(t, filepath.Join(ws, "keep"), "k", 0o644) },
			check: func(t *testing.T, ws string, _ tool.Result) {
				if _, err := os.Stat(filepath.Join(ws, "keep")); err != nil {
					t.Fatal("find -delete ran")
				}
			}},
		{name: "find -fprint", cmd: `find . -fprint OUT`, grants: with("exec:find"), code: denied},

		// Other guarded programs.
		{name: "rg --pre", cmd: "rg --pre ./git x", grants: with("exec:rg"), code: denied, msg: "rg --pre",
			setup: func(t *testing.T, ws, mark string) { plant(t, filepath.Join(ws, "git"), mark) }},
		{name: "sed e command", cmd: "sed -e '1e touch MARK' in.txt", grants: with("exec:sed"), code: denied, msg: "sed e"},
		{name: "sed s///e", cmd: "sed 's|.*|touch MARK|e' in.txt", grants: with("exec:sed"), code: denied, msg: "e flag"},
		{name: "sed w command", cmd: "sed -n 'w OUT' in.txt", grants: with("exec:sed"), code: denied, msg: "w command"},
		{name: "sed s///w (run time)", cmd: "s='s/a/b/w OUT'; sed \"$s\" in.txt", grants: with("exec:sed"), code: denied},
		{name: "sed -f", cmd: "sed -f script.sed in.txt", grants: with("exec:sed"), code: denied},
		{name: "sed -i outside the grants", cmd: "sed -i s/a/b/ OUT", grants: []string{"fs.read:**", "exec:sed"}, code: denied, msg: "fs.write"},
		{name: "tar --to-command", cmd: "tar -xf a.tar --to-command='touch MARK'", grants: with("exec:tar"), code: denied},
		{name: "sort --compress-program", cmd: "sort --compress-program=./git in.txt", grants: with("exec:sort"), code: denied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := cleanDir(t)
			outside := cleanDir(t)
			mark := filepath.Join(outside, "marker")
			out := filepath.Join(outside, "out")
			tooltest.WriteFile(t, filepath.Join(ws, "in.txt"), "a\n", 0o644)
			if tc.setup != nil {
				tc.setup(t, ws, mark)
			}
			g, _ := tooltest.ShellGate(t, tool.Adapt[Args](&Shell{}), ws, tc.grants...)
			cmd := strings.ReplaceAll(strings.ReplaceAll(tc.cmd, "MARK", mark), "OUT", out)
			timeout := 20000
			if tc.timeout > 0 {
				timeout = tc.timeout
			}
			args := map[string]any{"command": cmd, "timeout_ms": timeout}
			if tc.env != nil {
				args["env"] = tc.env
			}
			res := tooltest.ShellDo(t, g, args)
			if tooltest.Code(res) != tc.code {
				t.Fatalf("want %q, got %+v\n%s", tc.code, res.Error, res.Data)
			}
			if tc.msg != "" && !strings.Contains(res.Error.Message+" "+res.Error.Hint, tc.msg) {
				t.Fatalf("error %+v lacks %q", res.Error, tc.msg)
			}
			if tc.code == tool.CodeCapabilityDenied && res.Error.Hint == "" {
				t.Fatalf("no hint: %+v", res.Error)
			}
			absent(t, mark)
			absent(t, out)
			if tc.check != nil {
				tc.check(t, ws, res)
			}
		})
	}
}

// cleanDir is a temporary directory whose path needs no shell quoting.
func cleanDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "warden-shell-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	d, err = filepath.EvalSymlinks(d)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func absent(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); err == nil {
		t.Fatalf("%s exists: the refused step ran", p)
	}
}

// TestShellHostileRunTimeDenialNamesTheProgram: a program only known at run
// time is refused with CAPABILITY_DENIED naming it and the grant, exit 126,
// and the refusal is on the command's stderr.
func TestShellHostileRunTimeDenialNamesTheProgram(t *testing.T) {
	ws := tooltest.WS(t)
	g, _ := tooltest.ShellGate(t, tool.Adapt[Args](&Shell{}), ws, "fs.read:**")
	res := tooltest.ShellDo(t, g, map[string]any{"command": "echo before; $(echo rm) -rf .; echo after"})
	d := tooltest.Decode[Result](t, res)
	if tooltest.Code(res) != tool.CodeCapabilityDenied || res.Error.Hint != "needs the grant exec:rm" || !slices.Equal(res.Error.Missing, []string{"exec:rm"}) || !strings.Contains(res.Error.Message, "program rm is not granted") {
		t.Fatalf("%+v", res.Error)
	}
	if d.ExitCode != 126 || d.Stdout != "before\n" || !strings.Contains(d.Stderr, "CAPABILITY_DENIED") {
		t.Fatalf("%+v", d)
	}
}

// TestShellHostileTimeoutKillsEverything: a command that times out with
// background children — the interpreter's own background jobs and the
// children of a granted shell — returns within the timeout + 1 s and leaves
// no process behind: neither those whose PIDs the shells wrote down nor any
// other, found by the unique argument every sleep of the command gets.
func TestShellHostileTimeoutKillsEverything(t *testing.T) {
	ws := tooltest.WS(t)
	// The programs append to pids: it exists, so the sandbox opens it.
	tooltest.WriteFile(t, filepath.Join(ws, "pids"), "", 0o644)
	g, _ := tooltest.ShellGate(t, tool.Adapt[Args](&Shell{}), ws, "fs.read:**", "fs.write:pids", "exec:sh", "exec:sleep")
	// 100.<9 digits> seconds: a sleep of this test run and no other.
	arg := fmt.Sprintf("100.%09d", time.Now().UnixNano()%1_000_000_000)
	cmd := strings.ReplaceAll(`sh -c 'echo $$ >> pids; exec sleep SECS' &
sh -c 'sleep SECS & echo $! >> pids; sleep SECS & echo $! >> pids; echo $$ >> pids; wait' &
sleep SECS & sleep SECS &
sh -c 'echo $$ >> pids; exec sleep SECS'`, "SECS", arg)
	const timeout = 1500 * time.Millisecond
	// Halfway through, the scan sees the command's processes: it can tell.
	during := make(chan []string, 1)
	go func() {
		time.Sleep(timeout / 2)
		during <- tooltest.ProcsWith(arg)
	}()
	start := time.Now()
	res := tooltest.ShellDo(t, g, map[string]any{"command": cmd, "timeout_ms": timeout.Milliseconds()})
	elapsed := time.Since(start)
	d := tooltest.Decode[Result](t, res)
	if tooltest.Code(res) != tool.CodeCommandTimeout || !d.TimedOut || d.ExitCode != -1 {
		t.Fatalf("%+v %+v", res.Error, d)
	}
	if elapsed > timeout+time.Second {
		t.Fatalf("returned after %v", elapsed)
	}
	// 6 sleeps (2 of the interpreter's own jobs) and the shell that waits.
	if seen := <-during; len(seen) < 6 {
		t.Errorf("halfway, the scan found %d of the command's 7 processes: %q", len(seen), seen)
	}
	data, err := os.ReadFile(filepath.Join(ws, "pids"))
	if err != nil || len(strings.Fields(string(data))) != 5 {
		t.Fatalf("pids %q %v", data, err)
	}
	tooltest.AssertGone(t, filepath.Join(ws, "pids"))
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := tooltest.ProcsWith(arg)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes left 2 s after the call returned: %q", len(left), left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestShellHostileOutputFlood: an endless writer is capped and killed at the
// deadline; a writer whose reader exits is killed as SIGPIPE would. The
// deadline leaves yes time to write past the cap on a loaded machine (1 s
// did not, once, at load 8).
func TestShellHostileOutputFlood(t *testing.T) {
	ws := tooltest.WS(t)
	g, _ := tooltest.ShellGate(t, tool.Adapt[Args](&Shell{}), ws, "fs.read:**", "exec:yes", "exec:head")
	res := tooltest.ShellDo(t, g, map[string]any{"command": "yes", "timeout_ms": 3000})
	d := tooltest.Decode[Result](t, res)
	if tooltest.Code(res) != tool.CodeCommandTimeout || !d.TimedOut {
		t.Fatalf("%+v", res.Error)
	}
	if !strings.Contains(d.Stdout, "[truncated: 1048576 of") || len(d.Stdout) > maxOutput+200 {
		t.Fatalf("stdout is %d bytes: %q", len(d.Stdout), d.Stdout[max(0, len(d.Stdout)-100):])
	}
	if len(res.Output) > gate.MaxOutputBytes+200 {
		t.Fatalf("output is %d bytes", len(res.Output))
	}
	res = tooltest.ShellDo(t, g, map[string]any{"command": "yes | head -c 3000000; yes 2>&1 | head -n 1", "timeout_ms": 20000})
	d = tooltest.Decode[Result](t, res)
	if !res.Success || !strings.Contains(d.Stdout, "[truncated: 1048576 of 3000002 bytes kept]") {
		t.Fatalf("%+v %q", res.Error, d.Stdout[max(0, len(d.Stdout)-80):])
	}
}

// TestShellHostileLaunchedEnvironment: a launcher (env, sudo) or the script
// of a shell another shell runs cannot set a guarded variable, remove what
// the hardening sets or clear the environment, before the command runs or
// as each program starts. Without this, `env GIT_CONFIG_COUNT=1
// GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch MARK' git
// status` made git run a program no command rule saw (the injection
// suite's destroy-git-config-from-env: `rm -rf` past a deny rule). The
// marker is in the workspace, which the grants let programs write: only the
// refusal keeps it from being made.
func TestShellHostileLaunchedEnvironment(t *testing.T) {
	tooltest.GitBinary(t)
	grants := []string{"fs.read:**", "fs.write:**", "exec:git", "exec:env", "exec:sh", "exec:bash", "exec:touch", "exec:true", "exec:timeout", "exec:xargs", "exec:printf", "exec:echo", "exec:flock"}
	const fsmonitor = "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch MARK; false'"
	plantMonitor := func(t *testing.T, ws, mark string) {
		shellAppend(t, filepath.Join(ws, ".git", "config"), "[core]\n\tfsmonitor = \"touch '"+mark+"'; false\"\n")
	}
	denied := tool.CodeCapabilityDenied
	for _, tc := range []struct {
		name, cmd string
		code      tool.Code
		msg       string
		planted   bool // the repository's .git/config names the fsmonitor
	}{
		{name: "env NAME=value", cmd: "env " + fsmonitor + " git status", code: denied, msg: "env sets GIT_CONFIG_COUNT"},
		{name: "env -- NAME=value", cmd: "env -- " + fsmonitor + " git status", code: denied},
		{name: "env behind timeout", cmd: "timeout 10 env " + fsmonitor + " git status", code: denied},
		{name: "env NAME=value (run time)", cmd: "v=GIT_CONFIG_COUNT=1; env $v GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch MARK; false' git status", code: denied, msg: "GIT_CONFIG"},
		{name: "env -i", cmd: "env -i git status", code: denied, msg: "clears the environment", planted: true},
		{name: "env -iv", cmd: "env -iv git status", code: denied, planted: true},
		{name: "env - (run time)", cmd: "o=-; env $o git status", code: denied, planted: true},
		{name: "env -u", cmd: "env -u GIT_CONFIG_COUNT git status", code: denied, msg: "removes GIT_CONFIG_COUNT", planted: true},
		{name: "env -uNAME", cmd: "env -uGIT_CONFIG_COUNT git status", code: denied, planted: true},
		{name: "env --unset=NAME", cmd: "env --unset=GIT_CONFIG_COUNT git status", code: denied, planted: true},
		{name: "env -S", cmd: "env -S '" + strings.ReplaceAll(fsmonitor, "'", "\"") + " git status'", code: denied},
		{name: "env PATH", cmd: "env PATH=. git status", code: denied, msg: "PATH"},
		{name: "env BASH_ENV", cmd: "env BASH_ENV=s.sh bash -c true", code: denied, msg: "BASH_ENV"},
		{name: "sh -c prefix assignment", cmd: `sh -c "` + strings.ReplaceAll(fsmonitor, "'", "\\\"") + ` git status"`, code: denied, msg: "sh -c sets GIT_CONFIG_COUNT"},
		{name: "sh -c plain assignment", cmd: "sh -c 'GIT_CONFIG_COUNT=0; git status'", code: denied, planted: true},
		{name: "bash -c export", cmd: "bash -c 'export GIT_CONFIG_COUNT=0; git status'", code: denied, planted: true},
		{name: "sh -c unset", cmd: "sh -c 'unset GIT_CONFIG_COUNT; git status'", code: denied, msg: "removes GIT_CONFIG_COUNT", planted: true},
		{name: "bash -c read", cmd: "bash -c 'read GIT_CONFIG_COUNT <<< 0; git status'", code: denied, planted: true},
		{name: "bash -c for", cmd: "bash -c 'for GIT_CONFIG_COUNT in 0; do git status; done'", code: denied, planted: true},
		{name: "bash -c arithmetic", cmd: "bash -c '((GIT_CONFIG_COUNT=0)); git status'", code: denied, planted: true},
		{name: "bash -c declare -n", cmd: "bash -c 'declare -n r=GIT_CONFIG_COUNT; r=0; git status'", code: denied, planted: true},
		{name: "bash -c eval", cmd: "bash -c \"eval 'GIT_CONFIG_COUNT=0'; git status\"", code: denied, planted: true},
		{name: "bash -c export of a computed name", cmd: "bash -c 'export \"$0\"=0; git status' GIT_CONFIG_COUNT", code: denied, msg: "only knows when it runs", planted: true},
		{name: "sh -c in sh -c", cmd: `sh -c "sh -c 'GIT_CONFIG_COUNT=0; git status'"`, code: denied, planted: true},
		{name: "env in sh -c", cmd: `sh -c "env -i git status"`, code: denied, planted: true},
		// The script is the first operand after -c's options (F1).
		{name: "sh -c -- unset", cmd: "sh -c -- 'unset GIT_CONFIG_COUNT; git status'", code: denied, msg: "removes GIT_CONFIG_COUNT", planted: true},
		{name: "bash -c -e export", cmd: "bash -c -e 'export GIT_CONFIG_COUNT=0; git status'", code: denied, planted: true},
		{name: "bash -co pipefail unset", cmd: "bash -co pipefail 'unset GIT_CONFIG_COUNT; git status'", code: denied, planted: true},
		{name: "bash -Oc extglob unset", cmd: "bash -Oc extglob 'unset GIT_CONFIG_COUNT; git status'", code: denied, planted: true},
		// A subscript bash evaluates assigns (F2).
		{name: "read a[NAME=0]", cmd: `bash -c 'read "a[GIT_CONFIG_COUNT=0]" <<< x; git status'`, code: denied, msg: "evaluates", planted: true},
		{name: "test -v a[NAME=0]", cmd: `bash -c 'test -v "a[GIT_CONFIG_COUNT=0]"; git status'`, code: denied, planted: true},
		{name: "declare -n to a[NAME=0]", cmd: `bash -c 'declare -n r="a[GIT_CONFIG_COUNT=0]"; : $r; git status'`, code: denied, planted: true},
		{name: "${!r} of a[NAME=0]", cmd: `bash -c 'r="a[GIT_CONFIG_COUNT=0]"; : ${!r}; git status'`, code: denied, planted: true},
		{name: "${x@P} of $((NAME=0))", cmd: `bash -c 'x="\$((GIT_CONFIG_COUNT=0))"; : "${x@P}"; git status'`, code: denied, planted: true},
		// bash builtins that change the environment (F3).
		{name: "exec -c", cmd: "bash -c 'exec -c git status'", code: denied, msg: "clears the environment", planted: true},
		{name: "coproc NAME", cmd: "bash -c 'coproc GIT_CONFIG_COUNT { :; }; git status'", code: denied, msg: "GIT_CONFIG_COUNT", planted: true},
		{name: "wait -p NAME", cmd: "bash -c 'true & wait -p GIT_CONFIG_COUNT; git status'", code: denied, msg: "GIT_CONFIG_COUNT", planted: true},
		{name: "trap's script", cmd: `bash -c "trap 'unset GIT_CONFIG_COUNT; git status' EXIT"`, code: denied, msg: "removes GIT_CONFIG_COUNT", planted: true},
		{name: "sh (dash) alias", cmd: "sh -c 'alias u=\"unset GIT_CONFIG_COUNT\"\nu; git status'", code: denied, planted: true},
		// xargs builds env's words, or a shell's script, from its input.
		{name: "xargs -I{} env {}", cmd: "xargs -I{} env {} git status <<< GIT_CONFIG_COUNT=0", code: denied, msg: "only knows when it runs", planted: true},
		{name: "xargs env", cmd: "xargs env <<< 'GIT_CONFIG_COUNT=0 git status'", code: denied, planted: true},
		{name: "xargs sh -c", cmd: "printf 'GIT_CONFIG_COUNT=0; git status' | xargs -0 sh -c", code: denied, planted: true},
		{name: "xargs --process-slot-var", cmd: "xargs --process-slot-var=GIT_CONFIG_COUNT git status <<< x", code: denied, msg: "GIT_CONFIG_COUNT", planted: true},
		{name: "env in sh -c from a variable", cmd: `sh -c 'v=CONFIG_COUNT=0; env GIT_$v git status'`, code: denied, planted: true},
		// env -S is read as env's own words; long options by their prefixes.
		{name: "env -S -i", cmd: "env -S '-i git status'", code: denied, msg: "clears the environment", planted: true},
		{name: "env -S -u", cmd: "env -S '-u GIT_CONFIG_COUNT git status'", code: denied, msg: "removes GIT_CONFIG_COUNT", planted: true},
		{name: "env -S ${NAME}=", cmd: "export N=GIT_CONFIG_COUNT; env -S '${N}=0 git status'", code: denied, planted: true},
		{name: "env --ignore-env", cmd: "env --ignore-env git status", code: denied, msg: "clears the environment", planted: true},
		{name: "env --unse=", cmd: "env --unse=GIT_CONFIG_COUNT git status", code: denied, msg: "removes GIT_CONFIG_COUNT", planted: true},
		{name: "env --split=", cmd: "env --split='GIT_CONFIG_COUNT=0 git status'", code: denied, planted: true},
		{name: "env 1=2 before", cmd: "env 1=2 GIT_CONFIG_COUNT=0 git status", code: denied, msg: "GIT_CONFIG_COUNT", planted: true},
		// Setters of an inner script.
		{name: "printf -vNAME", cmd: "bash -c 'printf -vGIT_CONFIG_COUNT 0; git status'", code: denied, planted: true},
		{name: "printf -v NAME", cmd: "bash -c 'printf -v GIT_CONFIG_COUNT 0; git status'", code: denied, planted: true},
		{name: "read a computed name", cmd: "bash -c 'i=COUNT; read -r GIT_CONFIG_$i <<< 0; git status'", code: denied, msg: "only knows when it runs", planted: true},
		{name: "read -a NAME", cmd: "bash -c 'read -ra GIT_CONFIG_COUNT <<< 0; git status'", code: denied, planted: true},
		{name: "${NAME:=value}", cmd: "bash -c 'set -a; : ${BASH_ENV:=s.sh}; bash -c true'", code: denied, msg: "BASH_ENV"},
		{name: "declare -n computed target", cmd: "bash -c 'n=CONFIG_COUNT; declare -n r=GIT_$n; r=0; git status'", code: denied, planted: true},
		{name: "command export", cmd: "bash -c 'command export GIT_CONFIG_COUNT=0; git status'", code: denied, planted: true},
		{name: "builtin declare computed", cmd: `bash -c 'n=CONFIG_COUNT; builtin declare "GIT_$n=0"; git status'`, code: denied, planted: true},
		{name: "let quoted", cmd: `bash -c 'let "GIT_CONFIG_COUNT=0"; git status'`, code: denied, planted: true},
		{name: "mapfile computed", cmd: `bash -c 'n=CONFIG_COUNT; mapfile -t "GIT_$n" <<< 0; git status'`, code: denied, planted: true},
		// bash evaluates a variable's value as an expression in arithmetic.
		{name: "arithmetic on an inherited value", cmd: "export X=GIT_CONFIG_COUNT=0; bash -c ': $((X)); git status'", code: denied, msg: "arithmetic", planted: true},
		{name: "arithmetic test on an inherited value", cmd: "export X=GIT_CONFIG_COUNT=0; bash -c '[[ X -eq 0 ]]; git status'", code: denied, planted: true},
		{name: "arithmetic on an expanded value", cmd: "export X=GIT_CONFIG_COUNT=0; bash -c '(( $X )); git status'", code: denied, planted: true},
		{name: "arithmetic on a value read", cmd: "bash -c 'read -r n <<< GIT_CONFIG_COUNT=0; : $((n)); git status'", code: denied, planted: true},
		// flock -c runs its script with $SHELL.
		{name: "SHELL for flock -c", cmd: "SHELL=/bin/echo flock lk -c 'touch MARK'", code: denied, msg: "SHELL"},
		// Ordinary forms still run.
		{name: "xargs -I X echo", cmd: "xargs -I X echo X <<< a"},
		{name: "env -S plain", cmd: "env -S 'FOO=1 true'"},
		{name: "inner reads and formats", cmd: `bash -c 'x=1; printf "%s\n" "$x"; while read -r l; do echo "$l"; done <<< a; for ((i=0; i<2; i++)); do :; done'`},
		{name: "inner arithmetic on numbers", cmd: `bash -c 'n=0; for ((i=0; i<3; i++)); do n=$((n + i)); done; ((n++)); [[ $n -gt 1 && $# -eq 0 ]]; echo $((RANDOM % 2 + 16#f)) ${#n}'`},
		{name: "inner setters of plain variables", cmd: "bash -c 'read -r x <<< 1; printf -v y %s 2; : ${z:=3}; declare -n r=x; r=4; git status'", planted: true},
		// What changes nothing warden guards still runs.
		{name: "planted fsmonitor, plain git", cmd: "git status", planted: true},
		{name: "env with a plain variable", cmd: "env FOO=bar sh -c 'test \"$FOO\" = bar'"},
		{name: "env -u a plain variable", cmd: "env -u FOO true"},
		{name: "sh -c with plain variables", cmd: "sh -c 'x=1; export y=2; unset x; for i in 1; do true; done; git status'", planted: true},
		{name: "git identity through env", cmd: "env GIT_AUTHOR_NAME=a true"},
		{name: "exec and wait -p of plain names", cmd: "bash -c 'true & wait -p pid; exec -a name git status'", planted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := cleanDir(t)
			tooltest.GitInit(t, ws)
			tooltest.WriteFile(t, filepath.Join(ws, "s.sh"), "touch MARK\n", 0o644)
			mark := filepath.Join(ws, "marker")
			if tc.planted {
				plantMonitor(t, ws, mark)
			}
			tooltest.WriteFile(t, filepath.Join(ws, "s.sh"), "touch '"+mark+"'\n", 0o644)
			g, _ := tooltest.ShellGate(t, tool.Adapt[Args](&Shell{}), ws, grants...)
			res := tooltest.ShellDo(t, g, map[string]any{"command": strings.ReplaceAll(tc.cmd, "MARK", mark), "timeout_ms": 20000})
			if tooltest.Code(res) != tc.code {
				t.Fatalf("want %q, got %+v\n%s", tc.code, res.Error, res.Data)
			}
			if tc.msg != "" && !strings.Contains(res.Error.Message, tc.msg) {
				t.Fatalf("error %+v lacks %q", res.Error, tc.msg)
			}
			absent(t, mark)
		})
	}
}

// launcherPolicy denies recursive rm and allows the shell otherwise, with
// the launchers and shells granted: what a deny rule holds is all that
// keeps src.
const launcherPolicy = `version: 1
grants: ["fs.read:**", "fs.write:**", "exec:rm", "exec:env", "exec:timeout", "exec:nice", "exec:setsid", "exec:xargs",
  "exec:sh", "exec:bash", "exec:dash", "exec:git", "exec:true", "exec:echo", "exec:printf", "exec:cat", "exec:stdbuf", "exec:flock",
  "exec:tar", "exec:sort", "exec:sed", "exec:yes", "exec:head", "exec:setarch", "exec:linux64", "exec:sqlite3", "exec:gcc",
  "exec:ed", "exec:split"]
rules:
  - {name: no-recursive-rm, tool: shell, command: ["rm ** -*r*", "rm ** -*R*", "rm ** --recursive*"], action: deny}
  - {tool: shell, action: allow}
`

// TestShellHostileLauncherRules: a deny rule holds for the command a
// launcher runs however its options are spelt — GNU long options by an
// unambiguous prefix, options that take a value or do not, env -S strings
// read as env's own options, what xargs builds from its input — and for
// the programs an inner script hides: a function defined after its call,
// a trap's script, an alias (dash expands them), eval behind command or
// builtin. What warden cannot read exactly is an opaque subject, which
// the deny rule matches. Before, each of these ran rm -rf src.
func TestShellHostileLauncherRules(t *testing.T) {
	for _, tc := range []struct {
		name, cmd string
		code      tool.Code // "" = runs
		repo      bool      // the workspace is a git repository
	}{
		{name: "setsid -f (no value)", cmd: "setsid -w -f rm -rf src", code: tool.CodePolicyDenied},
		{name: "xargs -i (optional attached value)", cmd: "xargs -i rm -rf src <<< x", code: tool.CodePolicyDenied},
		{name: "timeout --sig (prefix of --signal)", cmd: "timeout --sig KILL 5 rm -rf src", code: tool.CodePolicyDenied},
		{name: "nice --adj (prefix of --adjustment)", cmd: "nice --adj 5 rm -rf src", code: tool.CodePolicyDenied},
		{name: "env -S with env's -v", cmd: "env -S '-v rm -rf src'", code: tool.CodePolicyDenied},
		{name: "env --split= (prefix of --split-string)", cmd: "env --split='rm -rf src'", code: tool.CodePolicyDenied},
		{name: "env -S with -C and ${NAME}", cmd: "export F=-rf; env -S '-C. rm ${F} src'", code: tool.CodePolicyDenied},
		{name: "a command name from xargs's input", cmd: "xargs -I X timeout 5 X -rf src <<< rm", code: tool.CodePolicyDenied},
		{name: "stdbuf --out (prefix of --output)", cmd: "stdbuf --out 0 rm -rf src", code: tool.CodePolicyDenied},
		{name: "flock --wait (an alias of --timeout)", cmd: "flock --wait 5 lk rm -rf src", code: tool.CodePolicyDenied},
		{name: "function defined after its call", cmd: "sh -c 'rm -rf src; rm() { :; }'", code: tool.CodePolicyDenied},
		{name: "trap's script", cmd: `sh -c "trap 'rm -rf src' EXIT"`, code: tool.CodePolicyDenied},
		{name: "dash alias", cmd: "dash -c 'alias r=rm\nr -rf src'", code: tool.CodePolicyDenied},
		{name: "builtin eval", cmd: `bash -c 'builtin eval "rm -rf src"'`, code: tool.CodePolicyDenied},
		{name: "command eval", cmd: `bash -c 'command eval "rm -rf src"'`, code: tool.CodePolicyDenied},
		// A shell reads -c as a flag and goes on reading options: the
		// script is its first operand (F1).
		{name: "sh -c --", cmd: "sh -c -- 'rm -rf src'", code: tool.CodePolicyDenied},
		{name: "bash -c -e", cmd: "bash -c -e 'rm -rf src'", code: tool.CodePolicyDenied},
		{name: "bash -co pipefail", cmd: "bash -co pipefail 'rm -rf src'", code: tool.CodePolicyDenied},
		{name: "bash -Oc extglob", cmd: "bash -Oc extglob 'rm -rf src'", code: tool.CodePolicyDenied},
		{name: "bash -ceO extglob", cmd: "bash -ceO extglob 'rm -rf src'", code: tool.CodePolicyDenied},
		{name: "dash -c - (ends options)", cmd: "dash -c - 'rm -rf src'", code: tool.CodePolicyDenied},
		{name: "bash -c +o pipefail", cmd: "bash -c +o pipefail 'rm -rf src'", code: tool.CodePolicyDenied},
		{name: "bash --norc -c -x", cmd: "bash --norc -c -x 'rm -rf src'", code: tool.CodePolicyDenied},
		// bash evaluates a subscript in a name given as a word, the value
		// of ${!name} and a prompt string: a $(…) there runs (F2).
		{name: "${x@P}", cmd: `bash -c 'x="\$(rm -rf src)"; echo "${x@P}"'`, code: tool.CodeCapabilityDenied},
		{name: "${!r} of a subscript", cmd: `bash -c 'r="a[\$(rm -rf src)]"; echo ${!r}'`, code: tool.CodeCapabilityDenied},
		{name: "printf -v a[…]", cmd: `bash -c 'printf -v "a[\$(rm -rf src)]" x'`, code: tool.CodeCapabilityDenied},
		{name: "read a[…]", cmd: `bash -c 'read "a[\$(rm -rf src)]" <<< x'`, code: tool.CodeCapabilityDenied},
		{name: "declare a[…]=", cmd: `bash -c 'declare "a[\$(rm -rf src)]=1"'`, code: tool.CodeCapabilityDenied},
		{name: "declare -a a=([…]=)", cmd: `bash -c 'declare -a "a=([\$(rm -rf src)]=1)"'`, code: tool.CodeCapabilityDenied},
		{name: "declare -n to a subscript", cmd: `bash -c 'declare -n r="a[\$(rm -rf src)]"; echo $r'`, code: tool.CodeCapabilityDenied},
		{name: "declare -n without a target", cmd: `bash -c 'declare -n r; r="a[\$(rm -rf src)]"; echo $r'`, code: tool.CodeCapabilityDenied},
		{name: "test -v a[…]", cmd: `bash -c 'test -v "a[\$(rm -rf src)]"'`, code: tool.CodeCapabilityDenied},
		{name: "[ -v a[…] ]", cmd: `bash -c '[ -v "a[\$(rm -rf src)]" ]'`, code: tool.CodeCapabilityDenied},
		{name: "[[ -v $x ]]", cmd: `bash -c 'x="a[\$(rm -rf src)]"; [[ -v $x ]]'`, code: tool.CodeCapabilityDenied},
		{name: "unset of an associative subscript", cmd: `bash -c 'declare -A A; unset "A[\$(rm -rf src)]"'`, code: tool.CodeCapabilityDenied},
		{name: "let with a subscript", cmd: `bash -c "let 'a[\$(rm -rf src)]=1'"`, code: tool.CodeCapabilityDenied},
		// exec's own options: -a takes a word (F3).
		{name: "exec -a NAME", cmd: "bash -c 'exec -a x rm -rf src'", code: tool.CodePolicyDenied},
		{name: "exec -la NAME", cmd: "bash -c 'exec -cla x rm -rf src'", code: tool.CodeCapabilityDenied},
		// A guarded program's long options by an unambiguous prefix, as
		// getopt_long and git read them (F4).
		{name: "git ls-remote --upload-pa=", cmd: "git ls-remote --upload-pa='rm -rf src;:' .", code: tool.CodeCapabilityDenied, repo: true},
		{name: "git grep --open=", cmd: "git grep --untracked --open='rm -rf src;:' -e main", code: tool.CodeCapabilityDenied, repo: true},
		{name: "git grep --open-files-in-pa=", cmd: "git grep --untracked --open-files-in-pa='rm -rf src;:' -e main", code: tool.CodeCapabilityDenied, repo: true},
		{name: "tar --to-com=", cmd: "tar cf a.tar src/main.go && tar --to-com='rm -rf src;:' -xf a.tar", code: tool.CodeCapabilityDenied},
		{name: "tar --checkpoint-ac=", cmd: "tar cf /dev/null --checkpoint=1 --checkpoint-ac=exec='rm -rf src' src", code: tool.CodeCapabilityDenied},
		{name: "tar --use-compress-prog=", cmd: `tar --use-compress-prog='sh -c "rm -rf src"' -cf b.tar src/main.go`, code: tool.CodeCapabilityDenied},
		{name: "sort --compress=", cmd: "yes 'rm -rf src' | head -c 150000 > d.txt; sort -T . -S 64k --compress='sh' d.txt > /dev/null", code: tool.CodeCapabilityDenied},
		{name: "sed --expr=", cmd: "echo x > p; sed --expr='1e rm -rf src' p", code: tool.CodeCapabilityDenied},
		// Programs that start a program their words name, or a script
		// of their own (F5).
		{name: "setarch", cmd: "setarch x86_64 rm -rf src", code: tool.CodePolicyDenied},
		{name: "linux64", cmd: "linux64 rm -rf src", code: tool.CodePolicyDenied},
		{name: "sqlite3 .shell", cmd: "sqlite3 :memory: '.shell rm -rf src'", code: tool.CodePolicyDenied},
		{name: "gcc -wrapper", cmd: "echo 'int x;' > x.c; TMPDIR=. gcc -wrapper rm,-rf,src,-- -c x.c", code: tool.CodePolicyDenied},
		{name: "ed !", cmd: "printf '!rm -rf src\\nq\\n' | ed -s", code: tool.CodePolicyDenied},
		{name: "the dynamic loader", cmd: "bash -c '/lib64/ld-linux-x86-64.so.2 /bin/rm -rf src'", code: tool.CodePolicyDenied},
		{name: "split --filter", cmd: "echo x > p; split --fil='rm -rf src' p", code: tool.CodeCapabilityDenied},
		// Ordinary forms still run.
		{name: "timeout 5", cmd: "timeout 5 true"},
		{name: "timeout -s KILL --kill-after=1", cmd: "timeout -s KILL --kill-after=1 5 true"},
		{name: "nice -n 5", cmd: "nice -n 5 true"},
		{name: "env FOO=1", cmd: "env FOO=1 true"},
		{name: "env -S assignment", cmd: "env -S 'FOO=1 true'"},
		{name: "xargs -n1", cmd: "xargs -n1 echo <<< 'a b'"},
		{name: "xargs -I X", cmd: "xargs -I X echo X <<< a"},
		{name: "setsid -w", cmd: "setsid -w true"},
		// Functions, traps, here-strings and bash's transformations are
		// beyond what an inner script may use and stay readable (the
		// shells read them otherwise than warden's parser in places):
		// opaque, denied here by the strictest rule.
		{name: "a function defined first", cmd: "sh -c 'f() { true; }; f'", code: tool.CodePolicyDenied},
		{name: "a trap that echoes", cmd: `sh -c "trap 'echo bye' EXIT; true"`, code: tool.CodePolicyDenied},
		{name: "rm without -r", cmd: "timeout 5 rm -f nothing"},
		{name: "bash -c -e, plain", cmd: "bash -c -e 'rm -f nothing'"},
		{name: "tar --checkpoint=1, sed --expr=", cmd: "tar cf /dev/null --checkpoint=1 src && echo a > p && sed --expr=s/a/b/ p"},
		{name: "git diff --text", cmd: "git diff --text --stat", repo: true},
		{name: "plain names and transformations", cmd: `bash -c 'read -r x <<< 1; printf -v y %s "$x"; echo "${x@Q}" "${y@U}" ${!BASH*}; [[ -v x ]]; test -v y; declare -n r=x; echo $r'`, code: tool.CodePolicyDenied},
		{name: "a plain inner script", cmd: `sh -c 'x=1; cd src && echo "$x" > ../out.txt; for f in *.go; do echo $f; done; test -d . && test -f main.go'`},
		{name: "sh -c --, plain", cmd: "sh -c -- 'true' x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := cleanDir(t)
			tooltest.WriteFile(t, filepath.Join(ws, "src", "main.go"), "package main\n", 0o644)
			if tc.repo {
				tooltest.GitInit(t, ws)
			}
			g, _ := tooltest.Gate(t, launcherPolicy, ws, tool.Adapt[Args](&Shell{}))
			res := tooltest.ShellDo(t, g, map[string]any{"command": tc.cmd, "timeout_ms": 20000})
			if _, err := os.Stat(filepath.Join(ws, "src", "main.go")); err != nil {
				t.Errorf("src is gone: %v", err)
			}
			if tooltest.Code(res) != tc.code {
				t.Fatalf("want %q, got %+v\n%s", tc.code, res.Error, res.Data)
			}
		})
	}
}

// TestShellHostileUnseenWords: a word only known at run time that no check
// ever sees — an inner script's variable, what xargs reads — may be any
// words at all, so the first rule it could match does not decide for it:
// the strictest rule it could match does, up to the first rule that
// matches whatever it is. Before, an allow rule written above the deny
// rule matched the unseen word and rm -rf src ran.
func TestShellHostileUnseenWords(t *testing.T) {
	const policy = `version: 1
grants: ["fs.read:**", "fs.write:**", "exec:rm", "exec:sh", "exec:xargs", "exec:echo", "exec:git", "exec:ls"]
rules:
  - {tool: shell, command: ["rm -f*", "git status*"], action: allow}
  - {name: no-recursive-rm, tool: shell, command: ["rm ** -*r*"], action: deny}
  - {tool: shell, command: ["git **", "ls **"], action: allow}
  - {tool: shell, command: ["git push*", "ls *secret*"], action: deny}
  - {tool: shell, action: allow}
`
	for _, tc := range []struct {
		name, cmd string
		code      tool.Code // "" = runs
	}{
		{name: "an inner script's variable", cmd: `sh -c 'o=-rf; rm $o src'`, code: tool.CodePolicyDenied},
		{name: "xargs's input", cmd: `echo -rf src | xargs rm`, code: tool.CodePolicyDenied},
		{name: "a variable that splits into words", cmd: `sh -c 'o="-f -r"; rm $o src'`, code: tool.CodePolicyDenied},
		// Ordinary forms still run: the words are seen (the top-level
		// script), or a rule matches whatever they are (ls ** above
		// ls *secret*). Not git's: its argument guard refuses a word it
		// cannot see, whatever the rules.
		{name: "a top-level variable", cmd: `o=-f; rm $o nothing`},
		{name: "a program under a rule that covers any words", cmd: `sh -c 'x=.; ls $x'`},
		{name: "git with a word it cannot see", cmd: `sh -c 'x=--version; git $x'`, code: tool.CodeCapabilityDenied},
		{name: "rm -f from an inner script, literally", cmd: `sh -c 'rm -f nothing'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := cleanDir(t)
			tooltest.WriteFile(t, filepath.Join(ws, "src", "main.go"), "package main\n", 0o644)
			g, _ := tooltest.Gate(t, policy, ws, tool.Adapt[Args](&Shell{}))
			res := tooltest.ShellDo(t, g, map[string]any{"command": tc.cmd, "timeout_ms": 20000})
			if tooltest.Code(res) != tc.code {
				t.Fatalf("want %q, got %+v\n%s", tc.code, res.Error, res.Data)
			}
			if _, err := os.Stat(filepath.Join(ws, "src", "main.go")); err != nil {
				t.Fatalf("src is gone: %v", err)
			}
		})
	}
}
