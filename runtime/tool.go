package runtime

import (
	"context"
	"encoding/json"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/pathrule"
	"github.com/wardenrt/warden/runtime/sandbox"
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
	// Preview says exactly what Run would do, and does nothing. Tools whose
	// Spec is ReadOnly are never asked for a preview.
	Preview(ctx context.Context, c *Call) Outcome
	// Run performs the call.
	Run(ctx context.Context, c *Call) Outcome
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
	Rule *Rule
	// RequireSandbox: the policy refuses programs started without every
	// sandbox protection (require_sandbox).
	RequireSandbox bool
	// Limits are the resource limits of the programs the call starts: the
	// rule's, over the policy's, over sandbox.DefaultLimits.
	Limits sandbox.Limits
	// Protect and Hide are the policy's protect: and hide: lists: paths
	// no program may change, and paths no program or tool may read,
	// whatever the grants. The gate refuses needs they match; tools that
	// walk directories or start programs hold them too.
	Protect, Hide pathrule.List

	// decoded is Args as DecodeArgs returned it, so Bind need not decode
	// twice.
	decoded map[string]any
	// rules, when the policy has command rules for the tool, checks the
	// programs it starts (CheckPrograms).
	rules *callRules
	// programs are what the tool reported from Needs (ReportPrograms).
	programs []Program
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
