package wasm

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	extism "github.com/extism/go-sdk"

	"github.com/wardenrt/warden/runtime/tool"
)

func TestPoolReuse(t *testing.T) {
	ctx := context.Background()
	// A 1 MiB payload below: slow under -race or on a loaded machine (this
	// test is about reuse, not deadlines).
	m := compile(t, "examples/textstats", nil, Limits{Timeout: time.Minute})
	in := []byte(`{"text":"Hello world."}`)
	call := func(o CallOptions) CallInfo {
		t.Helper()
		_, info, err := m.Call(ctx, "call", in, o)
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	for i, tt := range []struct {
		key    string
		pooled bool
	}{
		{"", false},
		{"", true},
		{"net:example.com", false}, // another key: a fresh instance
		{"net:example.com", true},
		{"", true},
	} {
		if info := call(CallOptions{PoolKey: tt.key}); info.Pooled != tt.pooled {
			t.Errorf("call %d (key %q): pooled %v, want %v", i, tt.key, info.Pooled, tt.pooled)
		}
	}
	if n := m.idleCount(); n != 2 {
		t.Errorf("%d idle instances, want 2 (one per key)", n)
	}

	// A tool error discards the instance; a missing export does not
	// touch it.
	_, _, err := m.Call(ctx, "nope", nil, CallOptions{})
	wantCode(t, err, tool.CodeInvalidInput)
	if info := call(CallOptions{}); !info.Pooled {
		t.Error("a missing export discarded the instance")
	}
	_, _, err = m.Call(ctx, "call", []byte(`{"txt":1}`), CallOptions{})
	wantCode(t, err, tool.CodeToolError)
	if info := call(CallOptions{}); info.Pooled {
		t.Error("the instance was reused after a tool error")
	}

	// A payload over 1 MiB discards the instance.
	big := []byte(`{"text":"` + strings.Repeat("word ", maxPooledPayload/5) + `"}`)
	if _, _, err := m.Call(ctx, "call", big, CallOptions{PoolKey: "big"}); err != nil {
		t.Fatal(err)
	}
	if info := call(CallOptions{PoolKey: "big"}); info.Pooled {
		t.Error("the instance was reused after a payload over 1 MiB")
	}

	// Close closes the idle instances; later calls fail.
	m.Close(ctx)
	if n := m.idleCount(); n != 0 {
		t.Errorf("%d idle instances after Close", n)
	}
	if _, _, err := m.Call(ctx, "call", in, CallOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Close: %v", err)
	}
}

func TestPoolBounded(t *testing.T) {
	ctx := context.Background()
	m := compileWith(t, "examples/textstats", CompileOptions{PoolSize: 2})
	in := []byte(`{"text":"Hello world."}`)
	// Six concurrent calls: none waits for the pool, at most 2 stay idle.
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for range 5 {
				if _, _, err := m.Call(ctx, "call", in, CallOptions{}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n := m.idleCount(); n > 2 || n == 0 {
		t.Errorf("%d idle instances, want 1..2", n)
	}
	// Across keys: at most idleKeysFactor × PoolSize.
	for i := range 20 {
		if _, _, err := m.Call(ctx, "call", in, CallOptions{PoolKey: string(rune('a' + i))}); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.idleCount(); n > idleKeysFactor*2 {
		t.Errorf("%d idle instances across keys, want at most %d", n, idleKeysFactor*2)
	}

	// No pooling: every call gets a fresh instance.
	m = compileWith(t, "examples/textstats", CompileOptions{PoolSize: -1})
	for range 3 {
		_, info, err := m.Call(ctx, "call", in, CallOptions{})
		if err != nil || info.Pooled {
			t.Fatalf("pooled %v, %v", info.Pooled, err)
		}
	}
}

// TestPoolResetsState checks that a reused instance starts each call
// clean: capture buffers, Extism vars, config, allowed hosts, logger.
func TestPoolResetsState(t *testing.T) {
	ctx := context.Background()
	m := compile(t, "hostile/hugeoutput", map[string]string{"bytes": "5"}, Limits{})
	for i, tt := range []struct {
		cfg  map[string]string
		want int
	}{
		{map[string]string{"bytes": "10"}, 10},
		{map[string]string{"bytes": "20"}, 20},
		{nil, 5}, // the module's config again
		{map[string]string{}, 64 << 20},
	} {
		out, info, err := m.Call(ctx, "call", nil, CallOptions{Config: tt.cfg})
		if tt.want > DefaultMaxOutput {
			wantCode(t, err, tool.CodeWasmLimit)
			continue
		}
		if err != nil || len(out) != tt.want || (i > 0) != info.Pooled {
			t.Errorf("call %d: %d bytes (want %d), pooled %v, %v", i, len(out), tt.want, info.Pooled, err)
		}
	}

	// The stdout capture starts empty at each call.
	m = compile(t, "hostile/hugeoutput", map[string]string{"bytes": "100000"}, Limits{})
	for i := range 2 {
		_, info, err := m.Call(ctx, "stdout", nil, CallOptions{})
		if err != nil || info.Pooled != (i == 1) {
			t.Fatalf("call %d: pooled %v, %v", i, info.Pooled, err)
		}
		if len(info.Stdout) != DefaultMaxLog || info.StdoutDropped != 100000-int64(DefaultMaxLog) || bytes.ContainsRune(info.Stdout, 'A') {
			t.Errorf("call %d: captured %d, dropped %d", i, len(info.Stdout), info.StdoutDropped)
		}
	}

	// Vars, allowed hosts and the logger a previous call left are reset
	// (set here by hand: no fixture uses vars).
	m = compile(t, "examples/textstats", nil, Limits{})
	in := []byte(`{"text":"x"}`)
	if _, _, err := m.Call(ctx, "call", in, CallOptions{PoolKey: "k"}); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	p := m.idle["k"][0].p
	m.mu.Unlock()
	p.Var["secret"] = []byte("from the last call")
	p.AllowedHosts = []string{"*"}
	logged := false
	p.SetLogger(func(extism.LogLevel, string) { logged = true })
	_, info, err := m.Call(ctx, "call", in, CallOptions{PoolKey: "k"})
	if err != nil || !info.Pooled {
		t.Fatalf("pooled %v, %v", info.Pooled, err)
	}
	if len(p.Var) != 0 || len(p.AllowedHosts) != 0 {
		t.Errorf("vars %v, allowed hosts %v after a reused call", p.Var, p.AllowedHosts)
	}
	p.Log(extism.LogLevelError, "x")
	if logged {
		t.Error("the previous logger survived")
	}
}

// TestPoolConcurrentHostile mixes healthy and hostile calls on one module
// from several goroutines (run it with -race): healthy calls keep
// succeeding, hostile ones fail with their code, and no instance carries
// one call's state into another.
func TestPoolConcurrentHostile(t *testing.T) {
	ctx := context.Background()
	m := compile(t, "hostile/trap", nil, Limits{Timeout: 2 * time.Second})
	ts := compile(t, "examples/textstats", nil, Limits{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 10 {
				_, _, err := m.Call(ctx, []string{"call", "unreachable", "nilderef", "exit"}[(g+i)%4], nil, CallOptions{})
				if e := tool.AsError(err); e == nil || e.Code != tool.CodeWasmTrap {
					t.Errorf("trap: %v", err)
				}
				out, _, err := ts.Call(ctx, "call", []byte(`{"text":"a b c"}`), CallOptions{PoolKey: string(rune('a' + g%2))})
				if err != nil || !bytes.Contains(out, []byte(`"words":3`)) {
					t.Errorf("textstats: %s %v", out, err)
				}
			}
		})
	}
	wg.Wait()
	if n := m.idleCount(); n != 0 {
		t.Errorf("%d trapped instances pooled", n)
	}
}
