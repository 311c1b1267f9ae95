package shell

import (
	"path/filepath"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// Sinks says which parts of a command land in a file as they are written,
// so that the gate can restore a mask there (see tool.Sinker). Two
// shapes, each with its output redirected (>, >>, >|, &>) to one literal
// path:
//
//   - the here-document of cat with no argument:
//     cat > .env <<'EOF' … EOF (the whole body; with an unquoted
//     delimiter, its literal text, and an original may not hold \ $ or `);
//   - the arguments of echo without -e: echo "TOKEN=…" >> .env (the text
//     inside single quotes, which may not hold '; inside double quotes or
//     unquoted, text without \ $ ` and, unquoted, without spaces or shell
//     syntax).
//
// Anything else in a command — another program's arguments, a pipe, a
// here-document with <<- — is not a sink: a mask there is refused, never
// handed to a program. A command that changes directory (cd, pushd,
// popd) has only its absolute targets as sinks.
func (s *Shell) Sinks(c *tool.Call, a *Args) ([]tool.Sink, error) {
	file, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(a.Command), "")
	if err != nil {
		return nil, tool.Errorf(tool.CodeInvalidInput, "fix the shell syntax (bash)", "command does not parse: %v", err)
	}
	cwd := a.Cwd
	if cwd == "" {
		cwd = "."
	}
	cwdAbs, err := capability.ResolvePath(c.Workspace, cwd)
	if err != nil {
		return nil, tool.Errorf(tool.CodeInvalidInput, "give an existing directory", "cwd %q cannot be resolved: %v", a.Cwd, err)
	}
	// A command that defines functions or aliases (or runs one sourced or
	// evaluated at run time) may mean something else by cat or echo: it
	// has no sinks.
	redefines := false
	syntax.Walk(file, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.FuncDecl:
			redefines = true
		case *syntax.CallExpr:
			if len(x.Args) > 0 {
				if name, ok := wordLit(x.Args[0]); ok && (name == "alias" || name == "eval" || name == "source" || name == "." || name == "enable" || name == "builtin" || name == "command") {
					redefines = true
				}
			}
		}
		return true
	})
	if redefines {
		return nil, nil
	}
	dirChanges := false
	syntax.Walk(file, func(n syntax.Node) bool {
		if ce, ok := n.(*syntax.CallExpr); ok && len(ce.Args) > 0 {
			if name, ok := wordLit(ce.Args[0]); !ok || name == "cd" || name == "pushd" || name == "popd" {
				dirChanges = true // or a program named at run time, which could be cd
			}
		}
		return true
	})
	var sinks []tool.Sink
	syntax.Walk(file, func(n syntax.Node) bool {
		st, ok := n.(*syntax.Stmt)
		if !ok {
			return true
		}
		ce, ok := st.Cmd.(*syntax.CallExpr)
		if !ok || len(ce.Args) == 0 || len(ce.Assigns) > 0 {
			return true
		}
		path := sinkTarget(st, c.Workspace, cwdAbs, dirChanges)
		if path == "" {
			return true
		}
		name, _ := wordLit(ce.Args[0])
		switch name {
		case "cat":
			if len(ce.Args) == 1 {
				sinks = append(sinks, heredocSinks(st, path)...)
			}
		case "echo":
			sinks = append(sinks, echoSinks(ce.Args[1:], path)...)
		}
		return true
	})
	return sinks, nil
}

// sinkTarget returns the file a statement's standard output is
// redirected to, resolved, when there is exactly one such literal target;
// else "".
func sinkTarget(st *syntax.Stmt, ws, cwd string, dirChanges bool) string {
	target, n := "", 0
	for _, rd := range st.Redirs {
		switch rd.Op {
		case syntax.RdrOut, syntax.AppOut, syntax.ClbOut, syntax.RdrAll, syntax.AppAll:
		default:
			continue
		}
		if rd.N != nil && rd.N.Value != "1" {
			continue // 2> is not the output
		}
		n++
		lit, ok := wordLit(rd.Word)
		if !ok {
			return ""
		}
		target = lit
	}
	if n != 1 || target == "" || device(target) {
		return ""
	}
	if !filepath.IsAbs(target) {
		if dirChanges {
			return ""
		}
		target = filepath.Join(cwd, target)
	}
	abs, err := capability.ResolvePath(ws, target)
	if err != nil {
		return ""
	}
	return abs
}

// heredocSinks: the body of a statement's here-document (<<, not
// <<-): all of it when the delimiter is quoted, its literal parts when not.
func heredocSinks(st *syntax.Stmt, path string) []tool.Sink {
	var sinks []tool.Sink
	for _, rd := range st.Redirs {
		if rd.Op != syntax.Hdoc || rd.Hdoc == nil {
			continue
		}
		quoted := false
		for _, p := range rd.Word.Parts {
			switch p := p.(type) {
			case *syntax.SglQuoted, *syntax.DblQuoted:
				quoted = true
			case *syntax.Lit:
				quoted = quoted || strings.Contains(p.Value, `\`)
			}
		}
		for _, p := range rd.Hdoc.Parts {
			lit, ok := p.(*syntax.Lit)
			if !ok {
				continue
			}
			sk := tool.Sink{Arg: "/command", Start: int(lit.Pos().Offset()), End: int(lit.End().Offset()), Path: path}
			if !quoted {
				sk.Forbid = "\\$`"
			}
			sinks = append(sinks, sk)
		}
	}
	return sinks
}

// echoSinks: the text of echo's arguments, unless -e makes echo read
// escapes in it.
func echoSinks(args []*syntax.Word, path string) []tool.Sink {
	for _, w := range args {
		lit, ok := wordLit(w)
		if !ok || lit == "" || lit[0] != '-' {
			break
		}
		if lit == "-e" {
			return nil
		}
		if lit != "-n" && lit != "-E" {
			break
		}
	}
	var sinks []tool.Sink
	add := func(start, end syntax.Pos, forbid string) {
		sinks = append(sinks, tool.Sink{Arg: "/command", Start: int(start.Offset()), End: int(end.Offset()), Path: path, Forbid: forbid})
	}
	for _, w := range args {
		for _, part := range w.Parts {
			switch p := part.(type) {
			case *syntax.Lit:
				add(p.Pos(), p.End(), " \t\n\\$`'\"|&;<>(){}*?[]~#!")
			case *syntax.SglQuoted:
				if !p.Dollar {
					add(posAdd(p.Left, 1), p.Right, "'")
				}
			case *syntax.DblQuoted:
				if p.Dollar {
					continue
				}
				for _, qp := range p.Parts {
					if lit, ok := qp.(*syntax.Lit); ok {
						add(lit.Pos(), lit.End(), "\\$`\"")
					}
				}
			}
		}
	}
	return sinks
}

// posAdd moves a position n bytes on the same line.
func posAdd(p syntax.Pos, n uint) syntax.Pos {
	return syntax.NewPos(p.Offset()+n, p.Line(), p.Col()+n)
}
