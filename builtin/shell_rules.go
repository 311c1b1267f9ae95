package builtin

// What the policy's command rules see of a shell command: every program it
// starts, as the interpreter will see it, and the commands those programs
// only launch (env, xargs, timeout, nice, nohup, setsid, stdbuf, time,
// busybox, sh -c …), so a rule for `git push` also holds for
// `timeout 5 git push` and `sh -c 'git push'`. The rules are checked before
// the command runs, with the words known then, and again as each program
// starts, with its real words (shellRun.exec).

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/wardenrt/warden/runtime"
)

// shellMaxLaunchDepth bounds how deep launchers are looked through
// (sh -c 'env timeout 5 nice git push' is three levels).
const shellMaxLaunchDepth = 8

// shellSubjects returns the program and, for a launcher, the commands it
// launches: what command rules are matched against.
func shellSubjects(p runtime.Program) []runtime.Program {
	out := []runtime.Program{p}
	for depth := 0; depth < shellMaxLaunchDepth; depth++ {
		inner := shellLaunched(out[len(out)-1])
		if len(inner) == 0 {
			return out
		}
		out = append(out, inner[0])
		for _, q := range inner[1:] {
			out = append(out, shellSubjects(q)...)
		}
	}
	return out
}

// shellLaunched returns the command a launcher runs (the first element),
// or for sh -c the programs of its script; nil when p launches nothing
// (or the launched command is not known).
func shellLaunched(p runtime.Program) []runtime.Program {
	if len(p.Argv) == 0 || shellDyn(p, 0) {
		return nil
	}
	name := path.Base(p.Argv[0])
	rest := func(i int) []runtime.Program {
		if i >= len(p.Argv) {
			return nil
		}
		q := runtime.Program{Argv: p.Argv[i:]}
		if p.Dynamic != nil {
			q.Dynamic = p.Dynamic[i:]
		}
		return []runtime.Program{q}
	}
	// skip steps over options: valued are the options taking a value as
	// the next word (their --long=value forms need no care); it returns
	// the index of the first operand.
	skip := func(i int, valued string, stopAtAssign bool) int {
		for i < len(p.Argv) {
			a := p.Argv[i]
			if shellDyn(p, i) {
				return i
			}
			switch {
			case a == "--":
				return i + 1
			case stopAtAssign && strings.Contains(a, "=") && !strings.HasPrefix(a, "-"):
				i++
				continue
			case strings.HasPrefix(a, "--"):
				if !strings.Contains(a, "=") && strings.Contains(valued, " "+a+" ") {
					i++
				}
			case strings.HasPrefix(a, "-") && len(a) > 1:
				// A cluster such as -n5 carries its value; -n takes the next word.
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
	switch name {
	case "env":
		i := skip(1, " -u --unset -C --chdir -S --split-string -P ", true)
		for j := 1; j < i && j < len(p.Argv); j++ {
			if (p.Argv[j] == "-S" || p.Argv[j] == "--split-string") && j+1 < len(p.Argv) && !shellDyn(p, j+1) {
				return []runtime.Program{{Argv: append(strings.Fields(p.Argv[j+1]), p.Argv[i:]...)}}
			}
		}
		return rest(i)
	case "timeout":
		i := skip(1, " -s --signal -k --kill-after ", false)
		return rest(i + 1) // the duration
	case "nice":
		return rest(skip(1, " -n --adjustment ", false))
	case "nohup", "setsid", "time", "chronic", "unbuffer":
		return rest(skip(1, " -f -o --output --format ", false))
	case "stdbuf":
		return rest(skip(1, " -i -o -e --input --output --error ", false))
	case "ionice":
		return rest(skip(1, " -c -n -p -P -u --class --classdata ", false))
	case "taskset":
		return rest(skip(1, "", false) + 1) // the mask
	case "flock":
		i := skip(1, " -w --timeout -E --conflict-exit-code ", false)
		return rest(i + 1) // the lock file
	case "xargs":
		return rest(skip(1, " -a --arg-file -d --delimiter -E -e -I -i -L -l -n --max-args -P --max-procs -s --max-chars --process-slot-var ", false))
	case "busybox":
		return rest(1)
	case "sudo", "doas":
		return rest(skip(1, " -u --user -g --group -C --close-from -h --host -p --prompt -r --role -t --type -D --chdir ", true))
	case "sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "posh":
		for i := 1; i < len(p.Argv); i++ {
			a := p.Argv[i]
			if shellDyn(p, i) || !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
				return nil
			}
			if !strings.HasPrefix(a, "--") && strings.Contains(a, "c") {
				if i+1 >= len(p.Argv) {
					return nil
				}
				if shellDyn(p, i+1) {
					return []runtime.Program{{Argv: []string{"‹script›"}, Dynamic: []bool{true}}}
				}
				return shellScriptPrograms(p.Argv[i+1])
			}
			if a == "-o" || a == "+o" {
				i++
			}
		}
	}
	return nil
}

func shellDyn(p runtime.Program, i int) bool { return i < len(p.Dynamic) && p.Dynamic[i] }

// shellScriptPrograms returns the programs of a script given to sh -c, as
// they are known before it runs; a script that does not parse is one
// program whose words are unknown, which every command rule matches.
func shellScriptPrograms(src string) []runtime.Program {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return []runtime.Program{{Argv: []string{"‹script›"}, Dynamic: []bool{true}}}
	}
	a := shellAnalyze(shellAnalyzeInput{file: f})
	return a.programs
}
