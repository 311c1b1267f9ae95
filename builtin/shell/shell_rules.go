package shell

// What the policy's command rules see of a shell command: every program it
// starts, as the interpreter will see it, and the commands those programs
// only launch — env, xargs, timeout, nice, nohup, setsid, stdbuf, time,
// ionice, taskset, flock, busybox, sudo, doas, and sh/bash/… -c 'script',
// parsed in turn — so a rule for `git push` also holds for
// `timeout 5 git push` and `sh -c 'git push'`. What warden cannot see —
// the script a shell reads from a file or stdin, what an interpreter, a
// build tool or another program starter runs — is an opaque subject,
// which every command rule matches (see tool.Program). The rules are
// checked before the command runs, with the words known then, and again
// as each program starts, with its real words (run.exec).

import (
	"path"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"

	"github.com/wardenrt/warden/builtin/internal/getopt"
	"github.com/wardenrt/warden/runtime/tool"
)

// maxLaunchDepth bounds how deep launchers are looked through
// (sh -c 'env timeout 5 nice git push' is three levels).
const maxLaunchDepth = 8

// starters are programs that start programs warden cannot name from
// their argv: interpreters, build tools, compilers (gcc -wrapper),
// debuggers, terminal multiplexers, editors, pagers and clients with
// shell escapes (ed's !, sqlite3's .shell, psql's \!), privilege,
// namespace and personality tools (setarch and its aliases), service
// starters. The list cannot be complete — what a program starts by itself
// is beyond the static view; the sandbox's exec grants are what holds
// there (docs/policy.md).
var starters = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"setarch": true, "linux32": true, "linux64": true, "i386": true, "x86_64": true, "nsenter": true, "chroot": true,
		"runcon": true, "ssh-agent": true, "dbus-run-session": true, "run-parts": true, "start-stop-daemon": true,
		"sqlite3": true, "psql": true, "mysql": true, "mariadb": true, "gcc": true, "cc": true, "clang": true, "g++": true,
		"c++": true, "m4": true, "ed": true, "red": true, "ex": true, "view": true, "dc": true, "cmake": true, "ninja": true,
		"meson": true, "rlwrap": true, "numactl": true, "perf": true, "firejail": true, "bwrap": true, "fakeroot": true,
		"proot": true, "capsh": true, "pkexec": true, "at": true, "batch": true, "crontab": true, "socat": true,
		"python": true, "python2": true, "python3": true, "perl": true, "ruby": true, "node": true, "nodejs": true,
		"deno": true, "bun": true, "php": true, "lua": true, "tclsh": true, "wish": true, "expect": true,
		"awk": true, "gawk": true, "mawk": true, "nawk": true, "busybox": false,
		"make": true, "gmake": true, "npm": true, "npx": true, "yarn": true, "pnpm": true, "go": true, "cargo": true,
		"mvn": true, "gradle": true, "pip": true, "pip3": true,
		"unshare": true, "setpriv": true, "prlimit": true, "chrt": true, "watch": true, "script": true, "strace": true,
		"logsave": true, "fstab-decode": true, "choom": true, "uclampset": true, "scriptlive": true, "newgrp": true,
		"sensible-editor": true, "sensible-pager": true, "sensible-browser": true, "editor": true, "pager": true,
		"ltrace": true, "gdb": true, "valgrind": true, "su": true, "runuser": true, "sg": true, "parallel": true,
		"systemd-run": true, "tmux": true, "screen": true, "vi": true, "vim": true, "nvim": true, "emacs": true,
		"less": true, "more": true, "man": true, "ssh": true, "docker": true, "podman": true, "kubectl": true,
	}
})

// launcher is how warden reads a launcher's words: its options, the
// operands before its command (timeout's duration, taskset's mask),
// whether NAME=value words come before the command (sudo), and the
// options with which what it runs is unseen (sudo -s runs the command
// through a shell, -e an editor).
type launcher struct {
	opts     *getopt.Table
	operands int
	assigns  bool
	unseen   string // keys, space separated
}

// launchers are the option tables of the launchers as this machine's
// programs read them (coreutils 9.1, findutils 4.9, util-linux 2.38, GNU
// time 1.9) or as documented (sudo, doas, moreutils' chronic, expect's
// unbuffer). env and xargs are read by readEnv and xargsLaunched.
var launchers = sync.OnceValue(func() map[string]launcher {
	return map[string]launcher{
		"timeout":  {opts: &getopt.Table{Short: "k:s:v", Long: "kill-after=k: signal=s: verbose=v foreground preserve-status help version"}, operands: 1},
		"nice":     {opts: &getopt.Table{Short: "n:", Long: "adjustment=n: help version", Numeric: true}},
		"nohup":    {opts: &getopt.Table{Long: "help version"}},
		"setsid":   {opts: &getopt.Table{Short: "Vhcfw", Long: "ctty=c fork=f wait=w help=h version=V"}},
		"stdbuf":   {opts: &getopt.Table{Short: "i:o:e:", Long: "input=i: output=o: error=e: help version"}},
		"time":     {opts: &getopt.Table{Short: "af:o:pqvV", Long: "append=a format=f: output=o: portability=p quiet=q verbose=v help version=V"}},
		"ionice":   {opts: &getopt.Table{Short: "n:c:p:P:u:tVh", Long: "class=c: classdata=n: pid=p: pgid=P: uid=u: ignore=t help=h version=V"}},
		"taskset":  {opts: &getopt.Table{Short: "apchV", Long: "all-tasks=a pid=p cpu-list=c help=h version=V"}, operands: 1},
		"flock":    {opts: &getopt.Table{Short: "sexnoFuw:E:hV", Long: "shared=s exclusive=x unlock=u nonblocking=n nb=n timeout=w: wait=w: conflict-exit-code=E: close=o no-fork=F verbose help=h version=V"}},
		"chronic":  {opts: &getopt.Table{Short: "ev"}},
		"unbuffer": {opts: &getopt.Table{Short: "p"}},
		"doas":     {opts: &getopt.Table{Short: "a:C:Lnsu:"}, assigns: true, unseen: "s"},
		"sudo": {opts: &getopt.Table{
			Short: "Aa:BbC:c:D:Eeg:Hh::iKklNnPp:R:r:SsT:t:U:u:Vv",
			Long: "askpass=A auth-type=a: background=b bell=B close-from=C: login-class=c: chdir=D: preserve-env=E:: edit=e group=g: " +
				"set-home=H help=h host: login=i remove-timestamp=K reset-timestamp=k list=l non-interactive=n no-update=N " +
				"preserve-groups=P prompt=p: chroot=R: role=r: stdin=S shell=s type=t: command-timeout=T: other-user=U: user=u: version=V validate=v",
		}, assigns: true, unseen: "s i e h host"},
	}
})

var (
	envOpts = getopt.Table{Short: "C:iS:u:v0", Long: "ignore-environment=i null=0 unset=u: chdir=C: split-string=S: block-signal:: " +
		"default-signal:: ignore-signal:: list-signal-handling debug=v help version"}
	xargsOpts = getopt.Table{Short: "0a:E:e::i::I:l::L:n:oprs:txP:d:", Long: "null=0 arg-file=a: delimiter=d: eof=e:: replace=I:: " +
		"max-lines=l:: max-args=n: open-tty=o interactive=p no-run-if-empty=r max-chars=s: verbose=t show-limits exit=x " +
		"max-procs=P: process-slot-var: version help"}
)

// command returns the index of the first word after p's options and
// assignments (and its operands: the command's name); false when warden
// cannot tell, or cannot see what runs.
func (l launcher) command(p tool.Program) (int, bool) {
	opts, i, st := l.opts.Parse(p.Argv, dynOf(p), 1, "")
	if st != getopt.OK {
		return 0, false
	}
	for _, o := range opts {
		if strings.Contains(" "+l.unseen+" ", " "+o.Key+" ") {
			return 0, false
		}
	}
	for l.assigns && i < len(p.Argv) && !dyn(p, i) && strings.IndexByte(p.Argv[i], '=') > 0 {
		i++
	}
	if l.assigns && dyn(p, i) {
		return 0, false // an assignment or the command
	}
	return i + l.operands, true
}

// subjects returns the program and what it launches: what command
// rules are matched against.
func subjects(p tool.Program) []tool.Program {
	out := []tool.Program{p}
	var walk func(i, depth int)
	walk = func(i, depth int) {
		if depth >= maxLaunchDepth {
			out = append(out, tool.Program{Argv: out[i].Argv, Opaque: true, Launcher: i + 1})
			return
		}
		qs := launched(out[i])
		at := make([]int, len(qs)) // where each of qs lands in out
		for k, q := range qs {
			if q.Opaque {
				// A script's subjects (scriptPrograms) name their
				// launcher by its place among them: it moves with them.
				if l := q.Launcher - 1; l >= 0 && l < k {
					q.Launcher = at[l] + 1
				} else {
					q.Launcher = i + 1
				}
			}
			out = append(out, q)
			at[k] = len(out) - 1
			if !q.Opaque {
				walk(len(out)-1, depth+1)
			}
		}
	}
	walk(0, 0)
	return out
}

// opaque is the subject for what p starts that warden cannot see.
func opaque(p tool.Program) []tool.Program {
	return []tool.Program{{Argv: p.Argv, Opaque: true}}
}

// launched returns the commands p launches: the command a launcher
// runs, the programs of an sh -c script, or an opaque subject; nil when p
// launches nothing. A launcher's words are read with its own option
// table (launchers); what warden does not model exactly — an unknown or
// ambiguous option, a word known only at run time where an option or an
// assignment may stand, what xargs builds from its input in a command's
// place — makes an opaque subject rather than a guess.
func launched(p tool.Program) []tool.Program {
	if len(p.Argv) == 0 || p.Opaque {
		return nil
	}
	if dyn(p, 0) {
		return nil // a name known only at run time: matched as a dynamic word, checked when it runs
	}
	switch name := path.Base(p.Argv[0]); name {
	case "env":
		return readEnv(p).launched(p)
	case "xargs":
		return xargsLaunched(p)
	case "flock":
		return flockLaunched(p)
	case "busybox":
		// An applet that launches reads busybox's own options, which
		// warden does not model.
		if len(p.Argv) < 2 || dyn(p, 1) || strings.HasPrefix(p.Argv[1], "-") || path.Base(p.Argv[1]) == "env" ||
			path.Base(p.Argv[1]) == "xargs" || launchers()[path.Base(p.Argv[1])].opts != nil {
			return opaque(p)
		}
		return launchRest(p, 1)
	case "sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "posh", "fish", "csh", "tcsh":
		return invocation(p)
	default:
		if l, ok := launchers()[name]; ok {
			i, ok := l.command(p)
			if !ok {
				return opaque(p)
			}
			return launchRest(p, i)
		}
		if starters()[name] || dynamicLoader(name) {
			return opaque(p)
		}
	}
	return nil
}

// dynamicLoader reports the dynamic loader (ld.so, ld-linux-x86-64.so.2,
// ld-musl-x86_64.so.1), which runs the program its words name.
func dynamicLoader(name string) bool {
	return strings.HasPrefix(name, "ld.so") || strings.HasPrefix(name, "ld-linux") || strings.HasPrefix(name, "ld-musl")
}

// launchRest is the command p launches from its word i on (nil: none),
// with a dynamic ‹input› word added for each of extra (what xargs reads).
func launchRest(p tool.Program, i int, extra ...bool) []tool.Program {
	if i >= len(p.Argv) {
		return nil
	}
	q := tool.Program{Argv: append([]string(nil), p.Argv[i:]...)}
	q.Dynamic = make([]bool, len(q.Argv))
	for k := range q.Argv {
		q.Dynamic[k] = dyn(p, i+k)
	}
	for range extra {
		q.Argv = append(q.Argv, inputWord)
		q.Dynamic = append(q.Dynamic, true)
	}
	if q.Dynamic[0] && strings.Contains(q.Argv[0], inputWord) {
		return opaque(p) // a name xargs reads from its input: never seen again
	}
	return []tool.Program{q}
}

// inputWord stands for the words xargs reads from its input.
const inputWord = "‹input›"

// xargsLaunched is what xargs launches: its command with the words it
// reads added at the end, or put in place of the replace string (-I R,
// -i, --replace). A command whose name is read from the input is an
// opaque subject: xargs starts it, and warden never sees its words.
func xargsLaunched(p tool.Program) []tool.Program {
	opts, i, st := xargsOpts.Parse(p.Argv, dynOf(p), 1, "")
	if st != getopt.OK {
		return opaque(p)
	}
	replace := ""
	for _, o := range opts {
		if o.Key == "I" || o.Key == "i" {
			switch {
			case o.Dynamic || o.HasValue && o.Value == "":
				return opaque(p)
			case o.HasValue:
				replace = o.Value
			default:
				replace = "{}"
			}
		}
	}
	if i >= len(p.Argv) {
		return []tool.Program{{Argv: []string{"echo", inputWord}, Dynamic: []bool{false, true}}}
	}
	if replace == "" {
		return launchRest(p, i, true)
	}
	q := launchRest(p, i)[0]
	for k, w := range q.Argv {
		if strings.Contains(w, replace) {
			q.Argv[k], q.Dynamic[k] = strings.ReplaceAll(w, replace, inputWord), true
		}
	}
	if strings.Contains(q.Argv[0], inputWord) {
		return opaque(p)
	}
	return []tool.Program{q}
}

// flockLaunched is what flock launches: the programs of its -c script, or
// the command after the lock file.
func flockLaunched(p tool.Program) []tool.Program {
	i, ok := launchers()["flock"].command(p)
	if !ok || i+1 >= len(p.Argv) {
		return opaque(p)
	}
	if src, ok := flockScript(p, i); ok {
		return scriptPrograms(src, "sh") // $SHELL, else /bin/sh
	}
	if c := p.Argv[i+1]; dyn(p, i+1) || c == "-c" || c == "--command" {
		return opaque(p)
	}
	return launchRest(p, i+1) // the lock file
}

// flockScript returns the literal script of flock FILE -c SCRIPT, the
// lock file at word i.
func flockScript(p tool.Program, i int) (string, bool) {
	if i+2 < len(p.Argv) && !dyn(p, i+1) && (p.Argv[i+1] == "-c" || p.Argv[i+1] == "--command") && !dyn(p, i+2) {
		return p.Argv[i+2], true
	}
	return "", false
}

// invocation is what a shell runs: the script of -c, parsed, when it
// is literal and in a language warden reads; an opaque subject otherwise
// (a script from a file or stdin, options warden does not know, zsh).
func invocation(p tool.Program) []tool.Program {
	if i, st := shellScriptAt(p); st == getopt.OK && i > 0 && !dyn(p, i) && readShells()[path.Base(p.Argv[0])] && plainInvocation(p, i) {
		return scriptPrograms(p.Argv[i], path.Base(p.Argv[0]))
	}
	return opaque(p)
}

func dyn(p tool.Program, i int) bool { return i < len(p.Dynamic) && p.Dynamic[i] }

func dynOf(p tool.Program) func(int) bool { return func(i int) bool { return dyn(p, i) } }

// scriptPrograms returns the programs of a script another shell
// runs, as they are known before it runs: warden's interpreter does not
// run that script, so what is only known then (an eval of a variable, a
// sourced file, a command name computed at run time, a script that does
// not parse) makes an opaque subject. A script for sh (dash here, bash
// elsewhere), dash, ash or posh is read both as POSIX and as bash: dash
// reads ((…)) as nested subshells where bash reads arithmetic, and either
// may be /bin/sh; the programs of both readings count.
func scriptPrograms(src, shell string) []tool.Program {
	langs := []syntax.LangVariant{syntax.LangBash}
	if shell != "bash" {
		langs = append(langs, syntax.LangPOSIX)
	}
	var out []tool.Program
	whole := tool.Program{Argv: []string{shell, "-c", src}}
	for _, lang := range langs {
		f, err := syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(src), "")
		if err != nil || !plainScript(src, f) {
			return append(out, opaque(whole)...)
		}
		a := analyze(analyzeInput{file: f})
		off := len(out)
		for _, q := range a.programs {
			if q.Launcher > 0 {
				q.Launcher += off // a place in this reading's list
			}
			out = append(out, q)
		}
		if a.unseen {
			return append(out, opaque(whole)...)
		}
	}
	return out
}
