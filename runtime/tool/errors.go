package tool

import (
	"errors"
	"fmt"
	"strings"
)

// Code is one of the canonical error codes of docs/envelope.md. Tool failures carry a
// Code in the result envelope; the CLI maps codes to exit statuses.
type Code string

// The canonical error codes.
const (
	CodeInvalidInput          Code = "INVALID_INPUT"
	CodeUnknownTool           Code = "UNKNOWN_TOOL"
	CodeOperationNotSupported Code = "OPERATION_NOT_SUPPORTED"
	CodePolicyDenied          Code = "POLICY_DENIED"
	CodeCapabilityDenied      Code = "CAPABILITY_DENIED"
	CodeApprovalRequired      Code = "APPROVAL_REQUIRED"
	CodeUserRejected          Code = "USER_REJECTED"
	CodeUserCancelled         Code = "USER_CANCELLED"
	CodePathEscape            Code = "PATH_ESCAPE"
	CodeNotFound              Code = "NOT_FOUND"
	CodeAlreadyExists         Code = "ALREADY_EXISTS"
	CodeNotText               Code = "NOT_TEXT"
	CodeTooLarge              Code = "TOO_LARGE"
	CodeCommandFailed         Code = "COMMAND_FAILED"
	CodeCommandNotFound       Code = "COMMAND_NOT_FOUND"
	CodeCommandTimeout        Code = "COMMAND_TIMEOUT"
	// CodeResourceLimit: a program was stopped at one of its sandbox's
	// resource limits (CPU time, address space, processes, open files,
	// file size). Not in the list of docs/envelope.md; see RATIONALE.md.
	CodeResourceLimit Code = "RESOURCE_LIMIT"
	CodeTimeout       Code = "TIMEOUT"
	CodePatchRejected Code = "PATCH_REJECTED"
	CodeNetworkError  Code = "NETWORK_ERROR"
	CodeWasmTrap      Code = "WASM_TRAP"
	CodeWasmLimit     Code = "WASM_LIMIT"
	CodeToolError     Code = "TOOL_ERROR"
	CodeStoreLocked   Code = "STORE_LOCKED"
	CodeStoreCorrupt  Code = "STORE_CORRUPT"
	// CodeStoreFull and CodeStoreReadOnly: the store (its database, its
	// audit anchor) could not be written for want of space, or because
	// its directory is read-only; nothing ran without its audit record.
	CodeStoreFull     Code = "STORE_FULL"
	CodeStoreReadOnly Code = "STORE_READONLY"
	// CodeStoreUnavailable: a store on a server (PostgreSQL) could not be
	// reached or did not answer in time.
	CodeStoreUnavailable Code = "STORE_UNAVAILABLE"
	CodeAuditTampered    Code = "AUDIT_TAMPERED"
	CodeLLMError         Code = "LLM_ERROR"
	CodeInternal         Code = "INTERNAL"
)

// Codes lists every canonical code, in the order of docs/envelope.md.
func Codes() []Code {
	return []Code{
		CodeInvalidInput, CodeUnknownTool, CodeOperationNotSupported, CodePolicyDenied,
		CodeCapabilityDenied, CodeApprovalRequired, CodeUserRejected, CodeUserCancelled,
		CodePathEscape, CodeNotFound, CodeAlreadyExists, CodeNotText, CodeTooLarge,
		CodeCommandFailed, CodeCommandNotFound, CodeCommandTimeout, CodeResourceLimit, CodeTimeout,
		CodePatchRejected, CodeNetworkError, CodeWasmTrap, CodeWasmLimit, CodeToolError,
		CodeStoreLocked, CodeStoreCorrupt, CodeStoreFull, CodeStoreReadOnly, CodeStoreUnavailable, CodeAuditTampered, CodeLLMError, CodeInternal,
	}
}

// Denial reports whether the code means the call was refused by policy,
// capabilities or approval (exit status 77 at the CLI).
func (c Code) Denial() bool {
	switch c {
	case CodePolicyDenied, CodeCapabilityDenied, CodeApprovalRequired, CodeUserRejected:
		return true
	}
	return false
}

// Error is a tool failure as the envelope carries it: a code, a message and a
// hint that says what to do about it.
//
// The core says what is missing as data (Missing, Approval) and words the
// hint for no reader in particular ("needs the grant fs.write:notes/**");
// each front end (the CLI, the MCP server, the agent loop) words the hint
// for its own reader from that data: a flag to type, a request to pass on
// to the user.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
	// Missing lists the grants that would allow what was refused, in the
	// syntax of a grant (fs.write:notes/a.txt, exec:git, env:HOME), on a
	// CAPABILITY_DENIED error whose fix is a grant.
	Missing []string `json:"missing_grants,omitempty"`
	// Approval says, on an APPROVAL_REQUIRED error from the gate's approval
	// step, which rule asked for an approval and why none was given.
	Approval *ApprovalNeeded `json:"approval,omitempty"`
}

// ApprovalNeeded is the approval a refused call needed.
type ApprovalNeeded struct {
	// Rule is the rule (or rules, joined by "; ") that asks for approval.
	Rule string `json:"rule,omitempty"`
	// Mode is the approval mode in force: never (no one is asked), ask
	// (someone is asked when someone can be).
	Mode ApprovalMode `json:"mode"`
	// Failed says why asking failed, when someone was asked ("" when no
	// one could be).
	Failed string `json:"failed,omitempty"`
}

// NeedsGrants is the CAPABILITY_DENIED error of a call the grants in
// missing would allow; its hint names them, for no reader in particular.
func NeedsGrants(missing []string, format string, args ...any) *Error {
	return &Error{Code: CodeCapabilityDenied, Message: fmt.Sprintf(format, args...), Hint: GrantsHint(missing), Missing: missing}
}

// GrantsHint is the reader-neutral hint for missing grants: "needs the
// grant X" or "needs the grants X, Y" ("" for none).
func GrantsHint(missing []string) string {
	switch len(missing) {
	case 0:
		return ""
	case 1:
		return "needs the grant " + missing[0]
	}
	return "needs the grants " + strings.Join(missing, ", ")
}

// GrantsNote is what e's hint says beyond naming its missing grants: the
// rest of a hint that begins with GrantsHint(e.Missing) (" (exactly this
// name)"), for a front end that words the grants its own way to keep.
func (e *Error) GrantsNote() string {
	if e == nil || len(e.Missing) == 0 {
		return ""
	}
	note, _ := strings.CutPrefix(e.Hint, GrantsHint(e.Missing))
	if note == e.Hint {
		return "" // a hint of its own, not about the grants
	}
	return note
}

// MapText returns a copy of e with every text field (message, hint,
// missing grants, approval) passed through f: for redaction and masking.
func (e *Error) MapText(f func(string) string) *Error {
	if e == nil {
		return nil
	}
	out := *e
	out.Message, out.Hint = f(e.Message), f(e.Hint)
	if e.Missing != nil {
		out.Missing = make([]string, len(e.Missing))
		for i, m := range e.Missing {
			out.Missing[i] = f(m)
		}
	}
	if e.Approval != nil {
		a := *e.Approval
		a.Rule, a.Failed = f(a.Rule), f(a.Failed)
		out.Approval = &a
	}
	return &out
}

func (e *Error) Error() string {
	if e.Hint == "" {
		return fmt.Sprintf("%s: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("%s: %s (%s)", e.Code, e.Message, e.Hint)
}

// Errorf makes an *Error with a formatted message.
func Errorf(code Code, hint, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Hint: hint}
}

// AsError returns err as an *Error: itself if it is one (or wraps one), else
// an INTERNAL error carrying its text.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// Runtime failures (not tool results): returned as Go errors by the gate.
var (
	// ErrAudit wraps a failure to write the audit log; the call did not run
	// (intent) or its result could not be recorded (result).
	ErrAudit = errors.New("audit log write failed")
)
