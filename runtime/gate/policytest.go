package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/wardenrt/warden/runtime/tool"
)

// PolicyTest is one test a policy carries: a call and the verdict the
// policy must give it.
type PolicyTest struct {
	Name string         `yaml:"name"`
	Tool string         `yaml:"tool"`
	Args map[string]any `yaml:"args"`
	// Expect is allow, deny or require_approval.
	Expect string `yaml:"expect"`
	// Rule, when set, is the rule that must decide: its name, or its
	// number (1 for the first rule).
	Rule string `yaml:"rule"`

	Line int `yaml:"-"`
}

// Expected verdicts of a policy test.
const (
	ExpectAllow           = "allow"
	ExpectDeny            = "deny"
	ExpectRequireApproval = "require_approval"
)

func (p *Policy) checkTest(i int, bad func(sub, format string, args ...any)) {
	t := &p.Tests[i]
	n := i + 1
	if t.Tool == "" {
		bad("", "test %d: tool is required", n)
	}
	switch t.Expect {
	case ExpectAllow, ExpectDeny, ExpectRequireApproval:
	case "":
		bad("", "test %d: expect is required (allow, deny or require_approval)", n)
	default:
		bad(".expect", "test %d: expect %q: use allow, deny or require_approval", n, t.Expect)
	}
	if t.Rule != "" && p.ruleByRef(t.Rule) == nil {
		bad(".rule", "test %d: no rule is named or numbered %q", n, t.Rule)
	}
	if _, err := json.Marshal(t.Args); err != nil {
		bad(".args", "test %d: args: %v", n, err)
	}
}

// ruleByRef finds a rule by name or by number (1-based).
func (p *Policy) ruleByRef(ref string) *Rule {
	for i := range p.Rules {
		if p.Rules[i].Name == ref {
			return &p.Rules[i]
		}
	}
	if k, err := strconv.Atoi(ref); err == nil && k >= 1 && k <= len(p.Rules) {
		return &p.Rules[k-1]
	}
	return nil
}

// TestResult is the outcome of one policy test.
type TestResult struct {
	Test PolicyTest
	// Got is the verdict the gate gave (allow, deny, require_approval),
	// GotRule the rule that decided (Describe), Why the refusal if any.
	Got     string
	GotRule string
	Why     string
	Pass    bool
	// Problem, when set, is why the test could not be judged (an unknown
	// tool, arguments the tool refuses as invalid).
	Problem string
}

// RunTests runs the policy's tests through a gate over reg in workspace,
// as dry decisions: each call is decoded, matched against the rules and
// checked against the policy's own grants, and nothing runs. Extra grants,
// remembered grants and approval modes play no part.
func (p *Policy) RunTests(reg *Registry, workspace string) ([]TestResult, error) {
	g, err := NewGate(GateOptions{Registry: reg, Policy: p, Workspace: workspace})
	if err != nil {
		return nil, err
	}
	out := make([]TestResult, 0, len(p.Tests))
	for _, t := range p.Tests {
		res := TestResult{Test: t}
		args, _ := json.Marshal(t.Args)
		if t.Args == nil {
			args = []byte("{}")
		}
		c, cerr := g.check(context.Background(), Request{Tool: t.Tool, Args: args, Principal: []string{"policy-test"}}, "policy-test", tool.NewVault())
		switch {
		case cerr != nil && (cerr.Code == tool.CodePolicyDenied || cerr.Code == tool.CodeCapabilityDenied || cerr.Code == tool.CodePathEscape):
			res.Got, res.Why = ExpectDeny, string(cerr.Code)+": "+cerr.Message
		case cerr != nil:
			res.Problem = string(cerr.Code) + ": " + cerr.Message
		case c.verdict.Approval:
			res.Got = ExpectRequireApproval
		default:
			res.Got = ExpectAllow
		}
		var decided *Rule
		if c != nil {
			decided = c.deciding()
		}
		res.GotRule = decided.Describe()
		res.Pass = res.Problem == "" && res.Got == t.Expect
		if t.Rule != "" && res.Pass {
			want := p.ruleByRef(t.Rule)
			res.Pass = decided != nil && want != nil && decided.Index == want.Index && decided.Line == want.Line
		}
		out = append(out, res)
	}
	return out, nil
}

// String describes the test's call for messages.
func (t PolicyTest) String() string {
	args, _ := json.Marshal(t.Args)
	s := fmt.Sprintf("%s %s", t.Tool, args)
	if t.Name != "" {
		s = fmt.Sprintf("%q: %s", t.Name, s)
	}
	return s
}
