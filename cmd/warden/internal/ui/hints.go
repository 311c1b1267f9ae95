package ui

import (
	"strings"

	"github.com/wardenrt/warden/runtime/tool"
)

// The core says what a refused call lacks as data (the missing grants, the
// approval it needed) and words its hints for no reader in particular. The
// CLI and the MCP server word them for their own readers here.

// CLIHint is e's hint for a person at warden's command line: the flags
// that would allow the call.
func CLIHint(e *tool.Error) string {
	switch {
	case e == nil:
		return ""
	case len(e.Missing) > 0:
		return "add --grant " + strings.Join(e.Missing, " --grant ") + e.GrantsNote()
	case e.Approval != nil && e.Approval.Failed != "":
		return "approve with --approve auto, or run it on a terminal"
	case e.Approval != nil:
		return "run it on a terminal to be asked (--approve ask), or approve it explicitly with --approve auto"
	}
	return e.Hint
}

// CLIError is e with its hint worded by CLIHint (a copy; nil for nil).
func CLIError(e *tool.Error) *tool.Error {
	if e == nil {
		return nil
	}
	out := *e
	out.Hint = CLIHint(e)
	return &out
}

// mcpHint is e's hint for an MCP client: what to ask the user for, since
// the client can neither pass warden a flag nor change its policy.
func mcpHint(e *tool.Error) string {
	switch {
	case e == nil:
		return ""
	case len(e.Missing) > 0:
		return "ask the user to grant " + strings.Join(e.Missing, ", ") + e.GrantsNote() +
			" (in warden's policy, or with a grant to the server); the call stays refused until then"
	case e.Approval != nil && e.Approval.Failed != "":
		return "the user must approve this call, and asking them through this client failed; ask the user to approve it, " +
			"or to allow it in warden's policy"
	case e.Approval != nil:
		return "the user must approve this call, and this server cannot ask them (approval mode " + string(e.Approval.Mode) +
			"); ask the user to allow it in warden's policy"
	}
	return e.Hint
}

// MCPError is e with its hint worded by mcpHint (a copy; nil for nil).
func MCPError(e *tool.Error) *tool.Error {
	if e == nil {
		return nil
	}
	out := *e
	out.Hint = mcpHint(e)
	return &out
}
