package ui

import (
	"strings"
	"testing"

	"github.com/wardenrt/warden/runtime/tool"
)

// TestHintsPerReader: the CLI words a refusal's data as the flags to add,
// the MCP server as what to ask the user for; a hint without data is
// passed on as the core wrote it.
func TestHintsPerReader(t *testing.T) {
	env := tool.NeedsGrants([]string{"env:TOKEN"}, "env TOKEN cannot be set")
	env.Hint += " (exactly this name)"
	two := tool.NeedsGrants([]string{"fs.write:out/**", "net:example.com:443"}, "workflow w needs …")
	never := &tool.Error{Code: tool.CodeApprovalRequired, Hint: "needs approval, and no one can be asked", Approval: &tool.ApprovalNeeded{Rule: "r", Mode: tool.ApproveNever}}
	failed := &tool.Error{Code: tool.CodeApprovalRequired, Hint: "needs approval, and asking for it failed", Approval: &tool.ApprovalNeeded{Rule: "r", Mode: tool.ApproveAsk, Failed: "no terminal"}}
	plain := &tool.Error{Code: tool.CodeNotFound, Hint: "check the path"}
	for _, tc := range []struct {
		err      *tool.Error
		cli, mcp string
	}{
		{env, "add --grant env:TOKEN (exactly this name)", "ask the user to grant env:TOKEN (exactly this name) (in warden's policy, or with a grant to the server)"},
		{two, "add --grant fs.write:out/** --grant net:example.com:443", "ask the user to grant fs.write:out/**, net:example.com:443 ("},
		{never, "run it on a terminal to be asked (--approve ask), or approve it explicitly with --approve auto", "this server cannot ask them (approval mode never); ask the user to allow it in warden's policy"},
		{failed, "approve with --approve auto, or run it on a terminal", "asking them through this client failed; ask the user to approve it"},
		{plain, "check the path", "check the path"},
		{nil, "", ""},
	} {
		if got := CLIHint(tc.err); got != tc.cli {
			t.Errorf("cli: %q, want %q", got, tc.cli)
		}
		if got := mcpHint(tc.err); !strings.Contains(got, tc.mcp) || strings.Contains(got, "--") {
			t.Errorf("mcp: %q, want %q", got, tc.mcp)
		}
	}
	if c := CLIError(two); c.Hint != CLIHint(two) || two.Hint != "needs the grants fs.write:out/**, net:example.com:443" || CLIError(nil) != nil {
		t.Errorf("cliError: %+v, the original %+v", c, two)
	}
}
