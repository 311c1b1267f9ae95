package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/pathrule"
	"github.com/wardenrt/warden/runtime/resource"
)

// Tool is one thing warden can do. Every tool is reached only through the
// Gate, which decodes and validates the arguments against InputSchema,
// checks the policy and the capabilities returned by Needs, and audits the
// call before and after Run.
type Tool interface {
	// Spec describes the tool. It must be constant for the tool's lifetime.
	Spec() Spec
	// Needs returns the concrete resources this call would touch, computed
	// from its (already validated) arguments before anything runs. An *Error
	// result (e.g. INVALID_INPUT, PATH_ESCAPE, OPERATION_NOT_SUPPORTED)
	// refuses the call.
	Needs(c *Call) ([]capability.Need, error)
	// Run performs the call.
	Run(ctx context.Context, c *Call) Outcome
}

// Previewer is implemented by every tool that changes something (its Spec
// is not ReadOnly): Preview says exactly what Run would do, and does
// nothing. A read-only tool needs none: a dry run runs it.
type Previewer interface {
	Preview(ctx context.Context, c *Call) Outcome
}

// Spec is a tool's public description.
type Spec struct {
	Name        string
	Description string
	// InputSchema is a JSON Schema (draft 2020-12) for the arguments object.
	// Every object in it must be closed (additionalProperties: false).
	InputSchema json.RawMessage
	// Capabilities lists the kinds of grant a call of this tool can need.
	Capabilities []capability.Kind
	// ReadOnly tools change nothing; a dry run executes them normally.
	ReadOnly bool
	// Wasm names the wasm module a wasm tool comes from; "" for core
	// tools. Guests may call core tools only.
	Wasm string
	// ApprovalRequired makes every call of the tool wait for an approval,
	// with its preview shown first, whatever the policy's rules say (they
	// can still deny it): for tools whose effect outlives the run
	// (schedule_task).
	ApprovalRequired bool
}

// headed is implemented by a typed tool (Adapt), whose input schema is
// derived when first asked for: head is its Spec without the InputSchema,
// at no cost. The method is unexported so that no other tool — a wasm
// tool, anything whose schema someone else wrote — can be taken for one.
type headed interface {
	head() Spec
}

// HeadOf returns t's Spec, leaving out the input schema when t is a typed
// tool (Adapt), which derives it when first asked for; deferred reports
// that it did. The registry names and checks a tool by its head and
// compiles a typed tool's schema on first use (DeferOwnSchema).
func HeadOf(t Tool) (spec Spec, deferred bool) {
	if h, ok := t.(headed); ok {
		return h.head(), true
	}
	return t.Spec(), false
}

// Call is one validated invocation, as a tool sees it.
type Call struct {
	ID   string
	Tool string
	// Args is the strictly decoded, schema-validated arguments object
	// (compact JSON). Tools read it with Bind.
	Args json.RawMessage
	// RunID groups the calls of one `warden run`, workflow or CLI call.
	RunID string
	// Principal is the chain of who is calling, outermost first
	// (e.g. ["cli"], ["run:01J…", "model"], ["run:…", "wasm:jq", "core"]).
	Principal []string
	// Grants are the effective grants of this call (never wider than the
	// gate's own).
	Grants capability.Set
	// Workspace is the absolute workspace root.
	Workspace string
	// DryRun is true when this call only previews.
	DryRun bool
	// Rule is the policy rule that matched this call (nil when none did and
	// capabilities alone decided). Read-only: a tool may use it to require
	// that the owner wrote a rule for it (git_commit does).
	Rule *MatchedRule
	// RequireSandbox: the policy refuses programs started without every
	// sandbox protection (require_sandbox).
	RequireSandbox bool
	// Limits are the resource limits of the programs the call starts: the
	// rule's, over the policy's, over resource.Default.
	Limits resource.Limits
	// Protect and Hide are the policy's protect: and hide: lists: paths
	// no program may change, and paths no program or tool may read,
	// whatever the grants. The gate refuses needs they match; tools that
	// walk directories or start programs hold them too.
	Protect, Hide pathrule.List

	// decoded is Args as DecodeArgs returned it, so Bind need not decode
	// twice.
	decoded map[string]any
	// checker, when the policy has command rules for the tool, checks the
	// programs it starts (CheckPrograms).
	checker Checker
	// programs are what the tool reported from Needs (ReportPrograms).
	programs []Program
	// bound is Args bound into a typed tool's argument struct (Adapt).
	bound any
	// vault is the call's run's (see Call.Vault).
	vault *Vault
}

// Bind decodes the call's arguments into v (a pointer to a struct) with the
// strict rules: field names match exactly, no unknown fields.
func (c *Call) Bind(v any) error {
	return bindStrict(c.Args, c.decoded, v)
}

// Outcome is what a tool returns; the gate turns it into a Result.
type Outcome struct {
	Output   string
	Data     any
	Warnings []string
	Err      *Error
	// Sandbox names the protections the programs the tool started ran
	// under (sandbox.Support.Level); the gate fills it from NoteSandbox.
	Sandbox string
	// Origins say which files the output was read from (fs_read: the
	// file), so that a secret masked in it can be restored into that file
	// when it comes back. Output with no origin is a command's: a mask from
	// it is restored only into a file that holds the original already.
	Origins []Origin
	// Connections are what those programs connected to, or were refused
	// (the gate fills them from NoteConnection, for the audit record).
	Connections        []Connection
	ConnectionsDropped int
}

// Fail is shorthand for a failed Outcome.
func Fail(code Code, hint, format string, args ...any) Outcome {
	return Outcome{Err: Errorf(code, hint, format, args...)}
}

// Result is the envelope of docs/envelope.md, returned for every call whoever made it.
type Result struct {
	Tool       string          `json:"tool"`
	CallID     string          `json:"call_id"`
	Success    bool            `json:"success"`
	DryRun     bool            `json:"dry_run"`
	Output     string          `json:"output"`
	Data       json.RawMessage `json:"data"`
	Warnings   []string        `json:"warnings"`
	Error      *Error          `json:"error,omitempty"`
	DurationMS int64           `json:"duration_ms"`
	// Sandbox says which protections the programs the call started ran
	// under: "full", "fallback", "partial" or "off" (absent: it started
	// none); see sandbox.Support.Level.
	Sandbox string `json:"sandbox,omitempty"`
	// AuditSeq is the sequence number of the call's last audit record.
	AuditSeq uint64 `json:"audit_seq,omitempty"`
}

// Connection is one network connection a program started by a call made,
// or was refused, through warden's egress proxy or a bridge to a granted
// address. The audit record of the call's result lists them.
type Connection struct {
	// Program is the program that made it, where known.
	Program string `json:"program,omitempty"`
	// Via: "proxy" or "bridge".
	Via    string `json:"via"`
	Method string `json:"method,omitempty"`
	Host   string `json:"host"`
	Port   int    `json:"port"`
	// Addr is the address connected to (allowed connections).
	Addr string `json:"addr,omitempty"`
	// Verdict: allowed, refused (by the grants) or failed.
	Verdict  string `json:"verdict"`
	Reason   string `json:"reason,omitempty"`
	Sent     int64  `json:"sent"`
	Received int64  `json:"received"`
}

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

// Program is one program a call would start: its argv, each word with
// whether it is known only at run time (Dynamic[i]; a nil Dynamic means
// every word is known).
type Program struct {
	Argv    []string
	Dynamic []bool
	// Opaque marks a command warden cannot see: what an interpreter, a
	// shell reading a script from a file or stdin, or another program
	// starter will run. It matches every command pattern, and is judged
	// by the strictest rule that can apply — unless Launcher (1-based
	// index of the program that starts it, among the same list) is
	// decided by a rule with a command matcher naming it: the owner wrote
	// a rule for that program, and it decides.
	Opaque   bool
	Launcher int
}

func (p Program) IsDynamic(i int) bool { return i < len(p.Dynamic) && p.Dynamic[i] }

// String renders the argv, dynamic words as ‹…›.
func (p Program) String() string {
	if p.Opaque {
		return "‹a command " + strings.Join(p.Argv, " ") + " runs›"
	}
	words := make([]string, len(p.Argv))
	for i, w := range p.Argv {
		if p.IsDynamic(i) {
			w = "‹" + w + "›"
		}
		words[i] = w
	}
	return strings.Join(words, " ")
}

// ReportPrograms is called by a tool that starts programs (shell) from its
// Needs, with every program the call would start — each program of a
// compound command, and the commands launchers run (env, xargs, timeout,
// sh -c, …) — as the interpreter will see them: the gate matches the
// policy's command rules against each.
func (c *Call) ReportPrograms(ps []Program) { c.programs = ps }

// CheckPrograms is called by a tool that starts programs, just before it
// starts one, with its real argv (and the commands it launches, see
// ReportPrograms): rules on arguments then hold for words known only at
// run time. It returns POLICY_DENIED when a rule denies one,
// APPROVAL_REQUIRED when a rule asks for an approval the call did not get,
// nil otherwise.
func (c *Call) CheckPrograms(ps ...Program) *Error {
	if c.checker == nil || len(ps) == 0 {
		return nil
	}
	return c.checker.CheckPrograms(ps)
}

// CheckPath is called by a tool as it opens a file it only learned of at
// run time (a shell redirection to $x): the policy's path rules hold for
// it too.
func (c *Call) CheckPath(p string) *Error {
	if c.checker == nil || !capability.CleanPath(p) {
		return nil
	}
	return c.checker.CheckPath(p)
}

// MatchedRule is the policy rule that matched a call, as a tool sees it.
type MatchedRule struct {
	// Tool is the rule's tool name or glob.
	Tool string
	// Allow: the rule's action is allow.
	Allow bool
	// Text is the rule as the policy's explanations write it.
	Text string
}

// Checker checks, as a tool starts a program or opens a file it learned
// of only at run time, what the policy's rules say of it. The gate
// provides it (SetChecker).
type Checker interface {
	CheckPrograms(ps []Program) *Error
	CheckPath(p string) *Error
}

// The gate's side of a call: the gate sets these before it asks the tool
// for its needs, and reads back what the tool reported. Tools use the
// methods above instead.

// SetArgs sets the call's arguments: raw, and decoded as DecodeArgs
// returned them.
func (c *Call) SetArgs(raw json.RawMessage, decoded map[string]any) {
	c.Args, c.decoded, c.bound = raw, decoded, nil
}

// Decoded returns the arguments as DecodeArgs returned them.
func (c *Call) Decoded() map[string]any { return c.decoded }

// SetVault sets the vault of the call's run.
func (c *Call) SetVault(v *Vault) { c.vault = v }

// SetChecker sets what checks the programs and paths the call learns of
// at run time (nil: the policy has no rules that need it).
func (c *Call) SetChecker(ck Checker) { c.checker = ck }

// Reported returns, and forgets, the programs the tool reported from its
// Needs (ReportPrograms).
func (c *Call) Reported() []Program {
	ps := c.programs
	c.programs = nil
	return ps
}

// Hidden reports the hide: entry that covers path (absolute), if any: for
// tools that walk directories or read more than their needs name.
func (c *Call) Hidden(path string) (string, bool) { return c.Hide.Match(c.Workspace, path) }
