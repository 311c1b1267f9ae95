package hostfuncs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero/api"

	"github.com/wardenrt/warden/hostfuncs"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// The buffer path's direct mode (the request and the envelope in a region
// of the guest's own linear memory), played by the test as a hostile guest
// would use it, from inside a real guest call.

const directFlag = 1 << 63

// region is a fresh part of the guest's own memory (pages grown for the
// test, zeroed again at the end, since the guest's runtime may later take
// them as fresh memory), with guard bytes on both sides.
type region struct {
	mem      api.Memory
	ptr, cap uint32
	end      uint32 // the grown pages' end
}

const guard = 64

func newRegion(t *testing.T, ctx context.Context, size uint32) *region {
	t.Helper()
	mem := hostfuncs.GuestMemory(ctx)
	if mem == nil {
		t.Fatal("no guest memory in a guest call: the direct mode is off")
	}
	pages := (size + 2*guard + 65535) / 65536
	prev, ok := mem.Grow(pages)
	if !ok {
		t.Fatal("grow")
	}
	r := &region{mem: mem, ptr: prev*65536 + guard, cap: size, end: (prev + pages) * 65536}
	t.Cleanup(func() { _ = mem.Write(prev*65536, make([]byte, pages*65536)) })
	fill := bytes.Repeat([]byte{0xAA}, int(pages*65536))
	if !mem.Write(prev*65536, fill) {
		t.Fatal("fill")
	}
	return r
}

// arg is warden_buffer's argument registering [ptr, ptr+cap).
func directArg(ptr, cap uint64) uint64 { return directFlag | cap<<32 | ptr }

func (r *region) register(t *testing.T, ctx context.Context, p *extism.CurrentPlugin) {
	t.Helper()
	if got := hostfuncs.WardenBuffer(ctx, p, directArg(uint64(r.ptr), uint64(r.cap))); got != uint64(r.ptr) {
		t.Fatalf("warden_buffer registering [%d, +%d) answered %d", r.ptr, r.cap, got)
	}
}

// send writes req at the region's start and calls warden_call_buffer in
// direct mode; it returns the envelope (nil for 0) and the answer.
func (r *region) send(t *testing.T, ctx context.Context, p *extism.CurrentPlugin, req []byte) ([]byte, uint64) {
	t.Helper()
	if !r.mem.Write(r.ptr, req) {
		t.Fatal("write request")
	}
	a := hostfuncs.WardenCallBuffer(ctx, p, directFlag|uint64(len(req)))
	if a == 0 {
		return nil, 0
	}
	n, off := a>>32, a&0xffffffff
	if off != 0 { // in the Extism buffer
		return unpack(t, p, a), a
	}
	b, ok := r.mem.Read(r.ptr, uint32(n))
	if !ok || n > uint64(r.cap) {
		t.Fatalf("envelope of %d bytes in a region of %d", n, r.cap)
	}
	return bytes.Clone(b), a
}

// guardsIntact fails when anything outside the region was written.
func (r *region) guardsIntact(t *testing.T) {
	t.Helper()
	for _, span := range [][2]uint32{{r.ptr - guard, r.ptr}, {r.ptr + r.cap, r.end}} {
		b, ok := r.mem.Read(span[0], span[1]-span[0])
		if !ok {
			t.Fatal("read guard")
		}
		for i, c := range b {
			if c != 0xAA {
				t.Fatalf("the host wrote outside the region: at %d", span[0]+uint32(i))
			}
		}
	}
}

// TestDirectRequests: through the direct mode, a request gets the envelope
// and the audit record it gets through the buffer path, written in the
// guest's region and nowhere else.
func TestDirectRequests(t *testing.T) {
	cp := compile(t, "examples/notes", playFunctions())
	for _, tc := range requestCases() {
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
				r := newRegion(t, ctx, uint32(max(len(tc.req), 8<<10)))
				r.register(t, ctx, p)
				env, _ = r.send(t, ctx, p, []byte(tc.req))
				r.guardsIntact(t)
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
			if tc.name == "oversize" {
				if rs := e.audit.results(""); len(rs) != 0 {
					t.Errorf("audited: %+v", rs)
				}
				return
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

// TestDirectHostile: a region or a length the guest lies about gets no
// envelope (and no audit record), never a trap or a read or write outside
// the guest's own memory; a region never outlives its export call.
func TestDirectHostile(t *testing.T) {
	cp := compile(t, "examples/notes", playFunctions())
	req := []byte(`{"tool":"system","args":{"operation":"get_info"}}`)
	e := newEnv(t, []string{"system.info"})
	g := e.guest(t, "notes", []string{"system.info"}, []string{"system.info"})
	withX := func() context.Context { return hostfuncs.WithExchange(gate.WithGuest(context.Background(), g)) }
	zero := func(t *testing.T, name string, r uint64) {
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
			r := newRegion(t, ctx, 8<<10)
			zero(t, "warden_buffer", hostfuncs.WardenBuffer(ctx, p, directArg(uint64(r.ptr), uint64(r.cap))))
			_ = r.mem.Write(r.ptr, req)
			zero(t, "warden_call_buffer", hostfuncs.WardenCallBuffer(ctx, p, directFlag|uint64(len(req))))
			r.guardsIntact(t)
		}},
		{"call before any region", withX, func(t *testing.T, ctx context.Context, p *extism.CurrentPlugin) {
			zero(t, "warden_call_buffer", hostfuncs.WardenCallBuffer(ctx, p, directFlag|uint64(len(req))))
		}},
		{"region outside the memory", withX, func(t *testing.T, ctx context.Context, p *extism.CurrentPlugin) {
			size := uint64(hostfuncs.GuestMemory(ctx).Size())
			for _, a := range [][2]uint64{
				{size - 8, 16},               // runs past the end
				{size, 1},                    // starts at the end
				{math.MaxUint32, 0x7fffffff}, // ptr + cap past 2^32
				{0, 64},                      // no region at 0
				{64, 0},                      // empty
			} {
				zero(t, "warden_buffer", hostfuncs.WardenBuffer(ctx, p, directArg(a[0], a[1])))
				zero(t, "warden_call_buffer", hostfuncs.WardenCallBuffer(ctx, p, directFlag|uint64(len(req))))
			}
			if got := uint64(hostfuncs.GuestMemory(ctx).Size()); got != size {
				t.Errorf("the guest's memory grew from %d to %d bytes", size, got)
			}
		}},
		{"length beyond the region", withX, func(t *testing.T, ctx context.Context, p *extism.CurrentPlugin) {
			r := newRegion(t, ctx, 64)
			r.register(t, ctx, p)
			_ = r.mem.Write(r.ptr, req)
			zero(t, "warden_call_buffer", hostfuncs.WardenCallBuffer(ctx, p, directFlag|65))
			zero(t, "warden_call_buffer", hostfuncs.WardenCallBuffer(ctx, p, directFlag|0))
			zero(t, "warden_call_buffer", hostfuncs.WardenCallBuffer(ctx, p, directFlag|1<<32|uint64(len(req)))) // bits above the length
			zero(t, "warden_call_buffer", hostfuncs.WardenCallBuffer(ctx, p, math.MaxUint64))
			r.guardsIntact(t)
		}},
		{"region replaced by a refused one", withX, func(t *testing.T, ctx context.Context, p *extism.CurrentPlugin) {
			r := newRegion(t, ctx, 8<<10)
			r.register(t, ctx, p)
			_ = r.mem.Write(r.ptr, req)
			zero(t, "warden_buffer", hostfuncs.WardenBuffer(ctx, p, directArg(uint64(r.end), 64))) // past the memory's end
			zero(t, "warden_call_buffer", hostfuncs.WardenCallBuffer(ctx, p, directFlag|uint64(len(req))))
			r.guardsIntact(t)
		}},
		{"envelope larger than the region", withX, func(t *testing.T, ctx context.Context, p *extism.CurrentPlugin) {
			r := newRegion(t, ctx, uint32(len(req)))
			r.register(t, ctx, p)
			env, a := r.send(t, ctx, p, req)
			if a&0xffffffff == 0 || env == nil {
				t.Fatalf("answer %#x: want the envelope in the Extism buffer", a)
			}
			if res := decodeResult(t, env); !res.Success {
				t.Fatalf("envelope %+v", res)
			}
			r.guardsIntact(t)
		}},
		{"classic call after a region", withX, func(t *testing.T, ctx context.Context, p *extism.CurrentPlugin) {
			r := newRegion(t, ctx, 8<<10)
			r.register(t, ctx, p)
			env, a := sendBuffer(t, ctx, p, req) // warden_buffer(n), warden_call_buffer(n): the Extism buffer, as ever
			if a&0xffffffff == 0 || !decodeResult(t, env).Success {
				t.Fatalf("answer %#x", a)
			}
			r.guardsIntact(t)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e.audit.reset()
			play(t, instance(t, cp), tc.ctx(), func(ctx context.Context, p *extism.CurrentPlugin) { tc.play(t, ctx, p) })
			if !strings.HasPrefix(tc.name, "envelope") && !strings.HasPrefix(tc.name, "classic") {
				if rs := e.audit.results(""); len(rs) != 0 {
					t.Errorf("audited: %+v", rs)
				}
			}
		})
	}
}

// TestDirectNotCarriedOver: a region registered in one export call is
// not used in the next (of the same instance or another), even with the
// same exchange: the guest must register it again.
func TestDirectNotCarriedOver(t *testing.T) {
	cp := compile(t, "examples/notes", playFunctions())
	e := newEnv(t, []string{"system.info"})
	ctx := hostfuncs.WithExchange(gate.WithGuest(context.Background(), e.guest(t, "notes", []string{"system.info"}, []string{"system.info"})))
	req := []byte(`{"tool":"system","args":{"operation":"get_info"}}`)
	p1 := instance(t, cp)
	var ptr, cap uint32
	play(t, p1, ctx, func(ctx context.Context, p *extism.CurrentPlugin) {
		r := newRegion(t, ctx, 8<<10)
		r.register(t, ctx, p)
		if env, _ := r.send(t, ctx, p, req); env == nil || !decodeResult(t, env).Success {
			t.Fatal("first call: no envelope")
		}
		ptr, cap = r.ptr, r.cap
	})
	for _, tc := range []struct {
		name string
		p    *extism.Plugin
	}{{"same instance", p1}, {"another instance", instance(t, cp)}} {
		t.Run(tc.name, func(t *testing.T) {
			e.audit.reset()
			play(t, tc.p, ctx, func(ctx context.Context, p *extism.CurrentPlugin) {
				if mem := hostfuncs.GuestMemory(ctx); uint64(mem.Size()) >= uint64(ptr)+uint64(cap) {
					_ = mem.Write(ptr, req)
				}
				if a := hostfuncs.WardenCallBuffer(ctx, p, directFlag|uint64(len(req))); a != 0 {
					t.Fatalf("warden_call_buffer used the last call's region: %#x", a)
				}
			})
			if rs := e.audit.results(""); len(rs) != 0 {
				t.Errorf("audited: %+v", rs)
			}
		})
	}
}

// TestHelperUsesDirect: the guest helper (examples/notes) sends through
// the direct mode when the host takes its region, and through the buffer
// in Extism memory when it refuses it (an older warden), with the same
// result.
func TestHelperUsesDirect(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		var direct, inRegion, classic int
		var funcs []extism.HostFunction
		for _, f := range hostfuncs.Functions() {
			inner := f
			w := extism.NewHostFunctionWithStack(f.Name, func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
				flagged := stack[0]&directFlag != 0
				if refuse && flagged {
					stack[0] = 0 // what an older warden answers
					return
				}
				hostfuncs.Invoke(inner, ctx, p, stack)
				switch {
				case inner.Name == "warden_call_buffer" && flagged:
					direct++
					if stack[0] != 0 && stack[0]&0xffffffff == 0 {
						inRegion++
					}
				case inner.Name == "warden_call_buffer" || inner.Name == "warden_call":
					classic++
				}
			}, f.Params, f.Returns)
			w.SetNamespace(f.Namespace)
			funcs = append(funcs, w)
		}
		cp := compile(t, "examples/notes", funcs)
		e := newEnv(t, notesGrants)
		ctx := hostfuncs.WithExchange(gate.WithGuest(context.Background(), e.guest(t, "notes", notesGrants, notesGrants)))
		rc, out, err := instance(t, cp).CallWithContext(ctx, "call", []byte(`{"op":"add","key":"k1","text":"buy oat milk"}`))
		if err != nil || rc != 0 || !strings.Contains(string(out), `"k1"`) {
			t.Fatalf("refuse %v: rc %d, %s, %v", refuse, rc, out, err)
		}
		wantAudit(t, e.audit, "write_memory", "ok")
		if want := map[bool][3]int{false: {1, 1, 0}, true: {0, 0, 1}}[refuse]; [3]int{direct, inRegion, classic} != want {
			t.Errorf("refuse %v: %d direct calls (%d answered in the region), %d other calls; want %v", refuse, direct, inRegion, classic, want)
		}
	}
}
