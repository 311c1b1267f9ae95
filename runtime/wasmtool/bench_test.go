package wasmtool_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"testing"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"

	"github.com/wardenrt/warden/hostfuncs"
	"github.com/wardenrt/warden/internal/wasmfixture"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/wasmtool"
)

// BenchmarkWarmCall is issue 4's benchmark (c): a warm in-process call of a
// pure wasm tool through the gate (audit in memory, no durable write) next
// to a raw Extism call of the same export with the same input.
func BenchmarkWarmCall(b *testing.B) {
	const args = `{"text":"The quick brown fox jumps over the lazy dog. The dog sleeps."}`
	ctx := context.Background()

	b.Run("raw-extism", func(b *testing.B) {
		wasmBytes, err := os.ReadFile(wasmfixture.Path(b, "examples/textstats", false))
		if err != nil {
			b.Fatal(err)
		}
		cp, err := extism.NewCompiledPlugin(ctx, extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: wasmBytes}}},
			extism.PluginConfig{EnableWasi: true, RuntimeConfig: wazero.NewRuntimeConfig().WithCloseOnContextDone(true)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cp.Close(ctx)
		p, err := cp.Instance(ctx, extism.PluginInstanceConfig{ModuleConfig: wazero.NewModuleConfig().WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader)})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close(ctx)
		b.ResetTimer()
		for b.Loop() {
			rc, out, err := p.CallWithContext(ctx, "call", []byte(args))
			if err != nil || rc != 0 || len(out) == 0 {
				b.Fatal(rc, err)
			}
		}
	})

	b.Run("gate", func(b *testing.B) {
		e := newEnv(b)
		e.install("examples/textstats", "textstats")
		g, _ := e.gate()
		req := gate.Request{Tool: "textstats", Args: json.RawMessage(args), Principal: []string{"bench"}}
		if res, err := g.Call(ctx, req); err != nil || !res.Success {
			b.Fatal(err, res.Error)
		}
		b.ResetTimer()
		for b.Loop() {
			res, err := g.Call(ctx, req)
			if err != nil || !res.Success {
				b.Fatal(err, res.Error)
			}
		}
	})
}

// BenchmarkInstall: installing a published servlet (compat/bsky, standard
// Go, ~3.3 MB) — check (structure, imports, sidecar), a trial instance,
// describe, schemas enforced and compiled, pin written — next to what any
// Extism host does at the least to list a servlet's tools (compile,
// instantiate, call describe), both with a warm on-disk compilation cache
// and a cold one.
func BenchmarkInstall(b *testing.B) {
	ctx := context.Background()
	file := wasmfixture.Stage(b, "compat/bsky", "", false)
	wasmBytes, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("module: %d bytes (%.1f MiB)", len(wasmBytes), float64(len(wasmBytes))/(1<<20))
	install := func(b *testing.B, cache string) {
		h, err := wasmtool.Open(ctx, wasmtool.Options{Dir: b.TempDir(), CacheDir: cache, Pins: &memPins{}, HostFuncs: hostfuncs.Functions()})
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close(ctx)
		if _, err := h.Install(ctx, file, wasmtool.InstallOptions{Naming: wasmtool.Naming{Prefix: "bsky_", Aliases: map[string]string{"feed.timeline": "bsky_timeline"}}}); err != nil {
			b.Fatal(err)
		}
	}
	describe := func(b *testing.B, cache string) {
		c, err := wazero.NewCompilationCacheWithDir(cache)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close(ctx)
		cp, err := extism.NewCompiledPlugin(ctx, extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: wasmBytes}}},
			extism.PluginConfig{EnableWasi: true, RuntimeConfig: wazero.NewRuntimeConfig().WithCompilationCache(c)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cp.Close(ctx)
		p, err := cp.Instance(ctx, extism.PluginInstanceConfig{})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close(ctx)
		if rc, out, err := p.CallWithContext(ctx, "describe", nil); err != nil || rc != 0 || len(out) == 0 {
			b.Fatal(rc, err)
		}
	}
	warmW, warmX := b.TempDir(), b.TempDir()
	install(b, warmW)
	describe(b, warmX)
	b.Run("warden-install-warm-cache", func(b *testing.B) {
		for b.Loop() {
			install(b, warmW)
		}
	})
	b.Run("extism-compile-describe-warm-cache", func(b *testing.B) {
		for b.Loop() {
			describe(b, warmX)
		}
	})
	b.Run("warden-install-cold-cache", func(b *testing.B) {
		for b.Loop() {
			install(b, b.TempDir())
		}
	})
	b.Run("extism-compile-describe-cold-cache", func(b *testing.B) {
		for b.Loop() {
			describe(b, b.TempDir())
		}
	})
}
