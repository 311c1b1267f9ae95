package shell

// The environment a launched program gets. warden's interpreter checks the
// variables it exports to each program it starts (childEnv) and adds the
// hardening last, so nothing it runs overrides it. But a program can make
// the environment of the programs it starts itself: env NAME=value, env -u,
// env -i, sudo NAME=value, and the script of sh -c, flock -c or env -S,
// which a real shell runs inside the sandbox (assignments, export, unset,
// read …). There a guarded variable (GIT_CONFIG_*, LD_PRELOAD, BASH_ENV,
// PAGER, …) set or warden's hardening removed changes what code the
// launched program runs — git then runs a core.fsmonitor, a pager or a diff
// driver of the command's choosing, a program warden's command rules never
// see. So the same rule holds there as in warden's own interpreter: a
// guarded variable needs an exact env:NAME grant, PATH is fixed, and what
// the hardening sets cannot be removed. It is checked on the words known
// before the command runs, and again on each program's real words as it
// starts.

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// envChange is one change a launcher or a script makes to the environment
// of the programs it starts.
type envChange struct {
	name    string // the variable ("" with clear or unknown)
	unset   bool   // removed (env -u, unset) rather than set
	clear   bool   // the whole environment dropped (env -i)
	unknown bool   // a variable whose name is known only when the script runs
	by      string // what makes it: "env", "sh -c", …
}

// launchEnvRefusal returns the refusal of the first change p, or a program
// or script it launches, makes to the environment that warden's own
// interpreter would refuse; nil when there is none.
func launchEnvRefusal(p tool.Program, grants capability.Set) *tool.Error {
	for _, s := range subjects(p) {
		for _, c := range launchEnv(s) {
			if e := c.refusal(grants); e != nil {
				return e
			}
		}
	}
	return nil
}

const envHint = "leave it as warden sets it; a variable that changes what programs load needs an exact env:NAME grant, and PATH is fixed"

func (c envChange) refusal(grants capability.Set) *tool.Error {
	switch {
	case c.unknown:
		return tool.Errorf(tool.CodeCapabilityDenied, "name the variable literally",
			"%s sets or removes a variable whose name it only knows when it runs, which may be one warden guards (GIT_CONFIG_*, LD_PRELOAD, PATH, …)", c.by)
	case c.clear:
		return tool.Errorf(tool.CodeCapabilityDenied, "remove only the variables you need to with env -u NAME",
			"%s clears the environment of the programs it starts, and with it what warden sets for every program (git's hardening, the pager)", c.by)
	case c.name == "PATH":
		return tool.Errorf(tool.CodeCapabilityDenied, "leave PATH alone: programs are found on warden's fixed PATH",
			"%s changes PATH for the programs it starts; warden runs programs only from its fixed PATH", c.by)
	case c.unset && hardeningSets(c.name):
		return tool.Errorf(tool.CodeCapabilityDenied, envHint,
			"%s removes %s, which warden sets for every program it starts (git's hardening, the pager)", c.by, c.name)
	case !c.unset:
		if why := envGuarded(c.name); why != "" && !exactEnvGrant(grants, c.name) {
			e := tool.NeedsGrants([]string{"env:" + c.name}, "%s sets %s for the programs it starts, which needs an exact env:%s grant: %s", c.by, c.name, c.name, why)
			e.Hint += " (exactly this name)"
			return e
		}
	}
	return nil
}

// hardeningSets reports whether the hardening sets name.
func hardeningSets(name string) bool {
	for _, kv := range hardening {
		if k, _, _ := strings.Cut(kv, "="); k == name {
			return true
		}
	}
	return false
}

// launchEnv returns the changes subject s makes to the environment of what
// it starts: env's and sudo's assignments and options, and what the script
// of a shell's -c, flock -c or env -S does. Words known only at run time
// end the search: the program's real words are checked as it starts.
func launchEnv(s tool.Program) []envChange {
	if s.Opaque || len(s.Argv) == 0 || dyn(s, 0) {
		return nil
	}
	switch name := path.Base(s.Argv[0]); name {
	case "env":
		return envArgsEnv(s)
	case "sudo", "doas":
		var out []envChange
		for i := 1; i < len(s.Argv) && !dyn(s, i); i++ {
			a := s.Argv[i]
			if strings.HasPrefix(a, "-") {
				continue // options (those taking a value cannot hold NAME=value)
			}
			n, _, ok := strings.Cut(a, "=")
			if !ok || !envName(n) {
				break
			}
			out = append(out, envChange{name: n, by: name})
		}
		return out
	case "flock":
		if i := skipOptions(s, 1, " -w --timeout -E --conflict-exit-code ", false); i >= 0 && i+2 < len(s.Argv) &&
			(s.Argv[i+1] == "-c" || s.Argv[i+1] == "--command") && !dyn(s, i+2) {
			return scriptEnv(s.Argv[i+2], "flock -c")
		}
	case "sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "posh", "fish", "csh", "tcsh":
		if src, ok := shellScript(s); ok {
			return scriptEnv(src, name+" -c")
		}
	}
	return nil
}

// envArgsEnv reads env's options and NAME=value operands.
func envArgsEnv(s tool.Program) []envChange {
	var out []envChange
	opts := true
	for i := 1; i < len(s.Argv); i++ {
		if dyn(s, i) {
			return out
		}
		a := s.Argv[i]
		value := func() (string, bool) { // the next word, an option's value
			if i+1 < len(s.Argv) && !dyn(s, i+1) {
				i++
				return s.Argv[i], true
			}
			return "", false
		}
		switch {
		case opts && a == "--":
			opts = false
		case opts && (a == "-" || a == "--ignore-environment"):
			out = append(out, envChange{clear: true, by: "env " + a})
		case opts && a == "--unset":
			if v, ok := value(); ok {
				out = append(out, envChange{name: v, unset: true, by: "env"})
			}
		case opts && strings.HasPrefix(a, "--unset="):
			out = append(out, envChange{name: strings.TrimPrefix(a, "--unset="), unset: true, by: "env"})
		case opts && (a == "--split-string" || strings.HasPrefix(a, "--split-string=")):
			src, ok := strings.CutPrefix(a, "--split-string=")
			if !ok {
				src, ok = value()
			}
			if ok {
				out = append(out, scriptEnv(src, "env -S")...)
			}
			return out
		case opts && a == "--chdir":
			value()
		case opts && strings.HasPrefix(a, "--"):
			// --null, --debug, --ignore-signal, …
		case opts && strings.HasPrefix(a, "-") && len(a) > 1:
			// A cluster of short options: -i, -0, -v; -u, -C and -S take
			// the rest of the word or the next one.
		cluster:
			for k := 1; k < len(a); k++ {
				switch o := a[k]; o {
				case 'i':
					out = append(out, envChange{clear: true, by: "env -i"})
				case 'u', 'C', 'S':
					v, ok := a[k+1:], true
					if v == "" {
						v, ok = value()
					}
					if !ok {
						return out
					}
					switch o {
					case 'u':
						out = append(out, envChange{name: v, unset: true, by: "env"})
					case 'S':
						return append(out, scriptEnv(v, "env -S")...)
					}
					break cluster
				}
			}
		default:
			n, _, ok := strings.Cut(a, "=")
			if !ok || !envName(n) {
				return out // the command
			}
			opts = false
			out = append(out, envChange{name: n, by: "env"})
		}
	}
	return out
}

// shellScript returns the literal script of a shell's -c (see invocation).
func shellScript(p tool.Program) (string, bool) {
	for i := 1; i < len(p.Argv); i++ {
		a := p.Argv[i]
		if dyn(p, i) {
			return "", false
		}
		switch {
		case a == "-o" || a == "+o" || a == "-O" || a == "+O" || a == "--rcfile" || a == "--init-file":
			i++
		case a == "--" || a == "-" || !(strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+")):
			return "", false
		case strings.HasPrefix(a, "--"):
		case strings.HasPrefix(a, "-") && strings.Contains(a, "c"):
			if i+1 >= len(p.Argv) || dyn(p, i+1) {
				return "", false
			}
			return p.Argv[i+1], true
		}
	}
	return "", false
}

// setters are builtins whose operands name variables they set.
var setters = map[string]bool{"read": true, "printf": true, "getopts": true, "mapfile": true, "readarray": true, "let": true}

// arithAssign are the assignment operators of arithmetic.
var arithAssign = map[syntax.BinAritOperator]bool{
	syntax.Assgn: true, syntax.AddAssgn: true, syntax.SubAssgn: true, syntax.MulAssgn: true, syntax.QuoAssgn: true,
	syntax.RemAssgn: true, syntax.AndAssgn: true, syntax.OrAssgn: true, syntax.XorAssgn: true, syntax.ShlAssgn: true,
	syntax.ShrAssgn: true, syntax.AndBoolAssgn: true, syntax.OrBoolAssgn: true, syntax.XorBoolAssgn: true, syntax.PowAssgn: true,
}

// scriptEnv returns what a script another shell runs does to its
// variables: each variable it assigns (alone, before a command, exported,
// declared or in arithmetic), reads into, loops over or unsets; one it
// names only when it runs is an unknown change. A variable the shell
// inherited is in the environment of what it starts, so every assignment
// counts, exported or not. Programs the script starts (env …) are
// subjects of their own.
func scriptEnv(src, by string) []envChange {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return nil // an opaque subject: the command rules judge it
	}
	var out []envChange
	add := func(name string, unset bool) {
		out = append(out, envChange{name: name, unset: unset, by: by})
	}
	unknown := func() { out = append(out, envChange{unknown: true, by: by}) }
	// word adds the variable a literal word names (NAME or NAME=value).
	word := func(w *syntax.Word, unset bool) {
		v, ok := wordLit(w)
		switch {
		case !ok:
			unknown()
		case strings.HasPrefix(v, "-") || strings.HasPrefix(v, "+"):
		default:
			n, _, _ := strings.Cut(v, "=")
			add(n, unset)
		}
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Assign:
			// Alone, before a command, or an operand of export, declare,
			// local, readonly, typeset.
			switch {
			case n.Name != nil:
				add(n.Name.Value, false)
			case n.Naked && n.Value != nil:
				word(n.Value, false)
			}
			// declare -n ref=NAME makes ref an alias of NAME.
			if n.Value != nil {
				if v, ok := wordLit(n.Value); ok && (envGuarded(v) != "" || v == "PATH") {
					add(v, false)
				}
			}
		case *syntax.CallExpr:
			if len(n.Args) == 0 {
				break
			}
			cmd, ok := wordLit(n.Args[0])
			if !ok {
				break
			}
			switch {
			case cmd == "unset":
				for _, w := range n.Args[1:] {
					word(w, true)
				}
			case cmd == "eval":
				var words []string
				for _, w := range n.Args[1:] {
					v, ok := wordLit(w)
					if !ok {
						return true // an opaque subject: the command rules judge it
					}
					words = append(words, v)
				}
				out = append(out, scriptEnv(strings.Join(words, " "), by)...)
			case setters[cmd]:
				for _, w := range n.Args[1:] {
					v, ok := wordLit(w)
					if !ok || strings.HasPrefix(v, "-") {
						continue
					}
					if n, _, _ := strings.Cut(v, "="); envName(n) && (envGuarded(n) != "" || n == "PATH") {
						add(n, false)
					}
				}
			}
		case *syntax.ForClause:
			if wi, ok := n.Loop.(*syntax.WordIter); ok && wi.Name != nil {
				add(wi.Name.Value, false)
			}
		case *syntax.BinaryArithm:
			if arithAssign[n.Op] {
				if w, ok := n.X.(*syntax.Word); ok {
					word(w, false)
				}
			}
		case *syntax.UnaryArithm:
			if n.Op == syntax.Inc || n.Op == syntax.Dec {
				if w, ok := n.X.(*syntax.Word); ok {
					word(w, false)
				}
			}
		}
		return true
	})
	return out
}
