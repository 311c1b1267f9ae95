package gate

import (
	"context"
	"encoding/json"
	"errors"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/tool"

	"github.com/wardenrt/warden/runtime/capability"
)

// memAudit is an in-memory AuditLog for tests.
type memAudit struct {
	mu     sync.Mutex
	events []AuditEvent
	raw    []string
	fail   error
}

func (m *memAudit) AppendAudit(_ context.Context, ev json.RawMessage) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return 0, m.fail
	}
	var e AuditEvent
	if err := json.Unmarshal(ev, &e); err != nil {
		return 0, err
	}
	m.events = append(m.events, e)
	m.raw = append(m.raw, string(ev))
	return uint64(len(m.events)), nil
}

func (m *memAudit) last() AuditEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.events[len(m.events)-1]
}

// noteTool writes a note (a pretend side effect) under notes/.
type noteTool struct {
	audit     *memAudit
	runs      int
	sawIntent bool
	output    string
	panics    bool
}

func (n *noteTool) Spec() tool.Spec {
	return tool.Spec{Name: "note", Description: "write a note", InputSchema: json.RawMessage(`{
		"type":"object","properties":{"name":{"type":"string","minLength":1},"text":{"type":"string"},
		"meta":{"type":"object","properties":{"tag":{"type":"string"}},"additionalProperties":false}},
		"required":["name"],"additionalProperties":false}`),
		Capabilities: []capability.Kind{capability.FSWrite}}
}

type noteArgs struct {
	Name string `json:"name"`
	Text string `json:"text"`
	Meta *struct {
		Tag string `json:"tag"`
	} `json:"meta"`
}

func (n *noteTool) Needs(c *tool.Call) ([]capability.Need, error) {
	var a noteArgs
	if err := c.Bind(&a); err != nil {
		return nil, err
	}
	if strings.Contains(a.Name, "/") {
		return nil, tool.Errorf(tool.CodePathEscape, "", "name %q has a slash", a.Name)
	}
	return []capability.Need{{Kind: capability.FSWrite, Resource: c.Workspace + "/notes/" + a.Name}}, nil
}

func (n *noteTool) Preview(ctx context.Context, c *tool.Call) tool.Outcome {
	var a noteArgs
	_ = c.Bind(&a)
	return tool.Outcome{Output: "would write notes/" + a.Name + ": " + a.Text}
}

func (n *noteTool) Run(ctx context.Context, c *tool.Call) tool.Outcome {
	if n.panics {
		panic("boom")
	}
	n.runs++
	if n.audit != nil && len(n.audit.events) > 0 {
		last := n.audit.last()
		n.sawIntent = last.Phase == PhaseIntent && last.CallID == c.ID
	}
	var a noteArgs
	_ = c.Bind(&a)
	out := "wrote notes/" + a.Name + ": " + a.Text
	if n.output != "" {
		out = n.output
	}
	return tool.Outcome{Output: out, Data: map[string]any{"name": a.Name, "echo": a.Text}}
}

type fixedApprover struct {
	ok   bool
	err  error
	seen []ApprovalRequest
}

func (f *fixedApprover) Approve(_ context.Context, r ApprovalRequest) (Approval, error) {
	f.seen = append(f.seen, r)
	return Approval{Approved: f.ok}, f.err
}

func newTestGate(t *testing.T, policyYAML string, o GateOptions) (*Gate, *noteTool, *memAudit) {
	t.Helper()
	p, err := policy.ParsePolicy("test", []byte(policyYAML))
	if err != nil {
		t.Fatal(err)
	}
	audit := &memAudit{}
	nt := &noteTool{audit: audit}
	reg := NewRegistry()
	if err := reg.Register(nt); err != nil {
		t.Fatal(err)
	}
	o.Registry, o.Policy, o.Audit = reg, p, audit
	if o.Workspace == "" {
		o.Workspace = "/ws"
	}
	g, err := NewGate(o)
	if err != nil {
		t.Fatal(err)
	}
	return g, nt, audit
}

const notesPolicy = "version: 1\ngrants: [\"fs.write:notes/**\"]\n"

func call(t *testing.T, g *Gate, args string) tool.Result {
	t.Helper()
	res, err := g.Call(context.Background(), Request{Tool: "note", Args: json.RawMessage(args), Principal: []string{"test"}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestGateAllowsAndAuditsIntentBeforeRun(t *testing.T) {
	g, nt, audit := newTestGate(t, notesPolicy, GateOptions{})
	res := call(t, g, `{"name":"a","text":"hi"}`)
	if !res.Success || res.Output != "wrote notes/a: hi" || nt.runs != 1 {
		t.Fatalf("got %+v runs=%d", res, nt.runs)
	}
	if !nt.sawIntent {
		t.Fatal("the tool ran before its intent record was written")
	}
	if len(audit.events) != 2 || audit.events[0].Phase != PhaseIntent || audit.events[1].Phase != PhaseResult {
		t.Fatalf("audit: %+v", audit.events)
	}
	r := audit.events[1]
	if r.IntentSeq != 1 || r.Outcome != "ok" || r.Decision.Action != policy.ActionAllow || r.Decision.Grants[0] != "fs.write:notes/**" || !strings.HasPrefix(r.Digest, "sha256:") {
		t.Fatalf("result record: %+v", r)
	}
	if res.AuditSeq != 2 || string(res.Data) != `{"echo":"hi","name":"a"}` {
		t.Fatalf("envelope: %+v", res)
	}
}

func TestGateRefusals(t *testing.T) {
	tests := []struct {
		name, policy, tool, args string
		code                     tool.Code
		hint                     string
	}{
		{"unknown tool", notesPolicy, "nope", `{}`, tool.CodeUnknownTool, "warden tools"},
		{"invalid json", notesPolicy, "note", `{"name":`, tool.CodeInvalidInput, ""},
		{"schema: missing required", notesPolicy, "note", `{}`, tool.CodeInvalidInput, ""},
		{"schema: unknown field", notesPolicy, "note", `{"name":"a","x":1}`, tool.CodeInvalidInput, ""},
		{"schema: case variant", notesPolicy, "note", `{"Name":"a"}`, tool.CodeInvalidInput, ""},
		{"schema: nested unknown", notesPolicy, "note", `{"name":"a","meta":{"Tag":"x"}}`, tool.CodeInvalidInput, ""},
		{"duplicate key", notesPolicy, "note", `{"name":"a","name":"b"}`, tool.CodeInvalidInput, ""},
		{"policy deny", notesPolicy + "rules: [{tool: note, action: deny}]\n", "note", `{"name":"a"}`, tool.CodePolicyDenied, "change its rule"},
		{"needs refuses", notesPolicy, "note", `{"name":"a/b"}`, tool.CodePathEscape, ""},
		{"no grant", "version: 1\n", "note", `{"name":"a"}`, tool.CodeCapabilityDenied, "needs the grant fs.write:notes/a"},
		{"approval, never", notesPolicy + "rules: [{tool: note, action: allow, require_approval: true}]\n", "note", `{"name":"a"}`, tool.CodeApprovalRequired, "needs approval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, nt, audit := newTestGate(t, tt.policy, GateOptions{})
			res, err := g.Call(context.Background(), Request{Tool: tt.tool, Args: json.RawMessage(tt.args), Principal: []string{"test"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Success || res.Error.Code != tt.code || !strings.Contains(res.Error.Hint, tt.hint) {
				t.Fatalf("want %s (hint %q), got %+v", tt.code, tt.hint, res.Error)
			}
			// The refusal carries what is missing as data, for each front
			// end to word.
			switch tt.code {
			case tool.CodeCapabilityDenied:
				if !slices.Equal(res.Error.Missing, []string{"fs.write:notes/a"}) || res.Error.Approval != nil {
					t.Fatalf("missing grants: %+v", res.Error)
				}
			case tool.CodeApprovalRequired:
				if a := res.Error.Approval; a == nil || a.Mode != tool.ApproveNever || !strings.Contains(a.Rule, "require_approval") || a.Failed != "" || res.Error.Missing != nil {
					t.Fatalf("approval: %+v", res.Error)
				}
			default:
				if res.Error.Missing != nil || res.Error.Approval != nil {
					t.Fatalf("%s with data: %+v", tt.code, res.Error)
				}
			}
			if nt.runs != 0 {
				t.Fatal("the tool ran")
			}
			if len(audit.events) != 1 || audit.events[0].Phase != PhaseResult || audit.events[0].Outcome != string(tt.code) {
				t.Fatalf("a refused call must leave exactly one result record: %+v", audit.events)
			}
		})
	}
}

func TestGateApproval(t *testing.T) {
	pol := notesPolicy + "rules: [{tool: note, action: allow, require_approval: true, dry_run_first: true}]\n"
	t.Run("auto", func(t *testing.T) {
		g, nt, audit := newTestGate(t, pol, GateOptions{Approval: tool.ApproveAuto})
		if res := call(t, g, `{"name":"a"}`); !res.Success || nt.runs != 1 {
			t.Fatalf("%+v", res)
		}
		if d := audit.last().Decision; d.Approval != ApprovalAuto || d.Approver != "auto" {
			t.Fatalf("decision %+v", d)
		}
		if audit.events[0].Preview != "would write notes/a: " {
			t.Fatalf("the intent should carry the preview: %+v", audit.events[0])
		}
	})
	t.Run("ask: yes, with the preview", func(t *testing.T) {
		ap := &fixedApprover{ok: true}
		g, nt, _ := newTestGate(t, pol, GateOptions{Approval: tool.ApproveAsk, Approver: ap})
		if res := call(t, g, `{"name":"a","text":"x"}`); !res.Success || nt.runs != 1 {
			t.Fatalf("%+v", res)
		}
		if len(ap.seen) != 1 || ap.seen[0].Preview == nil || ap.seen[0].Preview.Output != "would write notes/a: x" {
			t.Fatalf("approver saw %+v", ap.seen)
		}
	})
	t.Run("ask: no", func(t *testing.T) {
		g, nt, _ := newTestGate(t, pol, GateOptions{Approval: tool.ApproveAsk, Approver: &fixedApprover{ok: false}})
		if res := call(t, g, `{"name":"a"}`); res.Error.Code != tool.CodeUserRejected || nt.runs != 0 {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("ask: cancelled", func(t *testing.T) {
		g, nt, _ := newTestGate(t, pol, GateOptions{Approval: tool.ApproveAsk, Approver: &fixedApprover{err: ErrCancelled}})
		if res := call(t, g, `{"name":"a"}`); res.Error.Code != tool.CodeUserCancelled || nt.runs != 0 {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("ask without an approver fails closed", func(t *testing.T) {
		g, nt, _ := newTestGate(t, pol, GateOptions{Approval: tool.ApproveAsk})
		if res := call(t, g, `{"name":"a"}`); res.Error.Code != tool.CodeApprovalRequired || nt.runs != 0 {
			t.Fatalf("%+v", res)
		}
	})
}

func TestGateDryRun(t *testing.T) {
	g, nt, audit := newTestGate(t, notesPolicy, GateOptions{DryRun: true})
	res := call(t, g, `{"name":"a","text":"x"}`)
	if !res.Success || !res.DryRun || res.Output != "would write notes/a: x" || nt.runs != 0 {
		t.Fatalf("%+v runs=%d", res, nt.runs)
	}
	if len(audit.events) != 1 || !audit.events[0].DryRun {
		t.Fatalf("%+v", audit.events)
	}
	// A dry run is still refused without the grant: it would reveal what the call touches.
	g2, _, _ := newTestGate(t, "version: 1\n", GateOptions{})
	res, _ = g2.Call(context.Background(), Request{Tool: "note", Args: json.RawMessage(`{"name":"a"}`), DryRun: true})
	if res.Error == nil || res.Error.Code != tool.CodeCapabilityDenied {
		t.Fatalf("%+v", res)
	}
}

func TestGateRestrictNeverWidens(t *testing.T) {
	g, nt, _ := newTestGate(t, notesPolicy, GateOptions{})
	wide := capability.NewSet("/ws", capability.MustParse("fs.write:**"))
	res, _ := g.Call(context.Background(), Request{Tool: "note", Args: json.RawMessage(`{"name":"a"}`), Restrict: &wide})
	if !res.Success {
		t.Fatalf("restricting to a wider set keeps the gate's grants: %+v", res)
	}
	narrow := capability.NewSet("/ws", capability.MustParse("fs.write:other/**"))
	res, _ = g.Call(context.Background(), Request{Tool: "note", Args: json.RawMessage(`{"name":"a"}`), Restrict: &narrow})
	if res.Error == nil || res.Error.Code != tool.CodeCapabilityDenied || nt.runs != 1 {
		t.Fatalf("%+v", res)
	}
}

func TestGateRedactsBeforeWriting(t *testing.T) {
	const secret = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123"
	g, _, audit := newTestGate(t, notesPolicy, GateOptions{})
	res := call(t, g, `{"name":"a","text":"token `+secret+`"}`)
	blob, _ := json.Marshal(res)
	if strings.Contains(string(blob), secret) {
		t.Fatalf("secret in the envelope: %s", blob)
	}
	for _, raw := range audit.raw {
		if strings.Contains(raw, secret) {
			t.Fatalf("secret in the audit log: %s", raw)
		}
	}
	// Refused calls with undecodable arguments are recorded redacted too.
	res, _ = g.Call(context.Background(), Request{Tool: "note", Args: json.RawMessage(`{"name": "` + secret)})
	if res.Error.Code != tool.CodeInvalidInput || strings.Contains(audit.raw[len(audit.raw)-1], secret) {
		t.Fatalf("%+v / %s", res, audit.raw[len(audit.raw)-1])
	}
}

// pathTool reads a file: its need is the path, cleaned (a URL's "//" in a
// path becomes "/").
type pathTool struct{ noteTool }

func (*pathTool) Spec() tool.Spec {
	return tool.Spec{Name: "readpath", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},
		"required":["path"],"additionalProperties":false}`), Capabilities: []capability.Kind{capability.FSRead}}
}

func (*pathTool) Needs(c *tool.Call) ([]capability.Need, error) {
	var a struct {
		Path string `json:"path"`
	}
	if err := c.Bind(&a); err != nil {
		return nil, err
	}
	return []capability.Need{{Kind: capability.FSRead, Resource: path.Clean(c.Workspace + "/" + a.Path)}}, nil
}

// TestGateMasksArgumentSecretsWhereverRepeated: a secret found in a call's
// arguments is masked wherever its record or its outcome repeats it, also
// in a form the patterns do not know — the path of a capability, cleaned of
// a URL's "//" (postgres:/app:PASSWORD@db), in the audit record's needs and
// in the refusal that names them; and arguments refused by the schema are
// redacted as JSON, a value's escapes read as its text (secrets at scale,
// cmd/warden).
func TestGateMasksArgumentSecretsWhereverRepeated(t *testing.T) {
	const password = "bVrXfvZOh9nclgWmVy4T"
	g, _, audit := newTestGate(t, notesPolicy, GateOptions{})
	if err := g.Registry().Register(&pathTool{}); err != nil {
		t.Fatal(err)
	}
	res, err := g.Call(context.Background(), Request{Tool: "readpath", Principal: []string{"test"},
		Args: json.RawMessage(`{"path":"missing/DATABASE_URL=postgres://app:` + password + `@db.internal:5432/prod"}`)})
	if err != nil {
		t.Fatal(err)
	}
	blob, _ := json.Marshal(res)
	if res.Error == nil || res.Error.Code != tool.CodeCapabilityDenied || !strings.Contains(res.Error.Message, "postgres:/app:[REDACTED:url-password:") {
		t.Fatalf("the refusal: %s", blob)
	}
	if strings.Contains(string(blob), password) {
		t.Fatalf("the secret in the envelope: %s", blob)
	}
	if ev := audit.last(); len(ev.Needs) != 1 || !strings.Contains(ev.Needs[0], "postgres:/app:[REDACTED]@db") {
		t.Fatalf("needs on record: %q", ev.Needs)
	}
	// A grant suggested for the path would spell the secret as a glob
	// ("\\", "*" and "!" as "?": A7V?2ITa…): none is.
	const escaped = `A7V*2ITaCbre9aCW^5QD!`
	res, err = g.Call(context.Background(), Request{Tool: "readpath", Principal: []string{"test"},
		Args: json.RawMessage(`{"path":"/outside/\"SMTP_PASSWORD=\\\"` + escaped + `\\\"\""}`)})
	if err != nil {
		t.Fatal(err)
	}
	blob, _ = json.Marshal(res)
	if res.Error == nil || res.Error.Code != tool.CodeCapabilityDenied || strings.Contains(string(blob), "2ITaCbre9a") || len(res.Error.Missing) != 0 {
		t.Fatalf("the refusal: %s", blob)
	}
	// Refused by the schema (no name): the arguments are kept as text,
	// redacted as JSON — the secret is in a JSON string inside the text —
	// and only then cut to maxArgsText.
	const awsSecret = "cJFDhQUMHL3qflidyChlZu6mqIyRS463IktAQSIC"
	inner, _ := json.Marshal(`{"SecretAccessKey": "` + awsSecret + `"}`)
	args, _ := json.Marshal(map[string]string{"text": string(inner) + strings.Repeat(" and more", maxArgsText/8)})
	res = call(t, g, string(args))
	if res.Error == nil || res.Error.Code != tool.CodeInvalidInput {
		t.Fatalf("%+v", res)
	}
	// Not JSON, a token across the cut: redacted before it is cut.
	const token = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123"
	res = call(t, g, `{"name": "`+strings.Repeat("x", maxArgsText-20)+" "+token)
	if res.Error == nil || res.Error.Code != tool.CodeInvalidInput {
		t.Fatalf("%+v", res)
	}
	if ev := audit.last(); len(ev.ArgsText) > maxArgsText || !strings.HasSuffix(ev.ArgsText, "x [REDACTED") {
		t.Fatalf("args text %d bytes, ending %q", len(ev.ArgsText), ev.ArgsText[max(len(ev.ArgsText)-40, 0):])
	}
	for _, raw := range audit.raw {
		if strings.Contains(raw, password) || strings.Contains(raw, awsSecret) || strings.Contains(raw, token[:12]) {
			t.Fatalf("a secret in the audit log: %s", raw)
		}
	}
}

func TestGateAuditFailureStopsTheCall(t *testing.T) {
	g, nt, audit := newTestGate(t, notesPolicy, GateOptions{})
	audit.fail = errors.New("disk full")
	_, err := g.Call(context.Background(), Request{Tool: "note", Args: json.RawMessage(`{"name":"a"}`)})
	if !errors.Is(err, tool.ErrAudit) || nt.runs != 0 {
		t.Fatalf("err=%v runs=%d", err, nt.runs)
	}
}

func TestGatePanicIsInternal(t *testing.T) {
	g, nt, audit := newTestGate(t, notesPolicy, GateOptions{})
	nt.panics = true
	res := call(t, g, `{"name":"a"}`)
	if res.Error.Code != tool.CodeInternal || audit.last().Outcome != string(tool.CodeInternal) {
		t.Fatalf("%+v", res)
	}
}

func TestGateCapsOutput(t *testing.T) {
	g, nt, _ := newTestGate(t, notesPolicy, GateOptions{})
	nt.output = strings.Repeat("é", MaxOutputBytes)
	res := call(t, g, `{"name":"a"}`)
	if len(res.Output) > MaxOutputBytes+100 || !strings.Contains(res.Output, "[output truncated") {
		t.Fatalf("output not capped: %d bytes", len(res.Output))
	}
}

func TestRegistryRefusals(t *testing.T) {
	reg := NewRegistry()
	if err := reg.Register(&noteTool{}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(&noteTool{}); err == nil || !strings.Contains(err.Error(), "already taken") {
		t.Fatalf("collision: %v", err)
	}
	if err := reg.Alias("write_note", "note"); err != nil {
		t.Fatal(err)
	}
	if tl, ok := reg.Lookup("write_note"); !ok || tl.Spec().Name != "note" {
		t.Fatal("alias lookup")
	}
	if err := reg.Register(&openTool{}); err == nil || !strings.Contains(err.Error(), "additionalProperties") {
		t.Fatalf("open schema accepted: %v", err)
	}
}

type openTool struct{ noteTool }

func (*openTool) Spec() tool.Spec {
	return tool.Spec{Name: "open", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"object","properties":{}}},"additionalProperties":false}`)}
}

// A rule written for an alias binds the tool under every name, and the
// reverse: calling by the other name cannot dodge it.
func TestGateRulesBindAliases(t *testing.T) {
	for _, tt := range []struct{ rule, call string }{{"write_note", "note"}, {"note", "write_note"}, {"write_note", "write_note"}} {
		g, nt, _ := newTestGate(t, notesPolicy+"rules: [{tool: "+tt.rule+", action: deny}]\n", GateOptions{})
		if err := g.Registry().Alias("write_note", "note"); err != nil {
			t.Fatal(err)
		}
		res, _ := g.Call(context.Background(), Request{Tool: tt.call, Args: json.RawMessage(`{"name":"a"}`)})
		if res.Error == nil || res.Error.Code != tool.CodePolicyDenied || nt.runs != 0 {
			t.Fatalf("rule %s, call %s: %+v", tt.rule, tt.call, res)
		}
	}
}

func TestGateRedactsUnknownToolNames(t *testing.T) {
	g, _, audit := newTestGate(t, notesPolicy, GateOptions{})
	const secret = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef0123"
	res, _ := g.Call(context.Background(), Request{Tool: secret + strings.Repeat("x", 500), Args: json.RawMessage(`{}`)})
	if res.Error.Code != tool.CodeUnknownTool || strings.Contains(audit.raw[0], secret) || len(res.Tool) > 128 {
		t.Fatalf("%+v / %s", res, audit.raw[0])
	}
}

// TestGateOffered: a call limited to the tools a run offers cannot reach
// another tool; the refusal is audited like any other.
func TestGateOffered(t *testing.T) {
	g, nt, audit := newTestGate(t, notesPolicy, GateOptions{})
	req := Request{Tool: "note", Args: json.RawMessage(`{"name":"a"}`), Principal: []string{"test"}, Offered: map[string]bool{"other": true}}
	res, err := g.Call(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Success || res.Error.Code != tool.CodeUnknownTool || nt.runs != 0 {
		t.Fatalf("got %+v, runs %d", res.Error, nt.runs)
	}
	if len(audit.events) != 1 || audit.events[0].Outcome != string(tool.CodeUnknownTool) {
		t.Fatalf("audit: %+v", audit.events)
	}
	req.Offered = map[string]bool{"note": true}
	if res, err := g.Call(context.Background(), req); err != nil || !res.Success || nt.runs != 1 {
		t.Fatalf("offered: %+v %v", res, err)
	}
}
