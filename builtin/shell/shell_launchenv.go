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
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"

	"github.com/wardenrt/warden/builtin/internal/getopt"
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
	arith   bool   // with unknown: arithmetic on a value that may assign one (shell_arith.go)
	unread  bool   // with unknown: a shell's words warden cannot read (getopt.Shells)
	evals   string // with unknown: what bash evaluates as it runs (shell_arith.go's evalsUnseen)
	by      string // what makes it: "env", "sh -c", …
}

// launchEnvRefusal returns the refusal of the first change p, or a program
// or script it launches, makes to the environment that warden's own
// interpreter would refuse; nil when there is none.
func launchEnvRefusal(p tool.Program, grants capability.Set) *tool.Error {
	for k, s := range subjects(p) {
		for _, c := range launchEnv(s, k == 0) {
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
	case c.unknown && c.arith:
		return tool.Errorf(tool.CodeCapabilityDenied, "use literal numbers in arithmetic, or variables the script sets to a number before it uses them",
			"%s evaluates in arithmetic a value it only knows when it runs, which bash reads as an expression that may assign a variable warden guards (X='GIT_CONFIG_COUNT=0'; : $((X)))", c.by)
	case c.unknown && c.evals != "":
		return tool.Errorf(tool.CodeCapabilityDenied, "name variables plainly: no subscript in a name given as a word (read, printf -v, declare, test -v, unset …), no ${!name}, no ${name@P}, a declare -n with a plain target",
			"%s %s, which bash evaluates as it runs (a subscript as arithmetic, a prompt string as the shell would expand it): a $(…) in it runs a command, and an assignment in it sets a variable, that warden never sees", c.by, c.evals)
	case c.unknown && c.unread:
		return tool.Errorf(tool.CodeCapabilityDenied, "start the shell with the options of its manual, the script after -c and its options",
			"%s is started with words warden cannot read as the shell does (an unknown option, --rcfile, a missing value, or a shell warden has no table for): the script it runs may set or remove a variable warden guards", c.by)
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
	for _, kv := range hardening() {
		if k, _, _ := strings.Cut(kv, "="); k == name {
			return true
		}
	}
	return false
}

// launchEnv returns the changes subject s makes to the environment of what
// it starts: env's, sudo's and xargs's options and assignments, and what
// the script of a shell's -c, flock -c or env -S does. A word known only
// at run time where it may change the environment is checked again as
// the program starts when recheck holds (s is the command's own program,
// whose real words warden's interpreter checks); in what a launcher or a
// script starts, warden never sees it again (xargs's input, a variable of
// the script), so it is an unknown change.
func launchEnv(s tool.Program, recheck bool) []envChange {
	if s.Opaque || len(s.Argv) == 0 || dyn(s, 0) {
		return nil
	}
	var out []envChange
	open := func(by string) []envChange {
		if recheck {
			return out
		}
		return append(out, envChange{unknown: true, by: by})
	}
	switch name := path.Base(s.Argv[0]); name {
	case "env":
		r := readEnv(s)
		out = r.changes
		if r.open {
			if r.split {
				return append(out, envChange{unknown: true, by: "env -S"})
			}
			return open("env")
		}
	case "sudo", "doas":
		opts, i, st := launchers()[name].opts.Parse(s.Argv, dynOf(s), 1, "")
		if st == getopt.Dynamic {
			return open(name)
		}
		for _, o := range opts {
			if o.Dynamic {
				return open(name)
			}
		}
		for ; st == getopt.OK && i < len(s.Argv); i++ {
			if dyn(s, i) {
				return open(name)
			}
			n, _, ok := strings.Cut(s.Argv[i], "=")
			if !ok || n == "" {
				break
			}
			out = append(out, envChange{name: n, by: name})
		}
	case "xargs":
		// --process-slot-var=NAME sets NAME in each command it starts.
		opts, _, st := xargsOpts.Parse(s.Argv, dynOf(s), 1, "")
		for _, o := range opts {
			switch {
			case o.Key == "process-slot-var" && o.Dynamic:
				return open("xargs --process-slot-var")
			case o.Key == "process-slot-var":
				out = append(out, envChange{name: o.Value, by: "xargs --process-slot-var"})
			}
		}
		if st == getopt.Dynamic {
			return open("xargs")
		}
	case "flock":
		if i, ok := launchers()["flock"].command(s); ok {
			if src, ok := flockScript(s, i); ok {
				return scriptEnv(src, "flock -c")
			}
			if i+2 < len(s.Argv) && (dyn(s, i+1) || (s.Argv[i+1] == "-c" || s.Argv[i+1] == "--command") && dyn(s, i+2)) {
				return open("flock -c")
			}
		}
	case "sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "posh", "fish", "csh", "tcsh":
		switch i, st := shellScriptAt(s); {
		case st == getopt.Unknown:
			return append(out, envChange{unknown: true, unread: true, by: name})
		case st == getopt.Dynamic || i > 0 && dyn(s, i):
			return open(name + " -c")
		case i > 0:
			return scriptEnv(s.Argv[i], name+" -c")
		}
	}
	return out
}

// envRun is what env's words say: the changes it makes to the
// environment and the command it runs.
type envRun struct {
	changes []envChange
	cmd     int          // the command's first word in words (len: none)
	words   tool.Program // env's words, -S strings split in place
	// open: a word known only at run time stands where it may change the
	// environment or be an option (an option, an assignment, -u's or -S's
	// value); split: a -S string was read (its ${NAME} words are known
	// only to env); unseen: what env runs cannot be told (a string env
	// refuses, -S strings nested too deep).
	open, split, unseen bool
}

// maxSplits bounds how many -S strings env's words are read through.
const maxSplits = 8

// readEnv reads env's words as GNU env does: options (-i, -u NAME, -C DIR,
// -0, -v and their long names, by any unambiguous prefix), a - that
// clears the environment, NAME=value words, then the command. A -S string
// is split (getopt.SplitEnvString) and read in its place, options and
// all: env -S '-i git status' is env -i git status.
func readEnv(p tool.Program) envRun {
	r := envRun{words: p}
	for splits := 0; ; splits++ {
		w := r.words
		opts, i, st := envOpts.Parse(w.Argv, dynOf(w), 1, "S")
		resplit := false
		for _, o := range opts {
			switch {
			case o.Key == "i":
				r.changes = append(r.changes, envChange{clear: true, by: "env -i"})
			case o.Key == "u" && o.Dynamic:
				r.open = true
				return r
			case o.Key == "u":
				r.changes = append(r.changes, envChange{name: o.Value, unset: true, by: "env"})
			case o.Key == "S" && (o.Dynamic || splits >= maxSplits):
				r.open, r.unseen = true, true
				return r
			case o.Key == "S":
				words, expanded, err := getopt.SplitEnvString(o.Value)
				if err != nil {
					r.unseen = true // env refuses the string
					return r
				}
				r.split, resplit = true, true
				r.words = tool.Program{
					Argv:    append(append([]string{w.Argv[0]}, words...), w.Argv[i:]...),
					Dynamic: append(append([]bool{false}, expanded...), w.Dynamic[min(i, len(w.Dynamic)):]...),
				}
			}
		}
		if resplit {
			continue
		}
		if st != getopt.OK {
			r.open, r.unseen = st == getopt.Dynamic, true
			return r
		}
		if i < len(w.Argv) && !dyn(w, i) && w.Argv[i] == "-" {
			r.changes = append(r.changes, envChange{clear: true, by: "env -"})
			i++
		}
		for ; i < len(w.Argv); i++ {
			if dyn(w, i) {
				r.open = true
				break
			}
			n, _, ok := strings.Cut(w.Argv[i], "=")
			if !ok {
				break
			}
			r.changes = append(r.changes, envChange{name: n, by: "env"})
		}
		r.cmd = i
		return r
	}
}

// launched is what env runs, as command rules see it: an opaque subject
// when its words cannot be told, or its command holds a word env expands
// from a -S string (${NAME}).
func (r envRun) launched(p tool.Program) []tool.Program {
	if r.unseen || r.open { // r.open: a word known only at run time, an assignment or the command
		return opaque(p)
	}
	qs := launchRest(r.words, r.cmd)
	if r.split && len(qs) > 0 && slices.Contains(qs[0].Dynamic, true) {
		return opaque(p)
	}
	return qs
}

// shellScript returns the literal script of a shell's -c, read with the
// shell's own invocation table (getopt.Shells).
func shellScript(p tool.Program) (string, bool) {
	i, st := shellScriptAt(p)
	if st != getopt.OK || i == 0 || dyn(p, i) {
		return "", false
	}
	return p.Argv[i], true
}

// shellScriptAt finds the script of a shell's -c: its index (0: there is
// none, the shell reads a file or its input) and how far the shell's
// words could be read; a shell warden has no table for is Unknown.
func shellScriptAt(p tool.Program) (int, getopt.Status) {
	t, ok := getopt.Shells[path.Base(p.Argv[0])]
	if !ok {
		return 0, getopt.Unknown
	}
	return t.Script(p.Argv, dynOf(p))
}

// readShells are the shells whose scripts warden reads: bash's language
// and the POSIX shells', which it parses as bash's. zsh, ksh and mksh
// have tables (their script is found, and its plain assignments are
// checked) but their languages differ — zsh's glob qualifiers run code —
// so what they run is an opaque subject.
var readShells = sync.OnceValue(func() map[string]bool {
	return map[string]bool{"sh": true, "dash": true, "ash": true, "posh": true, "bash": true}
})

// setters are the builtins that set variables they name, and how each
// reads its words: its options (bash's), the options whose value names a
// variable, and whether its operands do (read NAME…, mapfile ARRAY) or
// only its second (getopts OPTSTRING NAME). printf sets only -v's.
var setters = sync.OnceValue(func() map[string]setter {
	return map[string]setter{
		"read":      {opts: getopt.Table{Short: "ersa:d:i:n:N:p:t:u:"}, named: "a", operands: true},
		"printf":    {opts: getopt.Table{Short: "v:"}, named: "v"},
		"wait":      {opts: getopt.Table{Short: "fnp:"}, named: "p"},
		"getopts":   {operands: true, only: true},
		"mapfile":   {opts: getopt.Table{Short: "d:n:O:s:tu:C:c:"}, operands: true},
		"readarray": {opts: getopt.Table{Short: "d:n:O:s:tu:C:c:"}, operands: true},
		"export":    {opts: getopt.Table{Short: "fnp"}, operands: true},
		"readonly":  {opts: getopt.Table{Short: "aAfp"}, operands: true},
		"declare":   {opts: getopt.Table{Short: "aAfFgiIlnrtuxp"}, operands: true},
		"typeset":   {opts: getopt.Table{Short: "aAfFgiIlnrtuxp"}, operands: true},
		"local":     {opts: getopt.Table{Short: "aAfFgiIlnrtuxp"}, operands: true},
	}
})

// setter is how one of the setters reads its words.
type setter struct {
	opts           getopt.Table
	named          string // option keys whose value is a variable's name
	operands, only bool   // operands are names; only the second one is
}

// arithAssign are the assignment operators of arithmetic.
var arithAssign = sync.OnceValue(func() map[syntax.BinAritOperator]bool {
	return map[syntax.BinAritOperator]bool{
		syntax.Assgn: true, syntax.AddAssgn: true, syntax.SubAssgn: true, syntax.MulAssgn: true, syntax.QuoAssgn: true,
		syntax.RemAssgn: true, syntax.AndAssgn: true, syntax.OrAssgn: true, syntax.XorAssgn: true, syntax.ShlAssgn: true,
		syntax.ShrAssgn: true, syntax.AndBoolAssgn: true, syntax.OrBoolAssgn: true, syntax.XorBoolAssgn: true, syntax.PowAssgn: true,
	}
})

// scriptEnv returns what a script another shell runs does to its
// variables: each variable it assigns (alone, before a command, exported,
// declared, in arithmetic or with ${NAME:=value}), reads into (read,
// printf -v, getopts, mapfile), loops over or unsets; one it names only
// when it runs, or through a reference whose target is computed
// (declare -n), is an unknown change. A variable the shell inherited is
// in the environment of what it starts, so every assignment counts,
// exported or not. Programs the script starts (env …) are subjects of
// their own.
func scriptEnv(src, by string) []envChange {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return nil // an opaque subject: the command rules judge it
	}
	e := &scriptEnvs{by: by}
	syntax.Walk(f, e.node)
	if what := evalsUnseen(f); what != "" {
		e.out = append(e.out, envChange{unknown: true, evals: what, by: by})
	}
	if arithUnseen(f) {
		e.out = append(e.out, envChange{unknown: true, arith: true, by: by})
	}
	return e.out
}

// callNames returns the variables a simple command of a script sets by
// name (read, printf -v, mapfile, getopts, export …), as call reads them.
func (e *scriptEnvs) callNames(args []*syntax.Word) []string {
	c := &scriptEnvs{}
	c.call(args)
	var names []string
	for _, ch := range c.out {
		if !ch.unknown && !ch.unset {
			names = append(names, ch.name)
		}
	}
	return names
}

// scriptEnvs gathers the changes of one script (scriptEnv).
type scriptEnvs struct {
	by  string
	out []envChange
}

func (e *scriptEnvs) add(name string, unset bool) {
	if strings.Contains(name, "[") { // a subscript bash evaluates
		e.out = append(e.out, envChange{unknown: true, evals: "names the variable " + quote(name), by: e.by})
		return
	}
	e.out = append(e.out, envChange{name: name, unset: unset, by: e.by})
}

func (e *scriptEnvs) unknown() { e.out = append(e.out, envChange{unknown: true, by: e.by}) }

// word adds the variable a word names (NAME or NAME=value); a word known
// only at run time is an unknown change.
func (e *scriptEnvs) word(w *syntax.Word, unset bool) {
	v, ok := wordLit(w)
	switch {
	case !ok:
		e.unknown()
	case strings.HasPrefix(v, "-") || strings.HasPrefix(v, "+"):
	default:
		n, val, _ := strings.Cut(v, "=")
		if strings.HasPrefix(val, "(") { // declare "a=([…]=…)": the subscripts are evaluated
			n += "["
		}
		e.add(n, unset)
	}
}

func (e *scriptEnvs) node(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.DeclClause:
		e.decl(n)
	case *syntax.Assign:
		// Alone, before a command, or an operand of export, declare,
		// local, readonly, typeset.
		switch {
		case n.Name != nil:
			e.add(n.Name.Value, false)
		case n.Naked && n.Value != nil:
			e.word(n.Value, false)
		}
		// declare -n ref=NAME makes ref an alias of NAME (so does ref=NAME
		// once ref is declared a reference).
		if n.Value != nil {
			if v, ok := wordLit(n.Value); ok && (envGuarded(v) != "" || v == "PATH") {
				e.add(v, false)
			}
		}
	case *syntax.CallExpr:
		e.call(n.Args)
	case *syntax.ForClause:
		if wi, ok := n.Loop.(*syntax.WordIter); ok && wi.Name != nil {
			e.add(wi.Name.Value, false)
		}
	case *syntax.CoprocClause:
		// coproc NAME sets NAME (its file descriptors) and NAME_PID.
		name := "COPROC"
		if n.Name != nil {
			v, ok := wordLit(n.Name)
			if !ok {
				e.unknown()
				break
			}
			name = v
		}
		e.add(name, false)
		e.add(name+"_PID", false)
	case *syntax.ParamExp:
		// ${NAME=value} and ${NAME:=value} set NAME.
		if n.Exp != nil && (n.Exp.Op == syntax.AssignUnset || n.Exp.Op == syntax.AssignUnsetOrNull) {
			if n.Excl || n.Param == nil {
				e.unknown()
			} else {
				e.add(n.Param.Value, false)
			}
		}
	case *syntax.LetClause:
		// let 'NAME=1': a quoted expression is read as arithmetic.
		for _, x := range n.Exprs {
			if w, ok := x.(*syntax.Word); ok {
				v, ok := wordLit(w)
				if !ok {
					e.unknown()
					continue
				}
				e.out = append(e.out, scriptEnv("(("+v+"))", e.by)...)
			}
		}
	case *syntax.BinaryArithm:
		if arithAssign()[n.Op] {
			if w, ok := n.X.(*syntax.Word); ok {
				e.word(w, false)
			}
		}
	case *syntax.UnaryArithm:
		if n.Op == syntax.Inc || n.Op == syntax.Dec {
			if w, ok := n.X.(*syntax.Word); ok {
				e.word(w, false)
			}
		}
	}
	return true
}

// decl: declare -n with a target known only at run time is an unknown
// change (the reference may name any variable).
func (e *scriptEnvs) decl(d *syntax.DeclClause) {
	ref := d.Variant != nil && d.Variant.Value == "nameref"
	for _, as := range d.Args {
		if v, ok := wordLit(as.Value); ok && as.Naked && strings.HasPrefix(v, "-") && strings.Contains(v, "n") {
			ref = true
		}
	}
	for _, as := range d.Args {
		v, ok := wordLit(as.Value)
		switch {
		case !ref || as.Naked && ok && (strings.HasPrefix(v, "-") || strings.HasPrefix(v, "+")):
		case as.Value == nil || as.Naked:
			// declare -n r: the next r=… names its target.
			e.out = append(e.out, envChange{unknown: true, evals: "declares a reference without a plain target", by: e.by})
		case !ok:
			e.unknown()
		case !envName(v):
			e.out = append(e.out, envChange{unknown: true, evals: "declares a reference to " + quote(v), by: e.by})
		}
	}
}

// call reads a simple command of the script: unset, eval, the setters,
// and those behind command or builtin.
func (e *scriptEnvs) call(args []*syntax.Word) {
	for len(args) > 0 {
		cmd, ok := wordLit(args[0])
		if !ok || cmd != "command" && cmd != "builtin" {
			break
		}
		args = args[1:]
		for len(args) > 0 {
			if v, ok := wordLit(args[0]); !ok || !strings.HasPrefix(v, "-") {
				break
			}
			args = args[1:]
		}
	}
	if len(args) == 0 {
		return
	}
	cmd, ok := wordLit(args[0])
	if !ok {
		return
	}
	switch st, isSetter := setters()[cmd]; {
	case cmd == "unset":
		for _, w := range args[1:] {
			e.word(w, true)
		}
	case cmd == "eval":
		var words []string
		for _, w := range args[1:] {
			v, ok := wordLit(w)
			if !ok {
				return // an opaque subject, as a sourced file is: the command rules judge it
			}
			words = append(words, v)
		}
		e.out = append(e.out, scriptEnv(strings.Join(words, " "), e.by)...)
	case cmd == "trap" || cmd == "alias":
		e.scripts(cmd, args[1:])
	case cmd == "exec":
		p := wordsProgram(args)
		opts, _, st := execOpts.Parse(p.Argv, dynOf(p), 1, "")
		if st != getopt.OK {
			e.unknown()
		}
		for _, o := range opts {
			if o.Key == "c" {
				e.out = append(e.out, envChange{clear: true, by: e.by + " (exec -c)"})
			}
		}
	case isSetter:
		e.setter(st.opts, st.named, st.operands, st.only, args)
	}
}

// execOpts are the options of bash's exec: -c clears the environment of
// the command, -l makes it a login shell, -a names its argv[0].
var execOpts = getopt.Table{Short: "cla:"}

// scripts reads the scripts trap and alias hold as eval's: a trap's
// action (trap [-lp] [--] ACTION CONDITION…) and each alias's value
// (dash expands aliases in scripts); one known only at run time is an
// unknown change.
func (e *scriptEnvs) scripts(cmd string, args []*syntax.Word) {
	var srcs []string
	for i, w := range args {
		v, ok := wordLit(w)
		switch {
		case !ok:
			e.unknown()
			return
		case cmd == "alias":
			if _, val, eq := strings.Cut(v, "="); eq {
				srcs = append(srcs, val)
			}
		case strings.HasPrefix(v, "-") && v != "-":
		case len(args) > i+1:
			srcs = append(srcs, v) // the action; the rest are conditions
		}
		if cmd == "trap" && len(srcs) > 0 {
			break
		}
	}
	for _, src := range srcs {
		e.out = append(e.out, scriptEnv(src, e.by)...)
	}
}

// wordsProgram is a script's words as a program's: the literal ones, and
// those known only at run time marked dynamic.
func wordsProgram(args []*syntax.Word) tool.Program {
	p := tool.Program{Argv: make([]string, len(args)), Dynamic: make([]bool, len(args))}
	for i, w := range args {
		v, ok := wordLit(w)
		p.Argv[i], p.Dynamic[i] = v, !ok
	}
	return p
}

// setter adds the variables a setter's words name.
func (e *scriptEnvs) setter(opts getopt.Table, named string, operands, only bool, args []*syntax.Word) {
	p := wordsProgram(args)
	read, i, st := opts.Parse(p.Argv, dynOf(p), 1, "")
	if st != getopt.OK {
		e.unknown() // an option known only at run time may name a variable
		return
	}
	for _, o := range read {
		switch {
		case !strings.Contains(named, o.Key):
		case o.Dynamic:
			e.unknown()
		default:
			e.add(o.Value, false)
		}
	}
	for k := i; operands && k < len(args); k++ {
		if only && k != i+1 {
			continue
		}
		if p.Dynamic[k] {
			e.unknown()
			continue
		}
		n, _, _ := strings.Cut(p.Argv[k], "=")
		e.add(n, false)
	}
}
