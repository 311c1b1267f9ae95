package hostfuncs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	extism "github.com/extism/go-sdk"

	"github.com/wardenrt/warden/hostfuncs"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/tool"
)

var notesGrants = []string{"memory.write:notes", "memory.read:notes"}

func TestFunctionsSignature(t *testing.T) {
	fs := hostfuncs.Functions()
	want := []string{"warden_call", "warden_buffer", "warden_call_buffer"}
	if len(fs) != len(want) {
		t.Fatalf("Functions() = %d functions, want %d", len(fs), len(want))
	}
	for i, f := range fs {
		if f.Namespace != "warden" || hostfuncs.ModuleName != "warden" || f.Name != want[i] {
			t.Fatalf("got %s.%s, want warden.%s", f.Namespace, f.Name, want[i])
		}
		if len(f.Params) != 1 || f.Params[0] != extism.ValueTypeI64 || len(f.Returns) != 1 || f.Returns[0] != extism.ValueTypeI64 {
			t.Fatalf("%s: signature (%v) → (%v), want (i64) → i64", f.Name, f.Params, f.Returns)
		}
	}
}

// TestNotesThroughGate runs examples/notes: its write_memory and
// query_memory calls go through the gate with run ∩ tool grants.
func TestNotesThroughGate(t *testing.T) {
	cp := compile(t, "examples/notes", nil)
	tests := []struct {
		name       string
		run, tool  []string
		wantDenied bool
	}{
		{"both grant", notesGrants, notesGrants, false},
		{"run only", notesGrants, nil, true},
		{"tool only", nil, notesGrants, true},
		{"run grants another namespace", []string{"memory.write:other", "memory.read:other"}, notesGrants, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, append([]string{"memory.write:other", "memory.read:other"}, notesGrants...))
			g := e.guest(t, "notes", tc.run, tc.tool)
			out, err := run(t, cp, g, `{"op":"add","key":"k1","text":"buy oat milk and coffee"}`, 20*time.Second)
			if tc.wantDenied {
				if err == nil || !strings.Contains(err.Error(), "CAPABILITY_DENIED") {
					t.Fatalf("add: out %q, err %v; want CAPABILITY_DENIED", out, err)
				}
				ev := wantAudit(t, e.audit, "write_memory", "CAPABILITY_DENIED")
				if ev.Decision == nil || ev.Decision.Action != policy.ActionDeny {
					t.Errorf("decision = %+v, want deny", ev.Decision)
				}
				if _, err := e.mem.GetMemory(context.Background(), "notes", "k1"); !errors.Is(err, gate.ErrNotFound) {
					t.Errorf("the note was stored anyway: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("add: %v", err)
			}
			var added struct{ Namespace, Key string }
			if err := json.Unmarshal([]byte(out), &added); err != nil || added.Namespace != "notes" || added.Key != "k1" {
				t.Fatalf("add output %q (%v)", out, err)
			}
			ev := wantAudit(t, e.audit, "write_memory", "ok")
			if len(ev.Needs) != 1 || ev.Needs[0] != "memory.write:notes" {
				t.Errorf("audit needs = %v", ev.Needs)
			}
			out, err = run(t, cp, g, `{"op":"search","query":"coffee"}`, 20*time.Second)
			if err != nil {
				t.Fatalf("search: %v", err)
			}
			var found struct {
				Notes []struct{ Key, Text string }
			}
			if err := json.Unmarshal([]byte(out), &found); err != nil || len(found.Notes) != 1 || found.Notes[0].Key != "k1" {
				t.Fatalf("search output %q (%v)", out, err)
			}
			wantAudit(t, e.audit, "query_memory", "ok")
		})
	}
}

// fakeTool is a tool whose behaviour the test decides.
type fakeTool struct {
	spec tool.Spec
	run  func(ctx context.Context, c *tool.Call) tool.Outcome
}

func (f *fakeTool) Spec() tool.Spec                             { return f.spec }
func (f *fakeTool) Needs(*tool.Call) ([]capability.Need, error) { return nil, nil }
func (f *fakeTool) Preview(context.Context, *tool.Call) tool.Outcome {
	return tool.Outcome{Output: "preview"}
}
func (f *fakeTool) Run(ctx context.Context, c *tool.Call) tool.Outcome {
	if f.run == nil {
		return tool.Outcome{Output: "ran"}
	}
	return f.run(ctx, c)
}

// fakeWriteMemory is a tool named write_memory with write_memory's schema.
func fakeWriteMemory(wasm string, run func(ctx context.Context, c *tool.Call) tool.Outcome) *fakeTool {
	return &fakeTool{spec: tool.Spec{
		Name: "write_memory", Description: "fake", Wasm: wasm,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"key":{"type":"string"},"value":{"type":"string"},"namespace":{"type":"string"}},"additionalProperties":false}`),
	}, run: run}
}

func TestGuestCannotCallWasmTool(t *testing.T) {
	cp := compile(t, "examples/notes", nil)
	ran := false
	e := newEnv(t, notesGrants, fakeWriteMemory("evil.wasm", func(context.Context, *tool.Call) tool.Outcome {
		ran = true
		return tool.Outcome{Output: "ran"}
	}))
	g := e.guest(t, "notes", notesGrants, notesGrants)
	_, err := run(t, cp, g, `{"op":"add","key":"k","text":"t"}`, 20*time.Second)
	if err == nil || !strings.Contains(err.Error(), "OPERATION_NOT_SUPPORTED") {
		t.Fatalf("err %v, want OPERATION_NOT_SUPPORTED", err)
	}
	if ran {
		t.Fatal("the wasm tool ran")
	}
	wantAudit(t, e.audit, "write_memory", "OPERATION_NOT_SUPPORTED")
}

// TestHostTimeout: the host call's own deadline (Guest.HostTimeout) ends a
// slow core call although the guest's deadline is far away.
func TestHostTimeout(t *testing.T) {
	cp := compile(t, "examples/notes", nil)
	const hostTimeout = 300 * time.Millisecond
	var (
		mu       sync.Mutex
		started  time.Time
		deadline time.Time
	)
	e := newEnv(t, notesGrants, fakeWriteMemory("", func(ctx context.Context, _ *tool.Call) tool.Outcome {
		mu.Lock()
		started = time.Now()
		deadline, _ = ctx.Deadline()
		mu.Unlock()
		select {
		case <-ctx.Done():
			return tool.Fail(tool.CodeTimeout, "", "write_memory: %v", ctx.Err())
		case <-time.After(30 * time.Second):
			return tool.Outcome{Output: "too late"}
		}
	}))
	g := e.guest(t, "notes", notesGrants, notesGrants)
	g.HostTimeout = hostTimeout
	_, err := run(t, cp, g, `{"op":"add","key":"k","text":"t"}`, 20*time.Second)
	end := time.Now()
	if err == nil || !strings.Contains(err.Error(), "TIMEOUT") {
		t.Fatalf("err %v, want the core call's TIMEOUT", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if deadline.IsZero() || deadline.Sub(started) > hostTimeout {
		t.Errorf("the core call's deadline is %v after it started, want ≤ %v", deadline.Sub(started), hostTimeout)
	}
	if took := end.Sub(started); took > hostTimeout+slack {
		t.Errorf("the guest call ended %v after the core call started; want ≤ %v + %v", took, hostTimeout, slack)
	}
	wantAudit(t, e.audit, "write_memory", "TIMEOUT")
}

// ---------------------------------------------------------------- raw requests

// substKey carries, in a guest call's context, the request the test
// warden_call hands to the real implementation instead of the guest's.
type substKey struct{}

type subst struct {
	req    []byte                               // the request block's content
	offset func(p *extism.CurrentPlugin) uint64 // or: the offset to pass (bad offsets)
	// results
	ret        uint64
	envelope   []byte
	inputAlive bool // the request block was still allocated after the call
}

// substFunctions is warden_call as the test drives it: the guest's own
// request is ignored; the one in the context's subst is written to a block
// of the guest's memory and handed to hostfuncs.WardenCall. warden_buffer
// and warden_call_buffer answer 0, so the guest sends through warden_call.
func substFunctions() []extism.HostFunction {
	f := extism.NewHostFunctionWithStack("warden_call", func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
		s := ctx.Value(substKey{}).(*subst)
		var off uint64
		if s.offset != nil {
			off = s.offset(p)
		} else {
			var err error
			if off, err = p.WriteBytes(s.req); err != nil {
				panic(err)
			}
		}
		s.ret = hostfuncs.WardenCall(ctx, p, off)
		if s.offset == nil {
			n, _ := p.Length(off)
			s.inputAlive = n == uint64(len(s.req))
			_ = p.Free(off)
		}
		if s.ret != 0 {
			s.envelope, _ = p.ReadBytes(s.ret)
		}
		stack[0] = s.ret
	}, []extism.ValueType{extism.ValueTypeI64}, []extism.ValueType{extism.ValueTypeI64})
	f.SetNamespace(hostfuncs.ModuleName)
	return append(playFunctions()[1:], f)
}

// callRaw runs notes once (one warden_call), substituting s, and returns
// the envelope warden_call produced (nil for offset 0).
func callRaw(t *testing.T, cp *extism.CompiledPlugin, g *gate.Guest, s *subst) *tool.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := cp.Instance(ctx, extism.PluginInstanceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	ctx = context.WithValue(ctx, substKey{}, s)
	if g != nil {
		ctx = gate.WithGuest(ctx, g)
	}
	_, _, err = p.CallWithContext(ctx, "call", []byte(`{"op":"add","key":"k","text":"t"}`))
	if s.ret == 0 {
		if err == nil {
			t.Fatal("warden_call returned 0 and the guest did not fail")
		}
		return nil
	}
	var res tool.Result
	if err := json.Unmarshal(s.envelope, &res); err != nil {
		t.Fatalf("envelope %q: %v", s.envelope, err)
	}
	return &res
}

// requestCase is a warden_call request and what it must give.
type requestCase struct {
	name      string
	req       string
	grants    []string // guest grants (run and tool); default system.info
	code      tool.Code
	msg       string // substring of the error message
	auditTool string // the tool the audit record names; "-" = no record
}

// requestCases are the requests of TestWardenCallRequests and
// TestBufferRequests.
func requestCases() []requestCase {
	huge := `{"tool":"system","args":{"operation":"` + strings.Repeat("x", 1<<20+8<<10) + `"}}`
	return []requestCase{
		{"ok", `{"tool":"system","args":{"operation":"get_info"}}`, nil, "", "", "system"},
		{"ok with whitespace and escapes", " {\"args\" : {\"operation\":\"get_info\"}, \"t\\u006fol\":\"system\"}\n", nil, "", "", "system"},
		{"denied", `{"tool":"system","args":{"operation":"get_info"}}`, []string{"memory.read:notes"}, tool.CodeCapabilityDenied, "system.info", "system"},
		{"unknown tool", `{"tool":"nope","args":{}}`, nil, tool.CodeUnknownTool, `no tool named "nope"`, "nope"},
		{"wasm tool", `{"tool":"evilwasm","args":{}}`, nil, tool.CodeOperationNotSupported, "wasm tool", "evilwasm"},
		{"args an array", `{"tool":"system","args":[1]}`, nil, tool.CodeInvalidInput, "must be a JSON object", "system"},
		{"args null", `{"tool":"system","args":null}`, nil, tool.CodeInvalidInput, "must be a JSON object", "system"},
		{"args a string", `{"tool":"system","args":"{\"operation\":\"get_info\"}"}`, nil, tool.CodeInvalidInput, "must be a JSON object", "system"},
		{"duplicate key in args", `{"tool":"system","args":{"operation":"get_info","operation":"get_status"}}`, nil, tool.CodeInvalidInput, "duplicate key", "system"},
		{"duplicate tool", `{"tool":"system","tool":"system","args":{"operation":"get_info"}}`, nil, tool.CodeInvalidInput, `"tool" is given twice`, "system"},
		{"duplicate args", `{"tool":"system","args":{"operation":"get_info"},"args":{"operation":"get_info"}}`, nil, tool.CodeInvalidInput, `"args" is given twice`, "system"},
		{"unknown field", `{"tool":"system","args":{"operation":"get_info"},"dry_run":false}`, nil, tool.CodeInvalidInput, `unknown field "dry_run"`, "system"},
		{"case variant", `{"Tool":"system","args":{"operation":"get_info"}}`, nil, tool.CodeUnknownTool, `unknown field "Tool"`, ""},
		{"args missing", `{"tool":"system"}`, nil, tool.CodeInvalidInput, `"args" is missing`, "system"},
		{"tool missing", `{"args":{}}`, nil, tool.CodeUnknownTool, `"tool" is missing`, ""},
		{"tool not a string", `{"tool":["system"],"args":{}}`, nil, tool.CodeUnknownTool, `"tool" is not a string`, ""},
		{"not JSON", `system get_info`, nil, tool.CodeUnknownTool, "not JSON", ""},
		{"not an object", `["system",{}]`, nil, tool.CodeUnknownTool, "not a JSON object", ""},
		{"truncated", `{"tool":"system","args":{"operation":"get_info"}`, nil, tool.CodeInvalidInput, "not valid JSON", "system"},
		{"trailing data", `{"tool":"system","args":{"operation":"get_info"}} {}`, nil, tool.CodeInvalidInput, "after the request", "system"},
		{"invalid UTF-8", "{\"tool\":\"system\",\"args\":{\"operation\":\"get_info\xff\"}}", nil, tool.CodeUnknownTool, "UTF-8", ""},
		{"oversize", huge, nil, tool.CodeWasmLimit, "the limit is", "-"},
	}
}

func TestWardenCallRequests(t *testing.T) {
	cp := compile(t, "examples/notes", substFunctions())
	for _, tc := range requestCases() {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, []string{"system.info", "memory.read:notes"}, &fakeTool{spec: tool.Spec{
				Name: "evilwasm", Wasm: "evil.wasm", InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false}`),
			}})
			grants := tc.grants
			if grants == nil {
				grants = []string{"system.info"}
			}
			s := &subst{req: []byte(tc.req)}
			res := callRaw(t, cp, e.guest(t, "notes", grants, grants), s)
			if res == nil {
				t.Fatal("no envelope")
			}
			if !s.inputAlive {
				t.Error("warden_call freed the guest's input block")
			}
			if tc.code == "" {
				if !res.Success || res.Tool != "system" || !strings.Contains(string(res.Data), `"os"`) {
					t.Fatalf("envelope %s", s.envelope)
				}
			} else {
				if res.Success || res.Error == nil || res.Error.Code != tc.code || !strings.Contains(res.Error.Message, tc.msg) {
					t.Fatalf("envelope %s; want %s with %q", s.envelope, tc.code, tc.msg)
				}
			}
			t.Logf("envelope: %.300s", s.envelope)
			if res.CallID == "" {
				t.Errorf("envelope without call_id: %s", s.envelope)
			}
			if tc.auditTool == "-" {
				if rs := e.audit.results(""); len(rs) != 0 {
					t.Errorf("audited: %+v", rs)
				}
				return
			}
			outcome := "ok"
			if tc.code != "" {
				outcome = string(tc.code)
			}
			ev := wantAudit(t, e.audit, tc.auditTool, outcome)
			if ev.CallID != res.CallID {
				t.Errorf("audit call_id %s, envelope %s", ev.CallID, res.CallID)
			}
		})
	}
}

func TestWardenCallNoEnvelope(t *testing.T) {
	cp := compile(t, "examples/notes", substFunctions())
	e := newEnv(t, []string{"system.info"})
	g := e.guest(t, "notes", []string{"system.info"}, []string{"system.info"})
	tests := []struct {
		name   string
		offset func(p *extism.CurrentPlugin) uint64
	}{
		{"zero", func(*extism.CurrentPlugin) uint64 { return 0 }},
		{"beyond 32 bits", func(*extism.CurrentPlugin) uint64 { return 1 << 40 }},
		{"beyond memory", func(p *extism.CurrentPlugin) uint64 { return uint64(p.Memory().Size()) + 64 }},
		{"freed block", func(p *extism.CurrentPlugin) uint64 {
			off, err := p.WriteBytes([]byte(`{"tool":"system","args":{"operation":"get_info"}}`))
			if err != nil {
				panic(err)
			}
			_ = p.Free(off)
			return off
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.audit.reset()
			s := &subst{offset: tc.offset}
			if res := callRaw(t, cp, g, s); res != nil {
				t.Fatalf("envelope %s for a bad offset", s.envelope)
			}
			if rs := e.audit.results(""); len(rs) != 0 {
				t.Errorf("audited: %+v", rs)
			}
		})
	}
}

func TestWardenCallLocalEnvelopes(t *testing.T) {
	cp := compile(t, "examples/notes", substFunctions())
	req := []byte(`{"tool":"system","args":{"operation":"get_info"}}`)

	t.Run("no guest", func(t *testing.T) {
		s := &subst{req: req}
		res := callRaw(t, cp, nil, s)
		if res == nil || res.Success || res.Error == nil || res.Error.Code != tool.CodeInternal || !strings.Contains(res.Error.Message, "no guest") {
			t.Fatalf("envelope %s, want INTERNAL", s.envelope)
		}
	})
	t.Run("audit log fails", func(t *testing.T) {
		e := newEnv(t, []string{"system.info"})
		e.audit.fail = errors.New("disk full")
		s := &subst{req: req}
		res := callRaw(t, cp, e.guest(t, "notes", []string{"system.info"}, []string{"system.info"}), s)
		if res == nil || res.Success || res.Error == nil || res.Error.Code != tool.CodeInternal || !strings.Contains(res.Error.Message, "audit log") {
			t.Fatalf("envelope %s, want INTERNAL", s.envelope)
		}
		if strings.Contains(string(s.envelope), "disk full") {
			t.Errorf("the store's error reached the guest: %s", s.envelope)
		}
	})
	t.Run("no guest in the core tool's context", func(t *testing.T) {
		var sawGuest, sawGate bool
		e := newEnv(t, nil, &fakeTool{spec: tool.Spec{Name: "probe", InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false}`)},
			run: func(ctx context.Context, _ *tool.Call) tool.Outcome {
				_, sawGuest = gate.GuestFrom(ctx)
				_, sawGate = gate.GateFrom(ctx)
				return tool.Outcome{Output: "ok"}
			}})
		s := &subst{req: []byte(`{"tool":"probe","args":{}}`)}
		res := callRaw(t, cp, e.guest(t, "notes", nil, nil), s)
		if res == nil || !res.Success {
			t.Fatalf("envelope %s", s.envelope)
		}
		if sawGuest || !sawGate {
			t.Errorf("core tool context: guest %v (want false), gate %v (want true)", sawGuest, sawGate)
		}
	})
}
