package policy

// Rules that see arguments: a policy rule matches a tool name and, when it
// says so, what the call does — the programs it starts (command), the paths
// it reads or writes (path), the method and hosts it reaches (method, host)
// and any field of its arguments (args). The gate evaluates a call's rules
// once per subject: each program a call starts is a subject of its own (so
// `npm test && git push` is judged for npm and for git), a call that starts
// none is one subject. The first rule matching a subject decides for it; the
// call takes the strictest of its subjects' decisions.

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/wardenrt/warden/runtime/policy/cmdpattern"
	"github.com/wardenrt/warden/runtime/tool"

	"github.com/goccy/go-yaml/ast"

	"github.com/wardenrt/warden/runtime/capability"
)

// Patterns is one pattern or a list of them; in YAML a string or a list of
// strings. A list matches when any of its patterns does.
type Patterns []string

// UnmarshalYAML implements goccy/go-yaml's NodeUnmarshaler: a string, or a
// sequence of strings.
func (p *Patterns) UnmarshalYAML(n ast.Node) error {
	str := func(n ast.Node) (string, error) {
		switch v := n.(type) {
		case *ast.StringNode:
			return v.Value, nil
		case *ast.LiteralNode:
			return v.Value.Value, nil
		case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
			return n.GetToken().Value, nil
		}
		return "", fmt.Errorf("want a string or a list of strings, not %s", n.Type())
	}
	if seq, ok := n.(*ast.SequenceNode); ok {
		out := make(Patterns, 0, len(seq.Values))
		for _, v := range seq.Values {
			s, err := str(v)
			if err != nil {
				return err
			}
			out = append(out, s)
		}
		*p = out
		return nil
	}
	s, err := str(n)
	if err != nil {
		return err
	}
	*p = Patterns{s}
	return nil
}

// maxRulePatterns bounds the patterns of one matcher; maxCommandWords the
// words of one command pattern.
const (
	maxRulePatterns = 256
	maxCommandWords = 64
)

// ruleMatchers is a rule's matchers, checked when the policy is parsed.
type ruleMatchers struct {
	command [][]string // words per pattern
	path    []capability.Grant
	method  []string // upper case
	host    []string // lower case
	args    []argMatcher

	// paths holds the path patterns anchored to a workspace, made once
	// per workspace.
	mu    sync.Mutex
	paths map[string]capability.PathMatcher
}

// pathsIn returns the path patterns anchored to ws.
func (m *ruleMatchers) pathsIn(ws string) capability.PathMatcher {
	m.mu.Lock()
	defer m.mu.Unlock()
	pm, ok := m.paths[ws]
	if !ok {
		if m.paths == nil {
			m.paths = map[string]capability.PathMatcher{}
		}
		pm = capability.NewPathMatcher(ws, m.path...)
		m.paths[ws] = pm
	}
	return pm
}

type argMatcher struct {
	field    string
	path     []string
	patterns []string
}

func (m *ruleMatchers) empty() bool {
	return len(m.command) == 0 && len(m.path) == 0 && len(m.method) == 0 && len(m.host) == 0 && len(m.args) == 0
}

// compileMatchers checks a rule's matchers; bad reports a problem at a YAML
// path below the rule.
func (r *Rule) compileMatchers(bad func(at, format string, args ...any)) {
	m := r.m
	n := r.Index + 1
	check := func(field string, ps Patterns) bool {
		if len(ps) > maxRulePatterns {
			bad(field, "rule %d: %s has %d patterns; at most %d", n, field, len(ps), maxRulePatterns)
			return false
		}
		for i, p := range ps {
			if strings.TrimSpace(p) == "" {
				bad(field, "rule %d: %s pattern %d is empty", n, field, i+1)
				return false
			}
		}
		return true
	}
	if check("command", r.Command) {
		for i, p := range r.Command {
			words, err := cmdpattern.Split(p)
			switch {
			case err != nil:
				bad("command", "rule %d: command pattern %d: %v", n, i+1, err)
			case len(words) > maxCommandWords:
				bad("command", "rule %d: command pattern %d has more than %d words", n, i+1, maxCommandWords)
			case words[0] == "**":
				bad("command", "rule %d: command pattern %q must start with the program's name (a word or glob such as git, npm*)", n, p)
			default:
				m.command = append(m.command, words)
			}
		}
	}
	if check("path", r.Path) {
		for _, p := range r.Path {
			g, err := capability.Parse("fs.read:" + p)
			if err != nil {
				bad("path", "rule %d: path %q: %v", n, p, strings.TrimPrefix(err.Error(), "capability: "))
				continue
			}
			m.path = append(m.path, g)
		}
	}
	if check("method", r.Method) {
		for _, p := range r.Method {
			if _, err := path.Match(p, ""); err != nil {
				bad("method", "rule %d: method pattern %q: %v", n, p, err)
				continue
			}
			m.method = append(m.method, strings.ToUpper(p))
		}
	}
	if check("host", r.Host) {
		for _, p := range r.Host {
			if _, err := path.Match(p, ""); err != nil || strings.ContainsAny(p, "/ ") {
				bad("host", "rule %d: host pattern %q: use a host name or a glob such as *.example.com", n, p)
				continue
			}
			m.host = append(m.host, strings.ToLower(strings.TrimSuffix(p, ".")))
		}
	}
	for _, field := range sortedKeys(r.Args) {
		at := "args." + field
		parts := strings.Split(field, ".")
		ok := true
		for _, part := range parts {
			if part == "" {
				ok = false
			}
		}
		if !ok {
			bad(at, "rule %d: args field %q: use field names separated by dots (a.b)", n, field)
			continue
		}
		if check(at, r.Args[field]) {
			m.args = append(m.args, argMatcher{field: field, path: parts, patterns: r.Args[field]})
		}
	}
}

// CallFacts is what rules can see of a call.
type CallFacts struct {
	names  []string // the tool's name and aliases
	paths  []string // fs needs' paths
	hosts  []string // net needs' hosts
	method string   // the method argument, upper case ("" when none)
	args   map[string]any
}

// NewCallFacts gathers what rules can see of a call of the tool names
// (its name and aliases) with needs and its decoded arguments.
func NewCallFacts(names []string, needs []capability.Need, args map[string]any) *CallFacts {
	f := &CallFacts{names: names, args: args}
	for _, n := range needs {
		switch n.Kind {
		case capability.FSRead, capability.FSWrite:
			if capability.CleanPath(n.Resource) {
				f.paths = append(f.paths, n.Resource)
			}
		case capability.Net:
			f.hosts = append(f.hosts, netHost(n.Resource))
		}
	}
	if m, ok := args["method"].(string); ok {
		f.method = strings.ToUpper(m)
	}
	return f
}

// netHost is the host of a net need's resource (host, host:port, [v6]:port).
func netHost(res string) string {
	if strings.HasPrefix(res, "[") {
		if i := strings.Index(res, "]"); i > 0 {
			return res[1:i]
		}
	}
	if i := strings.LastIndexByte(res, ':'); i >= 0 && strings.Count(res, ":") == 1 {
		return res[:i]
	}
	return res
}

// matches reports whether the rule applies to a subject: the call f, and
// prog (nil: the call starts no program). why says which matcher matched.
func (r *Rule) matches(f *CallFacts, prog *tool.Program, ws string) (bool, string) {
	return r.matchesAs(f, prog, ws, cmdpattern.One)
}

// matchesAs is matches with prog's run-time words matched as mode says.
func (r *Rule) matchesAs(f *CallFacts, prog *tool.Program, ws string, mode cmdpattern.Mode) (bool, string) {
	m := r.m
	var why []string
	if len(m.command) > 0 {
		if prog == nil {
			return false, ""
		}
		hit := ""
		for i, words := range m.command {
			if cmdpattern.Match(words, *prog, mode) {
				hit = fmt.Sprintf("command %q matched %s", r.Command[i], prog)
				break
			}
		}
		if hit == "" {
			return false, ""
		}
		why = append(why, hit)
	}
	if len(m.path) > 0 {
		hit := ""
		pm := m.pathsIn(ws)
		for _, p := range f.paths {
			if i := pm.Match(p); i >= 0 {
				hit = fmt.Sprintf("path %q matched %s", r.Path[i], p)
				break
			}
		}
		if hit == "" {
			return false, ""
		}
		why = append(why, hit)
	}
	if len(m.method) > 0 {
		hit := ""
		for _, p := range m.method {
			if ok, _ := path.Match(p, f.method); ok && f.method != "" {
				hit = fmt.Sprintf("method %q matched %s", p, f.method)
				break
			}
		}
		if hit == "" {
			return false, ""
		}
		why = append(why, hit)
	}
	if len(m.host) > 0 {
		hit := ""
	hosts:
		for _, h := range f.hosts {
			lh := strings.ToLower(strings.TrimSuffix(h, "."))
			for _, p := range m.host {
				if ok, _ := path.Match(p, lh); ok {
					hit = fmt.Sprintf("host %q matched %s", p, h)
					break hosts
				}
			}
		}
		if hit == "" {
			return false, ""
		}
		why = append(why, hit)
	}
	for _, a := range m.args {
		v, ok := argValue(f.args, a.path)
		if !ok {
			return false, ""
		}
		hit := ""
		for _, p := range a.patterns {
			if cmdpattern.Wildcard(p, v) {
				hit = fmt.Sprintf("args.%s %q matched %q", a.field, p, truncateText(v, 80))
				break
			}
		}
		if hit == "" {
			return false, ""
		}
		why = append(why, hit)
	}
	return true, strings.Join(why, ", ")
}

// argValue is the text of the argument at a dotted path: a string as it
// is, a number or boolean as JSON writes it; objects, lists and null have
// none.
func argValue(args map[string]any, p []string) (string, bool) {
	var v any = args
	for _, k := range p {
		m, ok := v.(map[string]any)
		if !ok {
			return "", false
		}
		if v, ok = m[k]; !ok {
			return "", false
		}
	}
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		return strconv.FormatBool(x), true
	}
	return "", false
}

// ruleBook is one policy's rules, with the candidates for each tool name
// found once.
type ruleBook struct {
	rules []Rule
	mu    sync.Mutex
	cands map[string][]*Rule
}

func newRuleBook(rules []Rule) *ruleBook {
	return &ruleBook{rules: rules, cands: map[string][]*Rule{}}
}

// candidates returns, in order, the rules whose tool pattern matches one of
// names (a tool's name and aliases).
func (b *ruleBook) candidates(names []string) []*Rule {
	key := strings.Join(names, "\x00")
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.cands[key]; ok {
		return c
	}
	var out []*Rule
	for i := range b.rules {
		for _, n := range names {
			if ok, _ := path.Match(b.rules[i].Tool, n); ok {
				out = append(out, &b.rules[i])
				break
			}
		}
	}
	b.cands[key] = out
	return out
}

// owns reports whether r is one of the book's rules.
func (b *ruleBook) owns(r *Rule) bool {
	for i := range b.rules {
		if &b.rules[i] == r {
			return true
		}
	}
	return false
}

// needsPrograms reports whether any candidate has a command matcher;
// seesPaths whether any has a path matcher.
func needsPrograms(cands []*Rule) bool {
	return slices.ContainsFunc(cands, func(r *Rule) bool { return len(r.m.command) > 0 })
}

func seesPaths(cands []*Rule) bool {
	return slices.ContainsFunc(cands, func(r *Rule) bool { return len(r.m.path) > 0 })
}

// first returns the first candidate that applies to the subject.
func first(cands []*Rule, f *CallFacts, prog *tool.Program, ws string) (*Rule, string) {
	for _, r := range cands {
		if ok, why := r.matches(f, prog, ws); ok {
			return r, why
		}
	}
	return nil, ""
}

// Verdict is what the rules decide for a call.
type Verdict struct {
	// Rule is the trusted policy's deciding rule (the strictest of the
	// subjects'), nil when none matched; Why says which matcher matched
	// and for which program.
	Rule *Rule
	Why  string
	// Narrowed is the untrusted workspace policy's strictest rule that
	// added a restriction, if any.
	Narrowed    *Rule
	NarrowedWhy string
	Deny        bool
	Approval    bool
	DryRunFirst bool
	// Asking are every rule, of either policy, that asks for an approval
	// of one of the call's subjects: an approval must cover them all.
	Asking []*Rule
	// Unseen is set when a subject has words known only at run time or is
	// opaque: an approval of it cannot be remembered.
	Unseen bool
}

// Deciding is the rule to name for the decision: the trusted policy's,
// or the untrusted one's when it is the stricter.
func (v *Verdict) Deciding() (*Rule, string) {
	if v.Narrowed != nil && severity(v.Narrowed) > severity(v.Rule) {
		return v.Narrowed, v.NarrowedWhy
	}
	return v.Rule, v.Why
}

func severity(r *Rule) int {
	switch {
	case r == nil:
		return 0
	case r.Action == ActionDeny:
		return 4
	case r.RequireApproval:
		return 3
	case r.DryRunFirst:
		return 2
	}
	return 1
}

// stricter reports whether r is stricter than best: more severe, or as
// severe and written first.
func stricter(r, best *Rule) bool {
	s, b := severity(r), severity(best)
	return s > b || (s == b && r != nil && best != nil && r.Index < best.Index)
}

// strictestOf is, among cands that apply to the subject, the strictest:
// how an opaque subject is judged.
func strictestOf(cands []*Rule, f *CallFacts, prog *tool.Program, ws string) (*Rule, string) {
	var best *Rule
	why := ""
	for _, r := range cands {
		if ok, w := r.matches(f, prog, ws); ok && (best == nil || stricter(r, best)) {
			best, why = r, w
		}
	}
	return best, why
}

// judged is one policy's rules applied to a call's subjects.
type judged struct {
	rule   *Rule // the strictest subject's
	why    string
	asking []*Rule
	unseen bool
}

// strictestUnseen is how a subject with words no later check sees is
// judged: the strictest of the rules that match some expansion of them,
// up to the first rule that matches whatever they are (which would decide
// any of its expansions: the rules after it never apply).
func strictestUnseen(cands []*Rule, f *CallFacts, prog *tool.Program, ws string) (*Rule, string) {
	var best *Rule
	why := ""
	for _, r := range cands {
		ok, w := r.matchesAs(f, prog, ws, cmdpattern.Any)
		if !ok {
			continue
		}
		if best == nil || stricter(r, best) {
			best, why = r, w
		}
		if sure, _ := r.matchesAs(f, prog, ws, cmdpattern.None); sure {
			break
		}
	}
	return best, why
}

// judge applies cands to every subject: the first rule matching a subject
// decides for it (the strictest that can, for an opaque one whose launcher
// no command rule decides); the call takes the strictest subject's. final
// says no later check will see the words a subject knows only at run time
// (the check as a program starts): such a subject is judged by
// strictestUnseen.
func judge(cands []*Rule, f *CallFacts, progs []tool.Program, ws string, final bool) judged {
	var j judged
	add := func(r *Rule, why string) {
		if r != nil && r.RequireApproval && !slices.Contains(j.asking, r) {
			j.asking = append(j.asking, r)
		}
		if j.rule == nil || stricter(r, j.rule) {
			j.rule, j.why = r, why
		}
	}
	if len(progs) == 0 {
		add(first(cands, f, nil, ws))
		return j
	}
	decided := make([]*Rule, len(progs))
	for i := range progs {
		p := &progs[i]
		if p.Opaque {
			if l := p.Launcher - 1; l >= 0 && l < i && decided[l] != nil && len(decided[l].m.command) > 0 {
				continue // the owner wrote a rule for the launcher itself
			}
			j.unseen = true
			r, why := strictestOf(cands, f, p, ws)
			decided[i] = r
			add(r, why)
			continue
		}
		dynamic := slices.Contains(p.Dynamic, true)
		j.unseen = j.unseen || dynamic
		pick := first
		if final && dynamic {
			pick = strictestUnseen
		}
		r, why := pick(cands, f, p, ws)
		decided[i] = r
		add(r, why)
	}
	return j
}

// Decide evaluates the policy's rules (and an untrusted workspace policy's
// restrictions) for a call; final as judge's.
func (p *Policy) Decide(f *CallFacts, progs []tool.Program, ws string, final bool) Verdict {
	var v Verdict
	base := judge(p.book.candidates(f.names), f, progs, ws, final)
	v.Rule, v.Why, v.Asking, v.Unseen = base.rule, base.why, base.asking, base.unseen
	if v.Rule != nil {
		v.Deny = v.Rule.Action == ActionDeny
		v.Approval = v.Rule.RequireApproval
		v.DryRunFirst = v.Rule.DryRunFirst
	}
	for _, u := range p.narrowers {
		nj := judge(u.book.candidates(f.names), f, progs, ws, final)
		if r := nj.rule; severity(r) >= 2 {
			if v.Narrowed == nil || stricter(r, v.Narrowed) {
				v.Narrowed, v.NarrowedWhy = r, nj.why
			}
			v.Deny = v.Deny || r.Action == ActionDeny
			v.Approval = v.Approval || r.RequireApproval
			v.DryRunFirst = v.DryRunFirst || r.DryRunFirst
		}
		v.Asking = append(v.Asking, nj.asking...)
	}
	return v
}

// QuickDeny is a decision that needs nothing but the tool's name: the first
// rule for it (in the policy, or in an untrusted workspace policy's
// restrictions) denies it whatever the arguments.
func (p *Policy) QuickDeny(names []string) *Rule {
	for _, b := range append([]*Policy{p}, p.narrowers...) {
		if c := b.book.candidates(names); len(c) > 0 && c[0].Action == ActionDeny && c[0].m.empty() {
			return c[0]
		}
	}
	return nil
}

// NeedsPrograms reports whether deciding a call of the tool needs the
// programs it starts; ChecksAtRunTime whether the tool must also check,
// as it runs, the programs and paths it only learns then.
func (p *Policy) NeedsPrograms(names []string) bool {
	return p.anyCandidate(names, needsPrograms)
}

func (p *Policy) ChecksAtRunTime(names []string) bool {
	return p.anyCandidate(names, func(c []*Rule) bool { return needsPrograms(c) || seesPaths(c) })
}

func (p *Policy) anyCandidate(names []string, fn func([]*Rule) bool) bool {
	for _, b := range append([]*Policy{p}, p.narrowers...) {
		if fn(b.book.candidates(names)) {
			return true
		}
	}
	return false
}

// truncateText cuts s to at most n bytes of valid UTF-8.
func truncateText(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// CallRules lets a tool check, as each program starts or each file opens,
// what it did not know before running (words and paths computed at run
// time).
type CallRules struct {
	p  *Policy
	f  *CallFacts
	ws string
	// approved are the rules whose approval the call got.
	approved []*Rule
}

// NewCallRules returns the run-time checks of a call of p in workspace ws
// with facts f, and approve, which records the rules whose approval the
// call got: only whoever made the checks can say what was approved.
func NewCallRules(p *Policy, f *CallFacts, ws string) (cr *CallRules, approve func(rules []*Rule)) {
	cr = &CallRules{p: p, f: f, ws: ws}
	return cr, func(rules []*Rule) { cr.approved = rules }
}

// CheckPrograms checks programs as they start, with their real argv.
func (cr *CallRules) CheckPrograms(ps []tool.Program) *tool.Error {
	return cr.check(cr.f, ps, ps[0].String())
}

// CheckPath checks a file the call opens that it only learned of at run
// time.
func (cr *CallRules) CheckPath(p string) *tool.Error {
	f := *cr.f
	f.paths = []string{p}
	return cr.check(&f, nil, p)
}

// It is the last look at what it checks: a word still known only at run
// time is never seen (an inner script's variable, what xargs reads).
func (cr *CallRules) check(f *CallFacts, ps []tool.Program, what string) *tool.Error {
	v := cr.p.Decide(f, ps, cr.ws, true)
	r, why := v.Deciding()
	if v.Deny {
		return tool.Errorf(tool.CodePolicyDenied, "the policy denies this; change its rule to allow it",
			"%s is denied by %s: %s", what, r.Describe(), why)
	}
	for _, a := range v.Asking {
		if !slices.Contains(cr.approved, a) {
			return tool.Errorf(tool.CodeApprovalRequired, "write the command's words and paths literally, so the approval is asked before it runs",
				"%s needs approval (%s), which the call did not get: it was only known when the command ran", what, a.Describe())
		}
	}
	return nil
}
