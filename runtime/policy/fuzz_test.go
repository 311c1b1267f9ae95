package policy

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/policy/cmdpattern"
	"github.com/wardenrt/warden/runtime/tool"
)

// fuzzBase is the trusted policy FuzzPolicy narrows with the policy it
// reads: a coding agent's, with rules on arguments.
const fuzzBase = `version: 1
grants: ["fs.read:**", "fs.write:src/**", "exec:git", "exec:npm", "exec:python3", "net:*.example.com", "memory.read:*"]
approval: auto
limits: {cpu_seconds: 60, processes: 64}
rules:
  - {name: secrets, tool: "*", path: ["**/.env", "secrets/**"], action: deny}
  - {name: push-asks, tool: shell, command: ["git push*", "git ** push*"], action: allow, require_approval: true}
  - {name: no-rm-rf, tool: shell, command: "rm -rf*", action: deny}
  - {name: tests, tool: shell, command: ["npm run test*", "npm test"], action: allow}
  - {name: status, tool: shell, command: "git status", action: allow}
  - {name: shell-asks, tool: shell, action: allow, require_approval: true}
  - {name: writes, tool: fs_write, path: "src/**", action: allow, dry_run_first: true}
  - {name: evil, tool: http, host: ["*.evil.example"], method: [POST, PUT], action: deny}
  - {name: mem, tool: write_memory, args: {namespace: "secrets*"}, action: deny}
`

// policySeeds are policies as owners and repositories write them, and the
// shapes ParsePolicy refuses.
var policySeeds = []string{
	fuzzBase,
	"version: 1\ngrants: [\"fs.read:**\"]\nrules:\n  - {tool: shell, command: \"git status\", action: allow}\n  - {tool: \"*\", action: deny}\n",
	"version: 1\nrules:\n  - tool: shell\n    command: [\"'git  push' origin\", \"npm run *\"]\n    action: allow\n    require_approval: true\n    limits: {cpu_seconds: 5}\n",
	"version: 1\napproval: never\nrequire_sandbox: true\nprotect: [\"docs/**\"]\nhide: [\"**/.env\"]\nlimits: {open_files: 64}\n",
	"version: 1\nrules:\n  - {name: a, tool: http, host: \"*.example.com\", method: GET, action: allow, dry_run_first: true}\ntests:\n  - {tool: http, args: {url: \"https://x.example.com\"}, expect: allow, rule: a}\n",
	"version: 1\nrules:\n  - {tool: x, action: deny, require_approval: true}\n",
	"version: 1\ngrants: [\"fs.raed:**\"]\n",
	"version: 1\nrules:\n  - { tool: \"[\", action: allow }\n",
}

// FuzzPolicy: ParsePolicy and LoadPolicy never panic and agree; every
// problem is a *PolicyError of the file; an accepted policy, read again
// (LoadPolicy), has the same rules and explanations and makes the same
// decisions. A decision for a call (its tool, the program it starts, a
// path) is deterministic, comes from a rule for the tool that applies to
// one of its subjects, says what that rule says, and is at least as
// strict as any subject's first rule. Narrowing a trusted policy with it
// (as with an untrusted workspace policy) never loosens a decision,
// widens a grant, lifts require_sandbox, raises a limit or relaxes the
// approval mode. The linear command matcher agrees with a backtracking
// one.
func FuzzPolicy(f *testing.F) {
	for _, s := range policySeeds {
		f.Add([]byte(s), "shell", "git push origin main", "src/a.go")
	}
	f.Add([]byte(policySeeds[1]), "fs_write", "rm -rf /", "secrets/x")
	f.Add([]byte(policySeeds[2]), "shell", "npm run test:unit", ".env")
	base, err := ParsePolicy("base.yaml", []byte(fuzzBase))
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	const ws = "/ws"
	f.Fuzz(func(t *testing.T, data []byte, name, command, file string) {
		p, err := ParsePolicy("p.yaml", data)
		file0 := filepath.Join(dir, "policy.yaml")
		if werr := os.WriteFile(file0, data, 0o600); werr != nil {
			t.Fatal(werr)
		}
		lp, lerr := LoadPolicy(file0)
		if (err == nil) != (lerr == nil) || err == nil && lp.Digest != p.Digest {
			t.Fatalf("ParsePolicy: %v; LoadPolicy: %v", err, lerr)
		}
		if err != nil {
			for _, e := range leaves(err) {
				var pe *PolicyError
				if !errors.As(e, &pe) || pe.Source != "p.yaml" || pe.Message == "" {
					t.Fatalf("error %T %v is not a *PolicyError of the file", e, e)
				}
			}
			return
		}
		again := lp // a second reading
		for i := range p.Rules {
			r := &p.Rules[i]
			if r.Index != i || r.Describe() != again.Rules[i].Describe() || r.m == nil ||
				r.Action != ActionAllow && r.Action != ActionDeny || r.Action == ActionDeny && (r.RequireApproval || r.DryRunFirst) {
				t.Fatalf("rule %d: %#v", i, r)
			}
			for _, words := range r.m.command {
				if len(words) == 0 || words[0] == "**" {
					t.Fatalf("rule %d: command pattern %q", i, words)
				}
			}
		}

		if name == "" {
			name = "shell"
		}
		facts, progs := fuzzCall(name, command, file, ws)
		v := p.Decide(facts, progs, ws, false)
		checkVerdict(t, p, facts, progs, ws, v)
		if w := again.Decide(facts, progs, ws, false); !sameVerdict(v, w) {
			t.Fatalf("two parses decide differently: %+v / %+v", v, w)
		}
		if w := p.Decide(facts, progs, ws, false); !sameVerdict(v, w) { // now from the candidates' cache
			t.Fatalf("deciding again differs: %+v / %+v", v, w)
		}
		for _, r := range p.Rules {
			for _, words := range r.m.command {
				for _, prog := range progs {
					if len(words) <= 8 && len(prog.Argv) <= 8 && cmdpattern.Match(words, prog, cmdpattern.One) != naiveMatchArgv(words, prog) {
						t.Fatalf("pattern %q on %v: matchArgv says %v", words, prog, cmdpattern.Match(words, prog, cmdpattern.One))
					}
				}
			}
		}

		// As an untrusted policy over the trusted base, it only narrows.
		n, _ := Narrow(base, again)
		vb, vn := base.Decide(facts, progs, ws, false), n.Decide(facts, progs, ws, false)
		if vb.Deny && !vn.Deny || vb.Approval && !vn.Approval || vb.DryRunFirst && !vn.DryRunFirst || vb.Rule != vn.Rule {
			t.Fatalf("narrowed, the decision loosened: base %+v, narrowed %+v", vb, vn)
		}
		gb, gn := base.GrantSet(ws), n.GrantSet(ws)
		for _, need := range fuzzNeeds(progs, facts) {
			if gn.Allows(need) && !gb.Allows(need) {
				t.Fatalf("narrowed, %s is granted; the base does not grant it", need)
			}
		}
		if base.RequireSandbox && !n.RequireSandbox {
			t.Fatal("narrowed, require_sandbox was lifted")
		}
		lb, ln := base.Limits.WithDefaults(), n.Limits.WithDefaults()
		if ln.CPUSeconds > lb.CPUSeconds || ln.AddressSpaceMB > lb.AddressSpaceMB || ln.OpenFiles > lb.OpenFiles ||
			ln.Processes > lb.Processes || ln.FileSizeMB > lb.FileSizeMB {
			t.Fatalf("narrowed, limits %+v are looser than %+v", ln, lb)
		}
		strict := map[tool.ApprovalMode]int{"": 0, tool.ApproveAuto: 0, tool.ApproveAsk: 1, tool.ApproveNever: 2}
		if strict[n.Approval] < strict[base.Approval] {
			t.Fatalf("narrowed, approval %q is looser than %q", n.Approval, base.Approval)
		}
	})
}

// fuzzCall is a call of tool name that starts command (its words; then
// what it runs, unseen) and touches file under ws.
func fuzzCall(name, command, file, ws string) (*CallFacts, []tool.Program) {
	var needs []capability.Need
	if p := ws + "/" + file; capability.CleanPath(p) {
		needs = append(needs, capability.Need{Kind: capability.FSWrite, Resource: p})
	}
	if strings.Contains(command, ".") {
		needs = append(needs, capability.Need{Kind: capability.Net, Resource: strings.Fields(command + " x")[0] + ":443"})
	}
	f := NewCallFacts([]string{name, "run"}, needs, map[string]any{"method": command, "namespace": file})
	var progs []tool.Program
	if words := strings.Fields(command); len(words) > 0 {
		dyn := make([]bool, len(words))
		for i, w := range words {
			dyn[i] = strings.HasPrefix(w, "$")
		}
		progs = append(progs, tool.Program{Argv: words, Dynamic: dyn})
		if len(words)%2 == 0 {
			progs = append(progs, tool.Program{Argv: words, Opaque: true, Launcher: 1})
		}
	}
	return f, progs
}

func fuzzNeeds(progs []tool.Program, f *CallFacts) []capability.Need {
	var needs []capability.Need
	for _, p := range f.paths {
		needs = append(needs, capability.Need{Kind: capability.FSRead, Resource: p}, capability.Need{Kind: capability.FSWrite, Resource: p})
	}
	for _, h := range f.hosts {
		needs = append(needs, capability.Need{Kind: capability.Net, Resource: h + ":443"})
	}
	for _, p := range progs {
		needs = append(needs, capability.Need{Kind: capability.Exec, Resource: path.Base(p.Argv[0])})
	}
	return append(needs, capability.Need{Kind: capability.MemoryRead, Resource: "notes"}, capability.Need{Kind: capability.GitWrite})
}

// checkVerdict: a decision names a rule for the call's tool that applies
// to one of its subjects, says what that rule says, and is at least as
// strict as the first rule of every subject warden can see.
func checkVerdict(t *testing.T, p *Policy, f *CallFacts, progs []tool.Program, ws string, v Verdict) {
	t.Helper()
	cands := p.book.candidates(f.names)
	if v.Rule != nil {
		if !slices.Contains(cands, v.Rule) {
			t.Fatalf("decided by %s, not a rule for %v", v.Rule.Describe(), f.names)
		}
		applies := false
		if len(progs) == 0 {
			applies, _ = v.Rule.matches(f, nil, ws)
		}
		for i := range progs {
			if ok, _ := v.Rule.matches(f, &progs[i], ws); ok {
				applies = true
			}
		}
		if !applies {
			t.Fatalf("decided by %s, which applies to no subject", v.Rule.Describe())
		}
		if v.Deny != (v.Rule.Action == ActionDeny) || v.Approval != v.Rule.RequireApproval || v.DryRunFirst != v.Rule.DryRunFirst {
			t.Fatalf("verdict %+v, rule %s", v, v.Rule.Describe())
		}
	} else if v.Deny || v.Approval || v.DryRunFirst {
		t.Fatalf("verdict %+v with no rule", v)
	}
	for i := range progs {
		if progs[i].Opaque {
			continue
		}
		if r, _ := first(cands, f, &progs[i], ws); severity(r) > severity(v.Rule) {
			t.Fatalf("%s decides %v, stricter than the call's %s", r.Describe(), progs[i], v.Rule.Describe())
		}
	}
}

func sameVerdict(a, b Verdict) bool {
	idx := func(r *Rule) int {
		if r == nil {
			return -1
		}
		return r.Index
	}
	ai, bi := make([]int, len(a.Asking)), make([]int, len(b.Asking))
	for i := range a.Asking {
		ai[i] = idx(a.Asking[i])
	}
	for i := range b.Asking {
		bi[i] = idx(b.Asking[i])
	}
	return idx(a.Rule) == idx(b.Rule) && a.Why == b.Why && a.Deny == b.Deny && a.Approval == b.Approval &&
		a.DryRunFirst == b.DryRunFirst && a.Unseen == b.Unseen && slices.Equal(ai, bi)
}

// naiveMatchArgv is matchArgv by backtracking, with a backtracking
// wildcard: the reference the linear matcher must agree with.
func naiveMatchArgv(pattern []string, p tool.Program) bool {
	if p.Opaque {
		return true
	}
	var match func(pi, ai int) bool
	match = func(pi, ai int) bool {
		if pi == len(pattern) {
			return true // a prefix
		}
		if pattern[pi] == "**" {
			for k := ai; k <= len(p.Argv); k++ {
				if match(pi+1, k) {
					return true
				}
			}
			return false
		}
		if ai == len(p.Argv) {
			return false
		}
		arg := p.Argv[ai]
		if ai == 0 && !p.IsDynamic(0) {
			arg = path.Base(arg)
		}
		return (p.IsDynamic(ai) || naiveWildcard(pattern[pi], arg)) && match(pi+1, ai+1)
	}
	return match(0, 0)
}

func naiveWildcard(pat, s string) bool {
	if pat == "" {
		return s == ""
	}
	switch pat[0] {
	case '*':
		for k := 0; k <= len(s); k++ {
			if naiveWildcard(pat[1:], s[k:]) {
				return true
			}
		}
		return false
	case '?':
		return s != "" && naiveWildcard(pat[1:], s[1:])
	}
	return s != "" && s[0] == pat[0] && naiveWildcard(pat[1:], s[1:])
}

func leaves(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}
