package shell

import (
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"

	"github.com/wardenrt/warden/internal/lazyre"
	"github.com/wardenrt/warden/runtime/tool"
)

// An inner script (sh -c, bash -c, flock -c, env -S) is run by bash or
// dash, not by warden's interpreter, and three reviews found one place
// after another where those shells and warden's parser read the same text
// differently (dash's ((…)), a carriage return, a here-document's
// delimiter, bash's jobs -x, BASH_CMDS, set -k, functions defined in the
// background, eval strings that do not parse). So an inner script is read
// only when it keeps to a small part of the language on which they agree
// (plainScript); anything else makes it opaque, judged by the strictest
// command rule. warden's own interpreter runs the top-level command, so
// there what warden reads is what runs, and none of this applies.

// plainBuiltins are the builtins an inner script may use: they run no
// command, set no variable by name, change no option that changes how
// words are read. Every other builtin of bash or dash makes it opaque.
var plainBuiltins = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"cd": true, "echo": true, "printf": true, "test": true, "[": true, "true": true, "false": true, ":": true,
		"pwd": true, "exit": true, "shift": true, "wait": true, "set": true, "exec": true, "break": true, "continue": true,
	}
})

// shellBuiltins are the builtins of bash 5.2 and dash (which has a subset
// of them), and the keywords that stand where a command does.
var shellBuiltins = sync.OnceValue(func() []string {
	return strings.Fields(". : [ alias bg bind break builtin caller cd command compgen complete compopt continue " +
		"declare dirs disown echo enable eval exec exit export false fc fg getopts hash help history jobs kill let local " +
		"logout mapfile popd printf pushd pwd read readarray readonly return set shift shopt source suspend test times trap " +
		"true type typeset ulimit umask unalias unset wait coproc function select time")
})

// plainSetOptions are the options set may take in a plain script.
var plainSetOptions = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"-e": true, "+e": true, "-u": true, "+u": true, "-eu": true, "-ue": true,
		"-o": true, "+o": true, "pipefail": true, "errexit": true, "nounset": true}
})

// lowerName is an assignment a plain script may make: a lower-case name
// (bash's and the environment's own variables — BASH_CMDS, PS4, ENV,
// SHELLOPTS, PATH — are upper-case).
var lowerName = lazyre.New(`^[a-z_][a-z0-9_]*$`)

// anyName is a variable a plain script may read: any, plainly ($NAME).
var anyName = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// plainScript reports whether an inner script keeps to the part of the
// language bash, dash and warden's parser read alike.
func plainScript(src string, f *syntax.File) bool {
	if strings.ContainsAny(src, "\r\x00") || strings.Contains(src, "\\\n") {
		return false
	}
	ok := true
	syntax.Walk(f, func(n syntax.Node) bool {
		if !ok || n == nil { // nil: the end of a node's children
			return ok
		}
		switch n := n.(type) {
		case *syntax.File, *syntax.Stmt, *syntax.BinaryCmd, *syntax.Subshell, *syntax.Block, *syntax.IfClause,
			*syntax.WhileClause, *syntax.CaseClause, *syntax.CaseItem, *syntax.WordIter, *syntax.Comment:
		case *syntax.CallExpr:
			ok = plainCall(n)
		case *syntax.Assign:
			ok = n.Name != nil && lowerName.MatchString(n.Name.Value) && n.Index == nil && n.Array == nil && !n.Append
		case *syntax.Redirect:
			ok = n.Hdoc == nil && n.Op != syntax.Hdoc && n.Op != syntax.DashHdoc && n.Op != syntax.WordHdoc
		case *syntax.Word, *syntax.Lit:
			if l, isLit := n.(*syntax.Lit); isLit {
				ok = !braceLike(l.Value)
			}
		case *syntax.DblQuoted:
			ok = !n.Dollar // $"…": bash expands the string's translation from a catalogue
		case *syntax.CmdSubst:
			ok = !n.Backquotes // backslashes inside backquotes are read differently
		case *syntax.ForClause:
			it, isIter := n.Loop.(*syntax.WordIter)
			ok = isIter && !n.Select && it.Name != nil && lowerName.MatchString(it.Name.Value) // a loop assigns its name too
		case *syntax.SglQuoted:
			ok = !n.Dollar
		case *syntax.ParamExp:
			ok = !n.Excl && !n.Length && !n.Width && n.Index == nil && n.Slice == nil && n.Repl == nil && n.Names == 0 &&
				n.Exp == nil && n.Param != nil && (anyName.MatchString(n.Param.Value) || strings.Trim(n.Param.Value, "0123456789@*#?$!-") == "")
		default:
			ok = false // functions, arithmetic, [[ ]], declarations, process substitution, extended globs, …
		}
		return ok
	})
	return ok
}

// plainCall reports whether a simple command stays plain: a program, or
// one of plainBuiltins used plainly.
func plainCall(c *syntax.CallExpr) bool {
	if len(c.Args) == 0 {
		return true // assignments alone (checked as Assign nodes)
	}
	name, ok := wordLit(c.Args[0])
	if !ok {
		return true // a run-time name: a dynamic word, judged by the strictest rule
	}
	if !slices.Contains(shellBuiltins(), name) {
		return true
	}
	if !plainBuiltins()[name] {
		return false
	}
	for _, w := range c.Args[1:] {
		v, lit := wordLit(w)
		switch name {
		case "test", "[":
			// bash's -v and -R read their operand as NAME[SUBSCRIPT] and
			// evaluate the subscript ($(…) runs), and an operator or an
			// operand known only when it runs may be either: literal
			// words only, no -v or -R, no subscript.
			if !lit || v == "-v" || v == "-R" || strings.Contains(v, "[") && v != "[" && v != "]" {
				return false
			}
		case "set":
			if !lit || !plainSetOptions()[v] {
				return false
			}
		case "printf", "wait", "exec":
			// printf -v NAME and wait -p NAME assign; exec -a gives
			// another argv[0], exec -c clears the environment.
			if !lit || strings.HasPrefix(v, "-") && v != "--" {
				return false
			}
			if name == "exec" || name == "printf" {
				return true // the rest is the program's, or printf's format and operands
			}
		}
	}
	return true
}

// braceLike reports a word bash would brace-expand (dash would not):
// {a,b} or {1..3}.
func braceLike(s string) bool {
	i := strings.IndexByte(s, '{')
	if i < 0 {
		return false
	}
	rest := s[i+1:]
	j := strings.IndexByte(rest, '}')
	return j >= 0 && (strings.Contains(rest[:j], ",") || strings.Contains(rest[:j], ".."))
}

// plainInvocation reports whether a shell's words before its -c script
// are options that change nothing of how the script is read or what it
// reads first: -c, -e, -u, -o pipefail|errexit|nounset, --norc,
// --noprofile, --. (-k, -i, -l, --rcfile, -O, --posix and the rest make
// the script opaque.)
func plainInvocation(p tool.Program, script int) bool {
	for i := 1; i < script; i++ {
		w := p.Argv[i]
		if dyn(p, i) {
			return false
		}
		switch {
		case w == "--" || w == "--norc" || w == "--noprofile":
		case w == "-o" || w == "+o":
			if i+1 >= script || !plainSetOptions()[p.Argv[i+1]] || p.Argv[i+1] == "-o" {
				return false
			}
			i++
		case strings.HasPrefix(w, "-") && len(w) > 1 && strings.Trim(w[1:], "ceu") == "":
		default:
			return false
		}
	}
	return true
}
