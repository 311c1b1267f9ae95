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

	"mvdan.cc/sh/v3/syntax"

	"github.com/wardenrt/warden/runtime/tool"
)

// maxLaunchDepth bounds how deep launchers are looked through
// (sh -c 'env timeout 5 nice git push' is three levels).
const maxLaunchDepth = 8

// starters are programs that start programs warden cannot name from
// their argv: interpreters, build tools, debuggers, terminal multiplexers,
// editors and pagers with shell escapes, privilege and namespace tools.
var starters = map[string]bool{
	"python": true, "python2": true, "python3": true, "perl": true, "ruby": true, "node": true, "nodejs": true,
	"deno": true, "bun": true, "php": true, "lua": true, "tclsh": true, "wish": true, "expect": true,
	"awk": true, "gawk": true, "mawk": true, "nawk": true, "busybox": false,
	"make": true, "gmake": true, "npm": true, "npx": true, "yarn": true, "pnpm": true, "go": true, "cargo": true,
	"mvn": true, "gradle": true, "pip": true, "pip3": true,
	"unshare": true, "setpriv": true, "prlimit": true, "chrt": true, "watch": true, "script": true, "strace": true,
	"ltrace": true, "gdb": true, "valgrind": true, "su": true, "runuser": true, "sg": true, "parallel": true,
	"systemd-run": true, "tmux": true, "screen": true, "vi": true, "vim": true, "nvim": true, "emacs": true,
	"less": true, "more": true, "man": true, "ssh": true, "docker": true, "podman": true, "kubectl": true,
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
// launches nothing.
func launched(p tool.Program) []tool.Program {
	if len(p.Argv) == 0 || p.Opaque {
		return nil
	}
	if dyn(p, 0) {
		return nil // a name known only at run time: matched as a dynamic word, checked when it runs
	}
	name := path.Base(p.Argv[0])
	switch name {
	case "env":
		return envLaunched(p)
	case "timeout":
		i := skipOptions(p, 1, " -s --signal -k --kill-after ", false)
		if i < 0 {
			return opaque(p)
		}
		return launchRest(p, i+1) // the duration
	case "nice":
		return launchAt(p, skipOptions(p, 1, " -n --adjustment ", false))
	case "nohup", "setsid", "time", "chronic", "unbuffer", "stdbuf", "ionice", "doas", "sudo":
		return launchAt(p, skipOptions(p, 1, " -f -o --output --format -i -e --input --error -c -n -p -P -u --class --classdata --user -g --group -C --close-from -h --host --prompt -r --role -t --type -D --chdir ", name == "sudo" || name == "doas"))
	case "taskset":
		i := skipOptions(p, 1, "", false)
		if i < 0 {
			return opaque(p)
		}
		return launchRest(p, i+1) // the mask
	case "flock":
		return flockLaunched(p)
	case "xargs":
		// xargs adds the words it reads to the command's argv.
		i := skipOptions(p, 1, " -a --arg-file -d --delimiter -E -e -I -i -L -l -n --max-args -P --max-procs -s --max-chars --process-slot-var ", false)
		if i < 0 {
			return opaque(p)
		}
		if i >= len(p.Argv) {
			return []tool.Program{{Argv: []string{"echo", "‹input›"}, Dynamic: []bool{false, true}}}
		}
		return launchRest(p, i, true)
	case "busybox":
		return launchRest(p, 1)
	case "sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "posh", "fish", "csh", "tcsh":
		return invocation(p)
	}
	if starters[name] {
		return opaque(p)
	}
	return nil
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
		q.Argv = append(q.Argv, "‹input›")
		q.Dynamic = append(q.Dynamic, true)
	}
	return []tool.Program{q}
}

// launchAt is launchRest, or an opaque subject when i < 0 (skipOptions
// met a word known only at run time).
func launchAt(p tool.Program, i int, extra ...bool) []tool.Program {
	if i < 0 {
		return opaque(p)
	}
	return launchRest(p, i, extra...)
}

// skipOptions steps over the options of p from word i on: valued are the
// options taking a value as the next word (their --long=value forms need
// no care), and with stopAtAssign NAME=value words are stepped over too;
// it returns the index of the first operand, or -1 when a word is only
// known at run time.
func skipOptions(p tool.Program, i int, valued string, stopAtAssign bool) int {
	for i < len(p.Argv) {
		a := p.Argv[i]
		if dyn(p, i) {
			return -1
		}
		switch {
		case a == "--":
			return i + 1
		case stopAtAssign && strings.Contains(a, "=") && !strings.HasPrefix(a, "-"):
		case strings.HasPrefix(a, "--"):
			if !strings.Contains(a, "=") && strings.Contains(valued, " "+a+" ") {
				i++
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			if len(a) == 2 && strings.Contains(valued, " "+a+" ") {
				i++
			}
		default:
			return i
		}
		i++
	}
	return i
}

// envLaunched is what env launches: the programs of its -S string, or the
// command after its options and assignments.
func envLaunched(p tool.Program) []tool.Program {
	for j := 1; j < len(p.Argv) && !dyn(p, j); j++ {
		a := p.Argv[j]
		split, ok := "", false
		switch {
		case a == "-S" || a == "--split-string":
			if j+1 < len(p.Argv) && !dyn(p, j+1) {
				split, ok = p.Argv[j+1], true
			}
		case strings.HasPrefix(a, "--split-string="):
			split, ok = strings.TrimPrefix(a, "--split-string="), true
		case strings.HasPrefix(a, "-S"):
			split, ok = a[2:], true
		}
		if ok {
			return scriptPrograms(split)
		}
		if !strings.HasPrefix(a, "-") {
			break
		}
	}
	return launchAt(p, skipOptions(p, 1, " -u --unset -C --chdir -S --split-string -P ", true))
}

// flockLaunched is what flock launches: the programs of its -c script, or
// the command after the lock file.
func flockLaunched(p tool.Program) []tool.Program {
	i := skipOptions(p, 1, " -w --timeout -E --conflict-exit-code ", false)
	if i < 0 || i+1 >= len(p.Argv) {
		return opaque(p)
	}
	if c := p.Argv[i+1]; c == "-c" || c == "--command" {
		if i+2 < len(p.Argv) && !dyn(p, i+2) {
			return scriptPrograms(p.Argv[i+2])
		}
		return opaque(p)
	}
	return launchRest(p, i+1) // the lock file
}

// invocation is what a shell runs: the script of -c, parsed, when it
// is literal; an opaque subject otherwise (a script from a file or stdin,
// options warden does not know).
func invocation(p tool.Program) []tool.Program {
	for i := 1; i < len(p.Argv); i++ {
		a := p.Argv[i]
		if dyn(p, i) {
			return opaque(p)
		}
		switch {
		case a == "-o" || a == "+o" || a == "-O" || a == "+O" || a == "--rcfile" || a == "--init-file":
			i++ // takes a value
		case a == "--" || a == "-" || !(strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+")):
			return opaque(p) // a script file, or stdin
		case strings.HasPrefix(a, "--"):
			// --norc, --noprofile, --posix, …
		case strings.HasPrefix(a, "-") && strings.Contains(a, "c"):
			if i+1 >= len(p.Argv) || dyn(p, i+1) {
				return opaque(p)
			}
			return scriptPrograms(p.Argv[i+1])
		}
	}
	return opaque(p) // no -c: it reads its script from stdin
}

func dyn(p tool.Program, i int) bool { return i < len(p.Dynamic) && p.Dynamic[i] }

// scriptPrograms returns the programs of a script another shell
// runs, as they are known before it runs: warden's interpreter does not
// run that script, so what is only known then (an eval of a variable, a
// sourced file, a command name computed at run time, a script that does
// not parse) makes an opaque subject.
func scriptPrograms(src string) []tool.Program {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return opaque(tool.Program{Argv: []string{"sh", "-c", src}})
	}
	a := analyze(analyzeInput{file: f})
	if a.unseen {
		return append(a.programs, opaque(tool.Program{Argv: []string{"sh", "-c", src}})...)
	}
	return a.programs
}
