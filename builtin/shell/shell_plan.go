package shell

// Static analysis of a shell command: the capabilities it visibly needs, the
// refusals that can be decided before anything runs, and the plan the dry
// run prints. Everything here is an early answer; the handlers in
// shell_exec.go check again, with the real values, when the command runs.

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/wardenrt/warden/builtin/internal/argguard"
	"github.com/wardenrt/warden/builtin/internal/getopt"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// Plan is the shell tool's dry-run data: what the command would run.
type Plan struct {
	Cwd       string        `json:"cwd"`
	TimeoutMS int64         `json:"timeout_ms"`
	Path      string        `json:"path"`
	Env       []string      `json:"env,omitempty"`
	Commands  []PlanCommand `json:"commands"`
	Needs     []string      `json:"needs"`
}

// PlanCommand is one simple command (or a redirected compound command)
// of the plan.
type PlanCommand struct {
	Pos string `json:"pos"` // line:column
	// Kind is program, builtin, function, dynamic (the name is only known at
	// run time), assignment or block (a compound command's redirections).
	Kind string `json:"kind"`
	// Argv holds the words as they will be passed; a word only known at run
	// time is shown as ‹its source›.
	Argv    []string `json:"argv,omitempty"`
	Dynamic bool     `json:"dynamic,omitempty"`
	// Context says where the command sits: "$(…)", "`…`", "<(…)", "eval",
	// "pipe", "background" (or empty at the top level).
	Context   string         `json:"context,omitempty"`
	Assigns   []string       `json:"assigns,omitempty"`
	Redirects []PlanRedirect `json:"redirects,omitempty"`
	// Need is the exec grant the program needs ("" for builtins).
	Need string `json:"need,omitempty"`
}

// PlanRedirect is one redirection.
type PlanRedirect struct {
	Op     string `json:"op"`
	Target string `json:"target"`
	// Path is the resolved file, when the target is known before running.
	Path   string `json:"path,omitempty"`
	Access string `json:"access,omitempty"` // read, write, read+write
}

// text renders the plan for the envelope's output.
func (p Plan) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "shell plan (nothing was run): cwd %s, timeout %d ms, PATH %s\n", p.Cwd, p.TimeoutMS, p.Path)
	if len(p.Env) > 0 {
		fmt.Fprintf(&b, "env set: %s\n", strings.Join(p.Env, ", "))
	}
	for _, c := range p.Commands {
		fmt.Fprintf(&b, "  %-6s %-8s", c.Pos, c.Kind)
		if len(c.Assigns) > 0 {
			b.WriteString(" " + strings.Join(c.Assigns, " "))
		}
		if len(c.Argv) > 0 {
			b.WriteString(" " + strings.Join(c.Argv, " "))
		}
		for _, r := range c.Redirects {
			fmt.Fprintf(&b, " %s %s", r.Op, r.Target)
			if r.Path != "" {
				fmt.Fprintf(&b, " (%s %s)", r.Access, r.Path)
			}
		}
		var notes []string
		if c.Context != "" {
			notes = append(notes, "in "+c.Context)
		}
		if c.Need != "" {
			notes = append(notes, "needs "+c.Need)
		}
		if c.Dynamic {
			notes = append(notes, "‹…› known only at run time, checked then")
		}
		if len(notes) > 0 {
			b.WriteString("   [" + strings.Join(notes, "; ") + "]")
		}
		b.WriteByte('\n')
	}
	if len(p.Needs) > 0 {
		fmt.Fprintf(&b, "needs: %s\n", strings.Join(p.Needs, ", "))
	}
	return strings.TrimRight(b.String(), "\n")
}

type analyzeInput struct {
	file   *syntax.File
	ws     string
	cwd    string
	grants capability.Set
	path   string
}

// analysis is the outcome of the static analysis.
type analysis struct {
	// programs are the programs the command starts and the commands they
	// launch, as command rules see them (shell_rules.go).
	programs []tool.Program
	// unseen: the command runs what cannot be known before it runs (an
	// eval of a variable, a sourced file, a computed command name).
	unseen   bool
	plan     Plan
	needs    []capability.Need
	refusal  *tool.Error
	warnings []string
}

type analyzer struct {
	in         analyzeInput
	out        *analysis
	funcs      map[string]bool
	defined    map[string]syntax.Pos // functions defined by a statement of the script, where
	unsets     []*syntax.Word        // the words of its unset commands
	at         syntax.Pos            // the call being read
	dirChanged bool
	// per-node context, filled while walking the statements that hold them
	redirs  map[*syntax.CallExpr][]*syntax.Redirect
	where   map[*syntax.CallExpr]string
	warned  map[string]bool
	printer *syntax.Printer
}

// maxEvalDepth bounds how deep literal eval strings are analysed.
const maxEvalDepth = 4

func analyze(in analyzeInput) *analysis {
	z := &analyzer{
		in: in, out: &analysis{}, funcs: map[string]bool{}, defined: map[string]syntax.Pos{},
		redirs: map[*syntax.CallExpr][]*syntax.Redirect{}, where: map[*syntax.CallExpr]string{},
		warned: map[string]bool{}, printer: syntax.NewPrinter(),
	}
	syntax.Walk(in.file, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.FuncDecl:
			if n.Name != nil {
				z.funcs[n.Name.Value] = true
			}
		case *syntax.CallExpr:
			if len(n.Args) > 0 {
				if v, _ := wordLit(n.Args[0]); v == "unset" {
					z.unsets = append(z.unsets, n.Args[1:]...)
				}
			}
		}
		return true
	})
	// A function is known to be defined before a call when its definition
	// is a statement of the script itself, before the call, and nothing
	// unsets it.
	for _, st := range in.file.Stmts {
		if fd, ok := st.Cmd.(*syntax.FuncDecl); ok && fd.Name != nil {
			if _, seen := z.defined[fd.Name.Value]; !seen {
				z.defined[fd.Name.Value] = fd.Pos()
			}
		}
	}
	z.walk(in.file.Stmts, "", 0)
	return z.out
}

func (z *analyzer) refuse(e *tool.Error) {
	if z.out.refusal == nil {
		z.out.refusal = e
	}
}

func (z *analyzer) need(n capability.Need) {
	for _, have := range z.out.needs {
		if have == n {
			return
		}
	}
	z.out.needs = append(z.out.needs, n)
}

func (z *analyzer) warn(w string) {
	if !z.warned[w] {
		z.warned[w] = true
		z.out.warnings = append(z.out.warnings, w)
	}
}

func (z *analyzer) source(n syntax.Node) string {
	var b strings.Builder
	_ = z.printer.Print(&b, n)
	return strings.TrimSpace(b.String())
}

// walk visits statements in source order, descending into substitutions with
// their own context.
func (z *analyzer) walk(stmts []*syntax.Stmt, context string, depth int) {
	for _, st := range stmts {
		syntax.Walk(st, func(n syntax.Node) bool {
			switch n := n.(type) {
			case *syntax.CmdSubst:
				ctx := "$(…)"
				if n.Backquotes {
					ctx = "`…`"
				}
				z.walk(n.Stmts, ctx, depth)
				return false
			case *syntax.ProcSubst:
				z.refuse(tool.Errorf(tool.CodeInvalidInput, "write the output to a file in the workspace and read that file instead",
					"process substitution %s…) at %s is not supported: the interpreter would open its FIFOs outside warden's checks", n.Op, pos(n.Pos())))
				z.walk(n.Stmts, n.Op.String()+"…)", depth)
				return false
			case *syntax.Stmt:
				z.stmt(n, context)
			case *syntax.BinaryCmd:
				if n.Op == syntax.Pipe || n.Op == syntax.PipeAll {
					for _, side := range []*syntax.Stmt{n.X, n.Y} {
						if ce, ok := side.Cmd.(*syntax.CallExpr); ok && z.where[ce] == "" {
							z.where[ce] = "pipe"
						}
					}
				}
			case *syntax.CallExpr:
				z.call(n, context, depth)
			case *syntax.DeclClause:
				z.decl(n)
			}
			return true
		})
	}
}

// stmt records a statement's redirections: on its simple command, or as a
// block entry for a compound command.
func (z *analyzer) stmt(st *syntax.Stmt, context string) {
	if ce, ok := st.Cmd.(*syntax.CallExpr); ok {
		z.redirs[ce] = st.Redirs
		if st.Background && z.where[ce] == "" {
			z.where[ce] = "background"
		}
		return
	}
	if len(st.Redirs) == 0 {
		return
	}
	entry := PlanCommand{Pos: pos(st.Pos()), Kind: "block", Context: context}
	for _, rd := range st.Redirs {
		entry.Redirects = append(entry.Redirects, z.redirect(rd))
	}
	z.out.plan.Commands = append(z.out.plan.Commands, entry)
}

func pos(p syntax.Pos) string { return fmt.Sprintf("%d:%d", p.Line(), p.Col()) }

// decl checks export / declare -x of guarded variables.
func (z *analyzer) decl(d *syntax.DeclClause) {
	if d.Variant == nil || d.Variant.Value != "export" && d.Variant.Value != "declare" && d.Variant.Value != "typeset" {
		return
	}
	for _, as := range d.Args {
		if as.Name != nil && !as.Naked {
			z.assign(as.Name.Value, d.Variant.Value == "export" || as.Name.Value == "PATH")
		}
	}
}

// assign refuses, before running, an assignment that would put a guarded
// variable in a program's environment (run time checks it again).
func (z *analyzer) assign(name string, reachesPrograms bool) {
	if !reachesPrograms {
		return
	}
	if name == "PATH" {
		z.refuse(tool.Errorf(tool.CodeCapabilityDenied, "leave PATH alone: programs are found on warden's fixed PATH",
			"the command changes PATH for the programs it runs; warden runs programs only from %s", z.in.path))
		return
	}
	if why := envGuarded(name); why != "" && !exactEnvGrant(z.in.grants, name) {
		e := tool.NeedsGrants([]string{"env:" + name}, "the command sets %s for the programs it runs, which needs an exact env:%s grant: %s", name, name, why)
		e.Hint += " (exactly this name)"
		z.refuse(e)
	}
}

// call analyses one simple command.
func (z *analyzer) call(ce *syntax.CallExpr, context string, depth int) {
	if w := z.where[ce]; w != "" && context == "" {
		context = w
	}
	entry := PlanCommand{Pos: pos(ce.Pos()), Context: context}
	for _, as := range ce.Assigns {
		entry.Assigns = append(entry.Assigns, z.source(as))
		if as.Name != nil {
			z.assign(as.Name.Value, len(ce.Args) > 0 || as.Name.Value == "PATH")
		}
	}
	words := make([]string, len(ce.Args))
	static := make([]bool, len(ce.Args))
	allStatic := true
	for i, w := range ce.Args {
		if v, ok := wordLit(w); ok {
			words[i], static[i] = v, true
			entry.Argv = append(entry.Argv, quote(v))
		} else {
			allStatic = false
			entry.Argv = append(entry.Argv, "‹"+z.source(w)+"›")
		}
	}
	entry.Dynamic = !allStatic
	for _, rd := range z.redirs[ce] {
		entry.Redirects = append(entry.Redirects, z.redirect(rd))
	}
	switch {
	case len(ce.Args) == 0:
		entry.Kind = "assignment"
	case !static[0]:
		entry.Kind = "dynamic"
		z.out.unseen = true
		z.addProgram(words, static, &entry)
	default:
		z.at = ce.Pos()
		entry.Kind = z.command(words, static, allStatic, &entry, depth)
	}
	z.out.plan.Commands = append(z.out.plan.Commands, entry)
}

// command classifies a call whose name is static and records its needs.
func (z *analyzer) command(words []string, static []bool, allStatic bool, entry *PlanCommand, depth int) string {
	name := words[0]
	if z.funcs[name] {
		if depth > 0 || !z.definedBefore(name, z.at) {
			// The function may not be defined yet when the call runs
			// (sh -c 'rm -rf src; rm() { :; }'): the program of that
			// name is a subject too.
			z.addProgram(words, static, entry)
		}
		return "function"
	}
	if !interp.IsBuiltin(name) {
		z.program(words, static, allStatic, entry)
		return "program"
	}
	switch name {
	case "command", "exec", "builtin":
		i := 1
		if name == "exec" { // exec [-cl] [-a NAME] [--] command
			opts, next, st := execOpts.Parse(words, func(k int) bool { return !static[k] }, 1, "")
			if st != getopt.OK || slices.ContainsFunc(opts, func(o getopt.Option) bool { return o.Key == "a" }) {
				// exec -a NAME gives the program another argv[0]: git runs
				// the command it names (git-difftool), past every check
				// that reads the words.
				z.out.unseen = true
				return "builtin"
			}
			i = len(words)
			if next < len(words) {
				i = next
			}
		}
		for i < len(words) && static[i] && strings.HasPrefix(words[i], "-") && words[i] != "-" {
			if name == "command" && (words[i] == "-v" || words[i] == "-V") {
				return "builtin" // only looks the name up
			}
			i++
		}
		switch {
		case i >= len(words) || !static[i]:
		case interp.IsBuiltin(words[i]) && name != "exec":
			// command eval '…', builtin trap '…' EXIT: the builtin's own reading.
			z.command(words[i:], static[i:], allStatic, entry, depth)
		case !interp.IsBuiltin(words[i]) && name != "builtin":
			z.program(words[i:], static[i:], allStatic, entry)
		}
	case "trap":
		z.trap(words, static, depth)
	case "alias":
		// dash expands aliases in scripts (and bash with expand_aliases).
		z.out.unseen = z.out.unseen || len(words) > 1
	case "compgen", "complete", "bind", "fc":
		// compgen -C runs a command (complete -C and bind -x when a key
		// or completion asks, -F a function), fc the editor FCEDIT
		// names: what runs is unseen.
		z.out.unseen = z.out.unseen || name == "fc" || slices.ContainsFunc(words[1:], func(w string) bool {
			return strings.HasPrefix(w, "-") && strings.ContainsAny(w, "CFx")
		}) || !allStatic
	case "enable", "hash", "mapfile", "readarray":
		// enable -f loads a builtin from a file and enable -n turns one
		// off (its name then runs the program), hash -p names the file a
		// program name runs, mapfile -C runs a callback: what runs is
		// unseen.
		flag := map[string]string{"hash": "p", "mapfile": "C", "readarray": "C"}[name]
		for i, w := range words[1:] {
			if !static[i+1] || name == "enable" || strings.HasPrefix(w, "-") && strings.Contains(w, flag) {
				z.out.unseen = true
			}
		}
	case "eval":
		if !allStatic || depth >= maxEvalDepth {
			z.out.unseen = true
		}
		if allStatic && depth < maxEvalDepth {
			src := strings.Join(words[1:], " ")
			if f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), ""); err == nil {
				z.walk(f.Stmts, "eval", depth+1)
			}
		}
	case "source", ".":
		z.out.unseen = true
		if len(words) > 1 && static[1] {
			if p, ok := z.staticPath(words[1]); ok {
				z.need(capability.Need{Kind: capability.FSRead, Resource: p})
			}
		}
	case "cd", "pushd":
		if len(words) > 1 && static[1] && !strings.HasPrefix(words[1], "-") && !strings.HasPrefix(words[1], "+") {
			if p, ok := z.staticPath(words[1]); ok {
				z.need(capability.Need{Kind: capability.FSRead, Resource: p})
			}
		}
		z.dirChanged = true
	case "popd":
		z.dirChanged = true
	}
	return "builtin"
}

// definedBefore reports whether function name is defined before pos by
// a statement of the script that nothing unsets.
func (z *analyzer) definedBefore(name string, pos syntax.Pos) bool {
	at, ok := z.defined[name]
	if !ok || !at.IsValid() || !pos.IsValid() || pos.Offset() < at.Offset() {
		return false
	}
	for _, w := range z.unsets {
		if v, ok := wordLit(w); !ok || v == name {
			return false
		}
	}
	return true
}

// trap reads trap's action, a script the shell runs on a signal or at
// exit, as eval's string is read (trap [-lp] [--] [ACTION] CONDITION…).
func (z *analyzer) trap(words []string, static []bool, depth int) {
	i := 1
	for i < len(words) && static[i] && (words[i] == "-l" || words[i] == "-p" || words[i] == "-lp" || words[i] == "-pl") {
		i++
	}
	if i < len(words) && static[i] && words[i] == "--" {
		i++
	}
	if i+1 >= len(words) {
		return // trap -p, trap -l, trap, or a single condition: nothing is set
	}
	if !static[i] || depth >= maxEvalDepth {
		z.out.unseen = true
		return
	}
	action := words[i]
	if action == "-" || action == "" || strings.Trim(action, "0123456789") == "" {
		return // resets or ignores the conditions
	}
	if f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(action), ""); err == nil {
		z.walk(f.Stmts, "trap", depth+1)
	} else {
		z.out.unseen = true
	}
}

// program records the exec need of a program and refuses, before running,
// what the run-time checks would refuse anyway.
func (z *analyzer) program(words []string, static []bool, allStatic bool, entry *PlanCommand) {
	name := words[0]
	base := name
	if name == "" {
		z.refuse(tool.Errorf(tool.CodeInvalidInput, "name a program", "the command runs a program with an empty name"))
		return
	}
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			z.refuse(tool.Errorf(tool.CodeCapabilityDenied, "name the program without a path (exec:"+filepath.Base(name)+"); warden finds it on its fixed PATH",
				"program %s is a relative path: warden never runs programs from the workspace or a relative directory", name))
			// Listed all the same: in an inner script, whose refusals
			// are not the call's, the list is what is checked
			// (programPathRefusal).
			z.addProgram(words, static, entry)
			return
		}
		base = filepath.Base(name)
	}
	n := capability.Need{Kind: capability.Exec, Resource: base}
	entry.Need = n.String()
	z.need(n)
	z.addProgram(words, static, entry)
	if g, err := capability.Parse("exec:" + base); err == nil {
		if why := g.Broad(); why != "" {
			z.warn(why)
		}
	}
	if !allStatic {
		return
	}
	for _, w := range argguard.RiskWarnings(base, words[1:]) {
		z.warn(w)
	}
	if g := argguard.Check(base, words[1:]); g.Reason != "" {
		z.refuse(tool.Errorf(tool.CodeCapabilityDenied, g.Hint, "%s refused: %s", shellShort(words), g.Reason))
	} else if !z.dirChanged {
		for _, f := range g.Writes {
			if p, ok := z.staticPath(f); ok {
				z.need(capability.Need{Kind: capability.FSWrite, Resource: p})
				if protected(z.in.ws, p) {
					z.refuse(tool.Errorf(tool.CodeCapabilityDenied, protectedHint, "%s would write %s: %s", shellShort(words), p, protectedWhy))
				}
			}
		}
	}
}

// addProgram records a program, and what it launches, for command rules;
// a word known only at run time is kept as its source.
func (z *analyzer) addProgram(words []string, static []bool, entry *PlanCommand) {
	p := tool.Program{Argv: make([]string, len(words)), Dynamic: make([]bool, len(words))}
	off := len(entry.Argv) - len(words)
	for i, w := range words {
		p.Argv[i] = w
		if !static[i] {
			p.Dynamic[i] = true
			if j := off + i; j >= 0 && j < len(entry.Argv) {
				p.Argv[i] = strings.TrimSuffix(strings.TrimPrefix(entry.Argv[j], "‹"), "›")
			}
		}
	}
	// Launcher indexes are places in subjects' list: shift them to where
	// the list lands among the command's programs.
	base := len(z.out.programs)
	for _, q := range subjects(p) {
		if q.Launcher > 0 {
			q.Launcher += base
		}
		z.out.programs = append(z.out.programs, q)
	}
	if z.in.ws != "" { // not a script another shell runs (scriptPrograms): its analysis only lists programs
		if e := launchEnvRefusal(p, z.in.grants); e != nil {
			z.refuse(e)
		}
	}
}

// staticPath resolves a literal path as the command would see it, while the
// directory is still known (no cd has been seen).
func (z *analyzer) staticPath(p string) (string, bool) {
	if !filepath.IsAbs(p) && z.dirChanged {
		return "", false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(z.in.cwd, p)
	}
	resolved, err := capability.ResolvePath(z.in.ws, p)
	if err != nil {
		z.refuse(tool.Errorf(tool.CodeInvalidInput, "", "path %s cannot be resolved: %v", p, err))
		return "", false
	}
	return resolved, true
}

// redirect records a redirection and its needs when its target is static.
func (z *analyzer) redirect(rd *syntax.Redirect) PlanRedirect {
	r := PlanRedirect{Op: rd.Op.String()}
	if rd.N != nil {
		r.Op = rd.N.Value + r.Op
	}
	switch rd.Op {
	case syntax.Hdoc, syntax.DashHdoc:
		r.Target = "(here-document)"
		return r
	case syntax.WordHdoc:
		r.Target = "(here-string)"
		return r
	case syntax.DplIn, syntax.DplOut:
		r.Target = z.source(rd.Word)
		return r
	}
	var read, write bool
	switch rd.Op {
	case syntax.RdrIn:
		read, r.Access = true, "read"
	case syntax.RdrInOut:
		read, write, r.Access = true, true, "read+write"
	default:
		write, r.Access = true, "write"
	}
	target, ok := wordLit(rd.Word)
	if !ok {
		r.Target = "‹" + z.source(rd.Word) + "›"
		return r
	}
	r.Target = quote(target)
	if device(target) {
		r.Access = ""
		return r
	}
	p, ok := z.staticPath(target)
	if !ok {
		return r
	}
	r.Path = p
	if read {
		z.need(capability.Need{Kind: capability.FSRead, Resource: p})
	}
	if write {
		z.need(capability.Need{Kind: capability.FSWrite, Resource: p})
		if protected(z.in.ws, p) {
			z.refuse(tool.Errorf(tool.CodeCapabilityDenied, protectedHint, "redirection to %s refused: %s", p, protectedWhy))
		}
	}
	return r
}

// device reports the device paths redirections may always use.
func device(p string) bool {
	switch p {
	case "/dev/null", "/dev/stdout", "/dev/stderr":
		return true
	}
	return false
}

const (
	protectedWhy  = "the shell never writes into .git/ or .warden/ (git hooks and configuration run code; the policy sets the grants)"
	protectedHint = "use the git tools for repository changes; edit the policy outside warden"
)

// protected reports whether p, inside the workspace, lies in a .git or
// .warden directory.
func protected(ws, p string) bool {
	rel, ok := strings.CutPrefix(p, ws+"/")
	if !ok {
		return false
	}
	for _, el := range strings.Split(rel, "/") {
		if el == ".git" || el == ".warden" {
			return true
		}
	}
	return false
}

// wordLit returns the value of a word that needs no expansion: plain
// text, quotes and backslash escapes. Anything the shell would expand
// (parameters, substitutions, globs, braces, a tilde) makes it dynamic.
func wordLit(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", false
	}
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			for i := 0; i < len(v); i++ {
				c := v[i]
				switch {
				case c == '\\' && i+1 < len(v):
					i++
					if v[i] != '\n' {
						b.WriteByte(v[i])
					}
				case strings.IndexByte("*?[]{}~", c) >= 0:
					return "", false
				default:
					b.WriteByte(c)
				}
			}
		case *syntax.SglQuoted:
			if p.Dollar && strings.Contains(p.Value, `\`) {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false
			}
			for _, qp := range p.Parts {
				lit, ok := qp.(*syntax.Lit)
				if !ok {
					return "", false
				}
				v := lit.Value
				for i := 0; i < len(v); i++ {
					if v[i] == '\\' && i+1 < len(v) && strings.IndexByte("$`\"\\\n", v[i+1]) >= 0 {
						i++
						if v[i] != '\n' {
							b.WriteByte(v[i])
						}
						continue
					}
					b.WriteByte(v[i])
				}
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// quote quotes a word for display when it needs it: when the shell would
// split or expand it, or it holds a control character (the parser splits
// words at a carriage return, too).
func quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`|&;<>()*?[]{}~#!") &&
		!strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellShort renders argv briefly for messages.
func shellShort(argv []string) string {
	var parts []string
	n := 0
	for _, a := range argv {
		q := quote(a)
		if n+len(q) > 120 {
			parts = append(parts, "…")
			break
		}
		n += len(q) + 1
		parts = append(parts, q)
	}
	return strings.Join(parts, " ")
}
