package hostfuncs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"

	"github.com/wardenrt/warden/builtin/memory"
	"github.com/wardenrt/warden/builtin/system"
	"github.com/wardenrt/warden/builtin/web"
	"github.com/wardenrt/warden/hostfuncs"
	"github.com/wardenrt/warden/internal/wasmfixture"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/tool"
)

func TestMain(m *testing.M) {
	hostfuncs.InstallHTTP()
	os.Exit(m.Run())
}

// ---------------------------------------------------------------- memory

// ---------------------------------------------------------------- audit

// memAudit keeps audit events in memory (the gate's whole path without the
// durable write); they are decoded when a test reads them.
type memAudit struct {
	mu   sync.Mutex
	raw  [][]byte
	fail error
}

func (a *memAudit) AppendAudit(_ context.Context, ev json.RawMessage) (uint64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail != nil {
		return 0, a.fail
	}
	a.raw = append(a.raw, append([]byte(nil), ev...))
	return uint64(len(a.raw)), nil
}

// results returns the result records of tool ("" = every tool).
func (a *memAudit) results(tool string) []gate.AuditEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []gate.AuditEvent
	for _, r := range a.raw {
		var e gate.AuditEvent
		if err := json.Unmarshal(r, &e); err != nil {
			panic(err)
		}
		if e.Phase == gate.PhaseResult && (tool == "" || e.Tool == tool) {
			out = append(out, e)
		}
	}
	return out
}

func (a *memAudit) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.raw = nil
}

// wantAudit checks that the last result record of tool has outcome and the
// guest's principal chain and run.
func wantAudit(t testing.TB, a *memAudit, tool, outcome string) gate.AuditEvent {
	t.Helper()
	rs := a.results(tool)
	if len(rs) == 0 {
		t.Fatalf("no audit result record for tool %q (records: %+v)", tool, a.results(""))
	}
	ev := rs[len(rs)-1]
	if ev.Outcome != outcome {
		t.Errorf("audit outcome of %s = %q (%s), want %q", tool, ev.Outcome, ev.Message, outcome)
	}
	if strings.Join(ev.Principal, ">") != "cli>wasm:notes" && strings.Join(ev.Principal, ">") != "cli>wasm:fetch" {
		t.Errorf("audit principal = %v, want [cli wasm:<tool>]", ev.Principal)
	}
	if ev.RunID != testRunID {
		t.Errorf("audit run_id = %q, want %q", ev.RunID, testRunID)
	}
	return ev
}

// ---------------------------------------------------------------- gate

const testRunID = "run-test"

// env is a gate over the core tools (memory over runtimetest.Memory, system, net)
// plus extra, granting gateGrants, with an in-memory audit log.
type env struct {
	gate  *gate.Gate
	audit *memAudit
	mem   *runtimetest.Memory
	ws    string
}

func newEnv(t testing.TB, gateGrants []string, extra ...tool.Tool) *env {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{audit: &memAudit{}, mem: &runtimetest.Memory{}, ws: ws}
	reg := gate.NewRegistry()
	tools := append(system.Tools(system.Config{Version: "test"}), web.Tools(web.Config{})...)
	if !hasTool(extra, "write_memory") {
		tools = append(tools, memory.Tools(memory.Config{Memory: e.mem})...)
	}
	tools = append(tools, extra...)
	if err := reg.Register(tools...); err != nil {
		t.Fatal(err)
	}
	q := make([]string, len(gateGrants))
	for i, g := range gateGrants {
		q[i] = strconv.Quote(g)
	}
	p, err := policy.ParsePolicy("test", []byte("version: 1\ngrants: ["+strings.Join(q, ", ")+"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	e.gate, err = gate.NewGate(gate.GateOptions{Registry: reg, Policy: p, Workspace: ws, Audit: e.audit, Approval: tool.ApproveNever})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func hasTool(ts []tool.Tool, name string) bool {
	for _, t := range ts {
		if t.Spec().Name == name {
			return true
		}
	}
	return false
}

func grantSet(t testing.TB, ws string, specs []string) capability.Set {
	t.Helper()
	s, err := capability.ParseSet(ws, specs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// guest is the gate.Guest of wasm tool `tool` called from the CLI with
// runGrants, its owner having granted toolGrants.
func (e *env) guest(t testing.TB, toolName string, runGrants, toolGrants []string) *gate.Guest {
	t.Helper()
	return &gate.Guest{
		Gate: e.gate, Tool: toolName,
		Parent: &tool.Call{
			ID: tool.NewID(), Tool: toolName, RunID: testRunID, Principal: []string{"cli"},
			Grants: grantSet(t, e.ws, runGrants), Workspace: e.ws,
		},
		Granted: grantSet(t, e.ws, toolGrants),
	}
}

// ---------------------------------------------------------------- guests

var compileCache = wazero.NewCompilationCache()

// compile compiles the fixture in wasm-tools/dir with funcs as its host
// functions (default: hostfuncs.Functions()).
func compile(t testing.TB, dir string, funcs []extism.HostFunction) *extism.CompiledPlugin {
	t.Helper()
	if funcs == nil {
		funcs = hostfuncs.Functions()
	}
	wasm := wasmfixture.Bytes(t, dir, false)
	manifest := extism.Manifest{
		Wasm:         []extism.Wasm{extism.WasmData{Data: wasm, Name: "main"}},
		AllowedHosts: []string{"*"}, // what the engine does while a GuestHTTPGuard is installed
		Config:       map[string]string{"user_agent": "warden-fetch-test/1"},
	}
	rc := wazero.NewRuntimeConfig().WithCloseOnContextDone(true).WithCompilationCache(compileCache)
	cp, err := extism.NewCompiledPlugin(context.Background(), manifest, extism.PluginConfig{RuntimeConfig: rc, EnableWasi: true}, funcs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Close(context.Background()) })
	return cp
}

// run calls export "call" of a fresh instance with input, as guest g (nil:
// no guest in the context), bounded by timeout.
func run(t testing.TB, cp *extism.CompiledPlugin, g *gate.Guest, input string, timeout time.Duration) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	p, err := cp.Instance(ctx, extism.PluginInstanceConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	if g != nil {
		ctx = gate.WithGuest(ctx, g)
	}
	rc, out, err := p.CallWithContext(ctx, "call", []byte(input))
	if err == nil && rc != 0 {
		err = fmt.Errorf("export returned %d", rc)
	}
	return string(out), err
}
