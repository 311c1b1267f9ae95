package runtime

import (
	_ "embed"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/decode"
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

// LoadPolicy reads and parses a policy file (at most MaxPolicyBytes; its
// size is checked before it is read).
func LoadPolicy(file string) (*Policy, error) {
	data, err := decode.ReadFile(file, MaxPolicyBytes)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return ParsePolicy(file, data)
}

// MaxPolicyBytes bounds a policy file.
const MaxPolicyBytes = decode.DefaultMaxBytes

// PositionError is a problem in a file someone else wrote — a policy, a
// wasm tool's sidecar, a workflow — located by line and column where known
// (Line 0: the file as a whole).
type PositionError = decode.Error

// PolicyError is a problem in a policy file.
type PolicyError = PositionError

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
// goccy/go-yaml path such as "$.steps[2].tool") in file: see
// decode.Position.
func YAMLPosition(file *ast.File, path string) (int, int) { return decode.Position(file, path) }

// YAMLError locates a goccy/go-yaml decoding error in source.
func YAMLError(source string, err error) *PositionError { return decode.YAMLError(source, err) }

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
