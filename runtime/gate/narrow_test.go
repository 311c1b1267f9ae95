package gate

import (
	"strings"
	"testing"

	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/tool"
)

// narrowGate builds a gate over base narrowed by the untrusted policy u,
// as policy resolution does for a workspace policy nobody trusted.
func narrowGate(t *testing.T, base, u string, o GateOptions) (*Gate, *noteTool, *memAudit, *policy.Policy, []policy.Ignored) {
	t.Helper()
	bp, err := policy.ParsePolicy("home", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	up, err := policy.ParsePolicy("ws", []byte(u))
	if err != nil {
		t.Fatal(err)
	}
	p, ign := policy.Narrow(bp, up)
	audit := &memAudit{}
	nt := &noteTool{audit: audit}
	reg := NewRegistry()
	if err := reg.Register(nt); err != nil {
		t.Fatal(err)
	}
	o.Registry, o.Policy, o.Audit, o.Workspace = reg, p, audit, "/ws"
	g, err := NewGate(o)
	if err != nil {
		t.Fatal(err)
	}
	return g, nt, audit, p, ign
}

func ignoredText(ign []policy.Ignored) string {
	var b strings.Builder
	for _, i := range ign {
		b.WriteString(i.What + "\n")
	}
	return b.String()
}

// TestNarrowOnlyNarrows: an untrusted policy's restrictions apply (dry
// run first, require_sandbox, a stricter approval mode, tighter limits,
// fewer grants) and whatever would widen is left out with a reason (its
// allow rules, a looser approval mode, looser limits, a rule's limits,
// grants the base lacks) — and an untrusted rule listed first never
// shadows the base policy's own restriction.
func TestNarrowOnlyNarrows(t *testing.T) {
	const base = "version: 1\ngrants: [\"fs.write:notes/**\"]\nlimits: {cpu_seconds: 10, processes: 16}\n"

	t.Run("dry_run_first applies: the intent carries the preview", func(t *testing.T) {
		g, nt, audit, _, _ := narrowGate(t, base, "version: 1\nrules: [{tool: note, action: allow, dry_run_first: true}]\n", GateOptions{})
		if res := call(t, g, `{"name":"a","text":"x"}`); !res.Success || nt.runs != 1 {
			t.Fatalf("%+v", res)
		}
		if audit.events[0].Preview != "would write notes/a: x" {
			t.Fatalf("no preview on the intent: %+v", audit.events[0])
		}
	})
	t.Run("require_approval applies and is refused without an approver", func(t *testing.T) {
		g, nt, _, _, _ := narrowGate(t, base, "version: 1\nrules: [{tool: note, action: allow, require_approval: true}]\n", GateOptions{Approval: tool.ApproveAuto})
		res := call(t, g, `{"name":"a"}`)
		// auto approves: the restriction is there (an approval was
		// needed), and the call ran once approved.
		if !res.Success || nt.runs != 1 {
			t.Fatalf("%+v", res)
		}
		g2, tool2, _, _, _ := narrowGate(t, base, "version: 1\nrules: [{tool: note, action: allow, require_approval: true}]\n", GateOptions{Approval: tool.ApproveNever})
		if res := call(t, g2, `{"name":"a"}`); res.Error == nil || res.Error.Code != tool.CodeApprovalRequired || tool2.runs != 0 {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("deny applies", func(t *testing.T) {
		g, nt, _, _, _ := narrowGate(t, base, "version: 1\nrules: [{tool: note, action: deny}]\n", GateOptions{})
		if res := call(t, g, `{"name":"a"}`); res.Error == nil || res.Error.Code != tool.CodePolicyDenied || nt.runs != 0 {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("an untrusted allow listed first does not shadow the base's approval", func(t *testing.T) {
		home := base + "rules: [{tool: note, action: allow, require_approval: true}]\n"
		g, nt, _, _, ign := narrowGate(t, home, "version: 1\nrules: [{tool: note, action: allow}, {tool: note, action: allow, dry_run_first: true}]\n", GateOptions{Approval: tool.ApproveNever})
		if res := call(t, g, `{"name":"a"}`); res.Error == nil || res.Error.Code != tool.CodeApprovalRequired || nt.runs != 0 {
			t.Fatalf("the untrusted allow widened the base: %+v", res)
		}
		if !strings.Contains(ignoredText(ign), "allow rule 1 (tool note)") {
			t.Fatalf("ignored: %s", ignoredText(ign))
		}
	})
	t.Run("grants are intersected; a grant the base lacks is ignored", func(t *testing.T) {
		g, nt, _, _, ign := narrowGate(t, base, "version: 1\ngrants: [\"fs.write:notes/a\", \"exec:*\"]\n", GateOptions{})
		if res := call(t, g, `{"name":"a"}`); !res.Success || nt.runs != 1 {
			t.Fatalf("notes/a is in both: %+v", res)
		}
		if res := call(t, g, `{"name":"b"}`); res.Error == nil || res.Error.Code != tool.CodeCapabilityDenied {
			t.Fatalf("notes/b is only in the base: %+v", res)
		}
		if txt := ignoredText(ign); !strings.Contains(txt, "grant exec:* (not in home)") || strings.Contains(txt, "notes/a") {
			t.Fatalf("ignored: %s", txt)
		}
	})
	t.Run("require_sandbox, approval and limits", func(t *testing.T) {
		_, _, _, p, ign := narrowGate(t, base, "version: 1\nrequire_sandbox: true\napproval: never\nlimits: {cpu_seconds: 5, processes: 1000}\n"+
			"rules: [{tool: note, action: allow, require_approval: true, limits: {cpu_seconds: 100000}}]\n", GateOptions{})
		if !p.RequireSandbox {
			t.Error("require_sandbox not taken")
		}
		if p.Approval != tool.ApproveNever {
			t.Errorf("approval %q, want never (stricter)", p.Approval)
		}
		if p.Limits.CPUSeconds != 5 || p.Limits.Processes != 16 {
			t.Errorf("limits %+v: want the tighter of each (cpu 5, processes 16)", p.Limits)
		}
		txt := ignoredText(ign)
		for _, want := range []string{"limits processes: 1000 (looser than home's)", "limits of rule 1"} {
			if !strings.Contains(txt, want) {
				t.Errorf("ignored lacks %q: %s", want, txt)
			}
		}
		if strings.Contains(txt, "cpu_seconds: 5") {
			t.Errorf("a tighter limit reported as ignored: %s", txt)
		}
	})
	t.Run("approval: auto is ignored", func(t *testing.T) {
		_, _, _, p, ign := narrowGate(t, "version: 1\napproval: ask\n", "version: 1\napproval: auto\n", GateOptions{})
		if p.Approval != tool.ApproveAsk || !strings.Contains(ignoredText(ign), "approval: auto") {
			t.Fatalf("approval %q, ignored %s", p.Approval, ignoredText(ign))
		}
	})
}
