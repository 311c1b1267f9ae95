package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestDefaultPolicy(t *testing.T) {
	p := DefaultPolicy()
	want := []string{"fs.read:**", "git.read", "system.info", "memory.read:*"}
	if strings.Join(p.Grants, " ") != strings.Join(want, " ") {
		t.Fatalf("default grants %v, want %v", p.Grants, want)
	}
	if r := firstFor(p, "shell"); r == nil || !r.RequireApproval {
		t.Fatalf("shell should require approval by default, got %+v", r)
	}
	if r := firstFor(p, "system"); r != nil {
		t.Fatalf("system should fall to capabilities, got rule %+v", r)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // each a "line:col: fragment"
	}{
		{"unknown kind", "version: 1\ngrants:\n  - \"fs.raed:**\"\n", []string{"3:5:", "fs.raed"}},
		{"bad action", "version: 1\nrules:\n  - tool: shell\n    action: permit\n", []string{"4:13:", `action "permit"`}},
		{"missing tool", "version: 1\nrules:\n  - action: allow\n", []string{"3:5:", "tool is required"}},
		{"bad glob", "version: 1\nrules:\n  - { tool: \"[\", action: allow }\n", []string{"3:", "pattern"}},
		{"deny with approval", "version: 1\nrules:\n  - { tool: x, action: deny, require_approval: true }\n", []string{"3:", "deny rule cannot"}},
		{"wrong version", "version: 2\n", []string{"1:10:", "version must be 1"}},
		{"unknown field", "version: 1\nrulez: []\n", []string{"2:1:", "unknown field"}},
		{"unknown rule field", "version: 1\nrules:\n  - { tool: x, action: allow, aprove: true }\n", []string{"3:", "unknown field"}},
		{"duplicate key", "version: 1\nversion: 1\n", []string{"2:1:", "already defined"}},
		{"wrong type", "version: 1\ngrants: 5\n", []string{"2:", ""}},
		{"bad approval", "version: 1\napproval: sometimes\n", []string{"2:", "ask, auto or never"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePolicy("p.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("want an error")
			}
			var pe *PolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("want a *PolicyError, got %T %v", err, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestPolicyMultipleErrors(t *testing.T) {
	_, err := ParsePolicy("p.yaml", []byte("version: 1\ngrants: [\"nope\", \"exec:\"]\nrules:\n  - { tool: a, action: x }\n"))
	if err == nil {
		t.Fatal("want errors")
	}
	if n := strings.Count(err.Error(), "p.yaml:"); n != 3 {
		t.Fatalf("want 3 located errors, got %d: %v", n, err)
	}
}

func TestPolicyMatchFirstWins(t *testing.T) {
	p, err := ParsePolicy("p", []byte("version: 1\nrules:\n  - { tool: fs_remove, action: deny }\n  - { tool: \"fs_*\", action: allow, dry_run_first: true }\n  - { tool: \"*\", action: deny }\n"))
	if err != nil {
		t.Fatal(err)
	}
	for nt, want := range map[string]string{"fs_remove": "deny", "fs_write": "allow", "shell": "deny"} {
		if r := firstFor(p, nt); r == nil || r.Action != want {
			t.Errorf("%s: got %+v, want %s", nt, r, want)
		}
	}
	if r := firstFor(p, "fs_write"); r.Index != 1 || r.Line != 4 {
		t.Errorf("rule location: %+v", r)
	}
}

// TestPolicyDeepNestingRefused: a policy nested deep enough to exhaust the
// YAML parser is refused before it reaches it.
func TestPolicyDeepNestingRefused(t *testing.T) {
	src := "version: 1\ngrants: " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "\n"
	_, err := ParsePolicy("deep.yaml", []byte(src))
	var pe *PolicyError
	if !errors.As(err, &pe) || pe.Line != 2 || !strings.Contains(pe.Message, "nested deeper than") {
		t.Fatalf("%v", err)
	}
}

// firstFor is the first rule whose tool pattern matches tool.
func firstFor(p *Policy, nt string) *Rule {
	if c := p.book.candidates([]string{nt}); len(c) > 0 {
		return c[0]
	}
	return nil
}
