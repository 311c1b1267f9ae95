//go:build unix

// The fourth hostile review of the shell tool's command checks (issue 17),
// each test is a way a command the policy allows made a program
// run that the command rules deny, or made git run a program named by
// configuration warden did not neutralise. Each runs under r3Policy —
// recursive rm denied by a rule, everything else allowed — in a workspace
// repository holding src/main.go, and fails when src is removed. They
// failed at d2ed2f6 and pass since inner scripts are read only within a
// plain part of the language (plainScript), launched programs' names must
// be granted, sed's labels end at a blank, and git's aliases, trailer
// commands, unknown transports and bisect view are off;
// TestShellHostileR3Held lists what was tried and held.

package shell

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/tool"
)

// r3Policy grants the programs the review was asked to use (git, the
// shells, cp, cat, rm, the launchers timeout, env and xargs, find, printf,
// sed, tar, sort, awk and perl); its rules deny recursive rm.
const r3Policy = `version: 1
grants: ["fs.read:**", "fs.write:**", "exec:git", "exec:sh", "exec:bash", "exec:dash", "exec:cp", "exec:cat", "exec:rm", "exec:timeout", "exec:env", "exec:xargs", "exec:find", "exec:printf", "exec:sed", "exec:tar", "exec:sort", "exec:awk", "exec:perl"]
rules:
  - {name: no-recursive-rm, tool: shell, command: ["rm ** -*r*", "rm ** -*R*", "rm ** --recursive*"], action: deny}
  - {tool: shell, action: allow}
`

// r3Run runs cmd under r3Policy in a workspace repository holding
// src/main.go (a.txt modified), after setup; it reports whether src
// survived.
func r3Run(t *testing.T, setup func(t *testing.T, ws string), cmd string) (tool.Result, bool) {
	t.Helper()
	return policyRun(t, r3Policy, nil, setup, cmd)
}

func r3Cases(t *testing.T, cmds []string, setup func(t *testing.T, ws string)) {
	t.Helper()
	for _, cmd := range cmds {
		t.Run(cmd, func(t *testing.T) {
			if _, ok := r3Run(t, setup, cmd); !ok {
				t.Errorf("BYPASS: src was removed")
			}
		})
	}
}

// r3Inner runs each script, single-quoted (its bytes literal, control
// characters too), as the -c script of each of shells.
func r3Inner(t *testing.T, shells []string, scripts []string) {
	t.Helper()
	var cmds []string
	for _, sh := range shells {
		for _, s := range scripts {
			cmds = append(cmds, sh+" -c '"+strings.ReplaceAll(s, "'", `'\''`)+"'")
		}
	}
	r3Cases(t, cmds, nil)
}

// r3Config plants cfg in the workspace repository's own .git/config.
func r3Config(cfg string) func(t *testing.T, ws string) {
	return func(t *testing.T, ws string) { shellAppend(t, filepath.Join(ws, ".git", "config"), cfg) }
}

// bash's jobs -x runs its operands as a command; the analyzer takes jobs
// (a builtin to mvdan's interp.IsBuiltin) for one that runs nothing.
func TestShellHostileR3JobsX(t *testing.T) {
	r3Inner(t, []string{"bash"}, []string{
		"jobs -x rm -rf src",
		"command jobs -x rm -rf src",
	})
}

// A call whose name is a function defined by a top-level statement before
// it is not a program to the analyzer (definedBefore). The shell that runs
// the call may not have the function: a definition in the background is
// made in a subshell, and unset -f behind command or builtin, or in an
// eval string, is not among the unsets definedBefore looks at.
func TestShellHostileR3FunctionShadow(t *testing.T) {
	r3Inner(t, []string{"sh", "bash"}, []string{
		"rm() { :; } & wait; rm -rf src",
		"rm() { :; }; command unset -f rm; rm -rf src",
		"rm() { :; }; eval 'unset -f rm'; rm -rf src",
	})
	r3Inner(t, []string{"bash"}, []string{
		"rm() { :; }; builtin unset -f rm; rm -rf src",
		"eval() { :; } & wait; eval 'rm -rf src'", // a builtin's name too (dash refuses it as a function's)
	})
}

// An eval string the analyzer's bash parser rejects is skipped — neither
// walked nor unseen — while bash and dash run it command by command up to
// the syntax error; bash's eval skips a leading "--", which the analyzer
// reads as a command named "--".
func TestShellHostileR3EvalUnread(t *testing.T) {
	r3Inner(t, []string{"sh", "bash"}, []string{"eval 'rm -rf src\n)'"})
	r3Inner(t, []string{"sh"}, []string{"eval '((rm -rf src) )'"})
	r3Inner(t, []string{"bash"}, []string{"eval -- 'rm -rf src'"})
}

// sh's script is read as POSIX and as bash (dash reads ((…)) as nested
// subshells), but eval and trap strings inside it are read as bash only.
func TestShellHostileR3DashStrings(t *testing.T) {
	r3Inner(t, []string{"sh", "dash"}, []string{
		"eval 'rm=1 rf=1 src=1; ((rm -rf *src))'",
		"trap 'rm=1 rf=1 src=1; ((rm -rf *src))' EXIT",
	})
}

// bash's BASH_CMDS is its table of program paths (what hash -p sets, which
// is refused) and BASH_ALIASES its aliases (what alias sets, which makes a
// script unseen): assigned, "cat -rf src" runs rm.
func TestShellHostileR3BashTables(t *testing.T) {
	r3Inner(t, []string{"bash"}, []string{
		"BASH_CMDS=([cat]=/usr/bin/rm); cat -rf src",
		"BASH_CMDS+=([cat]=/usr/bin/rm); cat -rf src",
		"BASH_CMDS[1]=/usr/bin/rm; 1 -rf src",
		"shopt -s expand_aliases; BASH_ALIASES=([cat]='rm -rf src')\ncat",
	})
}

// bash -k (set -k, set -o keyword) puts every NAME=value word of a command
// in its environment, not only those before its name: the analyzer reads
// them as arguments, so a guarded variable reaches the program — BASH_ENV
// (a file another bash runs) or GIT_CONFIG_GLOBAL (a filter warden never
// read).
func TestShellHostileR3KeywordOption(t *testing.T) {
	cfg := `printf '*.txt filter=x\n' > .gitattributes; printf '[filter "x"]\n\tclean = "rm -rf src; cat"\n' > evil.cfg; `
	r3Cases(t, []string{
		`printf 'rm -rf src\n' > evil.sh; bash -c 'set -k; bash -c : BASH_ENV=evil.sh'`,
		`printf 'rm -rf src\n' > evil.sh; bash -c 'set -o keyword; bash -c : BASH_ENV=evil.sh'`,
		cfg + `bash -k -c 'git diff a.txt GIT_CONFIG_GLOBAL=evil.cfg'`,
		cfg + `bash -c 'set -k; git diff a.txt GIT_CONFIG_GLOBAL=evil.cfg'`,
	}, nil)
}

// mvdan's parser takes a carriage return for a blank (a # after it starts
// a comment); to bash and dash it is a character of the word.
func TestShellHostileR3CarriageReturn(t *testing.T) {
	r3Inner(t, []string{"sh", "bash"}, []string{"true\r#;rm -rf src"})
}

// bash joins a backslash-newline before it compares a here-document's line
// with the delimiter: "E\<newline>OF" ends the body, and the lines the
// analyzer reads as the body run.
func TestShellHostileR3HeredocContinuation(t *testing.T) {
	r3Inner(t, []string{"bash"}, []string{
		"cat <<EOF\nE\\\nOF\nrm -rf src\nEOF",
		"cat <<-EOF\n\tE\\\nOF\nrm -rf src\nEOF",
	})
}

// rbash is a link to bash (the sandbox lets it run as bash's file), but not
// a shell warden reads: its -c script is neither read nor opaque.
func TestShellHostileR3ShellByOtherName(t *testing.T) {
	if _, err := os.Stat("/usr/bin/rbash"); err != nil {
		t.Skip("no rbash")
	}
	r3Cases(t, []string{`sh -c "rbash -c 'rm -rf src'"`}, nil)
}

// GNU sed ends a label (: b t T, and v's version) at a blank and reads the
// next command after it; the argument guard reads the label to ; or the
// end of the line, so the e command after it is never seen.
func TestShellHostileR3SedLabel(t *testing.T) {
	r3Cases(t, []string{
		`sed -n ':a e rm -rf src' a.txt`,
		"sed -n 'tx e rm -rf src\n:x' a.txt",
		`sed -n 'v 4.2 e rm -rf src' a.txt`,
		`timeout 20 sed -n ':a e rm -rf src' a.txt`,
		`sh -c "sed -n ':a e rm -rf src' a.txt"`,
	}, nil)
}

// The repository's (planted) configuration names an alias; git refuses
// nothing of alias.* at command scope, and git itself runs "git <name>"
// for a remote helper (<helper>::<url>, remote.<n>.vcs) and a merge
// strategy of the sequencer (cherry-pick --strategy), where the alias
// runs.
func TestShellHostileR3GitAliasReached(t *testing.T) {
	tooltest.GitBinary(t)
	cfg := "[alias]\n\tremote-foo = \"!rm -rf src;:\"\n\tmerge-zz = \"!rm -rf src;:\"\n[remote \"x\"]\n\tvcs = foo\n\turl = bar\n"
	r3Cases(t, []string{
		`git ls-remote foo::bar`,
		`git ls-remote x`,
		`git push foo::bar HEAD`,
		`git archive --remote=foo::bar HEAD`,
		`git cherry-pick --strategy=zz HEAD`,
	}, r3Config(cfg))
}

// trailer.<token>.command in the repository's (planted) configuration:
// git interpret-trailers runs it for every message, and .cmd for each
// --trailer of its token.
func TestShellHostileR3GitTrailerCommand(t *testing.T) {
	tooltest.GitBinary(t)
	r3Cases(t, []string{`git interpret-trailers a.txt`}, r3Config("[trailer \"x\"]\n\tcommand = \"rm -rf src;:\"\n"))
	r3Cases(t, []string{`git interpret-trailers --trailer x=1 a.txt`}, r3Config("[trailer \"x\"]\n\tcmd = \"rm -rf src;:\"\n"))
}

// git bisect visualize runs "git <its first word> …" (or that program when
// it starts with git): with a bisection under way, git bisect view
// difftool -x runs what git difftool (refused) runs.
func TestShellHostileR3GitBisectView(t *testing.T) {
	tooltest.GitBinary(t)
	bisecting := func(t *testing.T, ws string) {
		tooltest.GitPlain(t, ws, "commit", "-q", "-am", "second")
		tooltest.GitPlain(t, ws, "bisect", "start")
		tooltest.GitPlain(t, ws, "bisect", "bad", "HEAD")
		tooltest.GitPlain(t, ws, "bisect", "good", "HEAD~1")
	}
	r3Cases(t, []string{
		`TMPDIR=$PWD git bisect view difftool -y -x 'rm -rf src;:'`,
		`TMPDIR=$PWD git bisect visualize git difftool -y --extcmd='rm -rf src;:'`,
	}, bisecting)
}

// TestShellHostileR3Held: what was tried and held (src survives each).
func TestShellHostileR3Held(t *testing.T) {
	tooltest.GitBinary(t)
	r3Cases(t, []string{
		`awk 'BEGIN{system("rm -rf src")}'`,                                                // awk is opaque
		`sh -c "nawk 'BEGIN{system(\"rm -rf src\")}'"`,                                     // so is nawk
		`xargs -a /dev/null perl -e 'system(q(rm -rf src))'`,                               // and perl
		`bash -c "perl5.36.0 -e 'system(q(rm -rf src))'"`,                                  // a hard link to perl: the sandbox refuses it
		`printf 'rm -rf src\n' | sh -s`,                                                    // a script from stdin is opaque
		`printf -- '-rf\0src\0' | xargs -0 rm`,                                             // xargs's input matches -*r*
		`sh -c "echo \$'\\'' x ' ; rm -rf src ; # '"`,                                      // mvdan reads $'…' as dash 0.5.12 does
		`sh -c 'rm() { :; }; trap "unset -f rm; rm -rf src" EXIT'`,                         // the trap is read
		`bash -c 'echo $[$(rm -rf src)]'`,                                                  // arithmetic on unknown words refused
		`/bin/rm -rf src`,                                                                  // rules match rm by its base name
		`sh -c 'rm -r""f src'`,                                                             // quotes removed
		`sh -c 'x="-exec rm -rf src ;"; timeout 5 find . $x'`,                              // run-time words refused
		`printf '%s\n' -delete | xargs -I{} find src {}`,                                   // and through xargs -I
		`bash -c 'command exec -a git-difftool git show --no-index -y a.txt'`,              // exec -a behind command
		`sh -c 'rm=1 rf=1 src=1; x=$((rm -rf *src))'`,                                      // $(( is arithmetic to dash too
		`git log -1 --help`,                                                                // --help anywhere refused
		`sh -c 'flock f -c "rm -rf src"'`,                                                  // flock -c read
		"bash -c '[[ x =~ [ ]] ; rm -rf src ; : ] ]]'",                                     // the regex is read as bash does
		"bash -c 'cat <<-E\n\t`rm -rf src`\n\tE'",                                          // here-document bodies walked
		`printf -- '--to-command=rm -rf src\n' > l; tar cf x.tar a.txt; tar xf x.tar -T l`, // tar reads no options from -T
	}, nil)
	r3Cases(t, []string{
		`git ls-remote y`, // protocol.ext.allow=never holds for remote.<n>.vcs=ext
	}, r3Config("[remote \"y\"]\n\tvcs = ext\n\turl = sh -c rm%20-rf%20src\n"))
}
