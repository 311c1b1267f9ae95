package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wardenrt/warden/runtime/resource"
	"github.com/wardenrt/warden/runtime/tool"

	"github.com/wardenrt/warden/runtime/capability"
)

// A workspace policy (a repository's .warden/policy.yaml) is written by
// whoever wrote the repository. Until its owner trusts it, it may only
// narrow the policy that would apply without it: Narrow builds the policy
// in force from the two.

// Ignored is one thing an untrusted policy asked for that would have
// widened the policy in force, and that Narrow therefore left out.
type Ignored struct {
	// Line is where the policy file asks for it (0: the file as a whole).
	Line int
	What string
}

// Narrow returns the policy in force when the untrusted policy u is found
// over base (the home policy, else the built-in default):
//
//   - grants: base's ∩ u's (base's when u has no grants key);
//   - rules: base's decide as before, and u's deny, require_approval and
//     dry_run_first rules add their restriction to any call they match; u's
//     plain allow rules change nothing;
//   - require_sandbox: either's;
//   - approval: u's only when it is stricter (never over ask or auto, ask
//     over auto);
//   - limits: the tighter of the two, field by field.
//
// It also returns what u asked for that was left out, for warnings.
func Narrow(base, u *Policy) (*Policy, []Ignored) {
	p := *base
	p.narrowers = append(slices.Clone(base.narrowers), u)
	for i := range u.Rules {
		u.Rules[i].untrusted = true
	}
	p.RequireSandbox = base.RequireSandbox || u.RequireSandbox
	p.Limits = tighterLimits(base.Limits, u.Limits)
	var ign []Ignored
	at := func(path string) int {
		return u.lines[path]
	}

	// Grants u names that base does not allow in full.
	const ws = "/workspace"
	both := capability.NewSet(ws, base.grants...).Intersect(capability.NewSet(ws, u.grants...))
	kept := map[capability.Grant]bool{}
	for _, g := range both.Grants() {
		kept[g] = true
	}
	for i, g := range u.grants {
		if !kept[g] {
			ign = append(ign, Ignored{Line: at(fmt.Sprintf("$.grants[%d]", i)), What: fmt.Sprintf("grant %s (not in %s)", g, base.Source)})
		}
	}
	for i := range u.Rules {
		r := &u.Rules[i]
		if r.Action == ActionAllow && !r.RequireApproval && !r.DryRunFirst {
			ign = append(ign, Ignored{Line: r.Line, What: fmt.Sprintf("allow rule %d (tool %s)", i+1, r.Tool)})
		}
		if r.Limits != (resource.Limits{}) {
			ign = append(ign, Ignored{Line: r.Line, What: fmt.Sprintf("limits of rule %d (a rule's limits apply only from a trusted policy; the policy-wide limits apply where tighter)", i+1)})
		}
	}
	switch {
	case u.Approval == "" || u.Approval == base.Approval:
	case u.Approval == tool.ApproveNever, u.Approval == tool.ApproveAsk && base.Approval == tool.ApproveAuto:
		p.Approval = u.Approval
	default:
		ign = append(ign, Ignored{Line: at("$.approval"), What: fmt.Sprintf("approval: %s", u.Approval)})
	}
	if loose := looserLimits(base.Limits, u.Limits); len(loose) > 0 {
		ign = append(ign, Ignored{Line: at("$.limits"), What: "limits " + strings.Join(loose, ", ") + " (looser than " + base.Source + "'s)"})
	}
	return &p, ign
}

// limitFields lists a Limits' fields by their policy name.
func limitFields(l *resource.Limits) []struct {
	name string
	v    *uint64
} {
	return []struct {
		name string
		v    *uint64
	}{
		{"cpu_seconds", &l.CPUSeconds}, {"address_space_mb", &l.AddressSpaceMB}, {"open_files", &l.OpenFiles},
		{"processes", &l.Processes}, {"file_size_mb", &l.FileSizeMB},
	}
}

// tighterLimits returns, field by field, the smaller of a's and b's
// effective limits (a zero field is the default).
func tighterLimits(a, b resource.Limits) resource.Limits {
	out := a
	ea, eb := a.WithDefaults(), b.WithDefaults()
	of, fa, fb := limitFields(&out), limitFields(&ea), limitFields(&eb)
	for i := range of {
		if *fb[i].v < *fa[i].v {
			*of[i].v = *fb[i].v
		}
	}
	return out
}

// looserLimits names the fields b sets looser than a's effective limits.
func looserLimits(a, b resource.Limits) []string {
	ea := a.WithDefaults()
	fa, fb := limitFields(&ea), limitFields(&b)
	var out []string
	for i := range fb {
		if *fb[i].v != 0 && *fb[i].v > *fa[i].v {
			out = append(out, fmt.Sprintf("%s: %d", fb[i].name, *fb[i].v))
		}
	}
	return out
}
