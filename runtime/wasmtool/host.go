// Package wasmtool loads the wasm tools a user drops into <home>/tools or
// installs with `warden tool install`, pins each module by sha256 when its
// owner approves it, and serves its tools to the registry like any other:
// every call of a wasm tool goes through the gate, and the guest reaches the
// world only through host functions that go through the gate again, with
// the run's grants ∩ the grants the owner gave the tool (wasm-tools/README.md).
//
// A module is served from its pin: the files are hashed at load and again
// right before compiling, so what runs is what was approved (files whose
// stamps show no change since they last hashed are not hashed again, and
// what is compiled then is the copy of the approved bytes warden keeps in
// its cache: approved.go). Compilation is
// lazy (the first call of a module's tool compiles it, from the on-disk
// cache when warm), so listing tools or calling a core tool costs no
// compilation.
package wasmtool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	extism "github.com/extism/go-sdk"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/decode"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/internal/wasm"
	"github.com/wardenrt/warden/runtime/tool"
)

// maxModuleBytes caps a module file.
const maxModuleBytes = 64 << 20

// Options configures Open.
type Options struct {
	// Dir is where modules live (<home>/tools); created 0700 if missing.
	Dir string
	// CacheDir is the compilation cache (<home>/cache); "" keeps it in
	// memory. Refused if others can write to it.
	CacheDir string
	// Pins keeps approvals (the store).
	Pins Pins
	// HostFuncs are the host functions guests may import (hostfuncs.Functions()).
	HostFuncs []extism.HostFunction
	// CallContext, if set, derives the context of each guest call from
	// the one carrying its gate.Guest: cmd/warden passes
	// hostfuncs.WithExchange, which gives the call warden_call's buffer
	// path.
	CallContext func(context.Context) context.Context
	// Logger receives the guests' captured stdout and stderr.
	Logger *slog.Logger
	// HostTimeout bounds each host call a guest makes; 0 = gate.DefaultHostTimeout.
	HostTimeout time.Duration
	// Now is the clock for approvals (tests).
	Now func() time.Time
}

// Host is one process's view of the installed modules. Safe for concurrent
// use.
type Host struct {
	o        Options
	engine   *wasm.Engine
	approved approvals

	mu sync.Mutex
	// compiled is keyed by compileKey: a module re-approved while this
	// process runs (mcp serve) with other bytes, config or limits gets
	// its own compilation, and calls still holding the old pin keep
	// theirs (closed with the host).
	compiled map[string]*compiledModule
}

type compiledModule struct {
	once sync.Once
	mod  *wasm.Module
	err  error
}

// Open prepares a host; it compiles nothing.
func Open(ctx context.Context, o Options) (*Host, error) {
	if o.Dir == "" || o.Pins == nil {
		return nil, errors.New("wasmtool: Dir and Pins are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("wasmtool: tools dir: %w", err)
	}
	eng, err := wasm.NewEngine(ctx, wasm.EngineOptions{CacheDir: o.CacheDir})
	if err != nil {
		return nil, err
	}
	return &Host{o: o, engine: eng, approved: newApprovals(o.CacheDir), compiled: map[string]*compiledModule{}}, nil
}

// ErrUnsafeCacheDir is returned by [Open] for a compilation cache that
// someone else could write to or replace (it holds native code).
var ErrUnsafeCacheDir = wasm.ErrUnsafeCacheDir

// Close releases compiled modules and the cache.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, c := range h.compiled {
		if c.mod != nil {
			_ = c.mod.Close(ctx)
		}
		delete(h.compiled, key)
	}
	return h.engine.Close(ctx)
}

// Dir returns the tools directory.
func (h *Host) Dir() string { return h.o.Dir }

// Module states, as `warden tool ls` shows them.
const (
	StateOK         = "ok"
	StateUnapproved = "unapproved"
	StateChanged    = "changed"
	StateMissing    = "missing"
	StateError      = "error"
)

// Status is one module as Load found it.
type Status struct {
	Module string `json:"module"`
	File   string `json:"file"`
	State  string `json:"state"`
	// Reason says why a module is not loaded, and what to do.
	Reason string   `json:"reason,omitempty"`
	Tools  []string `json:"tools"`
	Pin    *Pin     `json:"pin,omitempty"`
}

func (h *Host) wasmPath(name string) string    { return filepath.Join(h.o.Dir, name+".wasm") }
func (h *Host) sidecarPath(name string) string { return filepath.Join(h.o.Dir, name+".tool.yaml") }

// Load finds every module in Dir and returns the tools of those whose files
// match their pins, with a status for every module (and for pins whose
// file is gone). taken reports names already used (core tools); a module
// whose tool name is taken, by a core tool or a module earlier in name
// order, is not loaded and says so. A module that fails never stops the
// others.
func (h *Host) Load(ctx context.Context, taken func(string) bool) ([]tool.Tool, []Status, error) {
	pins, err := h.pins(ctx)
	if err != nil {
		return nil, nil, err
	}
	entries, err := os.ReadDir(h.o.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("wasmtool: %w", err)
	}
	if h.settleStaged(ctx, entries) {
		if entries, err = os.ReadDir(h.o.Dir); err != nil {
			return nil, nil, fmt.Errorf("wasmtool: %w", err)
		}
		if pins, err = h.pins(ctx); err != nil {
			return nil, nil, err
		}
	}
	var names []string
	seen := map[string]bool{}
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".wasm"); ok && !e.IsDir() {
			names = append(names, n)
			seen[n] = true
		}
	}
	sort.Strings(names)
	used := map[string]string{} // tool name → module
	var tools []tool.Tool
	var statuses []Status
	for _, name := range names {
		st := Status{Module: name, File: h.wasmPath(name), Tools: []string{}}
		pin, ok := pins[name]
		switch {
		case !gate.ValidToolName(name):
			st.State, st.Reason = StateError, fmt.Sprintf("module name %q is invalid: rename the file to 1-64 letters, digits, _ or -", name)
		case !ok:
			st.State, st.Reason = StateUnapproved, fmt.Sprintf("not approved: review it with `warden tool approve %s`", name)
		default:
			st.Pin = pin
			for _, t := range pin.Tools {
				st.Tools = append(st.Tools, t.Name)
			}
			if why := h.verifyFiles(name, pin); why != "" {
				st.State, st.Reason = StateChanged, why+fmt.Sprintf(": refused until re-approved (`warden tool approve %s` shows what changed)", name)
				break
			}
			if err := checkNames(pin, taken, used); err != nil {
				st.State, st.Reason = StateError, loadReason(name, err)
				break
			}
			key := compileKey(name, pin)
			for _, t := range pin.Tools {
				used[strings.ToLower(t.Name)] = name
				tools = append(tools, &Tool{host: h, module: name, pin: pin, spec: t, key: key})
			}
			st.State = StateOK
		}
		statuses = append(statuses, st)
	}
	for name, pin := range pins {
		if !seen[name] {
			statuses = append(statuses, Status{Module: name, File: h.wasmPath(name), State: StateMissing, Pin: pin, Tools: []string{},
				Reason: fmt.Sprintf("approved but %s.wasm is gone: reinstall it, or `warden tool rm %s`", name, name)})
		}
	}
	sort.SliceStable(statuses, func(i, j int) bool { return statuses[i].Module < statuses[j].Module })
	return tools, statuses, nil
}

// verifyFiles returns "" when name's files hash to the pin, else why not.
// Files unchanged since they last did are not hashed again (approvals).
func (h *Host) verifyFiles(name string, pin *Pin) string {
	if h.approved.unchanged(name, h.wasmPath(name), h.sidecarPath(name), pin) {
		return ""
	}
	b, sum, stamp, err := readStamped(h.wasmPath(name), maxModuleBytes)
	if err != nil {
		return fmt.Sprintf("cannot read %s.wasm: %v", name, err)
	}
	if sum != pin.SHA256 {
		return fmt.Sprintf("%s.wasm changed since approved (sha256 %s, approved %s)", name, short(sum), short(pin.SHA256))
	}
	_, scSum, scStamp, err := readStamped(h.sidecarPath(name), MaxSidecarBytes)
	if errors.Is(err, os.ErrNotExist) {
		scSum, err = "", nil
	}
	if err != nil {
		return fmt.Sprintf("cannot read %s.tool.yaml: %v", name, err)
	}
	if scSum != pin.SidecarSHA256 {
		return fmt.Sprintf("%s.tool.yaml changed since approved", name)
	}
	h.approved.keep(sum, b)
	if stamp != nil && (scSum == "" || scStamp != nil) {
		h.approved.remember(name, verified{Wasm: *stamp, SHA256: sum, Sidecar: scStamp, SidecarSHA256: scSum}, h.o.Now())
	}
	return ""
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

// readHashed reads a module file or a sidecar (regular, not a symlink, at
// most max bytes — its size checked before it is read) and its sha256.
func readHashed(path string, max int64) ([]byte, string, error) {
	b, sum, _, err := readStamped(path, max)
	return b, sum, err
}

// readStamped is readHashed with the stamp of the file read, taken after
// reading it (nil where there is none).
func readStamped(path string, max int64) ([]byte, string, *fileStamp, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, "", nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, "", nil, fmt.Errorf("%s is not a regular file", filepath.Base(path))
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|oNoFollow, 0)
	if err != nil {
		return nil, "", nil, err
	}
	defer f.Close()
	b, err := decode.Read(f, path, max)
	if err != nil {
		return nil, "", nil, err
	}
	var stamp *fileStamp
	if fi, err := f.Stat(); err == nil {
		if s, ok := stampOf(fi); ok {
			stamp = &s
		}
	}
	s := sha256.Sum256(b)
	return b, hex.EncodeToString(s[:]), stamp, nil
}

// sidecarHash is the sidecar's sha256, or "" when there is none.
func sidecarHash(path string) (string, error) {
	_, sum, err := readHashed(path, MaxSidecarBytes)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return sum, err
}

func (h *Host) pins(ctx context.Context) (map[string]*Pin, error) {
	docs, err := h.o.Pins.ListPins(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*Pin, len(docs))
	for name, doc := range docs {
		p, err := decodePin(doc)
		if err != nil {
			return nil, fmt.Errorf("wasmtool: pin of %s: %w", name, err)
		}
		out[name] = p
	}
	return out, nil
}

func (h *Host) pin(ctx context.Context, name string) (*Pin, error) {
	doc, err := h.o.Pins.Pin(ctx, name)
	if err != nil {
		return nil, err
	}
	return decodePin(doc)
}

func (h *Host) putPin(ctx context.Context, p *Pin) error {
	doc, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return h.o.Pins.PutPin(ctx, p.Module, doc)
}

// engineLimits converts sidecar limits to the engine's.
func engineLimits(l Limits) wasm.Limits {
	l = l.withDefaults()
	return wasm.Limits{
		MemoryPages: uint32(l.MemoryMB) * 16,
		Timeout:     time.Duration(l.TimeoutMS) * time.Millisecond,
		MaxOutput:   l.MaxOutputBytes,
	}
}

// compileKey names what a compilation depends on: the module, its pinned
// hash, and the config and limits compiled in.
func compileKey(name string, pin *Pin) string {
	b, _ := json.Marshal(struct {
		Config map[string]string
		Limits Limits
	}{pin.Config, pin.Limits})
	return name + "\x00" + pin.SHA256 + "\x00" + string(b)
}

// module returns the module compiled for name's pin (key: its compileKey),
// compiling it on first use from bytes that must still hash to the pin.
func (h *Host) module(ctx context.Context, name string, pin *Pin, key string) (*wasm.Module, error) {
	h.mu.Lock()
	c, ok := h.compiled[key]
	if !ok {
		c = &compiledModule{}
		h.compiled[key] = c
	}
	h.mu.Unlock()
	c.once.Do(func() {
		b, err := h.approvedBytes(name, pin)
		if err != nil {
			c.err = err
			return
		}
		c.mod, c.err = h.engine.Compile(ctx, b, wasm.CompileOptions{
			Config: pin.Config, Limits: engineLimits(pin.Limits), HostFuncs: h.o.HostFuncs, Verified: true,
		})
	})
	if c.err != nil {
		// A failed compile is retried by the next call.
		h.mu.Lock()
		if h.compiled[key] == c {
			delete(h.compiled, key)
		}
		h.mu.Unlock()
	}
	return c.mod, c.err
}

// approvedBytes returns name's module bytes, which hash to pin: the
// approved copy when the files are unchanged since they last did, else the
// file, hashed (and kept as the approved copy when it matches).
func (h *Host) approvedBytes(name string, pin *Pin) ([]byte, error) {
	if h.approved.unchanged(name, h.wasmPath(name), h.sidecarPath(name), pin) {
		if b, ok := h.approved.bytes(pin.SHA256); ok {
			return b, nil
		}
	}
	b, sum, err := readHashed(h.wasmPath(name), maxModuleBytes)
	if err != nil {
		return nil, err
	}
	if sum != pin.SHA256 {
		return nil, fmt.Errorf("%s.wasm changed since approved (sha256 %s, approved %s): refused until `warden tool approve %s`", name, short(sum), short(pin.SHA256), name)
	}
	h.approved.keep(sum, b)
	return b, nil
}

// evict drops name's compiled modules.
func (h *Host) evict(ctx context.Context, name string) {
	var drop []*compiledModule
	h.mu.Lock()
	for key, c := range h.compiled {
		if strings.HasPrefix(key, name+"\x00") {
			drop = append(drop, c)
			delete(h.compiled, key)
		}
	}
	h.mu.Unlock()
	for _, c := range drop {
		if c.mod != nil {
			_ = c.mod.Close(ctx)
		}
	}
}

// checkTimeout bounds what checking a module nobody has approved yet may
// run — its start function and a servlet's describe — whatever limits its
// own sidecar asks for.
const checkTimeout = 10 * time.Second

// files is what a module's files declare, read and checked without
// running anything.
type files struct {
	pin  *Pin // no tools, grants or approval yet
	wasm []byte
	sc   *Sidecar
	info wasm.ModuleInfo
	// export is the Extism plugin's export (the sidecar's, else found).
	export string
}

func (f *files) has(export string) bool { return slices.Contains(f.info.Exports, export) }

// readFiles reads name's module and sidecar now, parses the sidecar,
// decodes the module's sections, decides its ABI and checks its imports
// and the exports its ABI needs. It compiles and runs nothing.
func (h *Host) readFiles(name string) (*files, error) {
	return h.readFilesAt(name, h.wasmPath(name), h.sidecarPath(name))
}

// readFilesAt is readFiles of module name's files at wasmPath and
// scPath (an install's staged copies).
func (h *Host) readFilesAt(name, wasmPath, scPath string) (*files, error) {
	if !gate.ValidToolName(name) {
		return nil, fmt.Errorf("module name %q is invalid: use 1-64 letters, digits, _ or -", name)
	}
	b, sum, err := readHashed(wasmPath, maxModuleBytes)
	if err != nil {
		return nil, err
	}
	f := &files{wasm: b}
	scSum := ""
	if raw, s, err := readHashed(scPath, MaxSidecarBytes); err == nil {
		scSum = s
		if f.sc, err = ParseSidecar(name+".tool.yaml", raw); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if f.info, err = h.engine.Inspect(context.Background(), b); err != nil {
		return nil, fmt.Errorf("%s.wasm: %w", name, err)
	}
	if err := h.engine.Check(b, h.o.HostFuncs); err != nil {
		return nil, fmt.Errorf("%s.wasm: %w", name, err)
	}
	p := &Pin{Module: name, SHA256: sum, Size: int64(len(b)), SidecarSHA256: scSum, Requested: []string{}, Granted: []string{}}
	sc := f.sc
	if sc != nil {
		p.ABI = sc.ABI
		p.Requested = append(p.Requested, sc.Capabilities...)
		p.Limits = sc.Limits
		p.Config = sc.Config
		p.InputFrom, p.Output = sc.Input.From, sc.Output
	}
	p.Limits = p.Limits.withDefaults()
	f.pin = p
	plugin := f.pluginExports()
	if p.ABI == "" {
		switch {
		case f.has("describe") && f.has("call") && (sc == nil || sc.schema == nil):
			p.ABI = ABIServlet
		case f.has("_start") && len(plugin) == 0 && (sc == nil || sc.Export == ""):
			// A WASI command: _start and nothing else to call. A module
			// exporting _start beside a plugin function (TinyGo -target
			// wasi) is a plugin, as for every Extism host.
			p.ABI = ABICommand
		default:
			p.ABI = ABIExtism
		}
	}
	if sc == nil && p.ABI != ABIServlet {
		return nil, fmt.Errorf("%s.wasm needs a sidecar %s.tool.yaml (name, description, input_schema or input, …): only servlets (exports describe and call) describe themselves", name, name)
	}
	if len(sc.toolOverrides()) > 0 && p.ABI != ABIServlet {
		return nil, fmt.Errorf("%s.tool.yaml: tools: per-tool overrides are for servlets, and %s.wasm is an %s module", name, name, p.ABI)
	}
	switch p.ABI {
	case ABIServlet:
		for _, e := range []string{"describe", "call"} {
			if !f.has(e) {
				return nil, fmt.Errorf("%s.wasm: a servlet must export %s", name, e)
			}
		}
		if sc != nil && (sc.Input.From != "" || sc.Output != "") {
			return nil, fmt.Errorf("%s.tool.yaml: input and output are for Extism plugins and commands; a servlet's call has its own format", name)
		}
	case ABICommand:
		if !f.has("_start") {
			return nil, fmt.Errorf("%s.wasm: a wasi-command must export _start (build without -buildmode)", name)
		}
	default:
		export := sc.Export
		switch {
		case export != "":
		case f.has("call"):
			export = "call"
		case len(plugin) == 1:
			// An Extism plugin's conventional export (count_vowels,
			// greet, …): the only function it exports besides the
			// runtime's own.
			export = plugin[0]
		case len(plugin) == 0:
			return nil, fmt.Errorf("%s.wasm exports no function to call (exports: %s)", name, orNone(strings.Join(f.info.Exports, ", ")))
		default:
			return nil, fmt.Errorf("%s.wasm exports %s: name the one to call with `export: NAME` in %s.tool.yaml", name, strings.Join(plugin, ", "), name)
		}
		if !f.has(export) {
			return nil, fmt.Errorf("%s.wasm does not export %q (the sidecar's export; exports: %s)", name, export, strings.Join(f.info.Exports, ", "))
		}
		f.export = export
	}
	return f, nil
}

// runtimeExports are the functions a toolchain exports for its own
// runtime or the host's, never a plugin's entry point.
var runtimeExports = map[string]bool{
	"_start": true, "_initialize": true, "__wasm_call_ctors": true, "hs_init": true, "hs_exit": true,
	"malloc": true, "free": true, "calloc": true, "realloc": true, "cabi_realloc": true, "__main_argc_argv": true,
	"asyncify_start_unwind": true, "asyncify_stop_unwind": true, "asyncify_start_rewind": true, "asyncify_stop_rewind": true, "asyncify_get_state": true,
}

// pluginExports are the exported functions that could be a plugin's entry
// point: not the runtime's, not a servlet's describe.
func (f *files) pluginExports() []string {
	var out []string
	for _, e := range f.info.Exports {
		if runtimeExports[e] || e == "describe" || strings.HasPrefix(e, "__") {
			continue
		}
		out = append(out, e)
	}
	return out
}

// Check checks name's files as far as can be done without running them
// (`warden tool ls` on a module nobody has approved: a dropped-in module
// runs nothing until its owner looks at it with inspect or approve).
func (h *Host) Check(name string) error {
	_, err := h.readFiles(name)
	return err
}

// candidate reads name's files now and checks them completely — sidecar,
// ABI, imports, a trial instance, the servlet's describe, the sidecar's
// overrides, tool names (named by n) and schemas (as warden enforces
// them) — returning the pin they would get (no grants, not approved).
// kept says n is the pin's own naming, kept for a new version.
// What it runs of the module runs within checkTimeout at most.
func (h *Host) candidate(ctx context.Context, name string, n Naming, kept bool) (*Pin, error) {
	return h.candidateAt(ctx, name, h.wasmPath(name), h.sidecarPath(name), n, kept)
}

// candidateAt is candidate of module name's files at wasmPath and scPath.
func (h *Host) candidateAt(ctx context.Context, name, wasmPath, scPath string, n Naming, kept bool) (*Pin, error) {
	f, err := h.readFilesAt(name, wasmPath, scPath)
	if err != nil {
		return nil, err
	}
	p, sc := f.pin, f.sc
	limits := engineLimits(p.Limits)
	limits.Timeout = min(limits.Timeout, checkTimeout)
	mod, err := h.engine.Compile(ctx, f.wasm, wasm.CompileOptions{Config: p.Config, Limits: limits, HostFuncs: h.o.HostFuncs})
	if err != nil {
		return nil, fmt.Errorf("%s.wasm: %w", name, err)
	}
	defer mod.Close(context.Background())
	switch p.ABI {
	case ABIServlet:
		tools, err := describe(ctx, mod)
		if err != nil {
			return nil, fmt.Errorf("%s.wasm: describe: %w", name, err)
		}
		p.Tools = tools
		if err := applyOverrides(name, p.Tools, sc.toolOverrides()); err != nil {
			return nil, err
		}
	case ABICommand:
		p.Tools = []ToolSpec{{Name: name, Description: sc.Description, InputSchema: sc.schema, Export: "_start"}}
	default:
		p.Tools = []ToolSpec{{Name: name, Description: sc.Description, InputSchema: sc.schema, Export: f.export}}
	}
	if p.InputFrom != "" {
		t := &p.Tools[0]
		if len(t.InputSchema) == 0 {
			t.InputSchema = textSchema(p.InputFrom)
		} else if err := checkTextInput(t.InputSchema, p.InputFrom); err != nil {
			return nil, fmt.Errorf("%s.tool.yaml: input: {from: %s}: %w", name, p.InputFrom, err)
		}
	}
	for i := range p.Tools {
		if err := enforceTool(name, p.ABI, &p.Tools[i]); err != nil {
			return nil, err
		}
	}
	if kept {
		// The pin's naming, kept for a new version: an alias of a tool
		// the module no longer lists goes (the diff shows it).
		n.Aliases = maps.Clone(n.Aliases)
		for own := range n.Aliases {
			if !slices.ContainsFunc(p.Tools, func(t ToolSpec) bool { return t.Name == own }) {
				delete(n.Aliases, own)
			}
		}
	}
	if err := applyNaming(p, n); err != nil {
		return nil, err
	}
	return p, nil
}

// enforceTool checks a tool of module name (of abi) — a description, an
// input schema that warden can close (enforceSchema) and compile — and
// sets its schema to the one warden enforces, keeping the module's own.
func enforceTool(name, abi string, t *ToolSpec) error {
	if len(t.InputSchema) == 0 {
		return fmt.Errorf("%s: tool %s has no input_schema (a sidecar gives one: input_schema, or input: {from: ARG} for a plugin that takes text)", name, t.Name)
	}
	if t.Description == "" {
		return fmt.Errorf("%s: tool %s has no description", name, t.Name)
	}
	enforced, rep, err := enforceSchema(t.InputSchema)
	if err != nil {
		return fmt.Errorf("%s: tool %s: %w%s", name, t.Name, err, overrideHint(name, abi, t.Name))
	}
	if _, err := tool.CompileSchema(t.Name, enforced); err != nil {
		msg := err.Error()
		if len(rep.Repairs) > 0 {
			msg += " (after repairing: " + strings.Join(rep.Repairs, "; ") + ")"
		}
		return fmt.Errorf("%s: %s%s", name, msg, overrideHint(name, abi, t.Name))
	}
	if !jsonEqual(enforced, t.InputSchema) {
		// An override's schema is closed too, but the module's own
		// schema, which applyOverrides kept, stays the one shown and
		// compared.
		if len(t.ModuleSchema) == 0 {
			t.ModuleSchema = t.InputSchema
		}
		t.InputSchema = enforced
	}
	if !rep.empty() {
		t.Schema = &rep
	}
	return nil
}

// overrideHint says how the owner replaces a schema warden cannot use.
func overrideHint(module, abi, tool string) string {
	if abi == ABIServlet {
		return fmt.Sprintf("; give the tool a schema of your own in %s.tool.yaml beside the module: tools: {%s: {input_schema: {type: object, properties: {…}}}}", module, tool)
	}
	return fmt.Sprintf("; fix input_schema in %s.tool.yaml", module)
}

// applyOverrides applies the sidecar's per-tool overrides (keyed by the
// tools' own names) to a servlet's tools.
func applyOverrides(module string, tools []ToolSpec, ov map[string]ToolOverride) error {
	have := map[string]bool{}
	for i := range tools {
		t := &tools[i]
		have[t.Name] = true
		o, ok := ov[t.Name]
		if !ok {
			continue
		}
		if o.Description != "" {
			t.Description = o.Description
			t.Overrides = append(t.Overrides, "description")
		}
		if o.schema != nil {
			t.ModuleSchema = t.InputSchema
			t.InputSchema = o.schema
			t.Overrides = append(t.Overrides, "input_schema")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(ov)) {
		if !have[name] {
			return fmt.Errorf("%s.tool.yaml: tools.%s: the servlet's describe lists no tool %q (its tools: %s)", module, name, name, strings.Join(slices.Sorted(maps.Keys(have)), ", "))
		}
	}
	return nil
}

// textSchema is the input schema of a plugin that takes the string
// argument from as its raw input.
func textSchema(from string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			from: map[string]any{"type": "string", "description": "passed to the plugin as its raw input"},
		},
		"required":             []string{from},
		"additionalProperties": false,
	})
	return b
}

// checkTextInput checks that a sidecar's schema declares the argument
// input: {from: ARG} names, as a string.
func checkTextInput(schema json.RawMessage, from string) error {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return fmt.Errorf("the input schema is not a JSON object")
	}
	p, ok := s.Properties[from]
	if !ok {
		return fmt.Errorf("input_schema declares no property %q", from)
	}
	if p.Type != "string" {
		return fmt.Errorf("input_schema's property %q must be {type: string}", from)
	}
	return nil
}

// describe calls a servlet's describe export.
func describe(ctx context.Context, mod *wasm.Module) ([]ToolSpec, error) {
	out, _, err := mod.Call(ctx, "describe", nil, wasm.CallOptions{PoolKey: "describe"})
	if err != nil {
		return nil, err
	}
	return parseDescribe(out)
}

// parseDescribe reads what a servlet's describe returned: its tools, each
// with a name (unique, UTF-8, at most 128 bytes), a description and an
// input schema (checked later, in candidate).
func parseDescribe(out []byte) ([]ToolSpec, error) {
	var d struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	// The module's own bytes: strictly, as a sidecar's (no duplicate
	// keys, nesting bounded), before they are read into the format.
	if _, err := decode.JSON("describe", out, &decode.Limits{MaxBytes: MaxMaxOutputBytes}); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(out, &d); err != nil {
		return nil, fmt.Errorf("not the servlet describe format {\"tools\":[{name, description, inputSchema}]}: %v", err)
	}
	if len(d.Tools) == 0 {
		return nil, errors.New("describes no tools")
	}
	seen := map[string]bool{}
	var tools []ToolSpec
	for _, t := range d.Tools {
		if t.Name == "" || len(t.Name) > 128 || !utf8.ValidString(t.Name) {
			return nil, fmt.Errorf("a tool's name %q is empty, over 128 bytes or not UTF-8", t.Name)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("tool %q listed twice", t.Name)
		}
		seen[t.Name] = true
		tools = append(tools, ToolSpec{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, Export: "call"})
	}
	return tools, nil
}

// InstallOptions configures Install.
type InstallOptions struct {
	// Name is the module's name (and, for a one-tool module, the tool's);
	// default: the sidecar's name, else the file's base name.
	Name string
	// Grants are given to the module at once.
	Grants []string
	// Naming names the module's tools (a prefix, aliases); the zero value
	// keeps their own names.
	Naming Naming
	// Taken reports names already used by core tools.
	Taken func(string) bool
	// By names who approved.
	By string
}

// Installed is what Install did.
type Installed struct {
	Pin      *Pin
	Warnings []string
}

// Install copies file (and the FILE.tool.yaml beside it, if any) into Dir
// as NAME.wasm and NAME.tool.yaml, checks it completely and pins it with
// the given grants. Nothing is left behind when it fails.
func (h *Host) Install(ctx context.Context, file string, o InstallOptions) (*Installed, error) {
	src, _, err := readHashed(file, maxModuleBytes)
	if err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(filepath.Base(file), ".wasm")
	scFile := filepath.Join(filepath.Dir(file), base+".tool.yaml")
	scRaw, _, scErr := readHashed(scFile, MaxSidecarBytes)
	if scErr != nil && !errors.Is(scErr, os.ErrNotExist) {
		return nil, scErr
	}
	name := o.Name
	if name == "" && scErr == nil {
		if sc, err := ParseSidecar(filepath.Base(scFile), scRaw); err != nil {
			return nil, err
		} else if sc.Name != "" {
			name = sc.Name
		}
	}
	if name == "" {
		name = base
	}
	if !gate.ValidToolName(name) {
		return nil, &ModuleNameError{Name: name, Fix: validName(name)}
	}
	grants, err := parseGrants(o.Grants)
	if err != nil {
		return nil, err
	}
	if old, err := h.pin(ctx, name); err == nil {
		ee := &ExistsError{Module: name, Free: h.freeName(ctx, name)}
		if ee.Free != "" && old.ABI == ABIServlet {
			// A servlet's tools keep their names under another module
			// name: the copy needs its own.
			fix := Naming{Prefix: ee.Free + "_"}
			for own := range old.Aliases {
				if fix.Aliases == nil {
					fix.Aliases = map[string]string{}
				}
				fix.Aliases[own] = validName(fix.Prefix + own)
			}
			ee.Fix = &fix
		}
		return nil, ee
	} else if !errors.Is(err, gate.ErrNotFound) {
		return nil, err
	}
	for _, p := range []string{h.wasmPath(name), h.sidecarPath(name)} {
		if _, err := os.Lstat(p); err == nil {
			return nil, &ExistsError{Module: name, DroppedIn: true, File: filepath.Base(p), Dir: h.o.Dir, Free: h.freeName(ctx, name)}
		}
	}
	// The files are staged under names Load does not read, checked
	// there, pinned, and only then put in place: a process killed before
	// the pin leaves no module (the next Load removes the staged copies),
	// one killed after it a pinned module whose files the next Load puts
	// in place. Never a module in place that is not what its pin says.
	stWasm, stSc := h.stagedPath(name, stagedWasm), h.stagedPath(name, stagedSidecar)
	var staged []string // what this install wrote: all that cleanup removes
	cleanup := func() {
		for _, p := range staged {
			os.Remove(p)
		}
	}
	if err := createStaged(stWasm, src); err != nil {
		return nil, err
	}
	staged = append(staged, stWasm)
	if scErr == nil {
		if err := createStaged(stSc, scRaw); err != nil {
			cleanup()
			return nil, err
		}
		staged = append(staged, stSc)
	}
	if err := CheckNaming(o.Naming); err != nil {
		cleanup()
		return nil, err
	}
	p, err := h.candidateAt(ctx, name, stWasm, stSc, o.Naming, false)
	if err != nil {
		cleanup()
		return nil, err
	}
	pins, err := h.pins(ctx)
	if err != nil {
		cleanup()
		return nil, err
	}
	if err := checkNames(p, o.Taken, usedNames(pins, name)); err != nil {
		cleanup()
		return nil, err
	}
	p.Granted = grants
	p.ApprovedAt, p.ApprovedBy = h.o.Now().UTC(), o.By
	if err := h.putPin(ctx, p); err != nil {
		cleanup()
		return nil, err
	}
	// The sidecar first: a module is loaded by its .wasm.
	err = nil
	if scErr == nil {
		err = os.Rename(stSc, h.sidecarPath(name))
	}
	if err == nil {
		err = os.Rename(stWasm, h.wasmPath(name))
	}
	if err != nil {
		cleanup()
		os.Remove(h.sidecarPath(name))
		if derr := h.o.Pins.DeletePin(context.WithoutCancel(ctx), name); derr != nil {
			return nil, errors.Join(err, derr)
		}
		return nil, err
	}
	syncDir(h.o.Dir)
	return &Installed{Pin: p, Warnings: unrequested(p)}, nil
}

// unrequested warns about grants the module did not request.
func unrequested(p *Pin) []string {
	var w []string
	for _, g := range p.Granted {
		if !slices.Contains(p.Requested, g) {
			w = append(w, fmt.Sprintf("%s grants %s, which the module does not request", p.Module, g))
		}
	}
	return w
}

func parseGrants(specs []string) ([]string, error) {
	out := []string{}
	for _, s := range specs {
		g, err := capability.Parse(s)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, g.String()) {
			out = append(out, g.String())
		}
	}
	return out, nil
}

// createStaged writes data to a new file at path, a staged name, on disk
// when it returns. A regular file of this user's already there is a
// staged copy an install killed in an earlier process with this pid left
// behind, and is replaced; anything else there — a symlink planted to have
// the install write elsewhere, a directory, another user's file — is
// refused (PATH_ESCAPE) and left as it is. The file is created
// exclusively, without following a final symlink: nothing planted between
// the check and the open is written through either.
func createStaged(path string, data []byte) error {
	if fi, err := os.Lstat(path); err == nil {
		if !fi.Mode().IsRegular() || !ownedByUs(fi) {
			what := "a file of another user"
			switch {
			case fi.Mode()&os.ModeSymlink != 0:
				what = "a symbolic link"
			case !fi.Mode().IsRegular():
				what = "not a regular file (" + fi.Mode().Type().String() + ")"
			}
			return tool.Errorf(tool.CodePathEscape,
				fmt.Sprintf("remove %s (warden did not put it there; see who could write to %s), then install again", path, filepath.Dir(path)),
				"%s is in the way of the install: it is %s, not a copy warden staged", filepath.Base(path), what)
		}
		if err := os.Remove(path); err != nil {
			return err
		}
	}
	return writeFileSynced(path, data)
}

// writeFileSynced writes data to a new file at path, which must not exist
// (not even as a symlink), on disk when it returns; the file is removed
// when that fails.
func writeFileSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// syncDir makes the renames in dir durable (best effort: not every
// system can sync a directory).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// Diff checks name's files now and compares them with its pin (nil Old
// when never approved). The candidate's tools are named by naming, or,
// when it is nil, as the pin names them.
func (h *Host) Diff(ctx context.Context, name string, naming *Naming) (*Change, error) {
	old, err := h.pin(ctx, name)
	if err != nil && !errors.Is(err, gate.ErrNotFound) {
		return nil, err
	}
	n, keep := Naming{}, false
	switch {
	case naming != nil:
		if err := CheckNaming(*naming); err != nil {
			return nil, err
		}
		n = *naming
	case old != nil:
		n, keep = old.naming(), true
	}
	cand, err := h.candidate(ctx, name, n, keep)
	if err != nil {
		return nil, err
	}
	return diff(old, cand), nil
}

// Approve pins reviewed — the candidate a person saw in [Host.Diff]'s
// Change.New — exactly as it was shown: its tools, schemas, limits and
// config are not derived again (a servlet's describe could answer
// differently the second time). The files must still hash to what was
// reviewed, both the module and its sidecar, so a file swapped between
// review and approval is not pinned. The grants stay what the owner gave
// before (approval never widens them).
func (h *Host) Approve(ctx context.Context, name string, reviewed *Pin, by string, taken func(string) bool) (*Pin, error) {
	if reviewed == nil || reviewed.Module != name {
		return nil, fmt.Errorf("approving %s needs the reviewed candidate from `warden tool approve %s`", name, name)
	}
	old, err := h.pin(ctx, name)
	if err != nil && !errors.Is(err, gate.ErrNotFound) {
		return nil, err
	}
	_, sum, err := readHashed(h.wasmPath(name), maxModuleBytes)
	if err != nil {
		return nil, err
	}
	scSum, err := sidecarHash(h.sidecarPath(name))
	if err != nil {
		return nil, err
	}
	if sum != reviewed.SHA256 || scSum != reviewed.SidecarSHA256 {
		return nil, fmt.Errorf("%s.wasm or its sidecar changed while it was being reviewed: run `warden tool approve %s` again", name, name)
	}
	p := clonePin(reviewed)
	pins, err := h.pins(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkNames(p, taken, usedNames(pins, name)); err != nil {
		return nil, err
	}
	p.Granted, p.OwnerConfig = []string{}, nil
	if old != nil {
		p.Granted = slices.Clone(old.Granted)
		p.OwnerConfig = maps.Clone(old.OwnerConfig)
	}
	p.ApprovedAt, p.ApprovedBy = h.o.Now().UTC(), by
	if err := h.putPin(ctx, p); err != nil {
		return nil, err
	}
	h.evict(ctx, name)
	return p, nil
}

// Grant adds grants to name's pin and returns it with warnings.
func (h *Host) Grant(ctx context.Context, name string, specs []string) (*Pin, []string, error) {
	p, err := h.pin(ctx, name)
	if err != nil {
		return nil, nil, h.notInstalled(name, err)
	}
	add, err := parseGrants(specs)
	if err != nil {
		return nil, nil, err
	}
	for _, g := range add {
		if !slices.Contains(p.Granted, g) {
			p.Granted = append(p.Granted, g)
		}
	}
	if err := h.putPin(ctx, p); err != nil {
		return nil, nil, err
	}
	var warn []string
	for _, w := range unrequested(p) {
		for _, g := range add {
			if strings.HasSuffix(w, " "+g+", which the module does not request") {
				warn = append(warn, w)
			}
		}
	}
	return p, warn, nil
}

// Revoke removes grants from name's pin.
func (h *Host) Revoke(ctx context.Context, name string, specs []string) (*Pin, error) {
	p, err := h.pin(ctx, name)
	if err != nil {
		return nil, h.notInstalled(name, err)
	}
	drop, err := parseGrants(specs)
	if err != nil {
		return nil, err
	}
	for _, g := range drop {
		if !slices.Contains(p.Granted, g) {
			return nil, fmt.Errorf("%s was not granted %s (granted: %s)", name, g, orNone(strings.Join(p.Granted, " ")))
		}
	}
	p.Granted = slices.DeleteFunc(p.Granted, func(g string) bool { return slices.Contains(drop, g) })
	return p, h.putPin(ctx, p)
}

func (h *Host) notInstalled(name string, err error) error {
	if errors.Is(err, gate.ErrNotFound) {
		return fmt.Errorf("no module named %s is installed (see `warden tool ls`): %w", name, gate.ErrNotFound)
	}
	return err
}

// Remove deletes name's files and pin.
func (h *Host) Remove(ctx context.Context, name string) error {
	if !gate.ValidToolName(name) {
		return fmt.Errorf("module name %q is invalid", name)
	}
	pinned, perr := h.pin(ctx, name)
	if perr != nil && !errors.Is(perr, gate.ErrNotFound) {
		return perr
	}
	_, ferr := os.Lstat(h.wasmPath(name))
	if perr != nil && errors.Is(ferr, os.ErrNotExist) {
		return h.notInstalled(name, perr)
	}
	h.evict(ctx, name)
	h.approved.forget(name, pinned)
	for _, p := range []string{h.wasmPath(name), h.sidecarPath(name)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if perr == nil {
		return h.o.Pins.DeletePin(ctx, name)
	}
	return nil
}

// Inspection is what `warden tool inspect` shows.
type Inspection struct {
	Status
	SHA256         string   `json:"sha256"`
	Size           int      `json:"size"`
	ABI            string   `json:"abi,omitempty"`
	Exports        []string `json:"exports"`
	Imports        []string `json:"imports"`
	MemoryMinPages uint32   `json:"memory_min_pages"`
	MemoryMaxPages *uint32  `json:"memory_max_pages,omitempty"`
	Requested      []string `json:"requested"`
	Granted        []string `json:"granted"`
	Limits         *Limits  `json:"limits,omitempty"`
	ConfigKeys     []string `json:"config_keys"`
	// Config lists every config key with where it comes from; an owner's
	// secret (env:VAR) by the variable's name, never its value.
	Config []ConfigEntry `json:"config"`
	// Tools are the module's tools as pinned (or, not approved yet, as
	// they would be): names, schemas as enforced, what warden closed and
	// repaired, what the sidecar overrode.
	ToolSpecs []ToolSpec `json:"tool_specs"`
	// Change is set when the files differ from the pin (or there is none).
	Change *Change `json:"-"`
}

// Inspect describes name: its files now, its pin, and any difference.
func (h *Host) Inspect(ctx context.Context, name string, taken func(string) bool) (*Inspection, error) {
	_, statuses, err := h.Load(ctx, taken)
	if err != nil {
		return nil, err
	}
	var st *Status
	for i := range statuses {
		if statuses[i].Module == name {
			st = &statuses[i]
		}
	}
	if st == nil {
		return nil, h.notInstalled(name, gate.ErrNotFound)
	}
	in := &Inspection{Status: *st, Exports: []string{}, Imports: []string{}, Requested: []string{}, Granted: []string{}, ConfigKeys: []string{},
		Config: []ConfigEntry{}, ToolSpecs: []ToolSpec{}}
	setPin := func(p *Pin) {
		l := p.Limits
		in.Limits = &l
		in.Config = configEntries(p)
		in.ConfigKeys = in.ConfigKeys[:0]
		for _, c := range in.Config {
			in.ConfigKeys = append(in.ConfigKeys, c.Key)
		}
		in.ToolSpecs = p.Tools
	}
	if st.Pin != nil {
		in.Requested, in.Granted, in.ABI = st.Pin.Requested, st.Pin.Granted, st.Pin.ABI
		setPin(st.Pin)
	}
	if st.State == StateMissing {
		return in, nil
	}
	b, sum, err := readHashed(h.wasmPath(name), maxModuleBytes)
	if err != nil {
		return nil, err
	}
	in.SHA256, in.Size = sum, len(b)
	info, err := h.engine.Inspect(ctx, b)
	if err != nil {
		in.Reason = strings.TrimSpace(in.Reason + " " + err.Error())
		return in, nil
	}
	in.Exports, in.Imports, in.MemoryMinPages = info.Exports, info.Imports, info.MemoryMinPages
	if info.HasMaxMemory {
		m := info.MemoryMaxPages
		in.MemoryMaxPages = &m
	}
	if st.State != StateOK {
		if ch, err := h.Diff(ctx, name, nil); err == nil {
			in.Change = ch
			if st.Pin == nil {
				in.Requested, in.ABI = ch.New.Requested, ch.New.ABI
				setPin(ch.New)
			}
		} else {
			in.Reason = strings.TrimSpace(in.Reason + " (" + err.Error() + ")")
		}
	}
	return in, nil
}
