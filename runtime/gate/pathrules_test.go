package gate

import (
	"context"
	"strings"
	"testing"

	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/tool"

	"github.com/wardenrt/warden/runtime/capability"
)

// TestPolicyProtectHide: protect: and hide: entries are checked with their
// line and column, and the gate refuses needs they cover — hide: for
// reading and writing, protect: for writing — whatever the grants, naming
// the entry; nothing runs.
func TestPolicyProtectHide(t *testing.T) {
	_, err := policy.ParsePolicy("p.yaml", []byte("version: 1\nprotect: [\"ok/\", \"../up\"]\nhide:\n  - \"\"\n  - \".env\"\n"))
	if err == nil || !strings.Contains(err.Error(), "p.yaml:2:") || !strings.Contains(err.Error(), `protect: "../up"`) ||
		!strings.Contains(err.Error(), "p.yaml:4:") || !strings.Contains(err.Error(), "hide: an entry cannot be empty") {
		t.Fatalf("%v", err)
	}
	policy := "version: 1\ngrants: [\"fs.write:notes/**\"]\nprotect: [\"notes/keep.md\"]\nhide: [\"*.secret\"]\n"
	g, nt, audit := newTestGate(t, policy, GateOptions{})
	for _, tc := range []struct{ name, entry string }{
		{"keep.md", `protect: "notes/keep.md"`},
		{"a.secret", `hide: "*.secret"`},
	} {
		res := call(t, g, `{"name":"`+tc.name+`"}`)
		if res.Success || res.Error.Code != tool.CodeCapabilityDenied || !strings.Contains(res.Error.Message, tc.entry) {
			t.Errorf("%s: %+v", tc.name, res.Error)
		}
	}
	if nt.runs != 0 {
		t.Fatalf("the tool ran %d times", nt.runs)
	}
	if res := call(t, g, `{"name":"other.md"}`); !res.Success {
		t.Fatalf("%+v", res.Error)
	}
	if n := len(audit.events); n != 4 { // two refusals, an intent and a result
		t.Errorf("%d audit records", n)
	}
}

// TestConnectionsOnRecord: connections a tool's programs noted are in the
// audit record of its result, redacted, and capped.
func TestConnectionsOnRecord(t *testing.T) {
	g, _, audit := newTestGate(t, notesPolicy, GateOptions{})
	ctx := context.Background()
	reg := NewRegistry()
	ct := &connTool{n: maxConnections + 3}
	if err := reg.Register(ct); err != nil {
		t.Fatal(err)
	}
	g, err := g.WithRegistry(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Call(ctx, Request{Tool: "conn", Args: []byte(`{}`), Principal: []string{"test"}}); err != nil {
		t.Fatal(err)
	}
	ev := audit.last()
	if len(ev.Connections) != maxConnections || ev.ConnectionsDropped != 3 {
		t.Fatalf("%d connections, %d dropped", len(ev.Connections), ev.ConnectionsDropped)
	}
	if c := ev.Connections[0]; c.Verdict != "refused" || strings.Contains(c.Host, "ghp_") {
		t.Fatalf("%+v", c)
	}
}

type connTool struct{ n int }

func (c *connTool) Spec() tool.Spec {
	return tool.Spec{Name: "conn", Description: "notes connections", InputSchema: []byte(`{"type":"object","additionalProperties":false}`)}
}
func (c *connTool) Needs(*tool.Call) ([]capability.Need, error)               { return nil, nil }
func (c *connTool) Preview(ctx context.Context, call *tool.Call) tool.Outcome { return tool.Outcome{} }
func (c *connTool) Run(ctx context.Context, call *tool.Call) tool.Outcome {
	for range c.n {
		NoteConnection(ctx, tool.Connection{Via: "proxy", Host: "ghp_0123456789abcdefghijABCDEFGHIJ012345.evil.example", Port: 443, Verdict: "refused"})
	}
	return tool.Outcome{Output: "ok"}
}
