package gate

import (
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// pathRuleRefusal refuses, with CAPABILITY_DENIED naming the entry, a call
// that needs to read or write a path the policy hides, or to write one it
// protects — whatever the grants say.
func pathRuleRefusal(c *tool.Call, needs []capability.Need) *tool.Error {
	for _, n := range needs {
		if n.Kind != capability.FSRead && n.Kind != capability.FSWrite {
			continue
		}
		if e, ok := c.Hide.Match(c.Workspace, n.Resource); ok {
			return HiddenError(n.Resource, e)
		}
		if n.Kind == capability.FSWrite {
			if e, ok := c.Protect.Match(c.Workspace, n.Resource); ok {
				return ProtectedError(n.Resource, e)
			}
		}
	}
	return nil
}

// HiddenError is the refusal of a path the policy's hide: entry covers.
func HiddenError(path, entry string) *tool.Error {
	return tool.Errorf(tool.CodeCapabilityDenied, "the policy's hide: list keeps it out of reach of every tool and program; no grant opens it",
		"%s is hidden by the policy (hide: %q)", path, entry)
}

// ProtectedError is the refusal to change a path the policy's protect:
// entry covers.
func ProtectedError(path, entry string) *tool.Error {
	return tool.Errorf(tool.CodeCapabilityDenied, "the policy's protect: list keeps it read-only to every tool and program; no grant opens it",
		"%s is protected by the policy (protect: %q)", path, entry)
}
