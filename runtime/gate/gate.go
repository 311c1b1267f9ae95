package gate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/wardenrt/warden/runtime/tool"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/redact"
)

// MaxOutputBytes caps a result's Output text; longer output is cut and marked.
const MaxOutputBytes = 1 << 20

// maxArgsText caps the raw argument text kept in the audit log for calls
// whose arguments could not be decoded.
const maxArgsText = 4096

// Approver asks someone to approve a call that a rule marks
// require_approval. It is used when the approval mode is ask.
type Approver interface {
	Approve(ctx context.Context, req ApprovalRequest) (Approval, error)
}

// ApprovalRequest is what an approver is shown. Everything in it is redacted.
type ApprovalRequest struct {
	Tool      string
	CallID    string
	Principal []string
	Args      json.RawMessage
	Needs     []string
	Rule      string
	// Matched says which of the rule's matchers matched, and what.
	Matched string
	// Preview is the dry run's result when the rule says dry_run_first.
	Preview *tool.Outcome
	// Lasting says the approval may cover the same rules' later calls in
	// this run; CanRemember that it may be remembered for a while
	// (Approval.For). Neither holds when the call's words are known only
	// at run time or an untrusted workspace policy's rule asks.
	Lasting     bool
	CanRemember bool
}

// Approval is an approver's answer.
type Approval struct {
	Approved bool
	// By names who approved ("user", or a name the approver chooses).
	By string
	// For, when positive, remembers the approval for this long: calls of
	// the same tool that the same rule asks about, in the same workspace,
	// are approved without asking until it expires (needs
	// GateOptions.Grants).
	For time.Duration
}

// ErrCancelled is returned by approvers when the person cancelled (Ctrl-C,
// EOF); the gate reports USER_CANCELLED.
var ErrCancelled = errors.New("cancelled by the user")

// GateOptions configures a Gate. Registry, Policy and Workspace are required;
// Audit is required for Call.
type GateOptions struct {
	Registry  *Registry
	Policy    *policy.Policy
	Workspace string // absolute, symlinks resolved
	// Extra grants for this invocation only (the CLI's grant flag).
	Extra []capability.Grant
	// Timed grants for this invocation that expire (CAP@30m).
	Timed []TimedGrant
	// Grants keeps remembered grants and approvals with an expiry (warden
	// grant add, "allow for 1 hour"); nil: none. They are read at each
	// call, so one that expires or is removed stops applying at once, also
	// in a long-running process.
	Grants GrantStore
	Audit  AuditLog
	// Approval mode; "" means never.
	Approval tool.ApprovalMode
	Approver Approver
	// Hide are absolute paths no tool or program may read or write,
	// whatever the grants or the policy: warden's own home (its store,
	// its policy, its modules), which may lie inside a workspace.
	Hide []string
	// DryRun makes every side-effecting call return its preview (--dry-run).
	DryRun   bool
	Logger   *slog.Logger
	Redactor *redact.Redactor
	Now      func() time.Time
	NewID    func() string
}

// Gate is the one path every tool call takes: strict decoding and schema
// validation → policy rule → capabilities → dry run → approval → durable
// audit intent → execute → redact → durable audit result → envelope.
type Gate struct {
	o      GateOptions
	grants capability.Set

	// expiredMu guards expired: the invocation's timed grants whose expiry
	// is already on the audit log.
	expiredMu sync.Mutex
	expired   map[string]bool
}

// NewGate validates the options and builds a gate.
func NewGate(o GateOptions) (*Gate, error) {
	if o.Registry == nil || o.Policy == nil {
		return nil, errors.New("gate: Registry and Policy are required")
	}
	if o.Workspace == "" {
		return nil, errors.New("gate: Workspace is required")
	}
	if o.Approval == "" {
		o.Approval = tool.ApproveNever
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Redactor == nil {
		o.Redactor = redact.New()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewID == nil {
		o.NewID = tool.NewID
	}
	grants := o.Policy.GrantSet(o.Workspace).Union(capability.NewSet(o.Workspace, o.Extra...))
	return &Gate{o: o, grants: grants, expired: map[string]bool{}}, nil
}

// Grants returns the gate's grants (policy ∪ extra), without the grants
// that expire.
func (g *Gate) Grants() capability.Set { return g.grants }

// Registry returns the gate's registry.
func (g *Gate) Registry() *Registry { return g.o.Registry }

// WithRegistry returns a gate like g — the same policy, grants, approvals,
// audit log and redactor — over another registry (a long-running server
// whose wasm tools changed).
func (g *Gate) WithRegistry(reg *Registry) (*Gate, error) {
	o := g.o
	o.Registry = reg
	return NewGate(o)
}

// Policy returns the gate's policy.
func (g *Gate) Policy() *policy.Policy { return g.o.Policy }

// Request is one call as a caller (CLI, model, workflow, guest) makes it.
type Request struct {
	Tool      string
	Args      json.RawMessage
	RunID     string
	Principal []string
	// Restrict, when set, narrows the grants: the call acts with the gate's
	// grants ∩ Restrict (a wasm tool acts with run ∩ tool grants). A request
	// can never widen the grants.
	Restrict *capability.Set
	// DryRun asks for the preview only.
	DryRun bool
	// CoreOnly refuses a wasm tool as the target: a guest's host calls
	// reach core tools only (no guest re-entering another guest).
	CoreOnly bool
	// Offered, when non-nil, is the only tools the call may target (by
	// registry name; an alias counts as its tool): any other is
	// UNKNOWN_TOOL, as if it did not exist — an agent run offered a
	// subset of the tools (--tools) cannot call the rest.
	Offered map[string]bool
	// Vault is the run's (agent run, workflow run, MCP session): the
	// secrets masked in the call's result are kept in it, and masks it
	// handed out earlier are restored when the arguments write them back
	// into the file they came from. nil: a vault for this call alone, so
	// that no mask can come back (warden call).
	Vault *tool.Vault
}

// checked is a call that passed decoding, the rules and capabilities.
type checked struct {
	entry   *entry
	call    *tool.Call
	verdict policy.Verdict
	needs   []capability.Need
	// timed are the grants with an expiry in force for the call.
	timed    []TimedGrant
	decision Decision
	// shown is the arguments as the caller sent them (compact), masks and
	// all: what the audit log and an approver see. call.Args has the
	// masks restored.
	shown json.RawMessage
	// restores are the masks restored in call.Args.
	restores []restore
	// rules check, at run time, what the call learns of as it runs (nil:
	// the policy has no rules that need it).
	rules *policy.CallRules
	// approveRules records, in rules, the rules whose approval the call
	// got.
	approveRules func([]*policy.Rule)
	// plainMasks warns of plain [REDACTED] text the call writes into a
	// file (see plainMaskWarning); "" when there is none.
	plainMasks string
}

// deciding is the rule to name for the call's decision: the trusted
// policy's, or the untrusted workspace policy's when it is the stricter.
func (c *checked) deciding() *policy.Rule {
	r, _ := c.verdict.Deciding()
	return r
}

// check runs the decision steps that need no side effects: decoding and
// schema validation, the policy's rules and the capabilities. On refusal
// it returns the error and as much of the decision as was reached.
func (g *Gate) check(ctx context.Context, req Request, callID string, vault *tool.Vault) (*checked, *tool.Error) {
	e, lerr := g.lookupOffered(req)
	if lerr != nil {
		return nil, lerr
	}
	if req.CoreOnly && e.spec.Wasm != "" {
		return &checked{entry: e}, tool.Errorf(tool.CodeOperationNotSupported, "call a core tool (see `warden tools`)",
			"%s is a wasm tool; a wasm tool can call only core tools", e.spec.Name)
	}
	value, compact, derr := tool.DecodeArgs(req.Args)
	if derr != nil {
		return &checked{entry: e}, derr
	}
	if verr := e.schema.Validate(value); verr != nil {
		return &checked{entry: e}, verr
	}
	c := &checked{entry: e}
	var grants capability.Set
	c.timed, grants = g.callGrants(ctx, req, e.spec.Name)
	pol := g.o.Policy
	names := g.o.Registry.Names(e.spec.Name)
	c.shown = compact
	c.call = &tool.Call{
		ID: callID, Tool: e.spec.Name, Args: compact, RunID: req.RunID,
		// The tool's own copy: the caller's slice is the record's too.
		Principal: slices.Clone(req.Principal), Grants: grants, Workspace: g.o.Workspace,
		DryRun: req.DryRun || (g.o.DryRun && !e.spec.ReadOnly),
	}
	c.call.SetArgs(compact, value)
	c.call.SetVault(vault)
	c.call.RequireSandbox = pol.RequireSandbox
	c.call.Limits = pol.Limits
	c.call.Protect, c.call.Hide = pol.PathRules(g.o.Hide...)
	c.decision = Decision{Action: policy.ActionDeny}
	// A rule that denies the tool whatever its arguments decides before
	// the arguments are looked at.
	if r := pol.QuickDeny(names); r != nil {
		c.verdict = policy.Verdict{Rule: r, Deny: true}
		c.decision.Rule = r.Describe()
		return c, g.denied(e.spec.Name, r, "")
	}
	// Masks coming back: restored before anything reads the arguments.
	if bytes.Contains(compact, []byte("[REDACTED:")) {
		if rerr := g.restoreMasks(c, vault); rerr != nil {
			return c, rerr
		}
	}
	needs, nerr := toolNeeds(e.tool, c.call)
	if nerr != nil {
		return c, nerr
	}
	c.needs = needs
	g.decide(c, names)
	if c.verdict.Deny {
		return c, g.denied(e.spec.Name, c.deciding(), c.why())
	}
	if gerr := g.grantsRefusal(c, grants); gerr != nil {
		return c, gerr
	}
	if perr := pathRuleRefusal(c.call, needs); perr != nil {
		return c, perr
	}
	if rerr := g.checkRestores(c.call, c.restores, vault); rerr != nil {
		return c, rerr
	}
	if bytes.Contains(compact, []byte(redact.Mask)) {
		c.plainMasks = g.plainMaskWarning(e.tool, c.call)
	}
	c.decision.Action = policy.ActionAllow
	c.decision.Approval = ApprovalNotRequired
	return c, nil
}

// lookupOffered finds the requested tool, refusing a name the registry
// does not know or one the run does not offer.
func (g *Gate) lookupOffered(req Request) (*entry, *tool.Error) {
	e, ok := g.o.Registry.lookup(req.Tool)
	if !ok {
		return nil, tool.Errorf(tool.CodeUnknownTool, "list the tools with `warden tools`", "no tool named %q", truncateText(req.Tool, 128))
	}
	if req.Offered != nil && !req.Offered[e.spec.Name] {
		return nil, tool.Errorf(tool.CodeUnknownTool, "call one of the tools this run offers", "%s is not one of the tools this run offers", e.spec.Name)
	}
	return e, nil
}

// callGrants returns the timed grants in force for the tool and the grants
// the call runs with: the gate's, widened by those timed grants, narrowed
// to the request's restriction.
func (g *Gate) callGrants(ctx context.Context, req Request, name string) ([]TimedGrant, capability.Set) {
	grants := g.grants
	timed := g.activeTimed(ctx, name)
	if len(timed) > 0 {
		gs := make([]capability.Grant, 0, len(timed))
		for _, t := range timed {
			gs = append(gs, t.grant)
		}
		grants = grants.Union(capability.NewSet(g.o.Workspace, gs...))
	}
	if req.Restrict != nil {
		grants = grants.Intersect(*req.Restrict)
	}
	return timed, grants
}

// restoreMasks restores the masks the vault handed out in the call's
// arguments, and validates the restored arguments against the schema again.
func (g *Gate) restoreMasks(c *checked, vault *tool.Vault) *tool.Error {
	restored, rs, rerr := g.restoreArgs(c.entry.tool, c.call, vault)
	if rerr != nil {
		return rerr
	}
	if restored != nil {
		c.call, c.restores = restored, rs
		if verr := c.entry.schema.Validate(restored.Decoded()); verr != nil {
			return verr
		}
	}
	return nil
}

// toolNeeds asks the tool what the call needs; an internal error there is
// the arguments' fault, so it is reported as invalid input.
func toolNeeds(t tool.Tool, call *tool.Call) ([]capability.Need, *tool.Error) {
	needs, err := t.Needs(call)
	if err != nil {
		te := tool.AsError(err)
		if te.Code == tool.CodeInternal {
			te = &tool.Error{Code: tool.CodeInvalidInput, Message: te.Message, Hint: te.Hint}
		}
		return nil, te
	}
	return needs, nil
}

// decide applies the policy's rules to the call (c.needs set): the
// verdict, the approval the tool requires, the limits of the deciding rule
// and of every narrower, and the rule the decision names.
func (g *Gate) decide(c *checked, names []string) {
	pol := g.o.Policy
	facts := policy.NewCallFacts(names, c.needs, c.call.Decoded())
	var progs []tool.Program
	if reported := c.call.Reported(); pol.NeedsPrograms(names) {
		progs = reported
	}
	if pol.ChecksAtRunTime(names) {
		c.rules, c.approveRules = policy.NewCallRules(pol, facts, g.o.Workspace)
		c.call.SetChecker(c.rules)
	}
	c.verdict = pol.Decide(facts, progs, g.o.Workspace, false)
	if c.entry.spec.ApprovalRequired && !c.verdict.Deny {
		c.verdict.Approval, c.verdict.DryRunFirst = true, true
	}
	if r := c.verdict.Rule; r != nil {
		c.call.Rule = &tool.MatchedRule{Tool: r.Tool, Allow: r.Action == policy.ActionAllow, Text: r.Describe()}
		c.call.Limits = r.Limits.Over(c.call.Limits)
	}
	// A trusted rule's own limits never loosen an untrusted policy's.
	c.call.Limits = pol.NarrowLimits(c.call.Limits)
	c.decision.Rule = ruleWhy(c.deciding(), c.why())
}

// grantsRefusal records in the decision the grant that allows each of the
// call's needs, and refuses the call, naming the grants that would lift
// the refusal, when any need is not allowed.
//
// A grant that names a secret of the call's is suggested only when the
// secret can still be found in it (to be masked with the refusal): its
// spelling as a glob (a "\" written as "?") may be one no redaction knows.
func (g *Gate) grantsRefusal(c *checked, grants capability.Set) *tool.Error {
	var missing []string
	var lift []string
	var secrets *redact.Redactor // the call's, made when a need is missing
	for _, n := range c.needs {
		if grants.Allows(n) {
			c.decision.Grants = append(c.decision.Grants, grantFor(grants, n)+timedNote(c.timed, grants, n))
			continue
		}
		missing = append(missing, n.String())
		h := n.Hint(g.o.Workspace)
		if h == "" {
			continue
		}
		if secrets == nil {
			_, inArgs := g.redactShown(c.shown)
			secrets = withArgSecrets(g.callRedactor(c), inArgs)
		}
		_, inNeed := secrets.Replace(n.String(), plainMask)
		if _, inHint := secrets.Replace(h, plainMask); len(inHint) < len(inNeed) {
			continue
		}
		lift = append(lift, h)
	}
	if len(missing) > 0 {
		return tool.NeedsGrants(lift, "%s needs %s, which the grants (%s) do not allow", c.entry.spec.Name, strings.Join(missing, ", "), grants.String())
	}
	return nil
}

// why says which matcher of the deciding rule matched.
func (c *checked) why() string {
	_, why := c.verdict.Deciding()
	return why
}

// denied is the refusal of a call a rule denies.
func (g *Gate) denied(name string, r *policy.Rule, why string) *tool.Error {
	src := g.o.Policy.Source
	if u := g.o.Policy.NarrowedBy(r); u != nil {
		src = u.Source + " (not trusted: it may only narrow)"
	}
	msg := fmt.Sprintf("tool %s is denied by %s", name, r.Describe())
	if why != "" {
		msg += ": " + why
	}
	return &tool.Error{Code: tool.CodePolicyDenied, Message: msg,
		Hint: fmt.Sprintf("the policy (%s) denies this call; change its rule to allow it", src)}
}

// ruleWhy names a rule and the matcher that matched, for the audit record.
func ruleWhy(r *policy.Rule, why string) string {
	if r == nil {
		return ""
	}
	if why == "" {
		return r.Describe()
	}
	return r.Describe() + " [" + why + "]"
}

// grantFor names the grant(s) that allow n (for the audit record and explain).
func grantFor(s capability.Set, n capability.Need) string {
	gs := s.AllowedBy(n)
	if len(gs) == 0 {
		return s.String()
	}
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = g.String()
	}
	return strings.Join(parts, " ∩ ")
}

// Call runs one call through the gate and returns its envelope. Tool
// failures and refusals are results; the error is non-nil only for runtime
// failures (the audit log could not be written, the context ended before the
// call was recorded), in which case the tool did not run or its result is
// not on record.
func (g *Gate) Call(ctx context.Context, req Request) (tool.Result, error) {
	if g.o.Audit == nil {
		return tool.Result{}, errors.New("gate: no audit log configured")
	}
	start := g.o.Now()
	callID := g.o.NewID()
	principal := req.Principal
	if len(principal) == 0 {
		principal = []string{"unknown"}
	}
	req.Principal = principal
	vault := req.Vault
	if vault == nil {
		vault = tool.NewVault() // this call's alone: nothing it masks can come back
	}
	res := tool.Result{CallID: callID, Data: json.RawMessage("{}"), Warnings: []string{}}
	ev := AuditEvent{CallID: callID, RunID: req.RunID, Principal: principal}

	c, cerr := g.check(ctx, req, callID, vault)
	if c == nil || c.call == nil {
		// The call was refused before its tool was known: its name is the
		// caller's text, capped and redacted.
		name := g.o.Redactor.String(truncateText(req.Tool, 128))
		res.Tool, ev.Tool = name, name
	}
	// What the call's record and outcome are masked with: the redactor,
	// and the originals restored in its arguments, wherever they are
	// repeated (an error quoting a line, a preview, the matcher that
	// matched an argument).
	red := g.callRedactor(c)
	// And the secrets found in its arguments, wherever the record or the
	// outcome repeats them in a form the patterns do not know (a path
	// cleaned of a URL's "//" in a capability, a refusal naming it).
	var inArgs []redact.Secret
	if c != nil && c.call != nil {
		ev.Args, inArgs = g.redactShown(c.shown)
		red = withArgSecrets(red, inArgs)
		ev.Needs = redactNeeds(red, c.needs)
		ev.DryRun = c.call.DryRun
		res.DryRun = c.call.DryRun
		res.Tool = c.call.Tool
		ev.Tool = c.call.Tool
		d := c.decision
		d.Rule = red.String(d.Rule)
		d.Grants = redactGrants(red, d.Grants, c.needs, ev.Needs)
		ev.Decision = &d
	} else {
		ev.ArgsText, inArgs = g.argsText(req.Args)
		red = withArgSecrets(red, inArgs)
	}

	if cerr != nil {
		return g.finish(ctx, res, ev, g.maskOutcome(tool.Outcome{Err: cerr}, vault, red, true), start, 0, nil)
	}
	call := c.call
	if c.plainMasks != "" {
		res.Warnings = append(res.Warnings, c.plainMasks)
	}

	// Dry run: requested, or dry_run_first (the preview is shown to the approver).
	var preview *tool.Outcome
	if call.DryRun || (c.verdict.DryRunFirst && !c.entry.spec.ReadOnly) {
		dry := *call
		dry.DryRun = true
		o := g.safeRun(ctx, c.entry.tool, &dry)
		o = g.maskOutcome(o, vault, red, false)
		preview = &o
		if call.DryRun {
			res.Warnings = append(res.Warnings, "dry run: nothing was changed")
			return g.finish(ctx, res, ev, o, start, 0, nil)
		}
	}

	// Approval.
	if c.verdict.Approval {
		verdict, aerr := g.approve(ctx, c, preview)
		ev.Decision.Approval = verdict.Approval
		ev.Decision.Approver = verdict.Approver
		if aerr != nil {
			ev.Decision.Action = policy.ActionDeny
			return g.finish(ctx, res, ev, g.maskOutcome(tool.Outcome{Err: aerr}, vault, red, true), start, 0, nil)
		}
		if c.approveRules != nil {
			c.approveRules(c.verdict.Asking)
		}
	}

	// Durable intent, then run.
	ev.Phase = PhaseIntent
	if preview != nil {
		ev.Preview = truncateText(preview.Output, maxArgsText)
	}
	var head eventHead
	intentSeq, err := g.append(ctx, ev, &head)
	if err != nil {
		return tool.Result{}, err
	}
	o := g.safeRun(ctx, c.entry.tool, call)
	o = g.maskOutcome(o, vault, red, false)
	// The result is recorded even if the caller's context ended meanwhile,
	// so the log never holds an intent without its result.
	return g.finish(context.WithoutCancel(ctx), res, ev, o, start, intentSeq, &head)
}

type approvalVerdict struct{ Approval, Approver string }

func (g *Gate) approve(ctx context.Context, c *checked, preview *tool.Outcome) (approvalVerdict, *tool.Error) {
	name := c.call.Tool
	asking := c.askingKeys()
	rule := strings.Join(asking, "; ")
	// An approval may last beyond this call (for the rest of the run, or
	// remembered for a while) only when what it approves is all in view
	// and all of it is the owner's own: no words known only at run time,
	// no rule from a workspace policy the owner has not trusted.
	lasting := !c.verdict.Unseen && !c.untrustedAsks()
	if g.o.Approval != tool.ApproveNever && lasting {
		if ts, ok := g.rememberedApprovals(ctx, name, asking); ok {
			return approvalVerdict{ApprovalRemembered, rememberedBy(ts)}, nil
		}
	}
	switch g.o.Approval {
	case tool.ApproveAuto:
		return approvalVerdict{ApprovalAuto, "auto"}, nil
	case tool.ApproveAsk:
		if g.o.Approver == nil {
			break
		}
		args, inArgs := g.redactShown(c.shown)
		red := withArgSecrets(g.callRedactor(c), inArgs)
		a, err := g.o.Approver.Approve(ctx, ApprovalRequest{
			Tool: name, CallID: c.call.ID, Principal: c.call.Principal,
			Args: args, Needs: redactNeeds(red, c.needs),
			Rule: rule, Matched: red.String(c.why()), Preview: preview,
			Lasting: lasting, CanRemember: lasting && g.o.Grants != nil,
		})
		if err != nil {
			if errors.Is(err, ErrCancelled) || ctx.Err() != nil {
				return approvalVerdict{ApprovalRefused, ""}, tool.Errorf(tool.CodeUserCancelled, "", "approval of %s was cancelled", name)
			}
			ae := tool.Errorf(tool.CodeApprovalRequired, "needs approval, and asking for it failed", "%s needs approval and asking failed: %v", name, err)
			ae.Approval = &tool.ApprovalNeeded{Rule: rule, Mode: g.o.Approval, Failed: err.Error()}
			return approvalVerdict{ApprovalUnavailable, ""}, ae
		}
		by := a.By
		if by == "" {
			by = ApprovalUser
		}
		if !a.Approved {
			return approvalVerdict{ApprovalRefused, by}, tool.Errorf(tool.CodeUserRejected, "", "%s was rejected by %s", name, by)
		}
		if a.For > 0 && lasting && g.o.Grants != nil {
			if ts, err := g.remember(ctx, name, asking, by, a.For); err != nil {
				g.o.Logger.Warn("the approval could not be remembered", "tool", name, "err", err)
			} else {
				by = fmt.Sprintf("%s (for %s: %s)", by, a.For, rememberedBy(ts))
			}
		}
		return approvalVerdict{ApprovalUser, by}, nil
	}
	ae := tool.Errorf(tool.CodeApprovalRequired, "needs approval, and no one can be asked",
		"%s needs approval (%s) and no one can approve it (approval mode %s)", name, rule, g.o.Approval)
	ae.Approval = &tool.ApprovalNeeded{Rule: rule, Mode: g.o.Approval}
	return approvalVerdict{ApprovalUnavailable, ""}, ae
}

// callRedactor is the redactor for what is shown or recorded of a call:
// the gate's, and the originals masks were restored to in its arguments.
func (g *Gate) callRedactor(c *checked) *redact.Redactor {
	red := g.o.Redactor
	if c != nil && len(c.restores) > 0 {
		originals := make([]string, len(c.restores))
		for i, r := range c.restores {
			originals[i] = r.entry.Original()
		}
		red = red.WithLiterals(minRestoredLiteral, originals...)
	}
	return red
}

// askingKeys names what an approval of the call approves: each rule that
// asks for one, by its policy file and digest and its place in it (or the
// tool itself, for a tool that always asks).
func (c *checked) askingKeys() []string {
	var keys []string
	for _, r := range c.verdict.Asking {
		keys = append(keys, r.Key())
	}
	if c.entry.spec.ApprovalRequired && len(keys) == 0 {
		keys = append(keys, c.call.Tool+" always needs approval")
	}
	return keys
}

// untrustedAsks reports whether a rule of an untrusted workspace policy
// asks for the approval.
func (c *checked) untrustedAsks() bool {
	for _, r := range c.verdict.Asking {
		if r.Untrusted() {
			return true
		}
	}
	return false
}

// finish fills the envelope from an outcome, records the result durably and
// logs one line.
//
// head is the intent's (nil when there was none): see eventHead.
func (g *Gate) finish(ctx context.Context, res tool.Result, ev AuditEvent, o tool.Outcome, start time.Time, intentSeq uint64, head *eventHead) (tool.Result, error) {
	res.Output = capOutput(o.Output)
	switch d := o.Data.(type) {
	case nil:
	case json.RawMessage: // already marshalled (and redacted) by redactOutcome
		res.Data = d
	default:
		data, err := json.Marshal(d)
		if err != nil {
			o.Err = tool.Errorf(tool.CodeInternal, "", "tool %s returned data that is not JSON: %v", res.Tool, err)
		} else {
			res.Data = data
		}
	}
	if len(o.Warnings) > 0 {
		res.Warnings = append(res.Warnings, o.Warnings...)
	}
	res.Error = o.Err
	res.Success = o.Err == nil
	res.Sandbox, ev.Sandbox = o.Sandbox, o.Sandbox
	ev.Connections, ev.ConnectionsDropped = g.redactConnections(o.Connections), o.ConnectionsDropped
	res.DurationMS = g.o.Now().Sub(start).Milliseconds()

	ev.Phase = PhaseResult
	ev.Preview = ""
	ev.IntentSeq = intentSeq
	ev.Duration = res.DurationMS
	ev.Outcome = "ok"
	if o.Err != nil {
		ev.Outcome = string(o.Err.Code)
		ev.Message = o.Err.Message
	}
	ev.Digest = outcomeDigest(res.Output, res.Data)
	seq, err := g.append(ctx, ev, head)
	if err != nil {
		return res, err
	}
	res.AuditSeq = seq
	if !g.o.Logger.Enabled(context.Background(), slog.LevelInfo) { // as Info asks
		return res, nil // the line would be dropped: not built
	}
	attrs := []any{"tool", res.Tool, "call_id", res.CallID, "principal", strings.Join(ev.Principal, ">"),
		"outcome", ev.Outcome, "duration_ms", res.DurationMS, "dry_run", res.DryRun, "audit_seq", seq}
	if ev.RunID != "" {
		attrs = append(attrs, "run_id", ev.RunID)
	}
	if ev.Decision != nil {
		attrs = append(attrs, "decision", ev.Decision.Action)
	}
	g.o.Logger.Info("tool call", attrs...)
	return res, nil
}

// outcomeDigest is "sha256:" and the hex SHA-256 of output then data; a
// long output is hashed a piece at a time, not copied whole.
func outcomeDigest(output string, data []byte) string {
	h := sha256.New()
	var small [512]byte
	buf := small[:]
	if len(output) > len(small) {
		buf = make([]byte, min(len(output), 32<<10))
	}
	for s := output; s != ""; {
		n := copy(buf, s)
		h.Write(buf[:n])
		s = s[n:]
	}
	h.Write(data)
	const prefix = "sha256:"
	var sum [sha256.Size]byte
	var out [len(prefix) + 2*sha256.Size]byte
	copy(out[:], prefix)
	hex.Encode(out[len(prefix):], h.Sum(sum[:0]))
	return string(out[:])
}

// append records ev, its head written from h or kept in it when h is not
// nil (see eventHead): a call's intent keeps it, its result writes it again.
func (g *Gate) append(ctx context.Context, ev AuditEvent, h *eventHead) (uint64, error) {
	body, err := marshalEventHead(&ev, h)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", tool.ErrAudit, err)
	}
	seq, err := g.o.Audit.AppendAudit(ctx, body)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", tool.ErrAudit, err)
	}
	return seq, nil
}

// safeRun runs a tool (its Preview when c.DryRun), turning a panic into an
// INTERNAL result.
func (g *Gate) safeRun(ctx context.Context, t tool.Tool, c *tool.Call) (o tool.Outcome) {
	defer func() {
		if r := recover(); r != nil {
			g.o.Logger.Error("tool panicked", "tool", c.Tool, "call_id", c.ID, "panic", fmt.Sprint(r))
			o = tool.Fail(tool.CodeInternal, "this is a bug in warden; please report it", "tool %s failed unexpectedly", c.Tool)
		}
	}()
	notes := &callNotes{gate: g}
	ctx = context.WithValue(ctx, callNotesKey{}, notes)
	defer func() {
		if o.Sandbox == "" {
			o.Sandbox = notes.sandbox.get()
		}
		o.Connections, o.ConnectionsDropped = notes.conns.get()
	}()
	if p, ok := t.(tool.Previewer); ok && c.DryRun {
		return p.Preview(ctx, c)
	}
	return t.Run(ctx, c)
}

// sandboxNote is where the programs a call starts note the protections
// they ran under.
type sandboxNote struct {
	mu    sync.Mutex
	level string
}

// callNotes is the one value a running call's context carries for the
// gate: the gate (GateFrom), and where the call's programs note the
// protections they ran under and the connections they made.
type callNotes struct {
	gate    *Gate
	sandbox sandboxNote
	conns   connNote
}

type callNotesKey struct{}

// notesFrom returns the notes of the call running in ctx, if any.
func notesFrom(ctx context.Context) (*callNotes, bool) {
	n, ok := ctx.Value(callNotesKey{}).(*callNotes)
	return n, ok && n != nil
}

func (n *sandboxNote) get() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.level
}

// NoteSandbox records, for the result and the audit record of the call
// running in ctx, that it started a program under the protections named
// by level (sandbox.Support.Level).
func NoteSandbox(ctx context.Context, level string) {
	if n, ok := notesFrom(ctx); ok {
		n.sandbox.mu.Lock()
		n.sandbox.level = level
		n.sandbox.mu.Unlock()
	}
}

// minArgSecret is the shortest secret found in a call's arguments that is
// masked wherever the call's record and outcome repeat it — but for a
// password only in its place (withArgSecrets).
const minArgSecret = 8

// withArgSecrets returns red that also masks the secrets found in a call's
// arguments wherever the call's record and outcome repeat them, from
// minArgSecret bytes. A shorter password is masked where it stands as a
// URL's user info — between ":" and "@", as they are or URL-encoded once
// or twice (a path cleaned of "//", an http tool repeating its params) —
// and nowhere else: the arguments choose what is a password, and a short
// one masked wherever it appears would let them hide any word ("rm",
// "the") from the approver and the record.
func withArgSecrets(red *redact.Redactor, found []redact.Secret) *redact.Redactor {
	var short []redact.Secret
	for _, s := range found {
		if len(s.Original) >= minArgSecret || !redact.IsPassword(s.Kind) {
			continue
		}
		for _, f := range [][2]string{{":", "@"}, {"%3A", "%40"}, {"%3a", "%40"}, {"%253A", "%2540"}, {"%253a", "%2540"}} {
			short = append(short, redact.Secret{Kind: s.Kind, Original: f[0] + s.Original + f[1]})
		}
	}
	return red.WithSecrets(minArgSecret, found...).WithSecrets(1, short...)
}

// redactShown is redactArgsFound for checked.shown (compact JSON); a copy.
func (g *Gate) redactShown(shown json.RawMessage) (json.RawMessage, []redact.Secret) {
	if out, found, err := g.o.Redactor.ReplaceCompactJSON(shown, plainMask); err == nil {
		return bytes.Clone(out), found
	}
	return g.redactArgsFound(shown)
}

// redactArgsFound redacts a call's arguments, and says what it masked.
func (g *Gate) redactArgsFound(args json.RawMessage) (json.RawMessage, []redact.Secret) {
	out, found, err := g.o.Redactor.ReplaceJSON(args, plainMask)
	if err != nil {
		s, found := g.o.Redactor.Replace(string(args), plainMask)
		b, _ := json.Marshal(s)
		return b, found
	}
	return out, found
}

func plainMask(string, string, int) string { return redact.Mask }

// argsText is the text of arguments that were not decoded (not an object,
// or not the tool's), redacted, then cut to maxArgsText, and the secrets
// it masked. JSON is redacted as JSON: a value's escapes are read as its
// text. Redacted whole before it is cut, a secret is never cut where its
// pattern would no longer know it.
func (g *Gate) argsText(raw []byte) (string, []redact.Secret) {
	if json.Valid(raw) {
		if out, found, err := g.o.Redactor.ReplaceJSON(raw, plainMask); err == nil {
			return truncateText(string(out), maxArgsText), found
		}
	}
	text, found := g.o.Redactor.Replace(strings.ToValidUTF8(string(raw), "\uFFFD"), plainMask)
	return truncateText(text, maxArgsText), found
}

// truncateText cuts s to at most n bytes of valid UTF-8.
func truncateText(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func (g *Gate) redactError(e *tool.Error) *tool.Error {
	if e == nil {
		return nil
	}
	return e.MapText(g.o.Redactor.String)
}

// redactNeeds renders needs for the audit log and the approver; a path or
// host can carry a secret too.
func redactNeeds(red *redact.Redactor, ns []capability.Need) []string {
	if len(ns) == 0 {
		return nil
	}
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = red.String(n.String())
	}
	return out
}

// redactGrants redacts the grants recorded for a call's needs (shown is
// needs redacted by red): a grant that reads as one of the needs (the
// grant system.info for the need system.info) is that need's redaction,
// made with the same redactor already. The result is a copy when any
// grant changes; grants itself is left as it is.
func redactGrants(red *redact.Redactor, grants []string, needs []capability.Need, shown []string) []string {
	out := grants
	for i, g := range grants {
		j := slices.IndexFunc(needs, func(n capability.Need) bool { return n.String() == g })
		r := ""
		if j >= 0 {
			r = shown[j]
		} else {
			r = red.String(g)
		}
		if r != g {
			if &out[0] == &grants[0] {
				out = slices.Clone(grants)
			}
			out[i] = r
		}
	}
	return out
}

func capOutput(s string) string {
	if len(s) <= MaxOutputBytes {
		return s
	}
	cut := MaxOutputBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n… [output truncated: %d of %d bytes shown]", cut, len(s))
}

// Explanation says how the gate would decide a call, without running it.
type Explanation struct {
	Tool   string `json:"tool"`
	Policy string `json:"policy"`
	// Untrusted names the workspace policy that narrows Policy because its
	// owner has not trusted it ("" when there is none).
	Untrusted string `json:"untrusted_policy,omitempty"`
	Rule      string `json:"rule"`
	// Matched says which of the rule's matchers matched, and what.
	Matched  string            `json:"matched,omitempty"`
	Needs    []NeedWhy         `json:"needs"`
	Approval string            `json:"approval"`
	Verdict  string            `json:"verdict"` // allow | deny | needs approval
	Error    *tool.Error       `json:"error,omitempty"`
	Grants   []string          `json:"grants"`
	Mode     tool.ApprovalMode `json:"approval_mode"`
}

// VerdictNeedsApproval is an Explanation's verdict for a call its rule
// makes wait for an approval the approval mode cannot give.
const VerdictNeedsApproval = "needs approval"

// NeedWhy is one need and the grant that allows it (or "" if none), or,
// when none does, the grant that would (Grant; "" when no grant can).
type NeedWhy struct {
	Need      string `json:"need"`
	GrantedBy string `json:"granted_by,omitempty"`
	Grant     string `json:"grant,omitempty"`
	// Hint is for a front end to fill, in its reader's words (the gate
	// leaves it empty).
	Hint string `json:"hint,omitempty"`
}

// Explain says which rule and which grants decide a call, and why.
func (g *Gate) Explain(req Request) Explanation {
	x := Explanation{Tool: req.Tool, Policy: g.o.Policy.Source, Mode: g.o.Approval, Grants: setStrings(g.grants)}
	if u := g.o.Policy.Untrusted(); u != nil {
		x.Untrusted = u.Source
	}
	vault := req.Vault
	if vault == nil {
		vault = tool.NewVault()
	}
	c, err := g.check(context.Background(), req, "explain", vault)
	if c != nil && c.entry != nil {
		x.Tool = c.entry.spec.Name
	}
	if c != nil && c.call != nil {
		for _, t := range c.timed {
			x.Grants = append(x.Grants, t.String())
		}
		if r := c.deciding(); r != nil {
			x.Rule = r.Describe()
			x.Matched = g.callRedactor(c).String(c.why())
			if u := g.o.Policy.NarrowedBy(r); u != nil {
				x.Rule += " — from " + u.Source + " (not trusted: it may only narrow)"
			}
		} else {
			x.Rule = "no rule matches; capabilities decide"
		}
		for _, n := range c.needs {
			w := NeedWhy{Need: g.o.Redactor.String(n.String())}
			if c.call.Grants.Allows(n) {
				w.GrantedBy = grantFor(c.call.Grants, n) + timedNote(c.timed, c.call.Grants, n)
			} else {
				w.Grant = g.o.Redactor.String(n.Hint(g.o.Workspace))
			}
			x.Needs = append(x.Needs, w)
		}
	}
	if err != nil {
		x.Verdict = policy.ActionDeny
		x.Error = g.redactError(err)
		x.Approval = "-"
		return x
	}
	x.Verdict = policy.ActionAllow
	x.Approval = ApprovalNotRequired
	if c.verdict.DryRunFirst {
		x.Approval = "not required; the dry-run preview is recorded before it runs"
	}
	if c.verdict.Approval {
		switch g.o.Approval {
		case tool.ApproveAuto:
			x.Approval = "required: approved automatically (approval mode auto)"
		case tool.ApproveAsk:
			x.Approval = "required: a person is asked on the terminal"
		default:
			x.Approval = "required: refused with APPROVAL_REQUIRED (approval mode never)"
			x.Verdict = VerdictNeedsApproval
		}
		if c.verdict.DryRunFirst {
			x.Approval += "; the dry-run preview is shown first"
		}
	}
	return x
}

func setStrings(s capability.Set) []string {
	gs := s.Grants()
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.String()
	}
	return out
}
