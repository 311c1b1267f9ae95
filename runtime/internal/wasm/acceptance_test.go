package wasm

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	extism "github.com/extism/go-sdk"

	"github.com/wardenrt/warden/internal/wasmfixture"
	"github.com/wardenrt/warden/runtime/tool"
)

// wardenCallStub is a trivial warden.warden_call: it counts its calls and
// answers every one with a successful envelope, or panics with fail (as a
// host function reporting a *tool.Error does).
func wardenCallStub(calls *atomic.Int64, fail *tool.Error) extism.HostFunction {
	f := extism.NewHostFunctionWithStack("warden_call", func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
		calls.Add(1)
		if fail != nil {
			panic(fail)
		}
		off, err := p.WriteBytes([]byte(`{"tool":"system","success":true,"output":"ok","data":{"os":"wasm"}}`))
		if err != nil {
			off = 0
		}
		stack[0] = off
	}, []extism.ValueType{extism.ValueTypeI64}, []extism.ValueType{extism.ValueTypeI64})
	f.SetNamespace("warden")
	return f
}

// noBufferPath are warden_buffer and warden_call_buffer answering 0: a
// guest built with the helper sends through warden_call.
func noBufferPath() []extism.HostFunction {
	var out []extism.HostFunction
	for _, name := range []string{"warden_buffer", "warden_call_buffer"} {
		f := extism.NewHostFunctionWithStack(name, func(_ context.Context, _ *extism.CurrentPlugin, stack []uint64) { stack[0] = 0 },
			[]extism.ValueType{extism.ValueTypeI64}, []extism.ValueType{extism.ValueTypeI64})
		f.SetNamespace("warden")
		out = append(out, f)
	}
	return out
}

// TestHostileFixturesEndInTime is the acceptance: every hostile
// fixture ends within its deadline + 250 ms (5 s under -race) with the
// right code, or fails to load with a clear error.
func TestHostileFixturesEndInTime(t *testing.T) {
	if testing.Short() {
		t.Skip("builds wasm guests; skipped with -short")
	}
	ctx := context.Background()
	var hostCalls atomic.Int64
	host := append([]extism.HostFunction{wardenCallStub(&hostCalls, nil)}, noBufferPath()...)
	// The loops test their deadline; the others test another limit and
	// get a longer one under -race (slowUnderRace).
	long := slowUnderRace(5 * time.Second)
	for _, tt := range []struct {
		fixture string
		command bool
		export  string
		limits  Limits
		config  map[string]string
		codes   []tool.Code // none = success
	}{
		{fixture: "hostile/loop", export: "call", limits: Limits{Timeout: 500 * time.Millisecond}, codes: []tool.Code{tool.CodeTimeout}},
		{fixture: "hostile/hostloop", export: "call", limits: Limits{Timeout: 2 * time.Second}, codes: []tool.Code{tool.CodeTimeout}}, // long enough to reach its host calls on a loaded machine
		{fixture: "hostile/membomb", export: "call", limits: Limits{Timeout: long}, codes: []tool.Code{tool.CodeWasmLimit, tool.CodeWasmTrap}},
		{fixture: "hostile/recursion", export: "call", limits: Limits{Timeout: long}, codes: []tool.Code{tool.CodeWasmTrap, tool.CodeWasmLimit}},
		{fixture: "hostile/trap", export: "call", limits: Limits{Timeout: time.Second}, codes: []tool.Code{tool.CodeWasmTrap}},
		{fixture: "hostile/trap", export: "unreachable", limits: Limits{Timeout: time.Second}, codes: []tool.Code{tool.CodeWasmTrap}},
		{fixture: "hostile/trap", export: "nilderef", limits: Limits{Timeout: time.Second}, codes: []tool.Code{tool.CodeWasmTrap}},
		{fixture: "hostile/trap", export: "exit", limits: Limits{Timeout: time.Second}, codes: []tool.Code{tool.CodeWasmTrap}},
		{fixture: "hostile/hugeoutput", export: "call", limits: Limits{Timeout: long}, codes: []tool.Code{tool.CodeWasmLimit}},
		{fixture: "hostile/hugeoutput", export: "stdout", limits: Limits{Timeout: long}},
		{fixture: "hostile/wasiprobe", export: "call", limits: Limits{Timeout: long}},
		{fixture: "hostile/wasiprobecmd", command: true, limits: Limits{Timeout: long}},
	} {
		name := strings.TrimPrefix(tt.fixture, "hostile/") + "/" + tt.export
		t.Run(name, func(t *testing.T) {
			m, err := engine(t).Compile(ctx, wasmfixture.Bytes(t, tt.fixture, tt.command), CompileOptions{Limits: tt.limits, Config: tt.config, HostFuncs: host})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(ctx)
			start := time.Now()
			var info CallInfo
			if tt.command {
				_, info, err = m.RunCommand(ctx, []byte(`{}`), CallOptions{})
			} else {
				_, info, err = m.Call(ctx, tt.export, []byte(`{}`), CallOptions{})
			}
			took := time.Since(start)
			limit := m.Limits().Timeout + deadlineSlack()
			if took > limit {
				t.Errorf("ended after %v, want at most %v", took, limit)
			}
			if len(tt.codes) == 0 {
				if err != nil {
					t.Fatalf("%v (stderr %q)", err, info.Stderr)
				}
				t.Logf("ok after %v", took)
				return
			}
			t.Logf("%v after %v", wantCode(t, err, tt.codes...), took)
		})
	}
	if hostCalls.Load() == 0 {
		t.Error("hostloop never called warden_call")
	}

	// Modules that do not load: a clear error, naming the import.
	for name, wasm := range map[string][]byte{
		"badimport": wasmfixture.Bytes(t, "hostile/badimport", false),
		"malformed": []byte("\x00asm\x01\x00\x00\x00garbage"),
		"random":    []byte{0x93, 0x11, 0x7e, 0x00, 0x61, 0x73, 0x6d, 0x01, 0x05},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, err := engine(t).Compile(ctx, wasm, CompileOptions{HostFuncs: host})
			if !errors.Is(err, ErrLoad) {
				t.Fatalf("want ErrLoad, got %v", err)
			}
			if name == "badimport" && !strings.Contains(err.Error(), "warden.nonexistent") {
				t.Errorf("does not name the import: %v", err)
			}
			t.Logf("%v after %v", err, time.Since(start))
		})
	}
}

// TestVerifiedLoadErrorAtFirstCall: a Verified module skips the checks;
// what they would have caught surfaces at the first call as ErrLoad.
func TestVerifiedLoadErrorAtFirstCall(t *testing.T) {
	ctx := context.Background()
	m, err := engine(t).Compile(ctx, wasmfixture.Bytes(t, "hostile/badimport", false), CompileOptions{Verified: true})
	if err != nil {
		t.Fatalf("verified compile: %v", err)
	}
	defer m.Close(ctx)
	for range 2 {
		_, _, err = m.Call(ctx, "call", nil, CallOptions{})
		if !errors.Is(err, ErrLoad) || !strings.Contains(err.Error(), "nonexistent") {
			t.Fatalf("first call: %v", err)
		}
	}
	t.Log(err)
	// Malformed bytes still fail at Compile.
	if _, err := engine(t).Compile(ctx, []byte("\x00asm\x01\x00\x00\x00garbage"), CompileOptions{Verified: true}); !errors.Is(err, ErrLoad) {
		t.Errorf("malformed: %v", err)
	}
	// A verified module runs.
	m = compileWith(t, "examples/textstats", CompileOptions{Verified: true})
	if _, _, err := m.Call(ctx, "call", []byte(`{"text":"x"}`), CallOptions{}); err != nil {
		t.Error(err)
	}
}

// TestHostFunctionError: a *tool.Error a host function panics with
// comes out of Call as is, and the instance is discarded.
func TestHostFunctionError(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int64
	deny := tool.Errorf(tool.CodeCapabilityDenied, "", "system.info is not granted")
	m := compileWith(t, "hostile/hostloop", CompileOptions{HostFuncs: append([]extism.HostFunction{wardenCallStub(&calls, deny)}, noBufferPath()...), Limits: Limits{Timeout: time.Second}})
	_, _, err := m.Call(ctx, "call", nil, CallOptions{})
	if e := wantCode(t, err, tool.CodeCapabilityDenied); e != deny {
		t.Errorf("got %v, want the host function's error", e)
	}
	if calls.Load() != 1 || m.idleCount() != 0 {
		t.Errorf("%d host calls, %d idle", calls.Load(), m.idleCount())
	}
}

// TestHostileCallsLeakNothing: 1,000 hostile calls (a loop with a short
// deadline, traps, a memory bomb, a huge output) on 4 goroutines, through
// the pool, with healthy calls mixed in; the goroutine count comes back to
// its baseline, GC completes, and the heap after GC does not grow from the
// 2nd to the 4th batch of 250. Under -race the run shrinks to 200 calls.
func TestHostileCallsLeakNothing(t *testing.T) {
	ctx := context.Background()
	total, workers := 1000, 4
	if raceEnabled {
		total = 200
	}
	loop := compile(t, "hostile/loop", nil, Limits{Timeout: 30 * time.Millisecond})
	trap := compile(t, "hostile/trap", nil, Limits{Timeout: slowUnderRace(5 * time.Second)}) // traps at once; the deadline is a safety net
	membomb := compile(t, "hostile/membomb", nil, Limits{MemoryPages: 64, Timeout: slowUnderRace(5 * time.Second)})
	huge := compile(t, "hostile/hugeoutput", map[string]string{"bytes": "100000"}, Limits{MaxOutput: 64 << 10, Timeout: slowUnderRace(5 * time.Second)})
	healthy := compile(t, "examples/textstats", nil, Limits{})
	exports := []string{"call", "unreachable", "nilderef", "exit"}

	heap := func() uint64 {
		goruntime.GC()
		goruntime.GC()
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	goruntime.GC()
	base := goruntime.NumGoroutine()
	batch := total / 4
	var heaps []uint64
	var counts sync.Map
	start := time.Now()
	for range 4 {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= batch {
						return
					}
					var err error
					var want []tool.Code
					key := fmt.Sprint(i % 2)
					switch i % 4 {
					case 0:
						_, _, err = loop.Call(ctx, "call", nil, CallOptions{PoolKey: key})
						want = []tool.Code{tool.CodeTimeout}
					case 1:
						_, _, err = trap.Call(ctx, exports[i/4%len(exports)], nil, CallOptions{PoolKey: key})
						want = []tool.Code{tool.CodeWasmTrap}
					case 2:
						_, _, err = membomb.Call(ctx, "call", nil, CallOptions{PoolKey: key})
						want = []tool.Code{tool.CodeWasmLimit, tool.CodeWasmTrap}
					case 3:
						_, _, err = huge.Call(ctx, "call", nil, CallOptions{PoolKey: key})
						want = []tool.Code{tool.CodeWasmLimit}
					}
					e := tool.AsError(err)
					ok := false
					for _, c := range want {
						ok = ok || (e != nil && e.Code == c)
					}
					if !ok {
						t.Errorf("call %d: want %v, got %v", i, want, err)
						return
					}
					n, _ := counts.LoadOrStore(e.Code, new(atomic.Int64))
					n.(*atomic.Int64).Add(1)
					if i%10 == 0 {
						if _, _, err := healthy.Call(ctx, "call", []byte(`{"text":"still fine"}`), CallOptions{PoolKey: key}); err != nil {
							t.Errorf("healthy call: %v", err)
						}
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		heaps = append(heaps, heap())
	}
	took := time.Since(start)

	var n int
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		goruntime.GC()
		if n = goruntime.NumGoroutine(); n <= base {
			break
		}
	}
	if n > base {
		t.Errorf("goroutines: %d after %d hostile calls, baseline %d", n, total, base)
	}
	// The heap after the 4th batch is within 8 MiB of the 2nd's: nothing
	// a hostile call leaves behind accumulates.
	const bound = 8 << 20
	if heaps[3] > heaps[1]+bound {
		t.Errorf("heap after GC grew from %d MiB (batch 2) to %d MiB (batch 4)", heaps[1]>>20, heaps[3]>>20)
	}
	var summary []string
	counts.Range(func(k, v any) bool {
		summary = append(summary, fmt.Sprintf("%v %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	t.Logf("%d hostile calls in %v (%s); goroutines %d (baseline %d); heap after GC per batch %v KiB; idle instances: healthy %d, others %d",
		total, took, strings.Join(summary, ", "), n, base, kib(heaps), healthy.idleCount(), loop.idleCount()+trap.idleCount()+membomb.idleCount()+huge.idleCount())
}

func kib(v []uint64) []uint64 {
	out := make([]uint64, len(v))
	for i, x := range v {
		out[i] = x >> 10
	}
	return out
}
