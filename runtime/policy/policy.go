// Package policy is the policy file the gate applies: parsed strictly and
// validated (docs/policy.md), its rules and what they decide of a call,
// the narrowing by a workspace policy its owner has not trusted, which
// policy is in force, and the tests a policy carries. It never imports the
// gate; the gate, above it, runs a policy's tests (gate.RunTests).
package policy

import (
	_ "embed"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/wardenrt/warden/runtime/resource"
	"github.com/wardenrt/warden/runtime/tool"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/decode"
	"github.com/wardenrt/warden/runtime/pathrule"
)

// Rule is one policy rule. Rules are matched in order against the tool name
// and, when a rule has matchers, against what the call does; the first rule
// that matches wins (see rules.go for calls that start several programs).
type Rule struct {
	// Name optionally names the rule, for explanations and policy tests.
	Name string `yaml:"name"`
	// Tool is a tool name or a glob over tool names (path.Match syntax:
	// `fs_*`, `*`).
	Tool            string `yaml:"tool"`
	Action          string `yaml:"action"`
	RequireApproval bool   `yaml:"require_approval"`
	DryRunFirst     bool   `yaml:"dry_run_first"`
	// Limits override the policy's resource limits for the programs the
	// tool starts (zero fields: the policy's).
	Limits resource.Limits `yaml:"limits"`

	// Matchers: a rule with matchers applies only to calls all of them
	// match; within one matcher any pattern may match.
	//
	// Command matches the argv prefix of each program the call starts
	// ("git push*", "npm run test:*", "git ** push": ** is any number of
	// words); Path the paths the call reads or writes (globs as in fs
	// grants: relative ones under the workspace); Method and Host the
	// method argument and the hosts the call reaches; Args a field of the
	// arguments (a dotted path) against a glob.
	Command Patterns            `yaml:"command"`
	Path    Patterns            `yaml:"path"`
	Method  Patterns            `yaml:"method"`
	Host    Patterns            `yaml:"host"`
	Args    map[string]Patterns `yaml:"args"`

	// Index and Line locate the rule in its file, for explanations.
	Index int `yaml:"-"`
	Line  int `yaml:"-"`

	m *ruleMatchers
	// origin names the policy file and its digest; untrusted marks the
	// rules of a workspace policy its owner has not trusted.
	origin    string
	untrusted bool
}

// Key names the rule for remembered approvals: its file, the file's
// digest and its place in it, so an edited policy asks again.
func (r *Rule) Key() string { return r.origin + ": " + r.Describe() }

// Untrusted reports whether r is a rule of a workspace policy its owner
// has not trusted.
func (r *Rule) Untrusted() bool { return r.untrusted }

// Rule actions.
const (
	ActionAllow = "allow"
	ActionDeny  = "deny"
)

// Policy is a parsed, validated policy file (docs/policy.md).
type Policy struct {
	Version  int               `yaml:"version"`
	Grants   []string          `yaml:"grants"`
	Rules    []Rule            `yaml:"rules"`
	Approval tool.ApprovalMode `yaml:"approval"`
	// RequireSandbox refuses to start programs (shell, git, ops) where the
	// kernel cannot give every sandbox protection.
	RequireSandbox bool `yaml:"require_sandbox"`
	// Limits are the resource limits of every program a tool starts (zero
	// fields: resource.Default).
	Limits resource.Limits `yaml:"limits"`
	// Tests are calls and the verdicts the policy must give them (warden
	// policy test).
	Tests []PolicyTest `yaml:"tests"`
	// Protect are paths no program may change and Hide paths no program
	// or tool may read, whatever the grants (pathrule entries).
	Protect []string `yaml:"protect"`
	Hide    []string `yaml:"hide"`

	// Source names where the policy came from (a path or "built-in default");
	// Digest is the sha256 of its text.
	Source string `yaml:"-"`
	Digest string `yaml:"-"`
	grants []capability.Grant
	book   *ruleBook
	// narrowers, on the policy in force, are policies its owner does not
	// trust as written: each may only narrow this one (see Narrow).
	narrowers []*Policy
	// lines locates top-level values ($.approval, $.grants[2], …).
	lines map[string]int
	// grantsGiven: the file has a grants key (an untrusted policy without
	// one does not narrow the grants).
	grantsGiven bool
}

//go:embed default_policy.yaml
var defaultPolicyYAML []byte

// DefaultPolicySource is the Source of the built-in default policy.
const DefaultPolicySource = "built-in default"

// DefaultPolicy returns the built-in default policy: read-only on the
// workspace (fs.read:**, git.read, system.info, memory.read:*), everything
// else denied.
func DefaultPolicy() *Policy {
	p, err := ParsePolicy(DefaultPolicySource, defaultPolicyYAML)
	if err != nil {
		panic("built-in default policy: " + err.Error())
	}
	return p
}

// DefaultPolicyYAML returns the text of the built-in default policy.
func DefaultPolicyYAML() string { return string(defaultPolicyYAML) }

// LoadPolicy reads and parses a policy file (at most MaxPolicyBytes; its
// size is checked before it is read).
func LoadPolicy(file string) (*Policy, error) {
	p, _, err := loadPolicyFile(file)
	return p, err
}

// MaxPolicyBytes bounds a policy file.
const MaxPolicyBytes = decode.DefaultMaxBytes

// PolicyError is a problem in a policy file.
type PolicyError = decode.Error

// ParsePolicy parses policy YAML strictly and under a budget (see package
// decode: size, aliases, depth, duplicate and unknown keys, wrong types)
// and validates it. Every problem is reported with its line and column;
// all of them are returned joined.
func ParsePolicy(source string, data []byte) (*Policy, error) {
	var p Policy
	file, err := decode.YAML(source, data, &p, &decode.Limits{MaxBytes: MaxPolicyBytes})
	if err != nil {
		return nil, err
	}
	pos := func(p string) (int, int) { return decode.Position(file, p) }
	var errs []error
	bad := func(at, format string, args ...any) {
		l, c := pos(at)
		errs = append(errs, &PolicyError{Source: source, Line: l, Column: c, Message: fmt.Sprintf(format, args...)})
	}
	p.lines = map[string]int{}
	if l, _ := pos("$.grants"); l > 0 {
		p.grantsGiven = true
	}
	for _, at := range []string{"$.approval", "$.limits", "$.require_sandbox"} {
		p.lines[at], _ = pos(at)
	}
	for i := range p.Grants {
		p.lines[fmt.Sprintf("$.grants[%d]", i)], _ = pos(fmt.Sprintf("$.grants[%d]", i))
	}
	if p.Version != 1 {
		bad("$.version", "version must be 1 (got %d)", p.Version)
	}
	for i, g := range p.Grants {
		pg, err := capability.Parse(g)
		if err != nil {
			bad(fmt.Sprintf("$.grants[%d]", i), "%v", err)
			continue
		}
		p.grants = append(p.grants, pg)
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		r.Index = i
		r.Line, _ = pos(fmt.Sprintf("$.rules[%d]", i))
		at := fmt.Sprintf("$.rules[%d]", i)
		if r.Tool == "" {
			bad(at, "rule %d: tool is required (a tool name or a glob such as fs_*)", i+1)
		} else if _, err := path.Match(r.Tool, ""); err != nil {
			bad(at+".tool", "rule %d: tool pattern %q: %v", i+1, r.Tool, err)
		}
		switch r.Action {
		case ActionAllow, ActionDeny:
		case "":
			bad(at, "rule %d: action is required (allow or deny)", i+1)
		default:
			bad(at+".action", "rule %d: action %q: use allow or deny", i+1, r.Action)
		}
		if r.Action == ActionDeny && (r.RequireApproval || r.DryRunFirst) {
			bad(at, "rule %d: a deny rule cannot require approval or a dry run", i+1)
		}
		r.m = &ruleMatchers{}
		r.compileMatchers(func(sub, format string, args ...any) { bad(at+"."+sub, format, args...) })
		if r.Name != "" {
			for j := range i {
				if p.Rules[j].Name == r.Name {
					bad(at+".name", "rule %d: the name %q is already rule %d's", i+1, r.Name, j+1)
				}
			}
		}
	}
	p.Digest = SHA256Hex(data)
	for i := range p.Rules {
		p.Rules[i].origin = fmt.Sprintf("%s (sha256 %s)", source, p.Digest[:16])
	}
	p.book = newRuleBook(p.Rules)
	for i := range p.Tests {
		p.Tests[i].Line, _ = pos(fmt.Sprintf("$.tests[%d]", i))
		p.checkTest(i, func(sub, format string, args ...any) { bad(fmt.Sprintf("$.tests[%d]%s", i, sub), format, args...) })
	}
	for _, l := range []struct {
		key     string
		entries []string
	}{{"protect", p.Protect}, {"hide", p.Hide}} {
		for i, e := range l.entries {
			if err := pathrule.Check(e); err != nil {
				bad(fmt.Sprintf("$.%s[%d]", l.key, i), "%s: %v", l.key, err)
			}
		}
	}
	if p.Approval != "" {
		if _, err := tool.ParseApprovalMode(string(p.Approval)); err != nil {
			bad("$.approval", "%v", err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p.Source = source
	return &p, nil
}

// GrantList returns the policy's parsed grants.
func (p *Policy) GrantList() []capability.Grant { return append([]capability.Grant(nil), p.grants...) }

// Untrusted returns the workspace policy that narrows p, when one was found
// that its owner has not trusted (see Narrow); nil otherwise.
func (p *Policy) Untrusted() *Policy {
	if len(p.narrowers) == 0 {
		return nil
	}
	return p.narrowers[len(p.narrowers)-1]
}

// NarrowedBy returns the narrower whose rule r is, or nil.
func (p *Policy) NarrowedBy(r *Rule) *Policy {
	for _, n := range p.narrowers {
		if n.book.owns(r) {
			return n
		}
	}
	return nil
}

// NarrowLimits returns l tightened by the limits of every policy that
// narrows p: a trusted rule's own limits never loosen an untrusted
// policy's.
func (p *Policy) NarrowLimits(l resource.Limits) resource.Limits {
	for _, u := range p.narrowers {
		l = tighterLimits(l, u.Limits)
	}
	return l
}

// GrantSet returns the policy's grants anchored to workspace: for a policy
// an untrusted one narrows, its grants ∩ the untrusted policy's.
func (p *Policy) GrantSet(workspace string) capability.Set {
	s := capability.NewSet(workspace, p.grants...)
	for _, n := range p.narrowers {
		if n.grantsGiven {
			s = s.Intersect(capability.NewSet(workspace, n.grants...))
		}
	}
	return s
}

// Describe says where a rule is, for explanations and audit records.
func (r *Rule) Describe() string {
	if r == nil {
		return "no rule (capabilities decide)"
	}
	var flags []string
	if r.RequireApproval {
		flags = append(flags, "require_approval")
	}
	if r.DryRunFirst {
		flags = append(flags, "dry_run_first")
	}
	s := fmt.Sprintf("rules[%d] (line %d): tool %s", r.Index, r.Line, r.Tool)
	if r.Name != "" {
		s = fmt.Sprintf("rules[%d] %q (line %d): tool %s", r.Index, r.Name, r.Line, r.Tool)
	}
	if m := r.Matchers(); m != "" {
		s += " " + m
	}
	s += " → " + r.Action
	if len(flags) > 0 {
		s += " + " + strings.Join(flags, ", ")
	}
	return s
}

// Matchers renders the rule's matchers ("" when it has none), as a policy
// file would write them.
func (r *Rule) Matchers() string {
	var parts []string
	add := func(name string, ps Patterns) {
		switch len(ps) {
		case 0:
		case 1:
			parts = append(parts, fmt.Sprintf("%s %q", name, ps[0]))
		default:
			q := make([]string, len(ps))
			for i, p := range ps {
				q[i] = fmt.Sprintf("%q", p)
			}
			parts = append(parts, name+" ["+strings.Join(q, ", ")+"]")
		}
	}
	add("command", r.Command)
	add("path", r.Path)
	add("method", r.Method)
	add("host", r.Host)
	for _, k := range sortedKeys(r.Args) {
		add("args."+k, r.Args[k])
	}
	return strings.Join(parts, ", ")
}
