package wasmtool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenrt/warden/builtin/memory"
	"github.com/wardenrt/warden/builtin/system"
	"github.com/wardenrt/warden/builtin/web"
	"github.com/wardenrt/warden/hostfuncs"
	"github.com/wardenrt/warden/internal/wasmfixture"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/wasmtool"
)

// sharedCache is the compilation cache of every test's host: the tests
// install the same few modules, which need compiling once (compiling a
// standard-Go module takes seconds under -race), not once per test.
var sharedCache string

func TestMain(m *testing.M) {
	hostfuncs.InstallHTTP()
	dir, err := os.MkdirTemp("", "wasmtool-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sharedCache = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// memPins keeps pins in memory (the store's pins bucket in production).
type memPins struct {
	mu   sync.Mutex
	docs map[string]json.RawMessage
}

func (p *memPins) Pin(_ context.Context, name string) (json.RawMessage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, ok := p.docs[name]
	if !ok {
		return nil, fmt.Errorf("pin %s: %w", name, gate.ErrNotFound)
	}
	return d, nil
}

func (p *memPins) PutPin(_ context.Context, name string, doc json.RawMessage) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.docs == nil {
		p.docs = map[string]json.RawMessage{}
	}
	p.docs[name] = append(json.RawMessage(nil), doc...)
	return nil
}

func (p *memPins) DeletePin(_ context.Context, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.docs[name]; !ok {
		return gate.ErrNotFound
	}
	delete(p.docs, name)
	return nil
}

func (p *memPins) ListPins(context.Context) (map[string]json.RawMessage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]json.RawMessage{}
	for k, v := range p.docs {
		out[k] = v
	}
	return out, nil
}

// memAudit keeps audit events in memory.
type memAudit struct {
	mu  sync.Mutex
	evs []gate.AuditEvent
}

func (a *memAudit) AppendAudit(_ context.Context, raw json.RawMessage) (uint64, error) {
	var ev gate.AuditEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		return 0, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.evs = append(a.evs, ev)
	return uint64(len(a.evs)), nil
}

func (a *memAudit) results(tool string) []gate.AuditEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []gate.AuditEvent
	for _, ev := range a.evs {
		if ev.Tool == tool && ev.Phase == gate.PhaseResult {
			out = append(out, ev)
		}
	}
	return out
}

type env struct {
	t     testing.TB
	home  string
	ws    string
	pins  *memPins
	host  *wasmtool.Host
	core  *gate.Registry
	audit *memAudit
	cache string // the host's CacheDir
}

func coreTools() []tool.Tool {
	tools := system.Tools(system.Config{Version: "test", Started: time.Now()})
	tools = append(tools, memory.Tools(memory.Config{Memory: &runtimetest.Memory{}})...)
	tools = append(tools, web.Tools(web.Config{})...)
	return tools
}

func newEnv(t testing.TB) *env {
	t.Helper()
	home := t.TempDir()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, home: home, ws: ws, pins: &memPins{}, audit: &memAudit{}, cache: sharedCache}
	e.host, err = wasmtool.Open(context.Background(), wasmtool.Options{
		Dir: filepath.Join(home, "tools"), CacheDir: sharedCache, Pins: e.pins, HostFuncs: hostfuncs.Functions(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.host.Close(context.Background()) })
	e.core = gate.NewRegistry()
	if err := e.core.Register(coreTools()...); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) install(dir, name string, grants ...string) *wasmtool.Pin {
	e.t.Helper()
	in, err := e.host.Install(context.Background(), wasmfixture.Stage(e.t, dir, name, false), wasmtool.InstallOptions{Name: name, Grants: grants, Taken: e.core.Has, By: "test"})
	if err != nil {
		e.t.Fatalf("install %s: %v", dir, err)
	}
	return in.Pin
}

// gate loads the modules and builds a gate whose policy grants grants.
func (e *env) gate(grants ...string) (*gate.Gate, []wasmtool.Status) {
	e.t.Helper()
	tools, statuses, err := e.host.Load(context.Background(), e.core.Has)
	if err != nil {
		e.t.Fatal(err)
	}
	reg := gate.NewRegistry()
	if err := reg.Register(append(coreTools(), tools...)...); err != nil {
		e.t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("version: 1\ngrants:\n")
	for _, g := range grants {
		fmt.Fprintf(&b, "  - %q\n", g)
	}
	if len(grants) == 0 {
		b.WriteString("  []\n")
	}
	p, err := policy.ParsePolicy("test", []byte(strings.Replace(b.String(), "grants:\n  []", "grants: []", 1)))
	if err != nil {
		e.t.Fatal(err)
	}
	g, err := gate.NewGate(gate.GateOptions{Registry: reg, Policy: p, Workspace: e.ws, Audit: e.audit, Approval: tool.ApproveAuto})
	if err != nil {
		e.t.Fatal(err)
	}
	return g, statuses
}

func call(t testing.TB, g *gate.Gate, tool, args string) tool.Result {
	t.Helper()
	res, err := g.Call(context.Background(), gate.Request{Tool: tool, Args: json.RawMessage(args), Principal: []string{"cli"}, RunID: "run1"})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func wantCode(t testing.TB, res tool.Result, code tool.Code) {
	t.Helper()
	if code == "" {
		if !res.Success {
			t.Fatalf("%s failed: %+v", res.Tool, res.Error)
		}
		return
	}
	if res.Success || res.Error == nil || res.Error.Code != code {
		t.Fatalf("%s: want %s, got success=%v error=%+v output=%q", res.Tool, code, res.Success, res.Error, res.Output)
	}
}

func TestPureToolInstallsAndRuns(t *testing.T) {
	e := newEnv(t)
	pin := e.install("examples/textstats", "textstats")
	if pin.ABI != wasmtool.ABIExtism || len(pin.Tools) != 1 || pin.Tools[0].Name != "textstats" || len(pin.SHA256) != 64 {
		t.Fatalf("pin: %+v", pin)
	}
	g, statuses := e.gate()
	if len(statuses) != 1 || statuses[0].State != wasmtool.StateOK {
		t.Fatalf("statuses: %+v", statuses)
	}
	res := call(t, g, "textstats", `{"text":"One fish. Two fish."}`)
	wantCode(t, res, "")
	var d map[string]any
	if err := json.Unmarshal(res.Data, &d); err != nil || d["words"] != float64(4) {
		t.Fatalf("data %s (%v)", res.Data, err)
	}
	// Strict arguments: the registry's schema is the sidecar's.
	wantCode(t, call(t, g, "textstats", `{"text":"x","Text":"y"}`), tool.CodeInvalidInput)
	spec := g.Registry().Specs()
	found := false
	for _, s := range spec {
		if s.Name == "textstats" {
			found = s.Wasm == "textstats"
		}
	}
	if !found {
		t.Fatal("textstats not registered as a wasm tool")
	}
}

func TestWardenCallActsWithRunIntersectToolGrants(t *testing.T) {
	e := newEnv(t)
	e.install("examples/notes", "notes", "memory.write:notes", "memory.read:notes")
	add := `{"op":"add","key":"k1","text":"buy oat milk"}`

	// Run and tool both grant it.
	g, _ := e.gate("memory.write:notes", "memory.read:notes")
	wantCode(t, call(t, g, "notes", add), "")
	res := call(t, g, "notes", `{"op":"search","query":"oat"}`)
	wantCode(t, res, "")
	if !strings.Contains(res.Output, "oat milk") {
		t.Fatalf("search output %q", res.Output)
	}
	evs := e.audit.results("write_memory")
	if len(evs) != 1 || strings.Join(evs[0].Principal, ">") != "cli>wasm:notes" || evs[0].RunID != "run1" {
		t.Fatalf("audit of the guest's call: %+v", evs)
	}

	// The run lacks it: denied although the tool has it.
	g, _ = e.gate("memory.read:notes")
	res = call(t, g, "notes", add)
	wantCode(t, res, tool.CodeToolError)
	if !strings.Contains(res.Error.Message, "CAPABILITY_DENIED") {
		t.Fatalf("want the guest to report CAPABILITY_DENIED, got %+v", res.Error)
	}

	// The tool lacks it: denied although the run has it.
	if _, err := e.host.Revoke(context.Background(), "notes", []string{"memory.write:notes"}); err != nil {
		t.Fatal(err)
	}
	g, _ = e.gate("memory.write:*", "memory.read:*")
	res = call(t, g, "notes", add)
	wantCode(t, res, tool.CodeToolError)
	if !strings.Contains(res.Error.Message, "CAPABILITY_DENIED") {
		t.Fatalf("want CAPABILITY_DENIED, got %+v", res.Error)
	}
	denied := 0
	for _, ev := range e.audit.results("write_memory") {
		if ev.Decision != nil && ev.Decision.Action == policy.ActionDeny {
			denied++
		}
	}
	if denied != 2 {
		t.Fatalf("want 2 denied write_memory records, got %d", denied)
	}
}

func TestServletToolsEachBecomeATool(t *testing.T) {
	e := newEnv(t)
	pin := e.install("examples/jsontools", "jsontools")
	if pin.ABI != wasmtool.ABIServlet || len(pin.Tools) != 2 {
		t.Fatalf("pin %+v", pin)
	}
	g, _ := e.gate()
	res := call(t, g, "json_query", `{"json":"{\"items\":[{\"name\":\"a\"}]}","path":"items[0].name"}`)
	wantCode(t, res, "")
	if !strings.Contains(res.Output, "a") {
		t.Fatalf("json_query output %q", res.Output)
	}
	wantCode(t, call(t, g, "json_format", `{"json":"{\"b\": 1}","indent":0}`), "")
}

func TestChangedModuleRefusedUntilApproved(t *testing.T) {
	e := newEnv(t)
	e.install("examples/textstats", "textstats")
	ctx := context.Background()

	// Another build (a different module) put in its place.
	other, err := os.ReadFile(wasmfixture.Path(t, "hostile/trap", false))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(e.home, "tools", "textstats.wasm")
	if err := os.WriteFile(path, other, 0o600); err != nil {
		t.Fatal(err)
	}
	g, statuses := e.gate()
	if statuses[0].State != wasmtool.StateChanged || !strings.Contains(statuses[0].Reason, "warden tool approve textstats") {
		t.Fatalf("status %+v", statuses[0])
	}
	wantCode(t, call(t, g, "textstats", `{"text":"x"}`), tool.CodeUnknownTool)

	ch, err := e.host.Diff(ctx, "textstats", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Changed() || !strings.Contains(ch.String(), "wasm sha256") {
		t.Fatalf("diff %s", ch)
	}
	stale := *ch.New
	stale.SHA256 = "0000"
	if _, err := e.host.Approve(ctx, "textstats", &stale, "test", e.core.Has); err == nil {
		t.Fatal("approve with a stale reviewed digest succeeded")
	}
	if _, err := e.host.Approve(ctx, "textstats", ch.New, "test", e.core.Has); err != nil {
		t.Fatal(err)
	}
	_, statuses = e.gate()
	if statuses[0].State != wasmtool.StateOK {
		t.Fatalf("after approve: %+v", statuses[0])
	}
}

func TestModuleSwappedAfterLoadIsRefused(t *testing.T) {
	e := newEnv(t)
	e.install("examples/textstats", "textstats")
	g, _ := e.gate()
	path := filepath.Join(e.home, "tools", "textstats.wasm")
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, append(b, 0), 0o600); err != nil { // a custom section's worth of change
		t.Fatal(err)
	}
	res := call(t, g, "textstats", `{"text":"x"}`)
	if res.Success || !strings.Contains(res.Error.Message, "changed since approved") {
		t.Fatalf("want refusal, got %+v", res)
	}
}

func TestSidecarChangeShowsRequestedCapabilities(t *testing.T) {
	e := newEnv(t)
	e.install("examples/textstats", "textstats")
	sc := filepath.Join(e.home, "tools", "textstats.tool.yaml")
	b, _ := os.ReadFile(sc)
	b = []byte(strings.Replace(string(b), "capabilities: []", "capabilities: [net:evil.example]", 1))
	if err := os.WriteFile(sc, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, statuses := e.gate()
	if statuses[0].State != wasmtool.StateChanged {
		t.Fatalf("status %+v", statuses[0])
	}
	ch, err := e.host.Diff(context.Background(), "textstats", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Added) != 1 || ch.Added[0] != "net:evil.example" || !strings.Contains(ch.String(), "+ requests net:evil.example") {
		t.Fatalf("diff: %s", ch)
	}
	p, err := e.host.Approve(context.Background(), "textstats", ch.New, "test", e.core.Has)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Granted) != 0 {
		t.Fatalf("approval widened the grants: %v", p.Granted)
	}
}

// TestSidecarSwappedDuringReviewIsNotPinned: the sidecar changes between
// the difference a person reviewed and their confirmation (asking for
// more, with longer limits): approval refuses, and the pin stays as it was.
func TestSidecarSwappedDuringReviewIsNotPinned(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.install("examples/textstats", "textstats")
	sc := filepath.Join(e.home, "tools", "textstats.tool.yaml")
	orig, _ := os.ReadFile(sc)
	edit := func(from, to string) {
		t.Helper()
		b, _ := os.ReadFile(sc)
		if !strings.Contains(string(b), from) {
			t.Fatalf("sidecar has no %q:\n%s", from, b)
		}
		if err := os.WriteFile(sc, []byte(strings.Replace(string(b), from, to, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	edit("capabilities: []", "capabilities: [net:example.com]")
	ch, err := e.host.Diff(ctx, "textstats", nil)
	if err != nil {
		t.Fatal(err)
	}
	// After the review, before the confirmation.
	edit("capabilities: [net:example.com]", "capabilities: [net:example.com, fs.write:**]")
	if _, err := e.host.Approve(ctx, "textstats", ch.New, "test", e.core.Has); err == nil || !strings.Contains(err.Error(), "changed while it was being reviewed") {
		t.Fatalf("approve after a swap: %v", err)
	}
	_, statuses := e.gate()
	if statuses[0].State != wasmtool.StateChanged {
		t.Fatalf("the swapped sidecar was pinned: %+v", statuses[0])
	}
	// Put back what was reviewed: the reviewed candidate is pinned, as shown.
	if err := os.WriteFile(sc, []byte(strings.Replace(string(orig), "capabilities: []", "capabilities: [net:example.com]", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := e.host.Approve(ctx, "textstats", ch.New, "test", e.core.Has)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Requested, []string{"net:example.com"}) || p.SidecarSHA256 != ch.New.SidecarSHA256 {
		t.Fatalf("pinned %+v", p)
	}
}

func TestFailingModulesDoNotStopOthers(t *testing.T) {
	e := newEnv(t)
	e.install("examples/textstats", "textstats")
	dir := filepath.Join(e.home, "tools")
	// Dropped in, never approved.
	if err := os.WriteFile(filepath.Join(dir, "garbage.wasm"), []byte("\x00asm\x01\x00\x00\x00garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := wasmfixture.Stage(t, "hostile/badimport", "badimport", false)
	if _, err := e.host.Install(context.Background(), bad, wasmtool.InstallOptions{Taken: e.core.Has}); err == nil || !strings.Contains(err.Error(), "warden.nonexistent") {
		t.Fatalf("badimport installed or unclear error: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "badimport.wasm")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a failed install left its file behind")
	}
	if _, err := e.host.Diff(context.Background(), "garbage", nil); err == nil {
		t.Fatal("garbage passed its check")
	}
	if _, err := e.host.Approve(context.Background(), "garbage", nil, "test", e.core.Has); err == nil {
		t.Fatal("garbage approved")
	}
	g, statuses := e.gate()
	states := map[string]string{}
	for _, s := range statuses {
		states[s.Module] = s.State
	}
	if states["garbage"] != wasmtool.StateUnapproved || states["textstats"] != wasmtool.StateOK {
		t.Fatalf("states %v", states)
	}
	wantCode(t, call(t, g, "textstats", `{"text":"still here"}`), "")
}

func TestCollisionsRefused(t *testing.T) {
	e := newEnv(t)
	// A module named after a core tool.
	_, err := e.host.Install(context.Background(), wasmfixture.Stage(t, "examples/textstats", "textstats", false),
		wasmtool.InstallOptions{Name: "write_memory", Taken: e.core.Has})
	if err == nil || !strings.Contains(err.Error(), "collides with a core tool") {
		t.Fatalf("want collision error, got %v", err)
	}
	// Two servlets providing the same tools.
	e.install("examples/jsontools", "jsontools")
	_, err = e.host.Install(context.Background(), wasmfixture.Stage(t, "examples/jsontools", "jsontools2", false),
		wasmtool.InstallOptions{Taken: e.core.Has})
	if err == nil || !strings.Contains(err.Error(), "already provided by module jsontools") {
		t.Fatalf("want collision error, got %v", err)
	}
}

func TestSidecarErrorsHaveLineAndColumn(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"name: x\nbogus: 1\n", "t.yaml:2:1"},
		{"name: x\nname: y\n", "t.yaml:2:1"},
		{"name: x\nlimits:\n  memory_mb: lots\n", "t.yaml:3:"},
		{"name: bad name\n", "not a valid tool name"},
		{"abi: wasm\n", "abi \"wasm\""},
		{"capabilities: [\"net:\"]\n", "capabilities"},
		{"limits: {memory_mb: 100000}\n", "memory_mb"},
		{"config: {\"env:HOME\": x}\n", "reserved"},
	} {
		_, err := wasmtool.ParseSidecar("t.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: want %q, got %v", tc.yaml, tc.want, err)
		}
	}
}

func TestServletHTTPObeysNetGrantsOnEveryHop(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the ungranted server got a request: %s", r.URL)
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			fmt.Fprint(w, "hello from the granted host")
		case "/to-other-port":
			http.Redirect(w, r, other.URL+"/x", http.StatusFound)
		case "/to-evil":
			http.Redirect(w, r, "http://evil.example/x", http.StatusFound)
		}
	}))
	defer srv.Close()
	grant := "net:" + strings.TrimPrefix(srv.URL, "http://")

	e := newEnv(t)
	e.install("examples/webtools", "webtools", grant)
	g, _ := e.gate(grant)
	res := call(t, g, "web_get", fmt.Sprintf(`{"url":%q}`, srv.URL+"/ok"))
	wantCode(t, res, "")
	if !strings.Contains(res.Output, "hello from the granted host") {
		t.Fatalf("output %q", res.Output)
	}
	for _, path := range []string{"/to-other-port", "/to-evil"} {
		res := call(t, g, "web_get", fmt.Sprintf(`{"url":%q}`, srv.URL+path))
		wantCode(t, res, tool.CodeCapabilityDenied)
	}
	// The run grants it but the tool does not.
	e2 := newEnv(t)
	e2.install("examples/webtools", "webtools")
	g2, _ := e2.gate(grant)
	wantCode(t, call(t, g2, "web_get", fmt.Sprintf(`{"url":%q}`, srv.URL+"/ok")), tool.CodeCapabilityDenied)
	// Every guest request is on record as an http call from the guest.
	evs := e.audit.results("http")
	if len(evs) != 3 || strings.Join(evs[0].Principal, ">") != "cli>wasm:web_get" {
		t.Fatalf("http audit records: %+v", evs)
	}
}

func TestWASICommand(t *testing.T) {
	e := newEnv(t)
	in, err := e.host.Install(context.Background(), wasmfixture.Stage(t, "examples/wordcount", "wordcount", true), wasmtool.InstallOptions{Taken: e.core.Has})
	if err != nil {
		t.Fatal(err)
	}
	if in.Pin.ABI != wasmtool.ABICommand {
		t.Fatalf("abi %s", in.Pin.ABI)
	}
	g, _ := e.gate()
	res := call(t, g, "wordcount", `{"text":"one two\nthree\n"}`)
	wantCode(t, res, "")
	if !strings.Contains(string(res.Data), `"words":3`) {
		t.Fatalf("data %s", res.Data)
	}
}

// startLoopWasm is a module exporting "call" whose start section loops
// forever: wazero runs a start section whenever it instantiates.
var startLoopWasm = []byte("\x00asm\x01\x00\x00\x00" +
	"\x01\x04\x01\x60\x00\x00" + // type 0: () -> ()
	"\x03\x02\x01\x00" + // func 0: type 0
	"\x07\x08\x01\x04call\x00\x00" + // export "call" = func 0
	"\x08\x01\x00" + // start: func 0
	"\x0a\x09\x01\x07\x00\x03\x40\x0c\x00\x0b\x0b") // loop { br 0 }

// TestDroppedInModuleRunsNothingUntilChecked: a module dropped into the
// tools directory is listed (Check, as `tool ls` does) without running
// any of its code; checking it completely (Diff, as `tool inspect` and
// `tool approve` do) runs its start function, bounded by its own deadline.
func TestDroppedInModuleRunsNothingUntilChecked(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(e.home, "tools")
	if err := os.WriteFile(filepath.Join(dir, "spin.wasm"), startLoopWasm, 0o600); err != nil {
		t.Fatal(err)
	}
	sidecar := "name: spin\ndescription: loops at start\nabi: extism\nexport: call\n" +
		"input_schema: {type: object}\ncapabilities: []\nlimits: {timeout_ms: 200}\n"
	if err := os.WriteFile(filepath.Join(dir, "spin.tool.yaml"), []byte(sidecar), 0o600); err != nil {
		t.Fatal(err)
	}
	// Had it instantiated the module, the start function's timeout would
	// be its error.
	if err := e.host.Check("spin"); err != nil {
		t.Fatalf("static check: %v", err)
	}
	start := time.Now()
	_, err := e.host.Diff(context.Background(), "spin", nil)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the full check took %v, the module's deadline is 200ms", took)
	}
	if err == nil || !strings.Contains(err.Error(), "start function") {
		t.Fatalf("full check: %v", err)
	}
}

// TestInstallFollowsNoPlantedStagedFile: an install stages its files at
// names derived from its pid (.install.PID.NAME.wasm.tmp); a symlink
// planted at those names in the tools directory, pointing elsewhere, is
// neither followed nor truncated: the install is refused (PATH_ESCAPE)
// and the files the links point to are untouched. A stale staged file of
// our own (a killed install of an earlier process with this pid) is
// replaced, and the install goes through.
func TestInstallFollowsNoPlantedStagedFile(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(e.home, "tools")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	staged := func(kind string) string {
		return filepath.Join(dir, fmt.Sprintf(".install.%d.textstats%s.tmp", os.Getpid(), kind))
	}
	outside := t.TempDir()
	for _, kind := range []string{".wasm", ".tool.yaml"} {
		victim := filepath.Join(outside, "victim"+kind)
		if err := os.WriteFile(victim, []byte("precious"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, staged(kind)); err != nil {
			t.Fatal(err)
		}
	}
	src := wasmfixture.Stage(t, "examples/textstats", "textstats", false)
	_, err := e.host.Install(context.Background(), src, wasmtool.InstallOptions{Name: "textstats", Taken: e.core.Has, By: "test"})
	var te *tool.Error
	if !errors.As(err, &te) || te.Code != tool.CodePathEscape || te.Hint == "" {
		t.Errorf("install over planted links: %v", err)
	}
	for _, kind := range []string{".wasm", ".tool.yaml"} {
		if b, err := os.ReadFile(filepath.Join(outside, "victim"+kind)); err != nil || string(b) != "precious" {
			t.Errorf("the file a planted link points to was written: %d bytes, %v", len(b), err)
		}
		if fi, err := os.Lstat(staged(kind)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("the planted link is not left as it was: %v", err)
		}
		os.Remove(staged(kind))
	}
	if _, err := e.pins.Pin(context.Background(), "textstats"); err == nil {
		t.Fatal("the refused install pinned its module")
	}
	// A stale staged file of our own is replaced.
	if err := os.WriteFile(staged(".wasm"), []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.host.Install(context.Background(), src, wasmtool.InstallOptions{Name: "textstats", Taken: e.core.Has, By: "test"}); err != nil {
		t.Fatalf("install over a stale staged file: %v", err)
	}
}

// TestKilledInstallSettles: an install killed after its pin and before its
// files were renamed into place leaves them staged; the next Load puts them
// in place (the module works). Staged files of an install killed before
// its pin are removed, and no module appears.
func TestKilledInstallSettles(t *testing.T) {
	e := newEnv(t)
	e.install("examples/textstats", "pinned")
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	pid := dead.Process.Pid
	dir := filepath.Join(e.home, "tools")
	staged := func(name, kind string) string {
		return filepath.Join(dir, fmt.Sprintf(".install.%d.%s%s.tmp", pid, name, kind))
	}
	// Killed between the renames: the sidecar in place, the module not.
	if err := os.Rename(filepath.Join(dir, "pinned.wasm"), staged("pinned", ".wasm")); err != nil {
		t.Fatal(err)
	}
	// Killed before the pin.
	b, err := os.ReadFile(staged("pinned", ".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{staged("unpinned", ".wasm"), staged("unpinned", ".tool.yaml")} {
		if err := os.WriteFile(f, b[:len(b)/2], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Being staged by a live process: left alone.
	live := filepath.Join(dir, fmt.Sprintf(".install.%d.busy.wasm.tmp", os.Getpid()))
	if err := os.WriteFile(live, b, 0o600); err != nil {
		t.Fatal(err)
	}
	g, statuses := e.gate()
	if len(statuses) != 1 || statuses[0].Module != "pinned" || statuses[0].State != wasmtool.StateOK {
		t.Fatalf("statuses %+v", statuses)
	}
	if r := call(t, g, "pinned", `{"text":"a b"}`); !r.Success {
		t.Fatalf("pinned: %+v", r.Error)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".install.*"))
	if len(left) != 1 || left[0] != live {
		t.Errorf("left in tools/: %v", left)
	}
}
