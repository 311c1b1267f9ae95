package env

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/builtin"
	"github.com/wardenrt/warden/builtin/automation"
	"github.com/wardenrt/warden/builtin/interact"
	"github.com/wardenrt/warden/builtin/memory"
	"github.com/wardenrt/warden/builtin/ops"
	"github.com/wardenrt/warden/builtin/system"
	"github.com/wardenrt/warden/builtin/text"
	"github.com/wardenrt/warden/builtin/web"
	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/hostfuncs"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/redact"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/wasmtool"
	"github.com/wardenrt/warden/store"
)

// DefaultLockTimeout is how long a command waits, by default, for another
// warden process to release the store (--lock-timeout).
const DefaultLockTimeout = 2 * time.Second

// Env is everything a command needs, built once from the global flags. It is
// the one place that wires store + runtime + builtin together.
type Env struct {
	// approval, when set, overrides the approval mode (mcp serve: never
	// ask on a terminal whose stdin is the protocol).
	approval tool.ApprovalMode
	// approver, when set, is asked instead of the terminal in approval
	// mode ask (mcp serve: the person behind the MCP client).
	approver gate.Approver

	c         *cli.Context
	home      string
	workspace string
	json      bool
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
	log       *slog.Logger
	logFile   *os.File
	// guestLog is the log file only (never stderr, whatever --log-level
	// says): where wasm guests' captured stdout and stderr go.
	guestLog *slog.Logger
	redactor *redact.Redactor
	st       store.Backend
	core     []tool.Tool
	host     *wasmtool.Host
	// regMu guards reg and wasmStatus, which mcp serve reloads while
	// calls (the system tool counts the tools) read them.
	regMu sync.Mutex
	reg   *gate.Registry
	// pol is the policy in force, resolved once (policyInForce).
	pol *policy.PolicyInForce
	// wasmStatus is what loading the wasm modules found (Registry()).
	wasmStatus []wasmtool.Status
	started    time.Time

	// secrets are literals masked besides the environment's secret-looking
	// values, known only after start (see addSecrets).
	secrets []string
	// fleetSynced is set once what a fleet's store publishes has been
	// written into the home (fleet.go).
	fleetSynced bool
}

// newEnv resolves the home and workspace directories and sets up logging.
// The store is opened lazily by env.store().
func newEnv(c *cli.Context) (*Env, error) {
	e := &Env{c: c, json: WantJSON(c), stdin: c.App.Reader, stdout: c.App.Writer, stderr: c.App.ErrWriter, started: time.Now()}
	home := GlobalString(c, "home")
	if home == "" {
		h, err := homeFor(goruntime.GOOS, os.Getenv, os.UserHomeDir)
		if err != nil {
			return nil, UsageErr("set --home or WARDEN_HOME", "cannot find a home directory: %v", err)
		}
		home = h
	}
	home, err := filepath.Abs(home)
	if err != nil {
		return nil, UsageErr("", "--home: %v", err)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		if werr := store.Classify(home, err); werr != err {
			return nil, writeFailure(werr) // a full or read-only file system
		}
		return nil, UsageErr("choose a writable --home", "cannot create %s: %v", home, err)
	}
	e.home = home
	ws := GlobalString(c, "workspace")
	if ws == "" {
		if ws, err = os.Getwd(); err != nil {
			return nil, UsageErr("", "current directory: %v", err)
		}
	}
	if ws, err = filepath.Abs(ws); err == nil {
		ws, err = filepath.EvalSymlinks(ws)
	}
	if err != nil {
		return nil, UsageErr("set --workspace to an existing directory", "workspace: %v", err)
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return nil, UsageErr("set --workspace to an existing directory", "workspace %s is not a directory", ws)
	}
	e.workspace = ws
	e.secrets = storePassword(GlobalString(c, "store"))
	e.redactor = redact.New(append(secretEnvValues(), e.secrets...)...)
	if err := e.setupLog(c.String("log-level")); err != nil {
		return nil, err
	}
	if wasiOutputIgnored {
		e.log.Warn(envWASIOutput+" is ignored: wasm guests never write to the terminal; their stdout and stderr go to warden's log",
			"log_dir", filepath.Join(e.home, "logs"))
	}
	return e, nil
}

// GlobalString reads a global flag from the app's own context, so a
// command's flag of the same name (grant add --workspace) does not hide it.
func GlobalString(c *cli.Context, name string) string {
	return rootContext(c).String(name)
}

// rootContext is the context the app's own flags were parsed into: of the
// contexts that run the root command, the one nearest the command.
func rootContext(c *cli.Context) *cli.Context {
	for _, lc := range c.Lineage() {
		if lc.Command != nil && lc.Command.Name == c.App.Name {
			return lc
		}
	}
	return c
}

// WantJSON reports whether --json was given, before or after the command
// (a command's own --json flag would otherwise hide the global one).
func WantJSON(c *cli.Context) bool {
	return c.Bool("json") || rootContext(c).Bool("json")
}

// secretEnvValues returns the values of environment variables that look like
// secrets, so they are redacted wherever they appear.
func secretEnvValues() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		u := strings.ToUpper(k)
		for _, w := range []string{"KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL"} {
			if strings.Contains(u, w) && len(v) >= 8 {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

func (e *Env) setupLog(level string) error {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return UsageErr("use debug, info, warn or error", "--log-level %q", level)
	}
	redactAttr := func(_ []string, a slog.Attr) slog.Attr {
		if a.Value.Kind() == slog.KindString {
			a.Value = slog.StringValue(e.redactor.String(a.Value.String()))
		}
		return a
	}
	handlers := []slog.Handler{slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: lv, ReplaceAttr: redactAttr})}
	dir := filepath.Join(e.home, "logs")
	if err := os.MkdirAll(dir, 0o700); err == nil {
		name := filepath.Join(dir, "warden-"+time.Now().UTC().Format("2006-01-02")+".log")
		if f, err := os.OpenFile(name, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
			e.logFile = f
			fh := slog.NewJSONHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: redactAttr})
			handlers = append(handlers, fh)
			e.guestLog = slog.New(fh)
		}
	}
	e.log = slog.New(slog.NewMultiHandler(handlers...))
	return nil
}

// store opens the store on first use: --store (WARDEN_STORE) chooses the
// backend, the bbolt file <home>/warden.db by default (storespec.go).
func (e *Env) store() (store.Backend, error) {
	if e.st != nil {
		return e.st, nil
	}
	e.Logger().Debug("opening the store", "home", e.home)
	st, err := e.openStore()
	if err != nil {
		return nil, StoreFailure(err)
	}
	e.st = st
	e.recoverRuns(st)
	return st, nil
}

// Close closes what the command opened: the wasm tools, the store and the
// log file.
func (e *Env) Close() {
	if e.host != nil {
		if err := e.host.Close(context.Background()); err != nil {
			e.Logger().Warn("closing the wasm tools", "err", err)
		}
	}
	if e.st != nil {
		if err := e.st.Close(); err != nil {
			e.log.Warn("closing the store", "err", err)
		}
	}
	if e.logFile != nil {
		_ = e.logFile.Close()
	}
}

// Policy returns the policy in force (resolved once): --policy, else
// <workspace>/.warden/policy.yaml — as written if its owner trusts it,
// else only narrowing what follows — else <home>/policy.yaml, else the
// built-in default. An untrusted workspace policy's ignored parts are
// warned about on stderr, once.
func (e *Env) Policy() (*policy.Policy, error) {
	pf, err := e.PolicyInForce()
	if err != nil {
		return nil, err
	}
	return pf.Policy, nil
}

// PolicyFiles are the files Policy looks at.
func (e *Env) PolicyFiles() policy.PolicyFiles {
	return policy.PolicyFiles{
		Explicit:  GlobalString(e.c, "policy"),
		Workspace: filepath.Join(e.workspace, ".warden", "policy.yaml"),
		Home:      filepath.Join(e.home, "policy.yaml"),
	}
}

// PolicyInForce is the policy in force with where it comes from and how
// far its workspace policy is trusted (Policy).
func (e *Env) PolicyInForce() (*policy.PolicyInForce, error) {
	if e.pol != nil {
		return e.pol, nil
	}
	e.fleetSync(e.Context())
	pf, err := policy.ResolvePolicy(e.Context(), e.PolicyFiles(), lazyStore{open: e.store})
	if err != nil {
		var f *Failure
		if errors.As(err, &f) {
			return nil, f // the store's, already worded
		}
		if IsStoreError(err) {
			return nil, StoreFailure(err)
		}
		src := "FILE"
		var pe *gate.PositionError
		if errors.As(err, &pe) {
			src = pe.Source
		}
		return nil, ReadFailure(err, "fix the policy file; check it with `warden policy check "+src+"`")
	}
	e.pol = pf
	if pf.State == policy.TrustMissing {
		fmt.Fprintf(e.stderr, "warden: warning: the workspace policy %s you trusted is gone: what it said still narrows %s — to drop it: warden policy untrust %s\n",
			ui.Printable(pf.File), ui.Printable(pf.Policy.Source), ui.ShellWord(pf.File))
	}
	if pf.State == policy.TrustUntrusted || pf.State == policy.TrustChanged {
		trust := "review it, then trust it with: warden policy trust " + ui.ShellWord(pf.File)
		why := "is not trusted"
		if pf.State == policy.TrustChanged {
			why = "changed since you trusted it"
		}
		fmt.Fprintf(e.stderr, "warden: warning: the workspace policy %s %s: it can only narrow %s — %s\n", ui.Printable(pf.File), why, ui.Printable(pf.Base.Source), trust)
		for _, ig := range pf.Ignored {
			at := pf.File
			if ig.Line > 0 {
				at = fmt.Sprintf("%s:%d", pf.File, ig.Line)
			}
			fmt.Fprintf(e.stderr, "warden: warning: %s: untrusted, so its %s is ignored — %s\n", ui.Printable(at), ui.Printable(ig.What), trust)
		}
	}
	return pf, nil
}

// grants parses the --grant flags, warning about broad grants. A grant
// written CAP@DURATION (exec:git@30m) expires that long after warden
// started: it is returned among the timed grants.
func (e *Env) grants() ([]capability.Grant, []gate.TimedGrant, error) {
	var out []capability.Grant
	var timed []gate.TimedGrant
	for i, s := range e.c.StringSlice("grant") {
		// One grant a flag: a comma is part of the grant (a path may hold
		// one), so "a,b" where b is a grant of its own is a mistake that
		// would grant neither.
		if parts := strings.Split(s, ","); len(parts) > 1 {
			for _, part := range parts[1:] {
				if _, perr := capability.Parse(strings.TrimSpace(part)); perr == nil {
					return nil, nil, UsageErr("repeat the flag: --grant "+strings.Join(parts, " --grant "), "--grant %s holds more than one grant", s)
				}
			}
		}
		spec, d, isTimed, err := gate.ParseTimedGrant(s)
		if err != nil {
			return nil, nil, UsageErr("CAP@30m makes a grant that expires after 30 minutes", "--grant %s: %v", s, err)
		}
		g, err := capability.Parse(spec)
		if err != nil {
			return nil, nil, UsageErr("see README \"Capabilities\" for the grammar; CAP@30m makes a grant that expires", "--grant: %v", err)
		}
		if why := g.Broad(); why != "" {
			fmt.Fprintf(e.stderr, "warden: warning: --grant %s: %s\n", g, why)
		}
		if !isTimed {
			out = append(out, g)
			continue
		}
		if d > gate.MaxTimedGrant {
			return nil, nil, UsageErr("use at most 720h", "--grant %s: %s is longer than %s", s, d, gate.MaxTimedGrant)
		}
		t := gate.TimedGrant{ID: fmt.Sprintf("flag-%d", i+1), Kind: gate.TimedGrantKind, Grant: g.String(),
			Added: e.started, Expires: e.started.Add(d), By: "--grant"}
		if err := t.Parse(); err != nil {
			return nil, nil, UsageErr("", "--grant %s: %v", s, err)
		}
		timed = append(timed, t)
	}
	return out, timed, nil
}

// approvalMode resolves --approve, then the policy's setting, then ask on a
// terminal and never otherwise.
func (e *Env) approvalMode(p *policy.Policy) (tool.ApprovalMode, error) {
	if e.approval != "" {
		return e.approval, nil
	}
	if s := e.c.String("approve"); s != "" {
		m, err := tool.ParseApprovalMode(s)
		if err != nil {
			return "", UsageErr("", "--approve: %v", err)
		}
		return m, nil
	}
	if p.Approval != "" {
		return p.Approval, nil
	}
	if e.isTTY() {
		return tool.ApproveAsk, nil
	}
	return tool.ApproveNever, nil
}

func (e *Env) isTTY() bool { return e.terminal() != nil }

// terminal returns stdin when it is a terminal, for prompts; nil otherwise.
func (e *Env) terminal() *os.File {
	if ui.IsTerminal(e.stdin) {
		return e.stdin.(*os.File)
	}
	return nil
}

// coreTools returns warden's built-in tools, built once.
func (e *Env) coreTools() []tool.Tool {
	if e.core != nil {
		return e.core
	}
	// Every built-in tool warden can run is configured here, and only here;
	// builtin.Core lists them.
	st := lazyStore{open: e.store}
	e.core = builtin.Core(builtin.Config{
		System:     system.Config{Version: version, Started: e.started, State: e.runtimeState},
		Web:        web.Config{Search: web.SearchConfigFromEnv(os.Getenv)},
		Interact:   interact.Config{TTY: e.terminal(), Out: e.stderr},
		Memory:     memory.Config{Memory: st},
		Automation: automation.Config{Runs: e.TrackRuns(st), Jobs: st},
		Text: text.Config{
			BaseURL: os.Getenv("OPENAI_BASE_URL"), APIKey: os.Getenv("OPENAI_API_KEY"), Model: os.Getenv("WARDEN_MODEL"),
		},
		// WARDEN_OPS_PATH: where the ops tools look for journalctl and
		// systemctl (absolute directories; default the system bin
		// directories).
		Ops: ops.Config{Artifacts: st, Redactor: e.redactor, SearchPath: os.Getenv("WARDEN_OPS_PATH")},
	})
	return e.core
}

// coreAlias is the one alias of a core tool: `run` is `shell`.
var coreAlias = [2]string{"run", "shell"}

// CoreRegistry is the registry of the core tools only: what a wasm module's
// tool names must not collide with.
func (e *Env) CoreRegistry() (*gate.Registry, error) {
	reg := gate.NewRegistry()
	if err := reg.Register(e.coreTools()...); err != nil {
		return nil, err
	}
	if err := reg.Alias(coreAlias[0], coreAlias[1]); err != nil {
		return nil, err
	}
	return reg, nil
}

// Registry builds the explicit list of enabled tools: the core tools, then
// the tools of the approved wasm modules under <home>/tools. A module that
// does not load (unapproved, changed, colliding) is left out and never
// stops warden: `warden tool ls` says why.
//
// Loading the modules (store, pins, hashing each file) runs alongside the
// compilation of the core tools' schemas: both are on the start-up path of
// every `warden call`, and neither needs the other (a module's tool names
// are checked against the core tools' names only).
func (e *Env) Registry() (*gate.Registry, error) {
	e.regMu.Lock()
	defer e.regMu.Unlock()
	if e.reg != nil {
		return e.reg, nil
	}
	reg, err := e.loadRegistry()
	if err == nil {
		// The first load, before any gate exists: the values the owner's
		// tool config reads from the environment (KEY=env:VAR) are
		// masked wherever warden records or shows anything. A reload
		// (mcp serve) keeps the redactor its gate was built with; a
		// wasm tool refuses to hand a guest a secret that redactor would
		// not mask (gate.Gate.Conceals).
		e.AddSecrets(configSecretValues(e.wasmStatus)...)
	}
	return reg, err
}

// AddSecrets makes the redactor also mask vals. Only before anything that
// runs concurrently has the redactor (start-up).
func (e *Env) AddSecrets(vals ...string) {
	if len(vals) == 0 {
		return
	}
	e.secrets = append(e.secrets, vals...)
	e.redactor = redact.New(append(secretEnvValues(), e.secrets...)...)
}

// configSecretValues are the values of the environment variables the
// approved modules' owner config reads (KEY=env:VAR).
func configSecretValues(statuses []wasmtool.Status) []string {
	var out []string
	for _, name := range wasmtool.SecretEnv(statuses) {
		if v := os.Getenv(name); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// ReloadRegistry builds the registry again from what <home>/tools and the
// pins hold now (mcp serve, after a module was installed, approved,
// re-granted or removed).
func (e *Env) ReloadRegistry() (*gate.Registry, error) {
	e.regMu.Lock()
	defer e.regMu.Unlock()
	e.reg, e.wasmStatus = nil, nil
	return e.loadRegistry()
}

// loadRegistry is registry's work, with regMu held.
func (e *Env) loadRegistry() (*gate.Registry, error) {
	e.fleetSync(e.Context())
	if !e.hasModules() {
		reg, err := e.CoreRegistry()
		if err != nil {
			return nil, err
		}
		e.reg = reg
		return reg, nil
	}
	core := map[string]bool{coreAlias[0]: true}
	for _, t := range e.coreTools() {
		spec, _ := tool.HeadOf(t) // the name only: no schema derived
		core[spec.Name] = true
	}
	type loaded struct {
		tools []tool.Tool
		err   error
	}
	done := make(chan loaded, 1)
	go func() {
		tools, err := e.loadWasm(func(name string) bool { return core[name] })
		done <- loaded{tools, err}
	}()
	reg, err := e.CoreRegistry()
	l := <-done
	if err != nil {
		return nil, err
	}
	if l.err != nil {
		return nil, l.err
	}
	e.registerWasm(reg, l.tools)
	e.reg = reg
	return reg, nil
}

// registerWasm adds the wasm tools module by module: a module one of whose
// tools the registry refuses (Load checked names and schemas, so this
// should not happen) is left out whole, and its status says why.
func (e *Env) registerWasm(reg *gate.Registry, tools []tool.Tool) {
	var order []string
	byModule := map[string][]tool.Tool{}
	for _, t := range tools {
		m := t.Spec().Wasm
		if _, ok := byModule[m]; !ok {
			order = append(order, m)
		}
		byModule[m] = append(byModule[m], t)
	}
	for _, m := range order {
		ts := byModule[m]
		err := gate.NewRegistry().Register(ts...)
		for _, t := range ts {
			if err == nil && reg.Has(t.Spec().Name) {
				err = fmt.Errorf("tool name %q is already taken", t.Spec().Name)
			}
		}
		if err == nil {
			err = reg.Register(ts...)
		}
		if err != nil {
			e.Logger().Warn("wasm module not loaded", "module", m, "err", err.Error())
			for i := range e.wasmStatus {
				if e.wasmStatus[i].Module == m {
					e.wasmStatus[i].State, e.wasmStatus[i].Reason = wasmtool.StateError, err.Error()
				}
			}
		}
	}
}

// hasModules reports whether <home>/tools holds any .wasm file (without
// one there is no wasm tool to load, and the store need not be opened).
func (e *Env) hasModules() bool {
	ents, err := os.ReadDir(filepath.Join(e.home, "tools"))
	if err != nil {
		return false
	}
	for _, d := range ents {
		if strings.HasSuffix(d.Name(), ".wasm") && !d.IsDir() {
			return true
		}
	}
	return false
}

// loadWasm loads the approved modules' tools. A store that cannot be used
// fails the command (it would fail at its first audit write anyway); any
// other failure (an unsafe cache directory, a pin that does not decode)
// leaves warden with its core tools and one warning: `warden tool …` says
// more.
func (e *Env) loadWasm(taken func(string) bool) ([]tool.Tool, error) {
	h, err := e.WasmHost()
	if err != nil {
		msg, hint := err.Error(), ""
		var f *Failure
		if errors.As(err, &f) {
			hint = f.Hint
		}
		e.Logger().Warn("wasm tools not loaded", "err", msg, "hint", hint)
		return nil, nil
	}
	tools, statuses, err := h.Load(e.Context(), taken)
	if err != nil {
		var f *Failure
		if errors.As(err, &f) || IsStoreError(err) {
			return nil, StoreFailure(err)
		}
		e.Logger().Warn("wasm tools not loaded: see `warden tool ls`", "err", err.Error())
		return nil, nil
	}
	e.wasmStatus = statuses
	for _, s := range statuses {
		if s.State != wasmtool.StateOK {
			// Info, not warn: the log file gets it, and every command's
			// stderr is not cluttered by a module the owner has not
			// approved yet; `warden tool ls` shows it, and a call of one of
			// its tools says why in its hint.
			e.Logger().Info("wasm module not loaded", "module", s.Module, "state", s.State, "reason", s.Reason)
		}
	}
	return tools, nil
}

// IsStoreError reports whether err is the store's (locked, corrupt,
// tampered) or a cancellation.
func IsStoreError(err error) bool {
	var we *store.WriteError
	return errors.Is(err, store.ErrLocked) || errors.Is(err, store.ErrCorrupt) ||
		errors.Is(err, store.ErrTampered) || errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.Canceled) || errors.As(err, &we)
}

// WasmHost opens the wasm tool host on first use: modules in <home>/tools,
// compiled code cached in <home>/cache, pins in the store. It compiles
// nothing.
func (e *Env) WasmHost() (*wasmtool.Host, error) {
	if e.host != nil {
		return e.host, nil
	}
	// Before any guest runs: a guest's Extism http_request goes through
	// the gate (the http tool) instead of straight to the network.
	hostfuncs.InstallHTTP()
	h, err := wasmtool.Open(e.Context(), wasmtool.Options{
		Dir:       filepath.Join(e.home, "tools"),
		CacheDir:  filepath.Join(e.home, "cache"),
		Pins:      fleetPins{lazyStore{open: e.store}, e},
		HostFuncs: hostfuncs.Functions(),
		Logger:    e.guestLog, // nil (discarded) when there is no log file

		// Each guest call gets warden_call's buffer path.
		CallContext: hostfuncs.WithExchange,
	})
	if err != nil {
		if errors.Is(err, wasmtool.ErrUnsafeCacheDir) {
			return nil, Fail(tool.CodeInternal, ExitFailed, "the cache holds native code: make the path named private to you (chmod go-w), or remove "+filepath.Join(e.home, "cache"), "%v", err)
		}
		return nil, err
	}
	e.host = h
	return h, nil
}

// ModuleStatus returns the status of the module that is, or provides, the
// tool name, when it was found but not loaded.
func (e *Env) ModuleStatus(name string) (wasmtool.Status, bool) {
	e.regMu.Lock()
	defer e.regMu.Unlock()
	for _, s := range e.wasmStatus {
		if s.State == wasmtool.StateOK {
			continue
		}
		if s.Module == name || slices.Contains(s.Tools, name) {
			return s, true
		}
	}
	return wasmtool.Status{}, false
}

// Context is the command's context (background outside a command).
func (e *Env) Context() context.Context {
	if e.c != nil && e.c.Context != nil {
		return e.c.Context
	}
	return context.Background()
}

// Logger is the command's log, or one that discards when there is none.
func (e *Env) Logger() *slog.Logger {
	if e.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.log
}

func (e *Env) runtimeState(ctx context.Context) (builtin.RuntimeState, error) {
	rs := builtin.RuntimeState{}
	st, err := e.store()
	if err != nil {
		return rs, err
	}
	s, err := st.Stats(ctx)
	if err != nil {
		return rs, err
	}
	rs.StorePath, rs.StoreBytes = s.Path, s.SizeBytes
	rs.AuditRecords, rs.AuditHeadSeq, rs.AuditHeadHash = s.AuditRecords, s.AuditHeadSeq, s.AuditHeadHash
	if reg, err := e.Registry(); err == nil {
		rs.ToolsLoaded = reg.Len()
	}
	if pf, err := e.PolicyInForce(); err == nil {
		rs.Policy = pf.Policy.Source
		if pf.State == policy.TrustUntrusted || pf.State == policy.TrustChanged {
			rs.Policy = fmt.Sprintf("%s narrowed by %s (%s)", pf.Policy.Source, pf.File, pf.State)
		}
	}
	return rs, nil
}

// Gate builds the gate for a tool-calling command.
func (e *Env) Gate() (*gate.Gate, error) {
	p, err := e.Policy()
	if err != nil {
		return nil, err
	}
	extra, timed, err := e.grants()
	if err != nil {
		return nil, err
	}
	mode, err := e.approvalMode(p)
	if err != nil {
		return nil, err
	}
	reg, err := e.Registry()
	if err != nil {
		var f *Failure
		if errors.As(err, &f) {
			return nil, f
		}
		return nil, Fail(tool.CodeInternal, ExitFailed, "", "%v", err)
	}
	opts := gate.GateOptions{
		Registry: reg, Policy: p, Workspace: e.workspace, Extra: extra, Timed: timed,
		Grants: lazyStore{open: e.store}, Hide: e.OwnPaths(),
		Approval: mode, DryRun: e.c.Bool("dry-run"), Logger: e.log, Redactor: e.redactor,
	}
	if mode == tool.ApproveAsk {
		opts.Approver = e.approver
		if opts.Approver == nil {
			opts.Approver = &ui.TerminalApprover{In: e.stdin, Out: e.stderr}
		}
	}
	st, err := e.store()
	if err != nil {
		return nil, err
	}
	opts.Audit = st
	return gate.NewGate(opts)
}

// Audit records a management command's change (memory put/rm, …), which the
// policy does not gate but the log must show.
func (e *Env) Audit(ctx context.Context, tool string, args any) error {
	return e.AuditAs(ctx, []string{"cli", "owner"}, gate.PhaseAdmin, tool, args)
}

// AuditAs records an event that is not a gate call (a management change,
// an MCP resource read) for principal, in phase.
func (e *Env) AuditAs(ctx context.Context, principal []string, phase, toolName string, args any) error {
	st, err := e.store()
	if err != nil {
		return err
	}
	raw, err := json.Marshal(args)
	if err != nil {
		return err
	}
	red, err := e.redactor.JSON(raw)
	if err != nil {
		return err
	}
	ev := gate.AuditEvent{Phase: phase, CallID: tool.NewID(), Principal: principal, Tool: toolName, Args: red, Outcome: "ok"}
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = st.AppendAudit(ctx, body)
	return StoreFailure(err)
}

// PrintJSON writes v as indented JSON on stdout.
func (e *Env) PrintJSON(v any) error { return WriteJSON(e.stdout, v) }

// With wraps a command action with env setup and teardown.
func With(fn func(ctx context.Context, e *Env) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		defer e.Close()
		if err := fn(c.Context, e); err != nil {
			return StoreFailure(err)
		}
		return nil
	}
}

// homeFor is warden's home when neither --home nor WARDEN_HOME names one,
// where each system keeps an application's data: on Linux (and the other
// unix systems) $XDG_DATA_HOME/warden, else ~/.local/share/warden; on
// macOS ~/Library/Application Support/warden; on Windows
// %LocalAppData%\warden (the machine's own, not the roaming profile: the
// store and the compiled code are this machine's).
func homeFor(goos string, getenv func(string) string, userHome func() (string, error)) (string, error) {
	if goos == "windows" {
		d := getenv("LocalAppData")
		if d == "" {
			return "", errors.New("%LocalAppData% is not set")
		}
		return filepath.Join(d, "warden"), nil
	}
	if goos != "darwin" && goos != "ios" {
		if x := getenv("XDG_DATA_HOME"); x != "" {
			return filepath.Join(x, "warden"), nil
		}
	}
	h, err := userHome()
	if err != nil {
		return "", err
	}
	if goos == "darwin" || goos == "ios" {
		return filepath.Join(h, "Library", "Application Support", "warden"), nil
	}
	return filepath.Join(h, ".local", "share", "warden"), nil
}
