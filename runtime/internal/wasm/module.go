package wasm

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wardenrt/warden/runtime"
)

// ErrLoad wraps every reason a module does not load: not wasm, invalid,
// an import the host does not provide, a memory minimum above the limit.
var ErrLoad = errors.New("wasm: module does not load")

// envWASIOutput makes the Extism SDK send every guest's WASI stdout and
// stderr to the host's (plugin.go, CompiledPlugin.Instance), overriding the
// module config. warden refuses to run guests while it is set.
const envWASIOutput = "EXTISM_ENABLE_WASI_OUTPUT"

// Host modules every module may import besides the host functions given to
// Compile.
const (
	wasiModule   = "wasi_snapshot_preview1"
	extismKernel = "extism:host/env"
)

// Module is a compiled Extism plugin, ready to be called. Safe for
// concurrent use: every call runs in its own instance.
type Module struct {
	compiled *extism.CompiledPlugin
	limits   Limits
}

// Compile validates and compiles an Extism plugin with the given sidecar
// config (served by the guest's config_get), limits and host functions.
// The plugin gets WASI with no preopens, no environment and no arguments,
// no allowed hosts (Extism's http_request refuses every URL) and no
// allowed paths. A module that cannot load (bad bytes, an import the host
// does not provide, too much initial memory) fails here with [ErrLoad].
func (e *Engine) Compile(ctx context.Context, wasm []byte, manifestConfig map[string]string, limits Limits, hostFuncs []extism.HostFunction) (*Module, error) {
	limits = limits.withDefaults()
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return nil, fmt.Errorf("%w: not a wasm module (bad magic number)", ErrLoad)
	}
	rc := wazero.NewRuntimeConfig().
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(limits.MemoryPages).
		WithCompilationCache(e.cache)
	if err := checkImports(ctx, rc, wasm, hostFuncs); err != nil {
		return nil, err
	}
	cfg := make(map[string]string, len(manifestConfig))
	for k, v := range manifestConfig {
		cfg[k] = v
	}
	manifest := extism.Manifest{
		Wasm: []extism.Wasm{extism.WasmData{Data: wasm, Name: "main"}},
		Memory: &extism.ManifestMemory{
			MaxPages:             limits.MemoryPages,
			MaxHttpResponseBytes: int64(limits.MaxOutput),
			MaxVarBytes:          1 << 20,
		},
		Config: cfg,
		// AllowedHosts and AllowedPaths stay empty: no network, no
		// files. Never set AllowedPaths (it follows symlinks out of the
		// mount).
	}
	cp, err := extism.NewCompiledPlugin(ctx, manifest, extism.PluginConfig{
		RuntimeConfig: rc,
		EnableWasi:    true,
	}, hostFuncs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLoad, err)
	}
	m := &Module{compiled: cp, limits: limits}
	// A trial instance resolves every import and the memory minimum now,
	// not at the first call. The guest's initialisation does not run.
	p, err := cp.Instance(ctx, extism.PluginInstanceConfig{ModuleConfig: m.moduleConfig(&capWriter{}, &capWriter{})})
	if err != nil {
		_ = cp.Close(context.Background())
		return nil, fmt.Errorf("%w: %w", ErrLoad, err)
	}
	_ = p.Close(context.Background())
	return m, nil
}

// checkImports compiles the module (a cache hit later) and refuses an
// import from a module the host does not provide, or a function missing
// from a host-function namespace, naming it.
func checkImports(ctx context.Context, rc wazero.RuntimeConfig, wasm []byte, hostFuncs []extism.HostFunction) error {
	r := wazero.NewRuntimeWithConfig(ctx, rc)
	defer r.Close(context.Background())
	cm, err := r.CompileModule(ctx, wasm)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrLoad, err)
	}
	provided := map[string]map[string]bool{}
	for _, f := range hostFuncs {
		if provided[f.Namespace] == nil {
			provided[f.Namespace] = map[string]bool{}
		}
		provided[f.Namespace][f.Name] = true
	}
	var missing []string
	for _, fn := range cm.ImportedFunctions() {
		mod, name, _ := fn.Import()
		if mod == wasiModule || mod == extismKernel {
			continue // resolved (or refused, naming the function) by the trial instance
		}
		if !provided[mod][name] {
			missing = append(missing, mod+"."+name)
		}
	}
	if len(missing) > 0 {
		ns := make([]string, 0, len(provided))
		for k := range provided {
			ns = append(ns, k)
		}
		sort.Strings(ns)
		have := "only " + strings.Join(append([]string{wasiModule, extismKernel}, ns...), ", ")
		return fmt.Errorf("%w: it imports %s, which the host does not provide (%s)", ErrLoad, strings.Join(missing, ", "), have)
	}
	return nil
}

// Limits returns the module's limits, defaults filled in.
func (m *Module) Limits() Limits { return m.limits }

// Close releases the compiled module.
func (m *Module) Close(ctx context.Context) error { return m.compiled.Close(ctx) }

// moduleConfig is the WASI configuration of every instance: output to the
// capture buffers, a real clock and real randomness, nothing else (no
// environment, no arguments, no file system).
func (m *Module) moduleConfig(stdout, stderr *capWriter) wazero.ModuleConfig {
	return wazero.NewModuleConfig().
		WithStdout(stdout).
		WithStderr(stderr).
		WithSysWalltime().
		WithSysNanotime().
		WithSysNanosleep().
		WithRandSource(rand.Reader)
}

// CallInfo describes a call, whatever its outcome; the caller logs it.
type CallInfo struct {
	Duration time.Duration
	// RC is the export's return code (0 = success, 1 = failure with a
	// message set by the guest).
	RC uint32
	// Exited is true when the guest called WASI proc_exit (a Go guest
	// does so when it panics or runs out of memory); ExitCode is its code.
	Exited   bool
	ExitCode uint32
	// Stdout and Stderr are what the guest wrote to WASI stdout and
	// stderr (and, in Stderr, what it logged through Extism), each capped
	// at DefaultMaxLog; the Dropped counts say how much was cut.
	Stdout, Stderr               []byte
	StdoutDropped, StderrDropped int64
	// MemoryBytes is the size of the Extism kernel's memory after the
	// call (where input and output live).
	MemoryBytes uint32
}

// Call runs export in a fresh instance with input as its Extism input and
// returns its output. A failure of the guest is a *runtime.Error (TIMEOUT,
// WASM_TRAP, WASM_LIMIT, TOOL_ERROR, INVALID_INPUT for a missing export);
// the cancellation of ctx is returned as ctx's error. The instance is
// closed after the call.
//
// TODO(issue 4): pool instances per module (bounded), replacing one after
// a timeout, a trap or a large payload.
func (m *Module) Call(ctx context.Context, export string, input []byte) (out []byte, info CallInfo, err error) {
	start := time.Now()
	stdout := &capWriter{max: DefaultMaxLog}
	stderr := &capWriter{max: DefaultMaxLog}
	defer func() {
		info.Duration = time.Since(start)
		info.Stdout, info.StdoutDropped = stdout.result()
		info.Stderr, info.StderrDropped = stderr.result()
	}()

	if _, set := os.LookupEnv(envWASIOutput); set {
		return nil, info, runtime.Errorf(runtime.CodeInternal, "unset "+envWASIOutput+" in warden's environment",
			"refusing to run a wasm guest: %s is set, and the Extism SDK would send the guest's output to the terminal", envWASIOutput)
	}
	memLimit := int64(m.limits.MemoryPages) * pageSize
	if int64(len(input)) >= memLimit {
		return nil, info, runtime.Errorf(runtime.CodeWasmLimit, "raise the tool's memory limit or send less",
			"input of %d bytes does not fit in the guest's memory limit (%d bytes)", len(input), memLimit)
	}

	callCtx, cancel := context.WithTimeout(ctx, m.limits.Timeout)
	defer cancel()

	p, err := m.compiled.Instance(callCtx, extism.PluginInstanceConfig{ModuleConfig: m.moduleConfig(stdout, stderr)})
	if err != nil {
		return nil, info, m.classify(ctx, callCtx, err, &info, stderr)
	}
	defer p.Close(context.Background())
	// Extism's default logger writes guest logs to the host's stderr
	// (log.Print) once a global level is set; keep them in the capture.
	p.SetLogger(func(level extism.LogLevel, msg string) {
		fmt.Fprintf(stderr, "[extism %s] %s\n", level, msg)
	})
	if !p.FunctionExists(export) {
		return nil, info, runtime.Errorf(runtime.CodeInvalidInput, "", "the module has no export %q", export)
	}
	// Extism does not check its input allocation: when the kernel cannot
	// grow, the guest silently sees empty input. Allocate once to check
	// (CallWithContext resets and allocates again, in the grown memory).
	if len(input) > 0 {
		if off, err := p.SetInputWithContext(callCtx, input); err != nil || off == 0 {
			if err == nil {
				err = runtime.Errorf(runtime.CodeWasmLimit, "raise the tool's memory limit or send less",
					"input of %d bytes does not fit in the guest's memory (limit %d bytes)", len(input), memLimit)
			}
			return nil, info, m.classify(ctx, callCtx, err, &info, stderr)
		}
	}

	rc, out, err := p.CallWithContext(callCtx, export, input)
	info.RC = rc
	info.MemoryBytes = p.Memory().Size()
	if err != nil {
		return nil, info, m.classify(ctx, callCtx, err, &info, stderr)
	}
	if rc != 0 {
		return nil, info, runtime.Errorf(runtime.CodeToolError, "", "export %s returned %d with no error message", export, rc)
	}
	if len(out) > m.limits.MaxOutput {
		return nil, info, runtime.Errorf(runtime.CodeWasmLimit, "raise the tool's max_output_bytes or ask for less",
			"output of %d bytes exceeds the limit of %d bytes", len(out), m.limits.MaxOutput)
	}
	if len(out) == 0 && int64(info.MemoryBytes)+pageSize > memLimit {
		// Extism's other silent failure: the guest's output block could
		// not be allocated in a kernel memory already at its limit.
		return nil, info, runtime.Errorf(runtime.CodeWasmLimit, "raise the tool's memory limit",
			"empty output with the guest's memory at its limit (%d bytes): the output did not fit", memLimit)
	}
	return out, info, nil
}

// classify maps a failed instantiation or call to a *runtime.Error, or to
// the caller's context error when ctx itself was cancelled.
func (m *Module) classify(ctx, callCtx context.Context, err error, info *CallInfo, stderr *capWriter) error {
	var rerr *runtime.Error
	if errors.As(err, &rerr) {
		return rerr
	}
	if ctx.Err() != nil {
		return fmt.Errorf("wasm: call cancelled: %w", ctx.Err())
	}
	if errors.Is(callCtx.Err(), context.DeadlineExceeded) {
		return runtime.Errorf(runtime.CodeTimeout, "raise the tool's timeout_ms if the work is legitimate",
			"the guest did not finish within its %s deadline", m.limits.Timeout)
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		info.Exited, info.ExitCode = true, exit.ExitCode()
	}
	log, _ := stderr.result()
	why := guestFatal(log)
	memLimit := int64(m.limits.MemoryPages) * pageSize
	switch {
	case strings.Contains(why, "out of memory"):
		return runtime.Errorf(runtime.CodeWasmLimit, "raise the tool's memory_mb if the work is legitimate",
			"the guest ran out of memory (limit %d MiB): %s", memLimit>>20, why)
	case strings.Contains(why, "stack overflow") || strings.Contains(why, "stack exceeds"):
		return runtime.Errorf(runtime.CodeWasmLimit, "", "the guest overflowed its stack: %s", why)
	case info.Exited:
		msg := fmt.Sprintf("the guest exited with code %d", info.ExitCode)
		if why != "" {
			msg += ": " + why
		}
		return runtime.Errorf(runtime.CodeWasmTrap, "", "%s", msg)
	}
	text := err.Error()
	if i := strings.Index(text, "wasm error: "); i >= 0 {
		line, _, _ := strings.Cut(text[i:], "\n")
		if why != "" {
			// A Go reactor's panic ends in unreachable after printing why.
			line += " after " + why
		}
		return runtime.Errorf(runtime.CodeWasmTrap, "", "the guest trapped: %s", line)
	}
	if strings.Contains(text, "memory") && strings.Contains(text, "limit") {
		return runtime.Errorf(runtime.CodeWasmLimit, "", "%s", firstLine(text))
	}
	if info.RC != 0 {
		return runtime.Errorf(runtime.CodeToolError, "", "%s", firstLine(text))
	}
	return runtime.Errorf(runtime.CodeWasmTrap, "", "the guest failed: %s", firstLine(text))
}

// guestFatal finds why a Go (or similar) guest died in its stderr: the
// first "panic:" or "fatal error:" line.
func guestFatal(stderr []byte) string {
	for _, line := range strings.Split(string(stderr), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") || strings.HasPrefix(line, "runtime: out of memory") {
			return line
		}
	}
	return ""
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// capWriter keeps the first max bytes written to it and counts the rest;
// it never fails, so a chatty guest is not stopped by its log.
type capWriter struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped int64
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := min(len(p), w.max-len(w.buf))
	w.buf = append(w.buf, p[:n]...)
	w.dropped += int64(len(p) - n)
	return len(p), nil
}

func (w *capWriter) result() ([]byte, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.buf), w.dropped
}
