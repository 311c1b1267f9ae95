package gate

import (
	"context"
	"encoding/json"

	"github.com/wardenrt/warden/runtime/tool"
)

// AuditLog is where the gate records every call. The store satisfies it.
// AppendAudit must return only once the event is durable, and return the
// event's sequence number in the log.
type AuditLog interface {
	AppendAudit(ctx context.Context, event json.RawMessage) (uint64, error)
}

// Audit phases.
const (
	PhaseIntent = "intent" // written, durably, before the tool runs
	PhaseResult = "result" // written, durably, before the result is returned
	PhaseAdmin  = "admin"  // a change that is not a call: a grant added or expired, a policy trusted
)

// AuditEvent is the body of one audit record, already redacted. The store
// adds the sequence number, time and hash chain.
type AuditEvent struct {
	Phase     string          `json:"phase"`
	CallID    string          `json:"call_id"`
	RunID     string          `json:"run_id,omitempty"`
	Principal []string        `json:"principal"`
	Tool      string          `json:"tool"`
	Args      json.RawMessage `json:"args,omitempty"`
	// ArgsText holds arguments that were not a valid JSON object (redacted,
	// truncated), so refused calls are on record too.
	ArgsText string   `json:"args_text,omitempty"`
	DryRun   bool     `json:"dry_run,omitempty"`
	Needs    []string `json:"needs,omitempty"`
	// Preview is the dry run shown before a dry_run_first call ran.
	Preview  string    `json:"preview,omitempty"`
	Decision *Decision `json:"decision,omitempty"`
	Outcome  string    `json:"outcome,omitempty"` // "ok" or an error code
	Message  string    `json:"message,omitempty"`
	Duration int64     `json:"duration_ms"`
	Digest   string    `json:"output_digest,omitempty"`
	// Sandbox: the protections the call's programs ran under (see
	// Result.Sandbox).
	Sandbox string `json:"sandbox,omitempty"`
	// Connections are the network connections the call's programs made
	// or were refused (host, port, verdict, bytes); ConnectionsDropped
	// counts those beyond the record's cap.
	Connections        []tool.Connection `json:"connections,omitempty"`
	ConnectionsDropped int               `json:"connections_dropped,omitempty"`
	IntentSeq          uint64            `json:"intent_seq,omitempty"`
}

// Decision records why the gate let a call through or not.
type Decision struct {
	Action string `json:"action"` // allow | deny
	// Rule is the policy rule that matched ("rules[2] …") or "" when none
	// did and capabilities decided.
	Rule string `json:"rule,omitempty"`
	// Grants lists, for each need, the grant that allowed it.
	Grants []string `json:"grants,omitempty"`
	// Approval: not_required | auto | user | refused | unavailable
	Approval string `json:"approval,omitempty"`
	Approver string `json:"approver,omitempty"`
}

// Approval values in a Decision.
const (
	ApprovalNotRequired = "not_required"
	ApprovalAuto        = "auto"
	ApprovalUser        = "user"
	ApprovalRefused     = "refused"
	ApprovalUnavailable = "unavailable"
	// ApprovalRemembered: approved by an approval remembered for a while
	// ("allow for 1 hour").
	ApprovalRemembered = "remembered"
)
