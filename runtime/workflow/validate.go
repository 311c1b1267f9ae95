package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wardenrt/warden/internal/lazyre"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/decode"
	"github.com/wardenrt/warden/runtime/gate"
)

// Options are what Parse checks a workflow against.
type Options struct {
	// Tool reports whether a tool exists and returns its argument check
	// (nil: only existence). A nil Tool skips the tool checks.
	Tool func(name string) (check func(args map[string]any) error, ok bool)
	// Open reads a nested workflow: path as a step names it, relative to
	// the file from. It returns the file's source name (its cleaned path,
	// used to find cycles) and contents. Nil: nested workflows are checked
	// only for their own step's syntax.
	Open func(from, path string) (source string, data []byte, err error)
	// MaxDepth bounds nesting (default DefaultMaxDepth).
	MaxDepth int

	// cache holds the nested files parsed so far (by path and digest), so
	// a file used by many steps is parsed once.
	cache map[string]parsed
	// read counts the bytes of every file read so far (MaxTotalBytes).
	read *int64
	// tokens is what is left of MaxTotalTokens.
	tokens *int
}

type parsed struct {
	w   *Workflow
	err error
}

// RegistryTools is an Options.Tool over reg: a tool exists if reg has it,
// and literal arguments are checked as the gate would (strict decoding,
// the tool's schema).
func RegistryTools(reg *gate.Registry) func(name string) (func(map[string]any) error, bool) {
	return func(name string) (func(map[string]any) error, bool) {
		if !reg.Has(name) {
			return nil, false
		}
		return func(args map[string]any) error {
			b, err := json.Marshal(args)
			if err != nil {
				return err
			}
			return reg.CheckArgs(name, b)
		}, true
	}
}

// Parse reads a workflow strictly (unknown keys, duplicate keys and wrong
// types are errors) and checks it, nested workflows included. Every
// problem is a *gate.PositionError with the line and column of the
// value at fault; all of them are returned, joined.
func Parse(source string, data []byte, o Options) (*Workflow, error) {
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.cache == nil {
		o.cache = map[string]parsed{}
	}
	if o.read == nil {
		o.read = new(int64)
	}
	if o.tokens == nil {
		o.tokens = new(int)
		*o.tokens = MaxTotalTokens
	}
	*o.read += int64(len(data))
	return parse(source, data, o, []string{source})
}

func parse(source string, data []byte, o Options, stack []string) (*Workflow, error) {
	var w Workflow
	file, err := decode.YAML(source, data, &w, &decode.Limits{MaxBytes: MaxFileBytes, Pool: o.tokens})
	if err != nil {
		return nil, err
	}
	// A grants: key with no value is no grants (as grants: []), not the
	// policy's: a file whose grant lines are all commented out must not
	// widen.
	if w.Grants == nil {
		if l, _ := gate.YAMLPosition(file, "$.grants"); l > 0 {
			w.Grants = []string{}
		}
	}
	sum := sha256.Sum256(data)
	w.Digest = "sha256:" + hex.EncodeToString(sum[:])
	w.Source = source
	w.pos = func(p string) (int, int) { return gate.YAMLPosition(file, p) }
	c := &checker{w: &w, o: o, stack: stack}
	c.check()
	if len(c.errs) > 0 {
		return nil, errors.Join(c.errs...)
	}
	return &w, nil
}

type checker struct {
	w     *Workflow
	o     Options
	stack []string
	errs  []error
}

func (c *checker) bad(path, format string, args ...any) {
	l, col := c.w.pos(path)
	c.errs = append(c.errs, &gate.PositionError{Source: c.w.Source, Line: l, Column: col, Message: fmt.Sprintf(format, args...)})
}

var (
	stepID    = lazyre.New(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)
	paramName = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	types     = map[string]bool{"string": true, "integer": true, "number": true, "boolean": true, "array": true, "object": true}
)

func (c *checker) check() {
	w := c.w
	if w.Version != 1 {
		c.bad("$.version", "version must be 1 (got %d)", w.Version)
	}
	if strings.TrimSpace(w.Name) == "" {
		c.bad("$.name", "name is required")
	}
	for _, name := range sortedKeys(w.Params) {
		p := w.Params[name]
		at := "$.params." + name
		if !paramName.MatchString(name) {
			c.bad(at, "param name %q: use letters, digits and _", name)
		}
		if !types[p.Type] {
			c.bad(at+".type", "param %s: type %q: use string, integer, number, boolean, array or object", name, p.Type)
		} else if p.Default != nil {
			if err := checkType(p.Type, p.Default); err != nil {
				c.bad(at+".default", "param %s: the default %v", name, err)
			}
		}
	}
	for i, g := range w.Grants {
		if _, err := capability.Parse(g); err != nil {
			c.bad(fmt.Sprintf("$.grants[%d]", i), "%v", err)
		}
	}
	if len(w.Steps) == 0 {
		c.bad("$.steps", "a workflow needs at least one step")
	}
	index := map[string]int{}
	for i, s := range w.Steps {
		if stepID.MatchString(s.ID) {
			if j, dup := index[s.ID]; dup {
				c.bad(fmt.Sprintf("$.steps[%d].id", i), "step id %q is already the id of step %d", s.ID, j+1)
				continue
			}
			index[s.ID] = i
		}
	}
	for i := range w.Steps {
		c.step(i, index)
	}
	for _, name := range sortedKeys(w.Outputs) {
		c.refs(fmt.Sprintf("$.outputs.%s", name), w.Outputs[name], len(w.Steps), index, false)
	}
}

func (c *checker) step(i int, index map[string]int) {
	s := &c.w.Steps[i]
	at := fmt.Sprintf("$.steps[%d]", i)
	switch {
	case s.ID == "":
		c.bad(at, "step %d has no id", i+1)
	case !stepID.MatchString(s.ID):
		c.bad(at+".id", "step id %q: start with a letter; letters, digits, _ and - (at most 64)", s.ID)
	}
	kinds := 0
	for _, k := range []string{s.Tool, s.Agent, s.Workflow} {
		if k != "" {
			kinds++
		}
	}
	if kinds != 1 {
		c.bad(at, "step %s must have exactly one of tool, agent and workflow (it has %d)", s.ID, kinds)
	}
	item := s.Foreach != nil
	// References: args, params, the agent's task, foreach.
	for _, k := range sortedKeys(s.Args) {
		c.value(fmt.Sprintf("%s.args.%s", at, k), s.Args[k], i, index, item)
	}
	for _, k := range sortedKeys(s.Params) {
		c.value(fmt.Sprintf("%s.params.%s", at, k), s.Params[k], i, index, item)
	}
	if s.Agent != "" {
		c.refs(at+".agent", s.Agent, i, index, item)
	}
	switch s.Kind() {
	case "tool":
		if len(s.Params) > 0 {
			c.bad(at+".params", "step %s: a tool step takes args, not params", s.ID)
		}
		c.tool(i, at)
	case "agent":
		if len(s.Args) > 0 || len(s.Params) > 0 {
			c.bad(at, "step %s: an agent step takes only its task", s.ID)
		}
	case "workflow":
		if len(s.Args) > 0 {
			c.bad(at+".args", "step %s: a workflow step takes params, not args", s.ID)
		}
		c.nested(i, at)
	}
	if s.When != "" {
		cnd, err := parseCond(s.When)
		if err != nil {
			c.bad(at+".when", "step %s: when: %v", s.ID, err)
		} else {
			for _, r := range cnd.refs() {
				c.ref(at+".when", r, i, index, false)
			}
		}
	}
	switch f := s.Foreach.(type) {
	case nil:
	case []any:
		if len(f) == 0 || len(f) > MaxForeach {
			c.bad(at+".foreach", "step %s: foreach has %d items; 1 to %d", s.ID, len(f), MaxForeach)
		}
		for j, e := range f {
			c.value(fmt.Sprintf("%s.foreach[%d]", at, j), e, i, index, false)
		}
	case string:
		r, ok := wholeRef(f)
		if !ok {
			c.bad(at+".foreach", "step %s: foreach is a list or one reference to a list, e.g. ${{ steps.files.data.matches }}", s.ID)
		} else {
			c.ref(at+".foreach", r, i, index, false)
		}
	default:
		c.bad(at+".foreach", "step %s: foreach is a list or one reference to a list", s.ID)
	}
	if s.Retry != nil {
		if s.Retry.Attempts < 1 || s.Retry.Attempts > MaxRetries {
			c.bad(at+".retry.attempts", "step %s: retry attempts must be 1 to %d (got %d)", s.ID, MaxRetries, s.Retry.Attempts)
		}
		if s.Retry.Delay != "" {
			if d, err := time.ParseDuration(s.Retry.Delay); err != nil || d < 0 || d > MaxRetryDelay {
				c.bad(at+".retry.delay", "step %s: retry delay %q: a duration up to %s, e.g. 2s", s.ID, s.Retry.Delay, MaxRetryDelay)
			}
		}
	}
	if s.Timeout != "" {
		if d, err := time.ParseDuration(s.Timeout); err != nil || d <= 0 || d > MaxTimeout {
			c.bad(at+".timeout", "step %s: timeout %q: a duration up to %s, e.g. 30s", s.ID, s.Timeout, MaxTimeout)
		}
	}
}

// value checks the references in a decoded YAML value.
func (c *checker) value(at string, v any, step int, index map[string]int, item bool) {
	switch x := v.(type) {
	case string:
		c.refs(at, x, step, index, item)
	case map[string]any:
		for _, k := range sortedKeys(x) {
			c.value(at+"."+k, x[k], step, index, item)
		}
	case []any:
		for j, e := range x {
			c.value(fmt.Sprintf("%s[%d]", at, j), e, step, index, item)
		}
	}
}

func (c *checker) refs(at, s string, step int, index map[string]int, item bool) {
	rs, err := refsIn(s)
	if err != nil {
		c.bad(at, "%v", err)
		return
	}
	for _, r := range rs {
		c.ref(at, r, step, index, item)
	}
}

// ref checks one reference made in step (len(steps) for outputs).
func (c *checker) ref(at string, r ref, step int, index map[string]int, item bool) {
	switch r.root {
	case "params":
		if _, ok := c.w.Params[r.name]; !ok {
			c.bad(at, "${{ %s }}: the workflow has no param %q (declare it under params)", r, r.name)
		}
	case "steps":
		j, ok := index[r.name]
		switch {
		case !ok:
			c.bad(at, "${{ %s }}: there is no step %q", r, r.name)
		case j == step:
			c.bad(at, "${{ %s }}: a step cannot use its own result (a cycle)", r)
		case j > step:
			c.bad(at, "${{ %s }}: step %s runs later; steps run in order, so this would be a cycle", r, r.name)
		}
	case "item":
		if !item {
			c.bad(at, "${{ %s }}: item exists only in a step with foreach", r)
		}
	}
}

// tool checks a tool step's tool and, when they hold no reference, its
// arguments against the tool's schema.
func (c *checker) tool(i int, at string) {
	s := &c.w.Steps[i]
	if c.o.Tool == nil {
		return
	}
	check, ok := c.o.Tool(s.Tool)
	if !ok {
		c.bad(at+".tool", "step %s: there is no tool %q (see `warden tools`)", s.ID, s.Tool)
		return
	}
	if check == nil || hasRefs(s.Args) {
		return
	}
	args := s.Args
	if args == nil {
		args = map[string]any{}
	}
	if err := check(args); err != nil {
		c.bad(at+".args", "step %s: %s arguments: %v", s.ID, s.Tool, err)
	}
}

// nested checks a workflow step: the file, its params, cycles and depth.
func (c *checker) nested(i int, at string) {
	s := &c.w.Steps[i]
	if c.o.Open == nil {
		return
	}
	if len(c.stack) >= c.o.MaxDepth {
		c.bad(at+".workflow", "step %s: workflows nest at most %d deep", s.ID, c.o.MaxDepth)
		return
	}
	if *c.o.tokens <= 0 || *c.o.read > MaxTotalBytes {
		// A budget ran out on an earlier file (and was reported
		// there): nothing more is opened.
		return
	}
	src, data, err := c.o.Open(c.w.Source, s.Workflow)
	if err != nil {
		c.bad(at+".workflow", "step %s: %v", s.ID, err)
		return
	}

	for _, prev := range c.stack {
		if prev == src {
			c.bad(at+".workflow", "step %s: %s includes itself (%s → %s): a cycle", s.ID, filepath.Base(src), strings.Join(c.stack, " → "), src)
			return
		}
	}
	// Every file read counts, parsed or found in the cache: a file is
	// read and hashed to be looked up, so 1,900 includes of one 1 MiB
	// file would otherwise read 1.9 GB within every other budget.
	if *c.o.read += int64(len(data)); *c.o.read > MaxTotalBytes {
		c.bad(at+".workflow", "step %s: the workflow and the files it includes come to more than %d bytes (the limit): include fewer or smaller files", s.ID, MaxTotalBytes)
		return
	}
	sum := sha256.Sum256(data)
	key := src + "\x00" + string(sum[:]) + "\x00" + strconv.Itoa(len(c.stack))
	p, ok := c.o.cache[key]
	if !ok {
		// What is parsed stays in the cache while the whole is checked.
		p.w, p.err = parse(src, data, c.o, append(append([]string(nil), c.stack...), src))
		c.o.cache[key] = p
	}
	child, err := p.w, p.err
	if err != nil {
		c.bad(at+".workflow", "step %s: %s is invalid: %v", s.ID, s.Workflow, strings.ReplaceAll(err.Error(), "\n", "; "))
		return
	}
	for _, name := range sortedKeys(child.Params) {
		p := child.Params[name]
		v, given := s.Params[name]
		switch {
		case !given && p.Required && p.Default == nil:
			where := at + ".params"
			if s.Params == nil {
				where = at + ".workflow"
			}
			c.bad(where, "step %s: %s needs param %s", s.ID, s.Workflow, name)
		case given && !hasRefs(v):
			if err := checkType(p.Type, v); err != nil {
				c.bad(fmt.Sprintf("%s.params.%s", at, name), "step %s: param %s of %s: %v", s.ID, name, s.Workflow, err)
			}
		}
	}
	for _, name := range sortedKeys(s.Params) {
		if _, ok := child.Params[name]; !ok {
			c.bad(fmt.Sprintf("%s.params.%s", at, name), "step %s: %s has no param %s", s.ID, s.Workflow, name)
		}
	}
}

// hasRefs reports whether a decoded value holds a `${{`.
func hasRefs(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.Contains(x, "${{")
	case map[string]any:
		for _, e := range x {
			if hasRefs(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasRefs(e) {
				return true
			}
		}
	}
	return false
}

// checkType checks a decoded value against a param type.
func checkType(typ string, v any) error {
	ok := false
	switch typ {
	case "string":
		_, ok = v.(string)
	case "boolean":
		_, ok = v.(bool)
	case "integer":
		switch n := v.(type) {
		case int, int64, uint64:
			ok = true
		case float64:
			ok = n == float64(int64(n))
		}
	case "number":
		switch v.(type) {
		case int, int64, uint64, float64:
			ok = true
		}
	case "array":
		_, ok = v.([]any)
	case "object":
		_, ok = v.(map[string]any)
	}
	if !ok {
		return fmt.Errorf("%v is not of type %s", text(v), typ)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
