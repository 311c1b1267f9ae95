package hostfuncs_test

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	extism "github.com/extism/go-sdk"

	"github.com/wardenrt/warden/hostfuncs"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// loopKey carries a loopState in the context of a hostloop call.
type loopKey struct{}

// loopState ends a hostloop call (which calls warden forever) after target
// round trips, by cancelling its context.
type loopState struct {
	n, target int
	cancel    context.CancelFunc
}

// loopFunctions are the host functions of hostloop: Functions(), each call
// carrying a request (warden_call, warden_call_buffer) counted, the
// context cancelled once the target count is reached. With canned set,
// those calls answer it without the gate: the ABI's own cost.
func loopFunctions(canned *tool.Result) []extism.HostFunction {
	var out []extism.HostFunction
	for _, f := range hostfuncs.Functions() {
		inner := f
		carries := f.Name == "warden_call" || f.Name == "warden_call_buffer"
		w := extism.NewHostFunctionWithStack(f.Name, func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
			switch {
			case canned != nil && inner.Name == "warden_call":
				b, _ := json.Marshal(canned)
				off, err := p.WriteBytes(b)
				if err != nil {
					panic(err)
				}
				stack[0] = off
			case canned != nil && inner.Name == "warden_call_buffer":
				stack[0] = hostfuncs.CallBufferCanned(ctx, p, stack[0], *canned)
			default:
				hostfuncs.Invoke(inner, ctx, p, stack)
			}
			if !carries {
				return
			}
			// Calls made after the cancellation, before the guest is
			// stopped, are not counted.
			if s := ctx.Value(loopKey{}).(*loopState); s.n < s.target {
				if s.n++; s.n == s.target {
					s.cancel()
				}
			}
		}, f.Params, f.Returns)
		w.SetNamespace(f.Namespace)
		out = append(out, w)
	}
	return out
}

// runLoop runs hostloop until it has made b.N round trips; with exchange,
// its calls have the buffer path.
func runLoop(b *testing.B, cp *extism.CompiledPlugin, g *gate.Guest, exchange bool) {
	b.ResetTimer()
	loop(b, cp, g, exchange, b.N)
	b.StopTimer()
}

// loop runs hostloop in a new instance until it has made n round trips
// and returns how long that took.
func loop(tb testing.TB, cp *extism.CompiledPlugin, g *gate.Guest, exchange bool, n int) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	p, err := cp.Instance(ctx, extism.PluginInstanceConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	defer p.Close(context.Background())
	with := func(s *loopState) context.Context {
		c := gate.WithGuest(context.WithValue(ctx, loopKey{}, s), g)
		if exchange {
			c = hostfuncs.WithExchange(c)
		}
		return c
	}
	// The guest's runtime starts at its first call: not timed.
	if rc, out, err := p.CallWithContext(with(&loopState{target: math.MaxInt}), "times", nil); err != nil || rc != 0 {
		tb.Fatalf("times: rc %d, %s, %v", rc, out, err)
	}
	s := &loopState{target: n, cancel: cancel}
	ctx = with(s)
	start := time.Now()
	_, _, _ = p.CallWithContext(ctx, "call", nil) // ends when cancelled
	took := time.Since(start)
	if s.n != n {
		tb.Fatalf("%d round trips, want %d", s.n, n)
	}
	return took
}

// BenchmarkWardenCall measures (d): a warden_call round trip from a guest
// to `system get_info` (grant system.info), with the audit log in memory
// (no durable write):
//
//   - gate: Guest.Call from Go, the gate alone;
//   - guest: one round trip from hostloop's loop through the guest helper
//     as warden runs it (the buffer path in its direct mode: warden_buffer,
//     warden_call_buffer), guest side included (request JSON, the copies
//     in and out of the guest's memory, the host function, the gate, the
//     envelope written back and decoded by the guest);
//   - guest-warden_call: the same without an exchange, through
//     warden_call, as modules built with another PDK call it;
//   - guest-trivial, guest-trivial-warden_call: the same two with a
//     trivial host answering a fixed envelope: the ABI's cost without the
//     gate;
//   - notes-add: one Extism call of examples/notes (an instance reused),
//     which makes one round trip (write_memory);
//   - textstats: one Extism call of examples/textstats, no host call.
//
// The parent logs guest ÷ gate; the issue aims at ≤ 3×.
func BenchmarkWardenCall(b *testing.B) {
	grants := []string{"system.info", "memory.write:notes", "memory.read:notes"}
	newGuest := func(b *testing.B) *gate.Guest {
		e := newEnv(b, grants)
		return e.guest(b, "hostloop", grants, grants)
	}
	args := json.RawMessage(`{"operation":"get_info"}`)
	perOp := map[string]time.Duration{}
	record := func(b *testing.B, name string) { perOp[name] = b.Elapsed() / time.Duration(b.N) }

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
		record(b, "gate")
	})
	for _, exchange := range []bool{true, false} {
		suffix := ""
		if !exchange {
			suffix = "-warden_call"
		}
		b.Run("guest"+suffix, func(b *testing.B) {
			g := newGuest(b)
			runLoop(b, compile(b, "hostile/hostloop", loopFunctions(nil)), g, exchange)
			record(b, "guest"+suffix)
		})
		b.Run("guest-trivial"+suffix, func(b *testing.B) {
			g := newGuest(b)
			res, err := g.Call(context.Background(), "system", args)
			if err != nil {
				b.Fatal(err)
			}
			runLoop(b, compile(b, "hostile/hostloop", loopFunctions(&res)), g, exchange)
		})
	}
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
			if rc, out, err := p.CallWithContext(hostfuncs.WithExchange(ctx), "call", []byte(input)); err != nil || rc != 0 {
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
	if gt, gu := perOp["gate"], perOp["guest"]; gt > 0 && gu > 0 {
		b.Logf("round trip from a guest %v, through warden_call %v; the gate alone %v: %.1f× (aim ≤ 3×)",
			gu, perOp["guest-warden_call"], gt, float64(gu)/float64(gt))
	}
	// The same, interleaved (gate, guest, gate, guest …), medians:
	// robust against the load of the machine drifting between the
	// sub-benchmarks. One instance makes every guest batch (export times),
	// its runtime started before the first.
	g := newGuest(b)
	cp := compile(b, "hostile/hostloop", hostfuncs.Functions())
	p, err := cp.Instance(context.Background(), extism.PluginInstanceConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(context.Background())
	const rounds, batch = 15, 200
	guestBatch := func(n int) time.Duration {
		ctx := hostfuncs.WithExchange(gate.WithGuest(context.Background(), g))
		start := time.Now()
		if rc, out, err := p.CallWithContext(ctx, "times", []byte(`{"n":`+strconv.Itoa(n)+`}`)); err != nil || rc != 0 {
			b.Fatalf("times: rc %d, %s, %v", rc, out, err)
		}
		return time.Since(start)
	}
	guestBatch(batch)
	var gates, guests []time.Duration
	for range rounds {
		start := time.Now()
		for range batch {
			if res, err := g.Call(context.Background(), "system", args); err != nil || !res.Success {
				b.Fatalf("%+v %v", res.Error, err)
			}
		}
		gates = append(gates, time.Since(start)/batch)
		guests = append(guests, guestBatch(batch)/batch)
	}
	mg, mu := median(gates), median(guests)
	b.Logf("interleaved medians of %d rounds of %d: round trip from a guest %v, the gate alone %v: %.1f×",
		rounds, batch, mu.Round(time.Microsecond), mg.Round(time.Microsecond), float64(mu)/float64(mg))
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
