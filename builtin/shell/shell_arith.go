package shell

// Arithmetic in a script another shell runs. bash evaluates a variable's
// value as an arithmetic expression where arithmetic references it —
// : $((X)), (( X )), [[ X -eq 0 ]], ${a[X]}, let, for ((…)) — and that
// expression may assign: X='GIT_CONFIG_COUNT=0' sets GIT_CONFIG_COUNT. A
// value expanded into arithmetic ($X, $(…)) is read the same way. So in
// an inner script, arithmetic may only use literal numbers, bash's own
// numeric variables, and variables the script itself set to a number
// (a literal integer, or the result of arithmetic) before it uses them;
// anything else may assign a variable warden never sees named.

import (
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// numericSpecial are bash's variables whose value is always a number.
var numericSpecial = sync.OnceValue(func() map[string]bool {
	return map[string]bool{
		"#": true, "?": true, "$": true, "!": true, "RANDOM": true, "SRANDOM": true, "SECONDS": true, "LINENO": true,
		"BASHPID": true, "PPID": true, "UID": true, "EUID": true, "EPOCHSECONDS": true, "OPTIND": true, "SHLVL": true,
	}
})

// arithUnseen reports whether script f evaluates in arithmetic a value
// it does not know to be a number (see above).
func arithUnseen(f *syntax.File) bool {
	sets := map[string][]syntax.Pos{} // where each variable gets a number
	unsafe := map[string]bool{}       // variables that get anything else
	var roots []syntax.Node           // arithmetic expressions and arithmetic test operands
	declInt := false
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Assign:
			if n.Name != nil && !n.Naked {
				if numericWord(n.Value) && n.Array == nil && n.Index == nil {
					sets[n.Name.Value] = append(sets[n.Name.Value], n.Pos())
				} else {
					unsafe[n.Name.Value] = true
				}
			}
			if n.Index != nil {
				roots = append(roots, n.Index)
			}
		case *syntax.DeclClause:
			for _, as := range n.Args {
				if v, ok := wordLit(as.Value); as.Naked && (!ok || strings.HasPrefix(v, "-") && strings.Contains(v, "i")) {
					declInt = true // declare -i: every assignment is arithmetic
				}
			}
		case *syntax.ForClause:
			if wi, ok := n.Loop.(*syntax.WordIter); ok && wi.Name != nil {
				unsafe[wi.Name.Value] = true
			}
		case *syntax.CallExpr:
			// read, printf -v, mapfile, getopts set strings: their names,
			// when literal, are unsafe (computed ones are refused anyway).
			for _, c := range (&scriptEnvs{}).callNames(n.Args) {
				unsafe[c] = true
			}
		case *syntax.ArithmExp:
			roots = append(roots, n.X)
		case *syntax.ArithmCmd:
			roots = append(roots, n.X)
		case *syntax.CStyleLoop:
			roots = append(roots, n.Init, n.Cond, n.Post)
		case *syntax.LetClause:
			for _, x := range n.Exprs {
				roots = append(roots, x)
			}
		case *syntax.ParamExp:
			if n.Index != nil {
				roots = append(roots, n.Index)
			}
			if n.Slice != nil {
				roots = append(roots, n.Slice.Offset, n.Slice.Length)
			}
		case *syntax.BinaryTest:
			if n.Op >= syntax.TsEql && n.Op <= syntax.TsGtr {
				roots = append(roots, n.X, n.Y)
			}
		}
		return true
	})
	if declInt {
		return true
	}
	// Arithmetic assignments give numbers.
	for _, r := range roots {
		arithWords(r, func(w *syntax.Word, assigned bool) {
			if v, ok := wordLit(w); ok && assigned && envName(v) {
				sets[v] = append(sets[v], w.Pos())
			}
		})
	}
	seen := false
	for _, r := range roots {
		arithWords(r, func(w *syntax.Word, assigned bool) {
			if !assigned && !numericRef(w, sets, unsafe) {
				seen = true
			}
		})
	}
	return seen
}

// numericWord reports a value that is a number: empty, a literal
// integer, or one arithmetic expansion.
func numericWord(w *syntax.Word) bool {
	if w == nil {
		return true
	}
	if v, ok := wordLit(w); ok {
		return strings.Trim(strings.TrimPrefix(v, "-"), "0123456789") == ""
	}
	if len(w.Parts) == 1 {
		_, ok := w.Parts[0].(*syntax.ArithmExp)
		return ok
	}
	return false
}

// numericRef reports whether an operand of arithmetic is known to be a
// number when it is read: a literal integer, a numeric special, or a
// variable (by name or $name) the script sets only to numbers, first
// before this read.
func numericRef(w *syntax.Word, sets map[string][]syntax.Pos, unsafe map[string]bool) bool {
	name, ok := wordLit(w)
	if !ok {
		if len(w.Parts) != 1 {
			return false
		}
		pe, isParam := w.Parts[0].(*syntax.ParamExp)
		if !isParam || pe.Param == nil || pe.Excl || pe.Length || pe.Index != nil || pe.Slice != nil || pe.Repl != nil || pe.Exp != nil {
			_, arith := w.Parts[0].(*syntax.ArithmExp)
			return arith || isParam && pe.Length // ${#x} is a number
		}
		name = pe.Param.Value
	}
	switch {
	case ok && name != "" && name[0] >= '0' && name[0] <= '9':
		return true // a literal number (10, 0x1f, 16#ff)
	case numericSpecial()[name]:
		return true
	case !envName(name) || unsafe[name] || len(sets[name]) == 0:
		return false
	}
	first := sets[name][0]
	for _, p := range sets[name] {
		if p.Offset() < first.Offset() {
			first = p
		}
	}
	return first.Offset() < w.Pos().Offset()
}

// arithWords calls f with each word operand of arithmetic expression x,
// and whether it is only assigned (x = …), not read.
func arithWords(x syntax.Node, f func(w *syntax.Word, assigned bool)) {
	switch x := x.(type) {
	case *syntax.Word:
		f(x, false)
	case *syntax.BinaryArithm:
		if w, ok := x.X.(*syntax.Word); ok && arithAssign()[x.Op] {
			f(w, x.Op == syntax.Assgn)
			if x.Op != syntax.Assgn {
				f(w, true)
			}
		} else {
			arithWords(x.X, f)
		}
		arithWords(x.Y, f)
	case *syntax.UnaryArithm:
		if w, ok := x.X.(*syntax.Word); ok && (x.Op == syntax.Inc || x.Op == syntax.Dec) {
			f(w, true)
		}
		arithWords(x.X, f)
	case *syntax.ParenArithm:
		arithWords(x.X, f)
	}
}

// transforms are the ${name@X} operators that only reformat a value;
// the others (P: prompt expansion, which runs $(…)) evaluate it.
const transforms = "QEULuAaKk"

// evalsUnseen returns what script f has bash evaluate that warden cannot
// see ("" when nothing): ${!name} (the value names a variable, and a
// subscript in it is arithmetic), ${name@P} (a prompt string, expanded
// with $(…)), and the operand of -v or -R in a test when it is not a
// literal plain name. Names given as words (read, printf -v, declare …)
// are checked where they are read (scriptEnvs.add).
func evalsUnseen(f *syntax.File) string {
	what := ""
	syntax.Walk(f, func(n syntax.Node) bool {
		if what != "" {
			return false
		}
		switch n := n.(type) {
		case *syntax.ParamExp:
			if n.Excl && n.Names == 0 && !allIndex(n.Index) {
				what = "expands ${!" + paramName(n) + "}, whose value names the variable"
			}
			if n.Exp != nil && n.Exp.Op == syntax.OtherParamOps {
				if v, ok := wordLit(n.Exp.Word); !ok || len(v) != 1 || !strings.Contains(transforms, v) {
					what = "expands ${" + paramName(n) + "@" + v + "}"
				}
			}
		case *syntax.UnaryTest:
			if n.Op == syntax.TsVarSet || n.Op == syntax.TsRefVar {
				if w, ok := n.X.(*syntax.Word); !ok || !plainName(w) {
					what = "tests -v on a name that is not a literal plain name"
				}
			}
		case *syntax.CallExpr:
			what = testNames(n.Args)
		}
		return what == ""
	})
	return what
}

// testNames checks the operands of test's and ['s -v and -R.
func testNames(args []*syntax.Word) string {
	if len(args) == 0 {
		return ""
	}
	if cmd, _ := wordLit(args[0]); cmd != "test" && args[0].Lit() != "[" {
		return ""
	}
	for i := 1; i+1 < len(args); i++ {
		if op, _ := wordLit(args[i]); (op == "-v" || op == "-R") && !plainName(args[i+1]) {
			return "tests " + op + " on a name that is not a literal plain name"
		}
	}
	return ""
}

// plainName reports a word that is a literal variable name.
func plainName(w *syntax.Word) bool {
	v, ok := wordLit(w)
	return ok && envName(v)
}

// allIndex reports the subscript [@] or [*] (${!a[@]}: the keys).
func allIndex(x syntax.ArithmExpr) bool {
	w, ok := x.(*syntax.Word)
	if !ok {
		return false
	}
	v, ok := wordLit(w)
	return ok && (v == "@" || v == "*")
}

func paramName(n *syntax.ParamExp) string {
	if n.Param == nil {
		return ""
	}
	return n.Param.Value
}
