package runtime

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/pathrule"
	"github.com/wardenrt/warden/runtime/sandbox"
)

// ApprovalMode says who approves calls a rule marks require_approval.
type ApprovalMode string

// Approval modes.
const (
	ApproveAsk   ApprovalMode = "ask"   // ask a person on the terminal
	ApproveAuto  ApprovalMode = "auto"  // approve automatically, recorded as auto
	ApproveNever ApprovalMode = "never" // refuse: APPROVAL_REQUIRED
)

// ParseApprovalMode checks an approval mode name.
func ParseApprovalMode(s string) (ApprovalMode, error) {
	switch m := ApprovalMode(s); m {
	case ApproveAsk, ApproveAuto, ApproveNever:
		return m, nil
	}
	return "", fmt.Errorf("approval mode %q: use ask, auto or never", s)
}

// Rule is one policy rule. Rules are matched against the tool name in order;
// the first match wins.
type Rule struct {
	// Tool is a tool name or a glob over tool names (path.Match syntax:
	// `fs_*`, `*`).
	Tool            string `yaml:"tool"`
	Action          string `yaml:"action"`
	RequireApproval bool   `yaml:"require_approval"`
	DryRunFirst     bool   `yaml:"dry_run_first"`
	// Limits override the policy's resource limits for the programs the
	// tool starts (zero fields: the policy's).
	Limits sandbox.Limits `yaml:"limits"`
	// Index and Line locate the rule in its file, for explanations.
	Index int `yaml:"-"`
	Line  int `yaml:"-"`
}

// Rule actions.
const (
	ActionAllow = "allow"
	ActionDeny  = "deny"
)

// Policy is a parsed, validated policy file (SPEC §4).
type Policy struct {
	Version  int          `yaml:"version"`
	Grants   []string     `yaml:"grants"`
	Rules    []Rule       `yaml:"rules"`
	Approval ApprovalMode `yaml:"approval"`
	// RequireSandbox refuses to start programs (shell, git, ops) where the
	// kernel cannot give every sandbox protection.
	RequireSandbox bool `yaml:"require_sandbox"`
	// Limits are the resource limits of every program a tool starts (zero
	// fields: sandbox.DefaultLimits).
	Limits sandbox.Limits `yaml:"limits"`
	// Protect are paths no program may change and Hide paths no program
	// or tool may read, whatever the grants (pathrule entries).
	Protect []string `yaml:"protect"`
	Hide    []string `yaml:"hide"`

	// Source names where the policy came from (a path or "built-in default").
	Source string `yaml:"-"`
	grants []capability.Grant
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

// LoadPolicy reads and parses a policy file.
func LoadPolicy(file string) (*Policy, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return ParsePolicy(file, data)
}

// PositionError is a problem in a YAML file — a policy, a wasm tool's
// sidecar, a workflow — located by line and column where known (Line 0:
// the file as a whole).
type PositionError struct {
	Source       string
	Line, Column int
	Message      string
}

// PolicyError is a problem in a policy file.
type PolicyError = PositionError

func (e *PositionError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", e.Source, e.Line, e.Column, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Source, e.Message)
}

// ParsePolicy parses policy YAML strictly (unknown keys, duplicate keys and
// wrong types are errors) and validates it. Every problem is reported with
// its line and column; all of them are returned joined.
func ParsePolicy(source string, data []byte) (*Policy, error) {
	if err := CheckYAMLDepth(source, data); err != nil {
		return nil, err
	}
	var p Policy
	if err := yaml.UnmarshalWithOptions(data, &p, yaml.Strict()); err != nil {
		return nil, YAMLError(source, err)
	}
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, YAMLError(source, err)
	}
	pos := func(p string) (int, int) { return YAMLPosition(file, p) }
	var errs []error
	bad := func(at, format string, args ...any) {
		l, c := pos(at)
		errs = append(errs, &PolicyError{Source: source, Line: l, Column: c, Message: fmt.Sprintf(format, args...)})
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
		if _, err := ParseApprovalMode(string(p.Approval)); err != nil {
			bad("$.approval", "%v", err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p.Source = source
	return &p, nil
}

// YAMLPosition is the line and column of the YAML value at path (a
// goccy/go-yaml path such as "$.steps[2].tool") in file, or of its nearest
// parent that exists; 0, 0 when none does. A mapping is where its first
// key is (its own token is a colon).
func YAMLPosition(file *ast.File, path string) (int, int) {
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

// YAMLError locates a goccy/go-yaml decoding error in source.
func YAMLError(source string, err error) *PositionError {
	var ye yaml.Error
	if errors.As(err, &ye) {
		if t := ye.GetToken(); t != nil && t.Position != nil {
			return &PositionError{Source: source, Line: t.Position.Line, Column: t.Position.Column, Message: ye.GetMessage()}
		}
		return &PositionError{Source: source, Message: ye.GetMessage()}
	}
	return &PositionError{Source: source, Message: err.Error()}
}

// GrantList returns the policy's parsed grants.
func (p *Policy) GrantList() []capability.Grant { return append([]capability.Grant(nil), p.grants...) }

// Match returns the first rule matching any of the tool's names (its name
// and its aliases), or nil when none does (the call is then decided by
// capabilities alone).
func (p *Policy) Match(names ...string) *Rule {
	for i := range p.Rules {
		for _, n := range names {
			if ok, _ := path.Match(p.Rules[i].Tool, n); ok {
				return &p.Rules[i]
			}
		}
	}
	return nil
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
	s := fmt.Sprintf("rules[%d] (line %d): tool %s → %s", r.Index, r.Line, r.Tool, r.Action)
	if len(flags) > 0 {
		s += " + " + strings.Join(flags, ", ")
	}
	return s
}

// MaxYAMLDepth bounds the flow-collection nesting ([ and {) of the YAML
// files warden reads (policies, sidecars, workflows): the YAML parser's
// time and memory grow steeply with it (100,000 levels took 46 s and 15
// GB), and no real file needs more than a few levels.
const MaxYAMLDepth = 64

// CheckYAMLDepth refuses YAML whose [ and { nest deeper than MaxYAMLDepth,
// before it reaches the parser. It skips quoted strings and comments.
func CheckYAMLDepth(source string, data []byte) error {
	depth, line, col := 0, 1, 0
	var quote byte
	comment := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		col++
		if c == '\n' {
			line, col, comment = line+1, 0, false
			if quote == '\'' || quote == '"' {
				continue // quoted strings may span lines
			}
			continue
		}
		switch {
		case comment:
		case quote == '"':
			if c == '\\' {
				i++
				col++
			} else if c == '"' {
				quote = 0
			}
		case quote == '\'':
			if c == '\'' {
				if i+1 < len(data) && data[i+1] == '\'' {
					i++
					col++
				} else {
					quote = 0
				}
			}
		case c == '#' && (i == 0 || data[i-1] == ' ' || data[i-1] == '\t' || data[i-1] == '\n'):
			comment = true
		case c == '"' || c == '\'':
			if i == 0 || strings.IndexByte(" \t\n[{,:-", data[i-1]) >= 0 {
				quote = c
			}
		case c == '[' || c == '{':
			depth++
			if depth > MaxYAMLDepth {
				return &PositionError{Source: source, Line: line, Column: col, Message: fmt.Sprintf("nested deeper than %d levels", MaxYAMLDepth)}
			}
		case c == ']' || c == '}':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}
