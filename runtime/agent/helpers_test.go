package agent_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenrt/warden/builtin/fs"
	"github.com/wardenrt/warden/builtin/memory"
	"github.com/wardenrt/warden/builtin/shell"
	"github.com/wardenrt/warden/internal/llmtest"
	"github.com/wardenrt/warden/runtime/agent"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/runtimetest"
)

// auditEvent returns the audit record with sequence number seq.
func auditEvent(t *testing.T, a *runtimetest.Audit, seq uint64) gate.AuditEvent {
	t.Helper()
	e, ok := a.Event(seq)
	if !ok {
		t.Fatalf("no audit record %d", seq)
	}
	return e
}

// savedRun returns the record of run id as saved, decoded and raw.
func savedRun(t *testing.T, r *runtimetest.Runs, id string) (*agent.Record, string) {
	t.Helper()
	doc, ok := r.Run(id)
	if !ok {
		t.Fatalf("run %s was not recorded", id)
	}
	var rec agent.Record
	if err := json.Unmarshal(doc, &rec); err != nil {
		t.Fatal(err)
	}
	return &rec, string(doc)
}

// env is a workspace, a gate over warden's fs, shell and memory tools with
// an in-memory audit log, and the stores a run writes to.
type env struct {
	t     *testing.T
	ws    string
	audit *runtimetest.Audit
	runs  *runtimetest.Runs
	arts  *runtimetest.Artifacts
	mem   *runtimetest.Memory
	reg   *gate.Registry
}

// basePolicy grants reading the workspace, writing under notes/, running
// sleep, and the run's own context.
const basePolicy = `version: 1
grants: ["fs.read:**", "fs.write:notes/**", "exec:sleep", "memory.read:*", "memory.write:*"]
`

func newEnv(t *testing.T) *env {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ws: ws, audit: &runtimetest.Audit{}, runs: &runtimetest.Runs{}, arts: &runtimetest.Artifacts{}, mem: &runtimetest.Memory{}}
	e.reg = gate.NewRegistry()
	tools := append(fs.Tools(), shell.Tools()...)
	tools = append(tools, memory.Tools(memory.Config{Memory: e.mem})...)
	if err := e.reg.Register(tools...); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) write(name, content string) {
	e.t.Helper()
	runtimetest.WriteFile(e.t, e.ws, name, content)
}

func (e *env) gate(policyYAML string) *gate.Gate {
	e.t.Helper()
	p, err := policy.ParsePolicy("test", []byte(policyYAML))
	if err != nil {
		e.t.Fatal(err)
	}
	g, err := gate.NewGate(gate.GateOptions{Registry: e.reg, Policy: p, Workspace: e.ws, Audit: e.audit})
	if err != nil {
		e.t.Fatal(err)
	}
	return g
}

// model is the OpenAI model on srv, with quick retries.
func model(t *testing.T, srv *llmtest.Server, stream bool) *agent.OpenAI {
	t.Helper()
	m, err := agent.NewOpenAI(agent.OpenAIConfig{
		BaseURL: srv.URL, APIKey: "sk-test-0123456789abcdefghijklmnop", Model: "scripted", Stream: stream,
		Retries: 3, BaseDelay: time.Millisecond, MaxDelay: 50 * time.Millisecond, AttemptTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// options are a run's options on e, the gate of policy and srv's model.
func (e *env) options(policy string, srv *llmtest.Server, stream bool, task string) agent.Options {
	o := agent.Options{
		Gate: e.gate(policy), Task: task, ModelName: "scripted", Endpoint: "127.0.0.1",
		Runs: e.runs, Artifacts: e.arts, Memory: e.mem,
	}
	if srv != nil {
		o.Model = model(e.t, srv, stream)
	}
	return o
}

// toolMessages returns the contents of the tool messages of a request.
func toolMessages(req []agent.Message) []string {
	var out []string
	for _, m := range req {
		if m.Role == "tool" {
			out = append(out, m.Content)
		}
	}
	return out
}

// lastTool returns the content of the last tool message of a request.
func lastTool(req []agent.Message) string {
	tm := toolMessages(req)
	if len(tm) == 0 {
		return ""
	}
	return tm[len(tm)-1]
}

func call(name, args string) llmtest.ToolCall { return llmtest.ToolCall{Name: name, Arguments: args} }

func contains(t testing.TB, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s does not contain %q:\n%s", what, sub, s)
		}
	}
}

func notContains(t testing.TB, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			t.Errorf("%s contains %q:\n%s", what, sub, s)
		}
	}
}
