package gate

import (
	"context"
	"encoding/json"

	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/tool"
)

// TestResult is the outcome of one policy test.
type TestResult struct {
	Test policy.PolicyTest
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

// RunTests runs the policy p's tests through a gate over reg in workspace,
// as dry decisions: each call is decoded, matched against the rules and
// checked against the policy's own grants, and nothing runs. Extra grants,
// remembered grants and approval modes play no part.
func RunTests(p *policy.Policy, reg *Registry, workspace string) ([]TestResult, error) {
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
			res.Got, res.Why = policy.ExpectDeny, string(cerr.Code)+": "+cerr.Message
		case cerr != nil:
			res.Problem = string(cerr.Code) + ": " + cerr.Message
		case c.verdict.Approval:
			res.Got = policy.ExpectRequireApproval
		default:
			res.Got = policy.ExpectAllow
		}
		var decided *policy.Rule
		if c != nil {
			decided = c.deciding()
		}
		res.GotRule = decided.Describe()
		res.Pass = res.Problem == "" && res.Got == t.Expect
		if t.Rule != "" && res.Pass {
			want := p.RuleByRef(t.Rule)
			res.Pass = decided != nil && want != nil && decided.Index == want.Index && decided.Line == want.Line
		}
		out = append(out, res)
	}
	return out, nil
}
