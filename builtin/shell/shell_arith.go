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

	"mvdan.cc/sh/v3/syntax"
)

// numericSpecial are bash's variables whose value is always a number.
var numericSpecial = map[string]bool{
	"#": true, "?": true, "$": true, "!": true, "RANDOM": true, "SRANDOM": true, "SECONDS": true, "LINENO": true,
	"BASHPID": true, "PPID": true, "UID": true, "EUID": true, "EPOCHSECONDS": true, "OPTIND": true, "SHLVL": true,
}

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
	case numericSpecial[name]:
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
		if w, ok := x.X.(*syntax.Word); ok && arithAssign[x.Op] {
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
