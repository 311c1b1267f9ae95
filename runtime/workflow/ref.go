package workflow

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/wardenrt/warden/internal/lazyre"
)

// A reference is `${{ EXPR }}` inside a string. In args, params, agent
// tasks, foreach and outputs, EXPR is a path:
//
//	params.NAME
//	steps.ID.output | steps.ID.success | steps.ID.failed | steps.ID.skipped
//	steps.ID.data[.FIELD…]
//	item[.FIELD…]                        (in a step with foreach)
//
// In `when`, EXPR is a condition: paths and literals ('text', 12, true,
// null) compared with == and !=, combined with !, && and ||, grouped with
// parentheses. Nothing else: no functions, no arithmetic, no code.

// blanks are what may stand around a reference that is a whole value or
// a condition: the published schema's \s (schema.json), no other space.
const blanks = " \t\n\f\r"

// refRE finds references; refOpen finds a `${{` that is not closed.
var refRE = lazyre.New(`\$\{\{(.*?)\}\}`)

// ref is one parsed path.
type ref struct {
	root  string   // params | steps | item
	name  string   // the param or step
	field string   // output | success | failed | skipped | data (steps)
	path  []string // fields below data / item
}

var ident = lazyre.New(`^[A-Za-z_][A-Za-z0-9_-]*$`)

func (r ref) String() string {
	parts := []string{r.root}
	if r.name != "" {
		parts = append(parts, r.name)
	}
	if r.field != "" {
		parts = append(parts, r.field)
	}
	return strings.Join(append(parts, r.path...), ".")
}

// parsePath parses a path expression.
func parsePath(expr string) (ref, error) {
	expr = strings.TrimSpace(expr)
	parts := strings.Split(expr, ".")
	for _, p := range parts {
		if !ident.MatchString(p) {
			return ref{}, fmt.Errorf("%q is not a reference: write params.NAME, steps.ID.output, steps.ID.data.FIELD or item", expr)
		}
	}
	switch parts[0] {
	case "params":
		if len(parts) != 2 {
			return ref{}, fmt.Errorf("%q: a param is params.NAME", expr)
		}
		return ref{root: "params", name: parts[1]}, nil
	case "steps":
		if len(parts) < 3 {
			return ref{}, fmt.Errorf("%q: a step's result is steps.ID.output, .success, .failed, .skipped or .data[.FIELD]", expr)
		}
		r := ref{root: "steps", name: parts[1], field: parts[2], path: parts[3:]}
		switch r.field {
		case "output", "success", "failed", "skipped":
			if len(r.path) > 0 {
				return ref{}, fmt.Errorf("%q: only data has fields (steps.%s.data.FIELD)", expr, r.name)
			}
		case "data":
		default:
			return ref{}, fmt.Errorf("%q: steps.%s has output, success, failed, skipped and data, not %s", expr, r.name, r.field)
		}
		return r, nil
	case "item":
		return ref{root: "item", path: parts[1:]}, nil
	}
	return ref{}, fmt.Errorf("%q: a reference starts with params, steps or item", expr)
}

// refsIn returns the paths referenced in s, or an error for a malformed
// reference (an unclosed `${{`, a bad path).
func refsIn(s string) ([]ref, error) {
	var out []ref
	rest := refRE.ReplaceAllStringFunc(s, func(m string) string {
		expr := m[3 : len(m)-2]
		r, err := parsePath(expr)
		if err != nil {
			out = append(out, ref{root: "!", name: err.Error()})
		} else {
			out = append(out, r)
		}
		return ""
	})
	if strings.Contains(rest, "${{") {
		return nil, fmt.Errorf("%q has a `${{` with no closing `}}`", s)
	}
	for _, r := range out {
		if r.root == "!" {
			return nil, fmt.Errorf("%s", r.name)
		}
	}
	return out, nil
}

// wholeRef reports whether s is exactly one reference (its value keeps its
// type when substituted), and returns it.
func wholeRef(s string) (ref, bool) {
	t := strings.Trim(s, blanks)
	m := refRE.FindStringSubmatchIndex(t)
	if m == nil || m[0] != 0 || m[1] != len(t) {
		return ref{}, false
	}
	r, err := parsePath(t[m[2]:m[3]])
	return r, err == nil
}

// lookupFunc resolves a reference to its value.
type lookupFunc func(r ref) (any, error)

// substitute replaces the references in v (a decoded YAML value): a string
// that is exactly one reference becomes the value (a number stays a
// number); references inside a longer string become text.
func substitute(v any, look lookupFunc) (any, error) {
	switch x := v.(type) {
	case string:
		if r, ok := wholeRef(x); ok {
			return look(r)
		}
		var err error
		out := refRE.ReplaceAllStringFunc(x, func(m string) string {
			r, perr := parsePath(m[3 : len(m)-2])
			if perr != nil {
				err = perr
				return ""
			}
			val, lerr := look(r)
			if lerr != nil {
				err = lerr
				return ""
			}
			return text(val)
		})
		return out, err
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			s, err := substitute(e, look)
			if err != nil {
				return nil, err
			}
			out[k] = s
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			s, err := substitute(e, look)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	}
	return v, nil
}

// text is a value as it appears inside a string.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// truthy is a condition's value as a boolean: false, null, "", 0, an
// empty list or object are false.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case float64:
		return x != 0
	case int:
		return x != 0
	case int64:
		return x != 0
	case uint64:
		return x != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// ---------------------------------------------------------------- conditions

// cond is a parsed `when` condition.
type cond interface {
	eval(look lookupFunc) (any, error)
	refs() []ref
}

type (
	condPath    struct{ r ref }
	condLiteral struct{ v any }
	condNot     struct{ c cond }
	condBinary  struct {
		op   string
		l, r cond
	}
)

func (c condPath) eval(look lookupFunc) (any, error) { return look(c.r) }
func (c condPath) refs() []ref                       { return []ref{c.r} }
func (c condLiteral) eval(lookupFunc) (any, error)   { return c.v, nil }
func (c condLiteral) refs() []ref                    { return nil }
func (c condNot) eval(look lookupFunc) (any, error) {
	v, err := c.c.eval(look)
	return !truthy(v), err
}
func (c condNot) refs() []ref { return c.c.refs() }
func (c condBinary) eval(look lookupFunc) (any, error) {
	l, err := c.l.eval(look)
	if err != nil {
		return nil, err
	}
	switch c.op {
	case "&&":
		if !truthy(l) {
			return false, nil
		}
		r, err := c.r.eval(look)
		return truthy(r), err
	case "||":
		if truthy(l) {
			return true, nil
		}
		r, err := c.r.eval(look)
		return truthy(r), err
	}
	r, err := c.r.eval(look)
	if err != nil {
		return nil, err
	}
	eq := equal(l, r)
	if c.op == "!=" {
		return !eq, nil
	}
	return eq, nil
}
func (c condBinary) refs() []ref { return append(c.l.refs(), c.r.refs()...) }

// equal compares two values as JSON does (numbers by value).
func equal(a, b any) bool {
	ja, _ := json.Marshal(normNum(a))
	jb, _ := json.Marshal(normNum(b))
	return string(ja) == string(jb)
}

func normNum(v any) any {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	}
	return v
}

// parseCond parses a `when` value: one `${{ … }}` holding a condition.
func parseCond(s string) (cond, error) {
	t := strings.Trim(s, blanks)
	if len(t) > maxCondLen {
		return nil, fmt.Errorf("the condition is longer than %d characters", maxCondLen)
	}
	if !strings.HasPrefix(t, "${{") || !strings.HasSuffix(t, "}}") {
		return nil, fmt.Errorf("when must be one condition in ${{ … }}, e.g. ${{ steps.check.success }}")
	}
	if strings.Contains(t, "\n") {
		return nil, fmt.Errorf("the condition must be on one line")
	}
	p := &condParser{toks: nil}
	if err := p.lex(t[3 : len(t)-2]); err != nil {
		return nil, err
	}
	c, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.i < len(p.toks) {
		return nil, fmt.Errorf("unexpected %q in the condition", p.toks[p.i])
	}
	return c, nil
}

// Bounds of a condition: its parser recurses, and a file of nested
// parentheses must not exhaust the stack.
const (
	maxCondLen   = 4096
	maxCondDepth = 32
)

type condParser struct {
	toks  []string
	i     int
	depth int
}

// deeper enters one level of nesting, refusing past maxCondDepth.
func (p *condParser) deeper() error {
	p.depth++
	if p.depth > maxCondDepth {
		return fmt.Errorf("the condition nests deeper than %d levels", maxCondDepth)
	}
	return nil
}

func (p *condParser) lex(s string) error {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case strings.HasPrefix(s[i:], "&&"), strings.HasPrefix(s[i:], "||"), strings.HasPrefix(s[i:], "=="), strings.HasPrefix(s[i:], "!="):
			p.toks = append(p.toks, s[i:i+2])
			i += 2
		case c == '!' || c == '(' || c == ')':
			p.toks = append(p.toks, string(c))
			i++
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return fmt.Errorf("an unclosed string in the condition")
			}
			p.toks = append(p.toks, s[i:i+j+2])
			i += j + 2
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t!&|=()'\"", rune(s[j])) {
				j++
			}
			if j == i {
				return fmt.Errorf("unexpected %q in the condition", string(c))
			}
			p.toks = append(p.toks, s[i:j])
			i = j
		}
	}
	if len(p.toks) == 0 {
		return fmt.Errorf("the condition is empty")
	}
	return nil
}

func (p *condParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *condParser) or() (cond, error) {
	l, err := p.and()
	for err == nil && p.peek() == "||" {
		p.i++
		var r cond
		if r, err = p.and(); err == nil {
			l = condBinary{"||", l, r}
		}
	}
	return l, err
}

func (p *condParser) and() (cond, error) {
	l, err := p.unary()
	for err == nil && p.peek() == "&&" {
		p.i++
		var r cond
		if r, err = p.unary(); err == nil {
			l = condBinary{"&&", l, r}
		}
	}
	return l, err
}

func (p *condParser) unary() (cond, error) {
	if p.peek() == "!" {
		p.i++
		if err := p.deeper(); err != nil {
			return nil, err
		}
		c, err := p.unary()
		p.depth--
		return condNot{c}, err
	}
	l, err := p.operand()
	if err != nil {
		return nil, err
	}
	if op := p.peek(); op == "==" || op == "!=" {
		p.i++
		r, err := p.operand()
		if err != nil {
			return nil, err
		}
		return condBinary{op, l, r}, nil
	}
	return l, nil
}

func (p *condParser) operand() (cond, error) {
	t := p.peek()
	if t == "" {
		return nil, fmt.Errorf("the condition ends too early")
	}
	p.i++
	switch {
	case t == "(":
		if err := p.deeper(); err != nil {
			return nil, err
		}
		c, err := p.or()
		p.depth--
		if err != nil {
			return nil, err
		}
		if p.peek() != ")" {
			return nil, fmt.Errorf("a ( with no )")
		}
		p.i++
		return c, nil
	case t[0] == '\'' || t[0] == '"':
		return condLiteral{t[1 : len(t)-1]}, nil
	case t == "true" || t == "false":
		return condLiteral{t == "true"}, nil
	case t == "null":
		return condLiteral{nil}, nil
	}
	// A number is a finite one: nan and inf are no JSON values (they
	// compared equal to each other, and nan to itself).
	if n, err := strconv.ParseFloat(t, 64); err == nil && !math.IsNaN(n) && !math.IsInf(n, 0) {
		return condLiteral{n}, nil
	}
	r, err := parsePath(t)
	if err != nil {
		return nil, err
	}
	return condPath{r}, nil
}
