package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wardenrt/warden/runtime/capability"
)

// Grants that expire: CAP@30m given for one invocation, `warden grant
// add CAP --for 8h` remembered in the store, and approvals remembered for a
// while ("allow for 1 hour"). The gate reads them at each call, so none
// outlives its expiry, also in a long-running `mcp serve` or `warden run`.

// Kinds of TimedGrant.
const (
	TimedGrantKind    = "grant"
	TimedApprovalKind = "approval"
)

// MaxTimedGrant is the longest a grant or an approval may be remembered.
const MaxTimedGrant = 30 * 24 * time.Hour

// TimedGrant is a grant, or a remembered approval, with an expiry.
type TimedGrant struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // grant | approval
	// Grant is the capability (kind grant).
	Grant string `json:"grant,omitempty"`
	// Tool, when set, limits it to calls of that tool.
	Tool string `json:"tool,omitempty"`
	// Workspace limits it to calls in that workspace ("" for an
	// invocation's own grant CAP@D).
	Workspace string `json:"workspace,omitempty"`
	// Rule is, for an approval, the rule that asked (Rule.Describe).
	Rule    string    `json:"rule,omitempty"`
	Added   time.Time `json:"added"`
	Expires time.Time `json:"expires"`
	By      string    `json:"by,omitempty"`

	grant capability.Grant
}

// Parse checks t's grant (kind grant) and remembers it parsed.
func (t *TimedGrant) Parse() error {
	switch t.Kind {
	case TimedGrantKind:
		g, err := capability.Parse(t.Grant)
		if err != nil {
			return err
		}
		t.grant = g
	case TimedApprovalKind:
	default:
		return fmt.Errorf("unknown kind %q", t.Kind)
	}
	return nil
}

// String describes it: "exec:git (until 2026-11-24T15:04:05Z)".
func (t TimedGrant) String() string {
	what := t.Grant
	if t.Kind == TimedApprovalKind {
		what = "approval of " + t.Tool + " asked by " + t.Rule
	} else if t.Tool != "" {
		what += " for " + t.Tool
	}
	return fmt.Sprintf("%s (until %s)", what, t.Expires.UTC().Format(time.RFC3339))
}

// ParseTimedGrant parses "CAP@DURATION" (exec:git@30m); ok is false when
// s has no duration after its last @ (then it is a plain grant: a path may
// hold an @, as in fs.read:node_modules/@types/**). A suffix that starts
// like a duration — a digit, or a sign and a digit — but is not a positive
// Go duration (@40d, @0s, @-5m) is an error rather than a literal grant
// that would never expire.
func ParseTimedGrant(s string) (spec string, d time.Duration, ok bool, err error) {
	i := strings.LastIndexByte(s, '@')
	if i < 0 {
		return s, 0, false, nil
	}
	suffix := s[i+1:]
	d, perr := time.ParseDuration(suffix)
	if perr == nil && d > 0 {
		return s[:i], d, true, nil
	}
	if looksLikeDuration(suffix) {
		return s, 0, false, fmt.Errorf("%q after @ is not a positive duration (units: s, m, h; e.g. 30m, 8h)", suffix)
	}
	return s, 0, false, nil
}

func looksLikeDuration(s string) bool {
	s = strings.TrimLeft(s, "+-")
	return s != "" && (s[0] >= '0' && s[0] <= '9' || s[0] == '.')
}

// GrantStore keeps remembered grants and approvals. The store satisfies it.
type GrantStore interface {
	ListGrants(ctx context.Context) ([]TimedGrant, error)
	PutGrant(ctx context.Context, t TimedGrant) error
	DeleteGrant(ctx context.Context, id string) error
}

// applies reports whether t is in force for a call of tool in workspace at
// now.
func (t *TimedGrant) applies(kind, tool, workspace string, now time.Time) bool {
	return t.Kind == kind && now.Before(t.Expires) && (t.Tool == "" || t.Tool == tool) &&
		(t.Workspace == "" || t.Workspace == workspace)
}

// activeTimed returns the grants with an expiry in force for a call of
// tool now, and records the expiry of those that ended.
func (g *Gate) activeTimed(ctx context.Context, tool string) []TimedGrant {
	if len(g.o.Timed) == 0 && g.o.Grants == nil {
		return nil
	}
	now := g.o.Now()
	var out []TimedGrant
	for _, t := range g.o.Timed {
		if t.applies(TimedGrantKind, tool, g.o.Workspace, now) {
			out = append(out, t)
		} else if !now.Before(t.Expires) {
			g.expire(ctx, t, false)
		}
	}
	for _, t := range g.stored(ctx) {
		if t.applies(TimedGrantKind, tool, g.o.Workspace, now) {
			out = append(out, t)
		}
	}
	return out
}

// stored returns the remembered grants and approvals that have not
// expired, removing (and recording) those that have. A store that cannot
// be read gives none: fewer grants, never more.
func (g *Gate) stored(ctx context.Context) []TimedGrant {
	if g.o.Grants == nil {
		return nil
	}
	ts, err := g.o.Grants.ListGrants(ctx)
	if err != nil {
		g.o.Logger.Warn("remembered grants could not be read; calls go on without them", "err", err)
		return nil
	}
	now := g.o.Now()
	out := ts[:0]
	for _, t := range ts {
		if !now.Before(t.Expires) {
			g.expire(ctx, t, true)
			continue
		}
		if err := t.Parse(); err != nil {
			continue
		}
		out = append(out, t)
	}
	return out
}

// expire records on the audit log that t has expired (once), and removes
// it from the store when it was remembered there.
func (g *Gate) expire(ctx context.Context, t TimedGrant, remembered bool) {
	if remembered {
		if err := g.o.Grants.DeleteGrant(ctx, t.ID); err != nil {
			return // another process removed it, and recorded it
		}
	} else {
		g.expiredMu.Lock()
		seen := g.expired[t.ID]
		g.expired[t.ID] = true
		g.expiredMu.Unlock()
		if seen {
			return
		}
	}
	if g.o.Audit == nil {
		return
	}
	ev := AuditEvent{Phase: PhaseAdmin, CallID: g.o.NewID(), Principal: []string{"warden"}, Tool: "grant",
		Outcome: "expired", Message: g.o.Redactor.String(t.String())}
	if _, err := g.append(ctx, ev, nil); err != nil {
		g.o.Logger.Warn("the expiry of a grant could not be recorded", "grant", t.ID, "err", err)
	}
}

// rememberedApprovals returns, when every one of rules has an approval
// remembered for tool in this workspace, those approvals.
func (g *Gate) rememberedApprovals(ctx context.Context, tool string, rules []string) ([]TimedGrant, bool) {
	now := g.o.Now()
	stored := g.stored(ctx)
	var out []TimedGrant
	for _, rule := range rules {
		i := slices.IndexFunc(stored, func(t TimedGrant) bool {
			return t.applies(TimedApprovalKind, tool, g.o.Workspace, now) && t.Tool == tool && t.Rule == rule
		})
		if i < 0 {
			return nil, false
		}
		out = append(out, stored[i])
	}
	return out, len(out) > 0
}

// rememberedBy names remembered approvals for the audit record.
func rememberedBy(ts []TimedGrant) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("%s, remembered until %s (%s)", t.By, t.Expires.UTC().Format(time.RFC3339), t.ID)
	}
	return strings.Join(parts, "; ")
}

// remember stores, for d, an approval of tool for each of rules, each on
// the audit log.
func (g *Gate) remember(ctx context.Context, tool string, rules []string, by string, d time.Duration) ([]TimedGrant, error) {
	now := g.o.Now()
	var out []TimedGrant
	for _, rule := range rules {
		t := TimedGrant{ID: "a-" + g.o.NewID(), Kind: TimedApprovalKind, Tool: tool, Workspace: g.o.Workspace,
			Rule: rule, Added: now, Expires: now.Add(min(d, MaxTimedGrant)), By: by}
		args, _ := json.Marshal(t)
		args, _ = g.redactShown(args) // json.Marshal's: compact
		ev := AuditEvent{Phase: PhaseAdmin, CallID: g.o.NewID(), Principal: []string{by}, Tool: "grant.approval",
			Args: args, Outcome: "ok", Message: g.o.Redactor.String(t.String())}
		if _, err := g.append(ctx, ev, nil); err != nil {
			return out, err
		}
		if err := g.o.Grants.PutGrant(ctx, t); err != nil {
			return out, err
		}
		out = append(out, t)
	}
	return out, nil
}

// timedNote says, for the audit record, that a need was allowed by a
// grant that expires.
func timedNote(timed []TimedGrant, s capability.Set, n capability.Need) string {
	if len(timed) == 0 {
		return ""
	}
	for _, g := range s.AllowedBy(n) {
		for _, t := range timed {
			if t.grant == g {
				return fmt.Sprintf(" (until %s, %s)", t.Expires.UTC().Format(time.RFC3339), t.ID)
			}
		}
	}
	return ""
}
