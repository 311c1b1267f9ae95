package wasm

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// ErrLoad wraps every reason a module does not load: not wasm, invalid,
// an import the host does not provide, a memory minimum above the limit.
var ErrLoad = errors.New("wasm: module does not load")

// ErrClosed is returned by a call on a closed [Module].
var ErrClosed = errors.New("wasm: module closed")

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

const (
	// DefaultPoolSize is the default bound of idle instances per pool key.
	DefaultPoolSize = 4
	// maxPooledPayload: an instance whose call moved more than this
	// (input + output) is discarded rather than pooled, so a pooled
	// instance's memory stays small.
	maxPooledPayload = 1 << 20
	// idleKeysFactor bounds the idle instances of a module across all its
	// pool keys to idleKeysFactor × PoolSize.
	idleKeysFactor = 4
)

// CompileOptions configures [Engine.Compile]. The zero value is valid.
type CompileOptions struct {
	// Config is the sidecar config, served by the guest's config_get
	// unless a call replaces it ([CallOptions.Config]).
	Config map[string]string
	Limits Limits
	// HostFuncs are the host functions guests may import.
	HostFuncs []extism.HostFunction
	// Verified skips the import check and the trial instance (the module
	// was checked when its owner approved it): the fast start path. Load
	// failures then surface at the first call, as ErrLoad-wrapped errors.
	Verified bool
	// PoolSize bounds idle pooled instances per pool key (0 =
	// DefaultPoolSize; negative = no pooling, a fresh instance per call).
	PoolSize int
}

// Module is a compiled module, ready to be called. Safe for concurrent
// use: a call runs in an instance no other call uses at the same time.
type Module struct {
	compiled *extism.CompiledPlugin
	limits   Limits
	config   map[string]string
	exports  []string
	poolSize int
	// verified modules keep what explains a failed instantiation.
	decoded   *decoded
	hostFuncs []extism.HostFunction

	mu     sync.Mutex
	idle   map[string][]*instance // per pool key, most recently used last
	nIdle  int
	closed bool
}

// instance is one Extism plugin instance with its capture buffers, which
// are fixed at instantiation and reset before each call.
type instance struct {
	p              *extism.Plugin
	stdout, stderr *capWriter
	sleep          *sleeper
	calls          int // calls run so far
}

// sleeper is an instance's WASI sleep (poll_oneoff's clock subscriptions,
// Go's time.Sleep on wasip1). wazero implements it with a plain
// time.Sleep, which neither the call's deadline nor its cancellation
// interrupts (WithCloseOnContextDone acts only when the guest runs
// again): a guest asking for a day's sleep would hold its caller for a
// day. This one ends at the requested time or when the context bound to
// the instance — the running call's — is done, whichever comes first.
type sleeper struct {
	mu   sync.Mutex
	done <-chan struct{}
}

// bind makes ctx the context sleeps end with.
func (s *sleeper) bind(ctx context.Context) {
	s.mu.Lock()
	s.done = ctx.Done()
	s.mu.Unlock()
}

func (s *sleeper) sleep(ns int64) {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if ns <= 0 || done == nil { // nil: no call to bound it; never sleep unbounded
		return
	}
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	}
}

func (in *instance) close() { _ = in.p.Close(context.Background()) }

// Compile compiles a module (an Extism plugin or servlet, or a WASI
// command) with the options' sidecar config, limits and host functions.
// Its instances get WASI with no preopens, no environment and no
// arguments, no allowed paths, and no allowed hosts unless a call allows
// HTTP (see [CallOptions.HTTP]). A module that cannot load (bad bytes, an
// import the host does not provide, too much initial memory) fails here
// with [ErrLoad]; with o.Verified, only bytes that do not parse or compile
// fail here, the rest at the first call.
//
// Compilation uses the engine's cache and compilation workers; the module
// is compiled once (the import check reads the binary's import section, it
// does not compile).
func (e *Engine) Compile(ctx context.Context, wasm []byte, o CompileOptions) (*Module, error) {
	limits := o.Limits.withDefaults()
	d, err := parseModule(wasm)
	if err != nil {
		return nil, err
	}
	if d.hasMemory && d.memMin > uint64(limits.MemoryPages) {
		return nil, fmt.Errorf("%w: the module needs %d pages (%d MiB) of initial memory, over its limit of %d pages (%d MiB)",
			ErrLoad, d.memMin, d.memMin*pageSize>>20, limits.MemoryPages, uint64(limits.MemoryPages)*pageSize>>20)
	}
	if !o.Verified {
		if err := checkImports(d, o.HostFuncs); err != nil {
			return nil, err
		}
	}
	rc := wazero.NewRuntimeConfig().
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(limits.MemoryPages).
		WithCompilationCache(e.cache)
	cfg := make(map[string]string, len(o.Config))
	for k, v := range o.Config {
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
		// AllowedHosts stays empty (each call sets its instance's) and
		// AllowedPaths is never set (it follows symlinks out of the
		// mount).
	}
	cctx := experimental.WithCompilationWorkers(ctx, e.workers)
	cp, err := extism.NewCompiledPlugin(cctx, manifest, extism.PluginConfig{
		RuntimeConfig: rc,
		EnableWasi:    true,
		// http_headers returns the last response's headers (published
		// plugins read them), cleared before each call in prepare.
		EnableHttpResponseHeaders: true,
	}, o.HostFuncs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLoad, err)
	}
	poolSize := o.PoolSize
	if poolSize == 0 {
		poolSize = DefaultPoolSize
	}
	m := &Module{compiled: cp, limits: limits, config: cfg, exports: d.funcExports, poolSize: max(poolSize, 0)}
	if o.Verified {
		m.decoded, m.hostFuncs = d, o.HostFuncs
	} else {
		// A trial instance resolves every import and the memory minimum
		// now, not at the first call. The guest's initialisation does
		// not run, but a start section (which wazero always runs) does:
		// under the module's deadline, like any call, since the module
		// may be one nobody has approved yet.
		tctx, cancel := context.WithTimeout(ctx, limits.Timeout)
		sl := &sleeper{}
		sl.bind(tctx)
		p, err := cp.Instance(tctx, extism.PluginInstanceConfig{ModuleConfig: moduleConfig(io.Discard, io.Discard, sl)})
		timedOut := errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		if err != nil && timedOut {
			_ = cp.Close(context.Background())
			return nil, fmt.Errorf("%w: its start function did not finish within the module's %s deadline", ErrLoad, limits.Timeout)
		}
		if err != nil {
			_ = cp.Close(context.Background())
			return nil, fmt.Errorf("%w: %w", ErrLoad, err)
		}
		_ = p.Close(context.Background())
	}
	return m, nil
}

// checkImports refuses an import from a module the host does not provide,
// or a function missing from a host-function namespace, naming it.
func checkImports(d *decoded, hostFuncs []extism.HostFunction) error {
	provided := map[string]map[string]bool{}
	for _, f := range hostFuncs {
		if provided[f.Namespace] == nil {
			provided[f.Namespace] = map[string]bool{}
		}
		provided[f.Namespace][f.Name] = true
	}
	var missing []string
	for _, im := range d.imports {
		if im.module == wasiModule || im.module == extismKernel {
			continue // resolved (or refused, naming the function) by the trial instance
		}
		if im.kind != importFunc || !provided[im.module][im.name] {
			missing = append(missing, im.module+"."+im.name)
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

// Exports returns the module's exported function names, sorted.
func (m *Module) Exports() []string { return append([]string(nil), m.exports...) }

// Close closes the pooled instances and releases the compiled module.
// Calls still running fail; their instances are closed when they return.
func (m *Module) Close(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	idle := m.idle
	m.idle, m.nIdle = nil, 0
	m.mu.Unlock()
	for _, list := range idle {
		for _, in := range list {
			in.close()
		}
	}
	return m.compiled.Close(ctx)
}

// moduleConfig is the WASI configuration of every instance: output to the
// capture buffers, a real clock and real randomness, nothing else (no
// environment, no arguments, no file system, empty stdin).
func moduleConfig(stdout, stderr io.Writer, sl *sleeper) wazero.ModuleConfig {
	return wazero.NewModuleConfig().
		WithStdout(stdout).
		WithStderr(stderr).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(sl.sleep).
		WithRandSource(rand.Reader)
}

// acquire takes an idle instance of key, or makes one (never waiting).
func (m *Module) acquire(ctx context.Context, key string) (*instance, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, ErrClosed
	}
	if list := m.idle[key]; len(list) > 0 {
		in := list[len(list)-1]
		list[len(list)-1] = nil
		if len(list) == 1 {
			delete(m.idle, key)
		} else {
			m.idle[key] = list[:len(list)-1]
		}
		m.nIdle--
		m.mu.Unlock()
		in.sleep.bind(ctx)
		return in, nil
	}
	m.mu.Unlock()
	in := &instance{stdout: &capWriter{max: DefaultMaxLog}, stderr: &capWriter{max: DefaultMaxLog}, sleep: &sleeper{}}
	in.sleep.bind(ctx)
	p, err := m.compiled.Instance(ctx, extism.PluginInstanceConfig{ModuleConfig: moduleConfig(in.stdout, in.stderr, in.sleep)})
	if err != nil {
		return nil, err
	}
	in.p = p
	return in, nil
}

// release returns a healthy instance to key's idle list, or closes it when
// the module is closed or the list is full. When the module's idle
// instances across keys reach their bound, the oldest idle instance of
// another key makes room.
func (m *Module) release(key string, in *instance) {
	var evict *instance
	m.mu.Lock()
	if m.closed || len(m.idle[key]) >= m.poolSize {
		m.mu.Unlock()
		in.close()
		return
	}
	if m.nIdle >= idleKeysFactor*m.poolSize {
		for k, list := range m.idle {
			if k == key {
				continue
			}
			evict = list[0]
			if len(list) == 1 {
				delete(m.idle, k)
			} else {
				m.idle[k] = append(list[:0:0], list[1:]...)
			}
			m.nIdle--
			break
		}
		if evict == nil { // only this key: cannot happen while len < poolSize
			m.mu.Unlock()
			in.close()
			return
		}
	}
	if m.idle == nil {
		m.idle = map[string][]*instance{}
	}
	m.idle[key] = append(m.idle[key], in)
	m.nIdle++
	m.mu.Unlock()
	if evict != nil {
		evict.close()
	}
}

// idleCount is the number of pooled idle instances (for tests).
func (m *Module) idleCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nIdle
}

// allHosts is the AllowedHosts of an instance whose call may use HTTP.
var allHosts = []string{"*"}

// guestHTTPGuarded reports whether http.DefaultClient, which Extism's
// http_request always uses, sends through warden's gated transport.
func guestHTTPGuarded() bool {
	_, ok := http.DefaultClient.Transport.(gate.GuestHTTPGuard)
	return ok
}

// prepare resets what a previous call may have left in a (pooled)
// instance and applies the call's options: capture buffers, logger, Extism
// vars, config, allowed hosts.
func (m *Module) prepare(p *extism.Plugin, stderr *capWriter, o CallOptions) {
	// Extism's default logger writes guest logs to the host's stderr
	// (log.Print) once a global level is set; keep them in the capture.
	p.SetLogger(func(level extism.LogLevel, msg string) {
		fmt.Fprintf(stderr, "[extism %s] %s\n", level, msg)
	})
	clear(p.Var)
	p.Config = m.config
	if o.Config != nil {
		p.Config = o.Config
	}
	p.AllowedHosts = nil
	if o.HTTP && guestHTTPGuarded() {
		p.AllowedHosts = allHosts
	}
	p.LastStatusCode = 0
	clear(p.LastResponseHeaders)
}

// CallInfo describes a call, whatever its outcome; the caller logs it.
type CallInfo struct {
	Duration time.Duration
	// RC is the export's return code (0 = success, 1 = failure with a
	// message set by the guest).
	RC uint32
	// Exited is true when the guest called WASI proc_exit (a Go guest
	// does so when it panics or runs out of memory), or, for
	// [Module.RunCommand], when the command ran to its end; ExitCode is
	// its code.
	Exited   bool
	ExitCode uint32
	// Stdout and Stderr are what the guest wrote to WASI stdout and
	// stderr (and, in Stderr, what it logged through Extism), each capped
	// at DefaultMaxLog; the Dropped counts say how much was cut. A
	// command's stdout is its result, not repeated here.
	Stdout, Stderr               []byte
	StdoutDropped, StderrDropped int64
	// MemoryBytes is the size of the Extism kernel's memory after the
	// call (where input and output live).
	MemoryBytes uint32
	// Pooled is true when the call ran in an instance a previous call
	// had used.
	Pooled bool
}

// CallOptions are the per-call options of [Module.Call] and
// [Module.RunCommand]. The zero value is valid.
type CallOptions struct {
	// Config, when non-nil, replaces the module's config for this call
	// (the sidecar config plus granted env: values). It is read, never
	// modified, and must not change during the call.
	Config map[string]string
	// HTTP lets the guest's Extism http_request through: the instance's
	// AllowedHosts becomes ["*"] ONLY when http.DefaultClient.Transport
	// implements gate.GuestHTTPGuard (warden's gated transport, which
	// turns each request into a gated `http` tool call); otherwise
	// AllowedHosts stays empty and Extism refuses every request
	// (CAPABILITY_DENIED).
	HTTP bool
	// PoolKey partitions pooled instances: an instance is reused only by
	// calls with the same key (the wasm tool passes its effective grants,
	// so state a guest keeps can't cross to a call with other grants). ""
	// is a key like any other.
	PoolKey string
}

// refuseWASIOutput refuses to run guests while EXTISM_ENABLE_WASI_OUTPUT is
// set.
func refuseWASIOutput() error {
	if _, set := os.LookupEnv(envWASIOutput); set {
		return tool.Errorf(tool.CodeInternal, "unset "+envWASIOutput+" in warden's environment",
			"refusing to run a wasm guest: %s is set, and the Extism SDK would send the guest's output to the terminal", envWASIOutput)
	}
	return nil
}

// Call runs export (of an Extism plugin or servlet) with input as its
// Extism input and returns its output. Instances are pooled per (module,
// o.PoolKey), at most PoolSize idle per key, made on demand (a call never
// waits for another); an instance is discarded after any error (timeout,
// trap, limit, tool error) or a payload (input + output) over 1 MiB.
//
// A failure of the guest is a *tool.Error (TIMEOUT, WASM_TRAP,
// WASM_LIMIT, TOOL_ERROR, INVALID_INPUT for a missing export,
// CAPABILITY_DENIED for a refused http_request, or the *tool.Error a
// host function or warden's HTTP transport failed with); the cancellation
// of ctx is returned as ctx's error; a module compiled with
// CompileOptions.Verified that cannot be instantiated fails with an
// [ErrLoad]-wrapped error.
func (m *Module) Call(ctx context.Context, export string, input []byte, o CallOptions) (out []byte, info CallInfo, err error) {
	start := time.Now()
	defer func() { info.Duration = time.Since(start) }()
	if err := refuseWASIOutput(); err != nil {
		return nil, info, err
	}
	memLimit := int64(m.limits.MemoryPages) * pageSize
	if int64(len(input)) >= memLimit {
		return nil, info, tool.Errorf(tool.CodeWasmLimit, "raise the tool's memory limit or send less",
			"input of %d bytes does not fit in the guest's memory limit (%d bytes)", len(input), memLimit)
	}

	callCtx, cancel := context.WithTimeout(ctx, m.limits.Timeout)
	defer cancel()

	in, err := m.acquire(callCtx, o.PoolKey)
	if err != nil {
		return nil, info, m.instantiateError(ctx, callCtx, err)
	}
	info.Pooled = in.calls > 0
	in.calls++
	in.stdout.reset()
	in.stderr.reset()
	keep := false
	defer func() {
		info.Stdout, info.StdoutDropped = in.stdout.result()
		info.Stderr, info.StderrDropped = in.stderr.result()
		if keep {
			m.release(o.PoolKey, in)
		} else {
			in.close()
		}
	}()
	p := in.p
	m.prepare(p, in.stderr, o)
	if !p.FunctionExists(export) {
		keep = true // the instance did not run
		return nil, info, tool.Errorf(tool.CodeInvalidInput, "", "the module has no export %q", export)
	}
	// Extism does not check its input allocation: when the kernel cannot
	// grow, the guest silently sees empty input. The kernel's bump
	// allocator starts over at each call, so an input well below its
	// current memory always fits; otherwise allocate once to check
	// (CallWithContext resets and allocates again, in the grown memory).
	if len(input) > 0 && int64(len(input))+pageSize > int64(p.Memory().Size()) {
		if off, err := p.SetInputWithContext(callCtx, input); err != nil || off == 0 {
			if err == nil {
				err = tool.Errorf(tool.CodeWasmLimit, "raise the tool's memory limit or send less",
					"input of %d bytes does not fit in the guest's memory (limit %d bytes)", len(input), memLimit)
			}
			return nil, info, m.classify(ctx, callCtx, err, &info, in.stderr)
		}
	}

	rc, out, err := p.CallWithContext(callCtx, export, input)
	info.RC = rc
	info.MemoryBytes = p.Memory().Size()
	if err != nil {
		return nil, info, m.classify(ctx, callCtx, err, &info, in.stderr)
	}
	if rc != 0 {
		return nil, info, tool.Errorf(tool.CodeToolError, "", "export %s returned %d with no error message", export, rc)
	}
	if len(out) > m.limits.MaxOutput {
		return nil, info, tool.Errorf(tool.CodeWasmLimit, "raise the tool's max_output_bytes or ask for less",
			"output of %d bytes exceeds the limit of %d bytes", len(out), m.limits.MaxOutput)
	}
	if len(out) == 0 && int64(info.MemoryBytes)+pageSize > memLimit {
		// Extism's other silent failure: the guest's output block could
		// not be allocated in a kernel memory already at its limit.
		return nil, info, tool.Errorf(tool.CodeWasmLimit, "raise the tool's memory limit",
			"empty output with the guest's memory at its limit (%d bytes): the output did not fit", memLimit)
	}
	// A deadline that fired as the guest returned may have let wazero's
	// watcher close the instance: never pool one whose call context ended.
	keep = len(input)+len(out) <= maxPooledPayload && callCtx.Err() == nil
	return out, info, nil
}

// instantiateError maps a failed instantiation: the caller's cancellation,
// the call's deadline, a closed module, else a load failure (an import
// the host does not provide, the memory minimum over the limit: what the
// trial instance of an unverified module reports at Compile).
func (m *Module) instantiateError(ctx, callCtx context.Context, err error) error {
	switch {
	case errors.Is(err, ErrClosed):
		return err
	case ctx.Err() != nil:
		return fmt.Errorf("wasm: call cancelled: %w", ctx.Err())
	case errors.Is(callCtx.Err(), context.DeadlineExceeded):
		return tool.Errorf(tool.CodeTimeout, "raise the tool's timeout_ms if the work is legitimate",
			"the guest was not instantiated within its %s deadline", m.limits.Timeout)
	}
	if m.decoded != nil {
		// A verified module skipped the import check at Compile: it
		// names a missing import better than wazero does.
		if cerr := checkImports(m.decoded, m.hostFuncs); cerr != nil {
			return cerr
		}
	}
	return fmt.Errorf("%w: %w", ErrLoad, err)
}

// classify maps a failed instantiation or call to a *tool.Error, or to
// the caller's context error when ctx itself was cancelled.
func (m *Module) classify(ctx, callCtx context.Context, err error, info *CallInfo, stderr *capWriter) error {
	var rerr *tool.Error
	if errors.As(err, &rerr) {
		// A host function's error, or warden's HTTP transport's inside
		// Extism's http_request: Extism panics with it and wazero wraps
		// the recovered error with %w.
		return rerr
	}
	if ctx.Err() != nil {
		return fmt.Errorf("wasm: call cancelled: %w", ctx.Err())
	}
	if errors.Is(callCtx.Err(), context.DeadlineExceeded) {
		return tool.Errorf(tool.CodeTimeout, "raise the tool's timeout_ms if the work is legitimate",
			"the guest did not finish within its %s deadline", m.limits.Timeout)
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		info.Exited, info.ExitCode = true, exit.ExitCode()
	}
	log, _ := stderr.result()
	why := guestFatal(log)
	if e := limitError(why, int64(m.limits.MemoryPages)*pageSize); e != nil {
		return e
	}
	if info.Exited {
		msg := fmt.Sprintf("the guest exited with code %d", info.ExitCode)
		if why != "" {
			msg += ": " + why
		}
		return tool.Errorf(tool.CodeWasmTrap, "", "%s", msg)
	}
	text := err.Error()
	if i := strings.Index(text, "wasm error: "); i >= 0 {
		line, _, _ := strings.Cut(text[i:], "\n")
		if why != "" {
			// A Go reactor's panic ends in unreachable after printing why.
			line += " after " + why
		}
		return tool.Errorf(tool.CodeWasmTrap, "", "the guest trapped: %s", line)
	}
	if host, ok := refusedHTTP(text); ok {
		return tool.Errorf(tool.CodeCapabilityDenied, "grant the tool net: access to the host, and run warden with its gated HTTP transport",
			"the guest's HTTP request to %s was refused: this call may not use the network", host)
	}
	if strings.Contains(text, "memory") && strings.Contains(text, "limit") {
		return tool.Errorf(tool.CodeWasmLimit, "", "%s", firstLine(text))
	}
	if info.RC != 0 {
		return tool.Errorf(tool.CodeToolError, "", "%s", firstLine(text))
	}
	return tool.Errorf(tool.CodeWasmTrap, "", "the guest failed: %s", firstLine(text))
}

// limitError is WASM_LIMIT for a guest that died of a resource limit (why
// is guestFatal's line), or nil.
func limitError(why string, memLimit int64) *tool.Error {
	switch {
	case strings.Contains(why, "out of memory"):
		return tool.Errorf(tool.CodeWasmLimit, "raise the tool's memory_mb if the work is legitimate",
			"the guest ran out of memory (limit %d MiB): %s", memLimit>>20, why)
	case strings.Contains(why, "stack overflow") || strings.Contains(why, "stack exceeds"):
		return tool.Errorf(tool.CodeWasmLimit, "", "the guest overflowed its stack: %s", why)
	}
	return nil
}

// refusedHTTP recognises Extism's refusal of a host not in AllowedHosts
// ("HTTP request to 'URL' is not allowed") and returns the URL.
func refusedHTTP(text string) (string, bool) {
	const prefix, suffix = "HTTP request to '", "' is not allowed"
	_, rest, ok := strings.Cut(text, prefix)
	if !ok {
		return "", false
	}
	url, _, ok := strings.Cut(rest, suffix)
	return url, ok
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
// it never fails, so a chatty guest is not stopped by its log. onDrop, if
// set, runs once, at the first byte dropped.
type capWriter struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped int64
	onDrop  func()
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := min(len(p), w.max-len(w.buf))
	w.buf = append(w.buf, p[:n]...)
	if n < len(p) {
		if w.dropped == 0 && w.onDrop != nil {
			w.onDrop()
		}
		w.dropped += int64(len(p) - n)
	}
	return len(p), nil
}

// reset empties the writer for the next call of its instance.
func (w *capWriter) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf, w.dropped = w.buf[:0], 0
}

func (w *capWriter) result() ([]byte, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.buf), w.dropped
}
