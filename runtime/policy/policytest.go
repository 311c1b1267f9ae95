package policy

import (
	"encoding/json"
	"fmt"
	"strconv"
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
	if t.Rule != "" && p.RuleByRef(t.Rule) == nil {
		bad(".rule", "test %d: no rule is named or numbered %q", n, t.Rule)
	}
	if _, err := json.Marshal(t.Args); err != nil {
		bad(".args", "test %d: args: %v", n, err)
	}
}

// RuleByRef finds a rule by name or by number (1-based).
func (p *Policy) RuleByRef(ref string) *Rule {
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

// String describes the test's call for messages.
func (t PolicyTest) String() string {
	args, _ := json.Marshal(t.Args)
	s := fmt.Sprintf("%s %s", t.Tool, args)
	if t.Name != "" {
		s = fmt.Sprintf("%q: %s", t.Name, s)
	}
	return s
}
