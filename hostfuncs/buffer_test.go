package hostfuncs_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	extism "github.com/extism/go-sdk"

	"github.com/wardenrt/warden/hostfuncs"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// The buffer path (warden_buffer, warden_call_buffer) played by the test
// as a hostile guest would use it: from inside a real guest call, with the
// real implementation and that call's context and Extism memory.

// playKey carries, in a guest call's context, what the test does in place
// of the guest's warden_call.
type playKey struct{}

// playFunctions: warden_call runs the test's function and answers 0;
// warden_buffer and warden_call_buffer answer 0, so the guest's helper
// sends through warden_call.
func playFunctions() []extism.HostFunction {
	i64 := []extism.ValueType{extism.ValueTypeI64}
	f := extism.NewHostFunctionWithStack("warden_call", func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
		ctx.Value(playKey{}).(func(context.Context, *extism.CurrentPlugin))(ctx, p)
		stack[0] = 0
	}, i64, i64)
	zero := func(_ context.Context, _ *extism.CurrentPlugin, stack []uint64) { stack[0] = 0 }
	b := extism.NewHostFunctionWithStack("warden_buffer", zero, i64, i64)
	c := extism.NewHostFunctionWithStack("warden_call_buffer", zero, i64, i64)
	for _, h := range []*extism.HostFunction{&f, &b, &c} {
		h.SetNamespace(hostfuncs.ModuleName)
	}
	return []extism.HostFunction{f, b, c}
}

// play runs one call of notes in p with ctx; its warden_call runs f.
func play(t *testing.T, p *extism.Plugin, ctx context.Context, f func(ctx context.Context, p *extism.CurrentPlugin)) {
	t.Helper()
	ran := false
	ctx = context.WithValue(ctx, playKey{}, func(ctx context.Context, p *extism.CurrentPlugin) {
		ran = true
		f(ctx, p)
	})
	_, _, _ = p.CallWithContext(ctx, "call", []byte(`{"op":"add","key":"k","text":"t"}`))
	if !ran {
		t.Fatal("the guest never called warden_call")
	}
}

// instance is a fresh instance of cp, closed with the test.
func instance(t *testing.T, cp *extism.CompiledPlugin) *extism.Plugin {
	t.Helper()
	p, err := cp.Instance(context.Background(), extism.PluginInstanceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

// sendBuffer sends req the way the guest helper does: warden_buffer, the
// request at the buffer's start, warden_call_buffer. It returns the
// envelope (nil for 0) and the packed answer.
func sendBuffer(t *testing.T, ctx context.Context, p *extism.CurrentPlugin, req []byte) ([]byte, uint64) {
	t.Helper()
	off := hostfuncs.WardenBuffer(ctx, p, uint64(len(req)))
	if off == 0 {
		t.Fatal("warden_buffer answered 0")
	}
	if !p.Memory().Write(uint32(off), req) {
		t.Fatal("write")
	}
	r := hostfuncs.WardenCallBuffer(ctx, p, uint64(len(req)))
	return unpack(t, p, r), r
}

func unpack(t *testing.T, p *extism.CurrentPlugin, r uint64) []byte {
	t.Helper()
	if r == 0 {
		return nil
	}
	off, n := r&0xffffffff, r>>32
	b, ok := p.Memory().Read(uint32(off), uint32(n))
	if !ok {
		t.Fatalf("envelope at %d (%d bytes) is outside the memory", off, n)
	}
	return append([]byte(nil), b...)
}

// decodeResult reads the binary envelope of the buffer path.
func decodeResult(t *testing.T, env []byte) tool.Result {
	t.Helper()
	res, err := hostfuncs.DecodeBinaryEnvelope(env)
	if err != nil {
		t.Fatalf("envelope %.300q: %v", env, err)
	}
	return res
}

// TestBufferRequests: every request of TestWardenCallRequests gets the
// same envelope and audit record through the buffer path.
func TestBufferRequests(t *testing.T) {
	cp := compile(t, "examples/notes", playFunctions())
	for _, tc := range requestCases() {
		if tc.name == "oversize" {
			continue // TestBufferHostile: warden_buffer refuses it
		}
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, []string{"system.info", "memory.read:notes"}, &fakeTool{spec: tool.Spec{
				Name: "evilwasm", Wasm: "evil.wasm", InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false}`),
			}})
			grants := tc.grants
			if grants == nil {
				grants = []string{"system.info"}
			}
			ctx := hostfuncs.WithExchange(gate.WithGuest(context.Background(), e.guest(t, "notes", grants, grants)))
			var env []byte
			play(t, instance(t, cp), ctx, func(ctx context.Context, p *extism.CurrentPlugin) {
				env, _ = sendBuffer(t, ctx, p, []byte(tc.req))
			})
			if env == nil {
				t.Fatal("no envelope")
			}
			res := decodeResult(t, env)
			if tc.code == "" {
				if !res.Success || res.Tool != "system" || !strings.Contains(string(res.Data), `"os"`) {
					t.Fatalf("envelope %+v", res)
				}
			} else if res.Success || res.Error == nil || res.Error.Code != tc.code || !strings.Contains(res.Error.Message, tc.msg) {
				t.Fatalf("envelope %+v; want %s with %q", res, tc.code, tc.msg)
			}
			outcome := "ok"
			if tc.code != "" {
				outcome = string(tc.code)
			}
			if ev := wantAudit(t, e.audit, tc.auditTool, outcome); ev.CallID != res.CallID {
				t.Errorf("audit call_id %s, envelope %s", ev.CallID, res.CallID)
			}
		})
	}
}

// TestBufferHostile: what a guest can do wrong with the buffer path gets
// no envelope (and no audit record) or a refusal, never a trap, a read or
// write outside its own Extism memory, or another call's buffer.
func TestBufferHostile(t *testing.T) {
	cp := compile(t, "examples/notes", playFunctions())
	req := []byte(`{"tool":"system","args":{"operation":"get_info"}}`)
	e := newEnv(t, []string{"system.info"})
	g := e.guest(t, "notes", []string{"system.info"}, []string{"system.info"})
	withX := func() context.Context { return hostfuncs.WithExchange(gate.WithGuest(context.Background(), g)) }
	noEnvelope := func(t *testing.T, name string, r uint64) {
		t.Helper()
		if r != 0 {
			t.Errorf("%s answered %#x, want 0", name, r)
		}
	}
	tests := []struct {
		name string
		ctx  func() context.Context
		play func(t *testing.T, ctx context.Context, p *extism.CurrentPlugin)
	}{
		{"no exchange", func() context.Context { return gate.WithGuest(context.Background(), g) }, func(t *testing.T, ctx context.Context, p *extism.CurrentPlugin) {
			noEnvelope(t, "warden_buffer", hostfuncs.WardenBuffer(ctx, p, 64))
			noEnvelope(t, "warden_call_buffer", hostfuncs.WardenCallBuffer(ctx, p, 64))
		}},
		{"call before any buffer", withX, func(t *testing.T, ctx context.Context, p *extism.CurrentPlugin) {
			noEnvelope(t, "warden_call_buffer", hostfuncs.WardenCallBuffer(ctx, p, uint64(len(req))))
		}},
		{"length beyond the buffer", withX, func(t *testing.T, ctx context.Context, p *extism.CurrentPlugin) {
			off := hostfuncs.WardenBuffer(ctx, p, 16)
			n, _ := p.Length(off)
			if off == 0 || n < 16 || n%8 != 0 {
				t.Fatalf("buffer at %d of %d bytes", off, n)
			}
			noEnvelope(t, "warden_call_buffer", hostfuncs.WardenCallBuffer(ctx, p, n+1))
			noEnvelope(t, "warden_call_buffer", hostfuncs.WardenCallBuffer(ctx, p, 1<<40))
			noEnvelope(t, "warden_call_buffer", hostfuncs.WardenCallBuffer(ctx, p, 0))
		}},
		{"over the request limit", withX, func(t *testing.T, ctx context.Context, p *extism.CurrentPlugin) {
			size := p.Memory().Size()
			noEnvelope(t, "warden_buffer", hostfuncs.WardenBuffer(ctx, p, 1<<20+4<<10+1))
			noEnvelope(t, "warden_buffer", hostfuncs.WardenBuffer(ctx, p, 1<<63)) // -2^63 as the guest's i64
			if p.Memory().Size() != size {
				t.Errorf("the memory grew from %d to %d bytes for refused buffers", size, p.Memory().Size())
			}
		}},
		{"buffer freed and reused by the guest", withX, func(t *testing.T, ctx context.Context, p *extism.CurrentPlugin) {
			off := hostfuncs.WardenBuffer(ctx, p, uint64(len(req)))
			_ = p.Free(off)
			mine, err := p.WriteBytes(make([]byte, 64)) // the kernel may hand the buffer's memory out again
			if err != nil {
				t.Fatal(err)
			}
			if !p.Memory().Write(uint32(off), req) {
				t.Fatal("write")
			}
			r := hostfuncs.WardenCallBuffer(ctx, p, uint64(len(req)))
			if env := unpack(t, p, r); env != nil {
				decodeResult(t, env)
			}
			_ = mine // whatever the envelope overwrote is the guest's own
		}},
		{"no guest", func() context.Context { return hostfuncs.WithExchange(context.Background()) }, func(t *testing.T, ctx context.Context, p *extism.CurrentPlugin) {
			env, _ := sendBuffer(t, ctx, p, req)
			if res := decodeResult(t, env); res.Success || res.Error == nil || res.Error.Code != tool.CodeInternal || !strings.Contains(res.Error.Message, "no guest") {
				t.Fatalf("envelope %+v, want INTERNAL", res)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.audit.reset()
			play(t, instance(t, cp), tc.ctx(), func(ctx context.Context, p *extism.CurrentPlugin) { tc.play(t, ctx, p) })
			if tc.name != "buffer freed and reused by the guest" && tc.name != "no guest" {
				if rs := e.audit.results(""); len(rs) != 0 {
					t.Errorf("audited: %+v", rs)
				}
			}
		})
	}
}

// TestBufferNotCarriedOver: an exchange used for a second export call (of
// the same instance, whose Extism memory the kernel reset in between, or
// of another instance) never hands out the first call's buffer: the
// buffer it gives is a live block of the current memory, and writing an
// envelope into it leaves the call's input intact.
func TestBufferNotCarriedOver(t *testing.T) {
	cp := compile(t, "examples/notes", playFunctions())
	e := newEnv(t, []string{"system.info"})
	ctx := hostfuncs.WithExchange(gate.WithGuest(context.Background(), e.guest(t, "notes", []string{"system.info"}, []string{"system.info"})))
	req := []byte(`{"tool":"system","args":{"operation":"get_info"}}`)
	p1 := instance(t, cp)
	check := func(t *testing.T, p *extism.CurrentPlugin, ctx context.Context) uint64 {
		t.Helper()
		off := hostfuncs.WardenBuffer(ctx, p, uint64(len(req)))
		if n, _ := p.Length(off); off == 0 || n < uint64(len(req)) {
			t.Fatalf("warden_buffer gave %d, a block of %d bytes in this call's memory", off, n)
		}
		env, r := sendBuffer(t, ctx, p, req)
		if res := decodeResult(t, env); !res.Success {
			t.Fatalf("envelope %+v", res)
		}
		if in := ctx.Value(extism.InputOffsetKey("inputOffset")).(uint64); r&0xffffffff <= in && in < r&0xffffffff+r>>32 {
			t.Fatalf("the envelope (%#x) was written over the call's input at %d", r, in)
		}
		return off
	}
	var first uint64
	play(t, p1, ctx, func(ctx context.Context, p *extism.CurrentPlugin) { first = check(t, p, ctx) })
	for _, tc := range []struct {
		name string
		p    *extism.Plugin
	}{{"same instance", p1}, {"another instance", instance(t, cp)}} {
		t.Run(tc.name, func(t *testing.T) {
			play(t, tc.p, ctx, func(ctx context.Context, p *extism.CurrentPlugin) {
				// The guest's own block where the old buffer was, if the
				// kernel hands that memory out again.
				mine, _ := p.WriteBytes(make([]byte, 4<<10))
				second := check(t, p, ctx)
				if second == mine {
					t.Fatalf("warden_buffer gave the guest's own block %d (the first call's buffer was %d)", mine, first)
				}
			})
		})
	}
}

// TestBufferGrows: an envelope larger than the buffer moves it to a larger
// block, freeing the old one; the next request reuses it.
func TestBufferGrows(t *testing.T) {
	cp := compile(t, "examples/notes", playFunctions())
	big := strings.Repeat("x", 100<<10)
	e := newEnv(t, nil, &fakeTool{spec: tool.Spec{Name: "big", InputSchema: json.RawMessage(`{"type":"object","additionalProperties":false}`)},
		run: func(context.Context, *tool.Call) tool.Outcome { return tool.Outcome{Output: big} }})
	ctx := hostfuncs.WithExchange(gate.WithGuest(context.Background(), e.guest(t, "notes", nil, nil)))
	play(t, instance(t, cp), ctx, func(ctx context.Context, p *extism.CurrentPlugin) {
		req := []byte(`{"tool":"big","args":{}}`)
		env, r := sendBuffer(t, ctx, p, req)
		if res := decodeResult(t, env); !res.Success || res.Output != big {
			t.Fatalf("envelope %.200q", env)
		}
		off := r & 0xffffffff
		if n, _ := p.Length(off); n < r>>32 || n%8 != 0 {
			t.Fatalf("the envelope (%d bytes) is in a block of %d bytes", r>>32, n)
		}
		if again := hostfuncs.WardenBuffer(ctx, p, uint64(len(req))); again != off {
			t.Fatalf("warden_buffer after the envelope: %d, want the grown buffer %d", again, off)
		}
		if _, r2 := sendBuffer(t, ctx, p, req); r2&0xffffffff != off {
			t.Fatalf("second envelope at %d, want %d", r2&0xffffffff, off)
		}
	})
}

// TestHelperUsesBuffer: the guest helper (examples/notes) sends through
// the buffer path when its call has an exchange, through warden_call
// otherwise, with the same result.
func TestHelperUsesBuffer(t *testing.T) {
	var classic, buffered atomic.Int64
	var funcs []extism.HostFunction
	for _, f := range hostfuncs.Functions() {
		counter := &classic
		if f.Name == "warden_call_buffer" {
			counter = &buffered
		}
		inner := f
		w := extism.NewHostFunctionWithStack(f.Name, func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
			counter.Add(1)
			hostfuncs.Invoke(inner, ctx, p, stack)
		}, f.Params, f.Returns)
		w.SetNamespace(f.Namespace)
		funcs = append(funcs, w)
	}
	cp := compile(t, "examples/notes", funcs)
	for _, withExchange := range []bool{true, false} {
		e := newEnv(t, notesGrants)
		g := e.guest(t, "notes", notesGrants, notesGrants)
		classic.Store(0)
		buffered.Store(0)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		ctx = gate.WithGuest(ctx, g)
		if withExchange {
			ctx = hostfuncs.WithExchange(ctx)
		}
		p := instance(t, cp)
		rc, out, err := p.CallWithContext(ctx, "call", []byte(`{"op":"add","key":"k1","text":"buy oat milk"}`))
		cancel()
		if err != nil || rc != 0 || !strings.Contains(string(out), `"k1"`) {
			t.Fatalf("exchange %v: rc %d, %s, %v", withExchange, rc, out, err)
		}
		wantAudit(t, e.audit, "write_memory", "ok")
		// warden_buffer counts as classic here: what matters is which
		// function carried the request.
		if withExchange && buffered.Load() != 1 {
			t.Errorf("with an exchange: %d warden_call_buffer calls, want 1", buffered.Load())
		}
		if !withExchange && buffered.Load() != 0 {
			t.Errorf("without an exchange: %d warden_call_buffer calls, want 0", buffered.Load())
		}
	}
}

// TestBufferEnvelopeSameAsJSON: the guest helper reads the same Envelope
// from the buffer path's binary envelope as from warden_call's JSON one,
// for results with everything JSON escaping and omission touch.
func TestBufferEnvelopeSameAsJSON(t *testing.T) {
	results := []tool.Result{
		{Tool: "system", CallID: "c1", Success: true, Output: "linux", Data: json.RawMessage(`{"os" : "linux", "n": [1, 2.5e3]}`), Warnings: []string{}, DurationMS: 7, AuditSeq: 3, Sandbox: "full"},
		{Tool: "t<&>", CallID: "c2", Output: "a\nb\t\"q\" \\ \u2028\u2029 é 😀 \x00\x1f", Data: json.RawMessage(` "<b>&\u2028" `), Warnings: []string{"w1", "", "bad \xff\xfe utf-8 \xed\xa0\x80"},
			Error: &tool.Error{Code: tool.CodeCapabilityDenied, Message: "m \xc3", Hint: "h", Missing: []string{"fs.read:a", "x\xff"}}, DurationMS: -1},
		{Tool: "t", DryRun: true, Data: nil, Warnings: nil, Error: &tool.Error{Code: tool.CodeApprovalRequired, Message: "m",
			Approval: &tool.ApprovalNeeded{Rule: "r", Mode: tool.ApprovalMode("ask"), Failed: "no tty"}}},
		{Tool: "t", Success: true, Data: json.RawMessage(`null`), Error: &tool.Error{Code: "X", Missing: []string{}, Approval: &tool.ApprovalNeeded{}}},
		{Tool: "t", Success: true, Output: strings.Repeat("long output ", 2000), Data: json.RawMessage(`[]`), Warnings: []string{"one"}},
		{Tool: "", CallID: "x", Success: false, Error: &tool.Error{Code: tool.CodeInternal}, Data: json.RawMessage(`{}`)},
	}
	for i, res := range results {
		var outs [2]string
		for j, exchange := range []bool{false, true} {
			funcs := loopFunctions(&res)
			cp := compile(t, "hostile/hostloop", funcs)
			ctx := gate.WithGuest(context.WithValue(context.Background(), loopKey{}, &loopState{target: 1 << 30}), nil)
			if exchange {
				ctx = hostfuncs.WithExchange(ctx)
			}
			rc, out, err := instance(t, cp).CallWithContext(ctx, "times", nil)
			if err != nil || rc != 0 {
				t.Fatalf("result %d, exchange %v: rc %d, %s, %v", i, exchange, rc, out, err)
			}
			outs[j] = string(out)
		}
		if outs[0] != outs[1] {
			t.Errorf("result %d: through warden_call the guest read\n%s\nthrough the buffer\n%s", i, outs[0], outs[1])
		}
	}
}
