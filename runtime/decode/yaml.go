package decode

import (
	"errors"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/scanner"
	"github.com/goccy/go-yaml/token"
)

// YAML decodes data, one YAML document, into v (a pointer; nil only
// checks), strictly and under the budget (see the package documentation):
// size, UTF-8, tokens, depth and width first, from the bytes; then anchors,
// aliases, merge keys and tags, from the tokens, before anything is
// parsed or expanded;
// then duplicate keys, a second document, unknown fields and types. It
// returns the parsed file, for the positions of values ([Position]).
func YAML(source string, data []byte, v any, lim *Limits) (file *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			file, err = nil, invalid(source, 0, 0, "the YAML library failed on this file (%v)", r)
		}
	}()
	l := lim.withDefaults()
	if int64(len(data)) > l.MaxBytes {
		return nil, overCap(source, int64(len(data)), l.MaxBytes)
	}
	if err := checkUTF8(source, data); err != nil {
		return nil, err
	}
	if err := scanBudget(source, data, l); err != nil {
		return nil, err
	}
	tokens, lerr := lex(source, data)
	if lerr != nil {
		return nil, lerr
	}
	for _, tk := range tokens {
		var what string
		switch tk.Type {
		case token.AnchorType:
			what = "YAML anchors (&name) are not allowed: write the value out (an anchor only serves aliases)"
		case token.AliasType:
			what = "YAML aliases (*name) are not allowed: write the value out"
		case token.MergeKeyType:
			what = "YAML merge keys (<<) are not allowed: write the keys out"
		case token.TagType:
			// None of warden's files needs one, and the library takes
			// a tag alone on a line as the parent of the next line's
			// node: a file of such lines nests as deep as it is long.
			what = "YAML tags (!name) are not allowed: write the plain value"
		default:
			continue
		}
		line, col := 0, 0
		if tk.Position != nil {
			line, col = tk.Position.Line, tk.Position.Column
		}
		return nil, invalid(source, line, col, "%s", what)
	}
	file, err = parser.Parse(tokens, 0)
	if err != nil {
		return nil, YAMLError(source, err)
	}
	var body ast.Node
	for i, d := range file.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		if _, comment := d.Body.(*ast.CommentGroupNode); comment {
			continue
		}
		if body != nil {
			line, col := 0, 0
			if t := d.Body.GetToken(); t != nil && t.Position != nil {
				line, col = t.Position.Line, t.Position.Column
			}
			return nil, invalid(source, line, col, "a second YAML document (document %d): a file holds one", i+1)
		}
		body = d.Body
	}
	if v != nil && body != nil {
		if err := yaml.NodeToValue(body, v, yaml.Strict()); err != nil {
			return nil, YAMLError(source, err)
		}
	}
	return file, nil
}

// lex splits data into the YAML library's tokens, stopping at the first
// invalid one (the library's own lexer would go on after it, past what
// the budget scan has seen).
func lex(source string, data []byte) (token.Tokens, *Error) {
	var sc scanner.Scanner
	sc.Init(string(data))
	var tokens token.Tokens
	for {
		tks, err := sc.Scan()
		if err == io.EOF {
			return tokens, nil
		}
		if err != nil {
			var ie *scanner.InvalidTokenError
			if errors.As(err, &ie) && ie.Token != nil && ie.Token.Position != nil {
				return nil, invalid(source, ie.Token.Position.Line, ie.Token.Position.Column, "%s", ie.Token.Error)
			}
			return nil, invalid(source, 0, 0, "%v", err)
		}
		tokens.Add(tks...)
	}
}

// checkUTF8 refuses bytes that are not UTF-8, at the first bad byte.
func checkUTF8(source string, data []byte) *Error {
	if utf8.Valid(data) {
		return nil
	}
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return invalid(source, line, col, "not valid UTF-8 (byte 0x%02x)", data[i])
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += n
	}
	return nil
}

// YAMLError locates an error of the YAML library in source.
func YAMLError(source string, err error) *Error {
	var ye yaml.Error
	if errors.As(err, &ye) {
		if t := ye.GetToken(); t != nil && t.Position != nil {
			return invalid(source, t.Position.Line, t.Position.Column, "%s", ye.GetMessage())
		}
		return invalid(source, 0, 0, "%s", ye.GetMessage())
	}
	return invalid(source, 0, 0, "%s", err.Error())
}

// Position is the line and column of the YAML value at path (a
// goccy/go-yaml path such as "$.steps[2].tool") in file, or of its nearest
// parent that exists; 0, 0 when none does. A mapping is where its first
// key is (its own token is a colon).
func Position(file *ast.File, path string) (int, int) {
	if file == nil {
		return 0, 0
	}
	for path != "" && path != "$" {
		if yp, err := yaml.PathString(path); err == nil {
			if n, err := yp.FilterFile(file); err == nil && n != nil {
				switch m := n.(type) {
				case *ast.MappingValueNode:
					n = m.Key
				case *ast.MappingNode:
					if len(m.Values) > 0 {
						n = m.Values[0].Key
					}
				}
				if t := n.GetToken(); t != nil && t.Position != nil {
					return t.Position.Line, t.Position.Column
				}
			}
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			break
		}
		path = path[:i]
	}
	return 0, 0
}
