package hostfuncs_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	extism "github.com/extism/go-sdk"

	"github.com/wardenrt/warden/hostfuncs"
	"github.com/wardenrt/warden/runtime/gate"
)

// loopKey carries a loopState in the context of a hostloop call.
type loopKey struct{}

// loopState ends a hostloop call (which calls warden_call forever) after
// target host calls, by cancelling its context.
type loopState struct {
	n, target int
	cancel    context.CancelFunc
}

// loopFunctions is warden_call for hostloop: each call is handed to host
// (the real implementation or a trivial one), and the context is cancelled
// once the target count is reached.
func loopFunctions(host func(ctx context.Context, p *extism.CurrentPlugin, in uint64) uint64) []extism.HostFunction {
	f := extism.NewHostFunctionWithStack("warden_call", func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
		s := ctx.Value(loopKey{}).(*loopState)
		stack[0] = host(ctx, p, stack[0])
		if s.n++; s.n == s.target {
			s.cancel()
		}
	}, []extism.ValueType{extism.ValueTypeI64}, []extism.ValueType{extism.ValueTypeI64})
	f.SetNamespace(hostfuncs.ModuleName)
	return []extism.HostFunction{f}
}

// runLoop runs hostloop until it has made b.N warden_calls and returns.
func runLoop(b *testing.B, cp *extism.CompiledPlugin, g *gate.Guest) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	p, err := cp.Instance(ctx, extism.PluginInstanceConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	s := &loopState{target: b.N, cancel: cancel}
	ctx = gate.WithGuest(context.WithValue(ctx, loopKey{}, s), g)
	b.ResetTimer()
	_, _, _ = p.CallWithContext(ctx, "call", nil) // ends when cancelled
	b.StopTimer()
	if s.n != b.N {
		b.Fatalf("%d host calls, want %d", s.n, b.N)
	}
}

// BenchmarkWardenCall measures (d): a warden_call round trip from a guest
// to `system get_info` (grant system.info), with the audit log in memory
// (no durable write):
//
//   - gate: Guest.Call from Go, the gate alone;
//   - guest: one warden_call from hostloop's loop, guest side included
//     (request JSON, memory blocks, the host function, the gate, the
//     envelope written back and decoded by the guest);
//   - guest-trivial: the same loop with a trivial warden_call that writes
//     back a fixed envelope: the ABI's cost without the gate;
//   - notes-add: one Extism call of examples/notes (an instance reused),
//     which makes one warden_call (write_memory);
//   - textstats: one Extism call of examples/textstats, no host call.
func BenchmarkWardenCall(b *testing.B) {
	grants := []string{"system.info", "memory.write:notes", "memory.read:notes"}
	newGuest := func(b *testing.B) *gate.Guest {
		e := newEnv(b, grants)
		return e.guest(b, "hostloop", grants, grants)
	}
	args := json.RawMessage(`{"operation":"get_info"}`)

	b.Run("gate", func(b *testing.B) {
		g := newGuest(b)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			res, err := g.Call(ctx, "system", args)
			if err != nil || !res.Success {
				b.Fatalf("%+v %v", res.Error, err)
			}
		}
	})
	b.Run("guest", func(b *testing.B) {
		g := newGuest(b)
		cp := compile(b, "hostile/hostloop", loopFunctions(hostfuncs.WardenCall))
		runLoop(b, cp, g)
	})
	b.Run("guest-trivial", func(b *testing.B) {
		g := newGuest(b)
		res, err := g.Call(context.Background(), "system", args)
		if err != nil {
			b.Fatal(err)
		}
		canned, _ := json.Marshal(res)
		cp := compile(b, "hostile/hostloop", loopFunctions(func(_ context.Context, p *extism.CurrentPlugin, _ uint64) uint64 {
			off, err := p.WriteBytes(canned)
			if err != nil {
				panic(err)
			}
			return off
		}))
		runLoop(b, cp, g)
	})
	reused := func(b *testing.B, dir, input string, g *gate.Guest) {
		cp := compile(b, dir, nil)
		ctx := context.Background()
		p, err := cp.Instance(ctx, extism.PluginInstanceConfig{})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close(ctx)
		ctx = gate.WithGuest(ctx, g)
		for b.Loop() {
			if rc, out, err := p.CallWithContext(ctx, "call", []byte(input)); err != nil || rc != 0 {
				b.Fatalf("rc %d, %s, %v", rc, out, err)
			}
		}
	}
	b.Run("notes-add", func(b *testing.B) {
		reused(b, "examples/notes", `{"op":"add","key":"k","text":"some text to keep"}`, newGuest(b))
	})
	b.Run("textstats", func(b *testing.B) {
		reused(b, "examples/textstats", `{"text":"The quick brown fox jumps over the lazy dog. Again!"}`, newGuest(b))
	})
}
