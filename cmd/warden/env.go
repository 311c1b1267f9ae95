package main

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
	"golang.org/x/term"

	"github.com/wardenrt/warden/builtin"
	"github.com/wardenrt/warden/builtin/automation"
	"github.com/wardenrt/warden/builtin/interact"
	"github.com/wardenrt/warden/builtin/memory"
	"github.com/wardenrt/warden/builtin/ops"
	"github.com/wardenrt/warden/builtin/system"
	"github.com/wardenrt/warden/builtin/text"
	"github.com/wardenrt/warden/builtin/web"
	"github.com/wardenrt/warden/hostfuncs"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/redact"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/wasmtool"
	"github.com/wardenrt/warden/store"
)

const defaultLockTimeout = 2 * time.Second

// env is everything a command needs, built once from the global flags. It is
// the one place that wires store + runtime + builtin together.
type env struct {
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
	pol *gate.PolicyInForce
	// wasmStatus is what loading the wasm modules found (registry()).
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
func newEnv(c *cli.Context) (*env, error) {
	e := &env{c: c, json: wantJSON(c), stdin: c.App.Reader, stdout: c.App.Writer, stderr: c.App.ErrWriter, started: time.Now()}
	home := globalString(c, "home")
	if home == "" {
		h, err := homeFor(goruntime.GOOS, os.Getenv, os.UserHomeDir)
		if err != nil {
			return nil, usageErr("set --home or WARDEN_HOME", "cannot find a home directory: %v", err)
		}
		home = h
	}
	home, err := filepath.Abs(home)
	if err != nil {
		return nil, usageErr("", "--home: %v", err)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		if werr := store.Classify(home, err); werr != err {
			return nil, writeFailure(werr) // a full or read-only file system
		}
		return nil, usageErr("choose a writable --home", "cannot create %s: %v", home, err)
	}
	e.home = home
	ws := globalString(c, "workspace")
	if ws == "" {
		if ws, err = os.Getwd(); err != nil {
			return nil, usageErr("", "current directory: %v", err)
		}
	}
	if ws, err = filepath.Abs(ws); err == nil {
		ws, err = filepath.EvalSymlinks(ws)
	}
	if err != nil {
		return nil, usageErr("set --workspace to an existing directory", "workspace: %v", err)
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return nil, usageErr("set --workspace to an existing directory", "workspace %s is not a directory", ws)
	}
	e.workspace = ws
	e.secrets = storePassword(globalString(c, "store"))
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

// globalString reads a global flag from the app's own context, so a
// command's flag of the same name (grant add --workspace) does not hide it.
func globalString(c *cli.Context, name string) string {
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

// wantJSON reports whether --json was given, before or after the command
// (a command's own --json flag would otherwise hide the global one).
func wantJSON(c *cli.Context) bool {
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

func (e *env) setupLog(level string) error {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return usageErr("use debug, info, warn or error", "--log-level %q", level)
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
// backend, the bbolt file <home>/warden.db by default (store_backend.go).
func (e *env) store() (store.Backend, error) {
	if e.st != nil {
		return e.st, nil
	}
	e.logger().Debug("opening the store", "home", e.home)
	st, err := e.openStore()
	if err != nil {
		return nil, storeFailure(err)
	}
	e.st = st
	return st, nil
}

func (e *env) close() {
	if e.host != nil {
		if err := e.host.Close(context.Background()); err != nil {
			e.logger().Warn("closing the wasm tools", "err", err)
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

// policy returns the policy in force (resolved once): --policy, else
// <workspace>/.warden/policy.yaml — as written if its owner trusts it,
// else only narrowing what follows — else <home>/policy.yaml, else the
// built-in default. An untrusted workspace policy's ignored parts are
// warned about on stderr, once.
func (e *env) policy() (*gate.Policy, error) {
	pf, err := e.policyInForce()
	if err != nil {
		return nil, err
	}
	return pf.Policy, nil
}

// policyFiles are the files policy() looks at.
func (e *env) policyFiles() gate.PolicyFiles {
	return gate.PolicyFiles{
		Explicit:  globalString(e.c, "policy"),
		Workspace: filepath.Join(e.workspace, ".warden", "policy.yaml"),
		Home:      filepath.Join(e.home, "policy.yaml"),
	}
}

func (e *env) policyInForce() (*gate.PolicyInForce, error) {
	if e.pol != nil {
		return e.pol, nil
	}
	e.fleetSync(e.ctx())
	pf, err := gate.ResolvePolicy(e.ctx(), e.policyFiles(), lazyStore{open: e.store})
	if err != nil {
		var f *failure
		if errors.As(err, &f) {
			return nil, f // the store's, already worded
		}
		if isStoreError(err) {
			return nil, storeFailure(err)
		}
		src := "FILE"
		var pe *gate.PositionError
		if errors.As(err, &pe) {
			src = pe.Source
		}
		return nil, readFailure(err, "fix the policy file; check it with `warden policy check "+src+"`")
	}
	e.pol = pf
	if pf.State == gate.TrustMissing {
		fmt.Fprintf(e.stderr, "warden: warning: the workspace policy %s you trusted is gone: what it said still narrows %s — to drop it: warden policy untrust %s\n",
			printable(pf.File), printable(pf.Policy.Source), shellWord(pf.File))
	}
	if pf.State == gate.TrustUntrusted || pf.State == gate.TrustChanged {
		trust := "review it, then trust it with: warden policy trust " + shellWord(pf.File)
		why := "is not trusted"
		if pf.State == gate.TrustChanged {
			why = "changed since you trusted it"
		}
		fmt.Fprintf(e.stderr, "warden: warning: the workspace policy %s %s: it can only narrow %s — %s\n", printable(pf.File), why, printable(pf.Base.Source), trust)
		for _, ig := range pf.Ignored {
			at := pf.File
			if ig.Line > 0 {
				at = fmt.Sprintf("%s:%d", pf.File, ig.Line)
			}
			fmt.Fprintf(e.stderr, "warden: warning: %s: untrusted, so its %s is ignored — %s\n", printable(at), printable(ig.What), trust)
		}
	}
	return pf, nil
}

// shellWord quotes s for a command line when it needs it.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '@' || r == '+' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// grants parses the --grant flags, warning about broad grants. A grant
// written CAP@DURATION (exec:git@30m) expires that long after warden
// started: it is returned among the timed grants.
func (e *env) grants() ([]capability.Grant, []gate.TimedGrant, error) {
	var out []capability.Grant
	var timed []gate.TimedGrant
	for i, s := range e.c.StringSlice("grant") {
		// One grant a flag: a comma is part of the grant (a path may hold
		// one), so "a,b" where b is a grant of its own is a mistake that
		// would grant neither.
		if parts := strings.Split(s, ","); len(parts) > 1 {
			for _, part := range parts[1:] {
				if _, perr := capability.Parse(strings.TrimSpace(part)); perr == nil {
					return nil, nil, usageErr("repeat the flag: --grant "+strings.Join(parts, " --grant "), "--grant %s holds more than one grant", s)
				}
			}
		}
		spec, d, isTimed, err := gate.ParseTimedGrant(s)
		if err != nil {
			return nil, nil, usageErr("CAP@30m makes a grant that expires after 30 minutes", "--grant %s: %v", s, err)
		}
		g, err := capability.Parse(spec)
		if err != nil {
			return nil, nil, usageErr("see README \"Capabilities\" for the grammar; CAP@30m makes a grant that expires", "--grant: %v", err)
		}
		if why := g.Broad(); why != "" {
			fmt.Fprintf(e.stderr, "warden: warning: --grant %s: %s\n", g, why)
		}
		if !isTimed {
			out = append(out, g)
			continue
		}
		if d > gate.MaxTimedGrant {
			return nil, nil, usageErr("use at most 720h", "--grant %s: %s is longer than %s", s, d, gate.MaxTimedGrant)
		}
		t := gate.TimedGrant{ID: fmt.Sprintf("flag-%d", i+1), Kind: gate.TimedGrantKind, Grant: g.String(),
			Added: e.started, Expires: e.started.Add(d), By: "--grant"}
		if err := t.Parse(); err != nil {
			return nil, nil, usageErr("", "--grant %s: %v", s, err)
		}
		timed = append(timed, t)
	}
	return out, timed, nil
}

// approvalMode resolves --approve, then the policy's setting, then ask on a
// terminal and never otherwise.
func (e *env) approvalMode(p *gate.Policy) (tool.ApprovalMode, error) {
	if e.approval != "" {
		return e.approval, nil
	}
	if s := e.c.String("approve"); s != "" {
		m, err := tool.ParseApprovalMode(s)
		if err != nil {
			return "", usageErr("", "--approve: %v", err)
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

func (e *env) isTTY() bool { return e.terminal() != nil }

// terminal returns stdin when it is a terminal, for prompts; nil otherwise.
func (e *env) terminal() *os.File {
	if isTerminal(e.stdin) {
		return e.stdin.(*os.File)
	}
	return nil
}

// isTerminal reports whether v (a reader or writer) is a terminal.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// coreTools returns warden's built-in tools, built once.
func (e *env) coreTools() []tool.Tool {
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
		Automation: automation.Config{Runs: st, Jobs: st},
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

// coreRegistry is the registry of the core tools only: what a wasm module's
// tool names must not collide with.
func (e *env) coreRegistry() (*gate.Registry, error) {
	reg := gate.NewRegistry()
	if err := reg.Register(e.coreTools()...); err != nil {
		return nil, err
	}
	if err := reg.Alias(coreAlias[0], coreAlias[1]); err != nil {
		return nil, err
	}
	return reg, nil
}

// registry builds the explicit list of enabled tools: the core tools, then
// the tools of the approved wasm modules under <home>/tools. A module that
// does not load (unapproved, changed, colliding) is left out and never
// stops warden: `warden tool ls` says why.
//
// Loading the modules (store, pins, hashing each file) runs alongside the
// compilation of the core tools' schemas: both are on the start-up path of
// every `warden call`, and neither needs the other (a module's tool names
// are checked against the core tools' names only).
func (e *env) registry() (*gate.Registry, error) {
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
		e.addSecrets(configSecretValues(e.wasmStatus)...)
	}
	return reg, err
}

// addSecrets makes the redactor also mask vals. Only before anything that
// runs concurrently has the redactor (start-up).
func (e *env) addSecrets(vals ...string) {
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

// reloadRegistry builds the registry again from what <home>/tools and the
// pins hold now (mcp serve, after a module was installed, approved,
// re-granted or removed).
func (e *env) reloadRegistry() (*gate.Registry, error) {
	e.regMu.Lock()
	defer e.regMu.Unlock()
	e.reg, e.wasmStatus = nil, nil
	return e.loadRegistry()
}

// loadRegistry is registry's work, with regMu held.
func (e *env) loadRegistry() (*gate.Registry, error) {
	e.fleetSync(e.ctx())
	if !e.hasModules() {
		reg, err := e.coreRegistry()
		if err != nil {
			return nil, err
		}
		e.reg = reg
		return reg, nil
	}
	core := map[string]bool{coreAlias[0]: true}
	for _, t := range e.coreTools() {
		core[t.Spec().Name] = true
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
	reg, err := e.coreRegistry()
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
func (e *env) registerWasm(reg *gate.Registry, tools []tool.Tool) {
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
			e.logger().Warn("wasm module not loaded", "module", m, "err", err.Error())
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
func (e *env) hasModules() bool {
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
func (e *env) loadWasm(taken func(string) bool) ([]tool.Tool, error) {
	h, err := e.wasmHost()
	if err != nil {
		msg, hint := err.Error(), ""
		var f *failure
		if errors.As(err, &f) {
			hint = f.hint
		}
		e.logger().Warn("wasm tools not loaded", "err", msg, "hint", hint)
		return nil, nil
	}
	tools, statuses, err := h.Load(e.ctx(), taken)
	if err != nil {
		var f *failure
		if errors.As(err, &f) || isStoreError(err) {
			return nil, storeFailure(err)
		}
		e.logger().Warn("wasm tools not loaded: see `warden tool ls`", "err", err.Error())
		return nil, nil
	}
	e.wasmStatus = statuses
	for _, s := range statuses {
		if s.State != wasmtool.StateOK {
			// Info, not warn: the log file gets it, and every command's
			// stderr is not cluttered by a module the owner has not
			// approved yet; `warden tool ls` shows it, and a call of one of
			// its tools says why in its hint.
			e.logger().Info("wasm module not loaded", "module", s.Module, "state", s.State, "reason", s.Reason)
		}
	}
	return tools, nil
}

// isStoreError reports whether err is the store's (locked, corrupt,
// tampered) or a cancellation.
func isStoreError(err error) bool {
	var we *store.WriteError
	return errors.Is(err, store.ErrLocked) || errors.Is(err, store.ErrCorrupt) ||
		errors.Is(err, store.ErrTampered) || errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.Canceled) || errors.As(err, &we)
}

// wasmHost opens the wasm tool host on first use: modules in <home>/tools,
// compiled code cached in <home>/cache, pins in the store. It compiles
// nothing.
func (e *env) wasmHost() (*wasmtool.Host, error) {
	if e.host != nil {
		return e.host, nil
	}
	// Before any guest runs: a guest's Extism http_request goes through
	// the gate (the http tool) instead of straight to the network.
	hostfuncs.InstallHTTP()
	h, err := wasmtool.Open(e.ctx(), wasmtool.Options{
		Dir:       filepath.Join(e.home, "tools"),
		CacheDir:  filepath.Join(e.home, "cache"),
		Pins:      fleetPins{lazyStore{open: e.store}, e},
		HostFuncs: hostfuncs.Functions(),
		Logger:    e.guestLog, // nil (discarded) when there is no log file
	})
	if err != nil {
		if errors.Is(err, wasmtool.ErrUnsafeCacheDir) {
			return nil, fail(tool.CodeInternal, exitFailed, "the cache holds native code: make the path named private to you (chmod go-w), or remove "+filepath.Join(e.home, "cache"), "%v", err)
		}
		return nil, err
	}
	e.host = h
	return h, nil
}

// moduleStatus returns the status of the module that is, or provides, the
// tool name, when it was found but not loaded.
func (e *env) moduleStatus(name string) (wasmtool.Status, bool) {
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

func (e *env) ctx() context.Context {
	if e.c != nil && e.c.Context != nil {
		return e.c.Context
	}
	return context.Background()
}

func (e *env) logger() *slog.Logger {
	if e.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.log
}

func (e *env) runtimeState(ctx context.Context) (builtin.RuntimeState, error) {
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
	if reg, err := e.registry(); err == nil {
		rs.ToolsLoaded = reg.Len()
	}
	if pf, err := e.policyInForce(); err == nil {
		rs.Policy = pf.Policy.Source
		if pf.State == gate.TrustUntrusted || pf.State == gate.TrustChanged {
			rs.Policy = fmt.Sprintf("%s narrowed by %s (%s)", pf.Policy.Source, pf.File, pf.State)
		}
	}
	return rs, nil
}

// gate builds the gate for a tool-calling command.
func (e *env) gate() (*gate.Gate, error) {
	p, err := e.policy()
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
	reg, err := e.registry()
	if err != nil {
		var f *failure
		if errors.As(err, &f) {
			return nil, f
		}
		return nil, fail(tool.CodeInternal, exitFailed, "", "%v", err)
	}
	opts := gate.GateOptions{
		Registry: reg, Policy: p, Workspace: e.workspace, Extra: extra, Timed: timed,
		Grants: lazyStore{open: e.store}, Hide: e.ownPaths(),
		Approval: mode, DryRun: e.c.Bool("dry-run"), Logger: e.log, Redactor: e.redactor,
	}
	if mode == tool.ApproveAsk {
		opts.Approver = e.approver
		if opts.Approver == nil {
			opts.Approver = &terminalApprover{in: e.stdin, out: e.stderr}
		}
	}
	st, err := e.store()
	if err != nil {
		return nil, err
	}
	opts.Audit = st
	return gate.NewGate(opts)
}

// audit records a management command's change (memory put/rm, …), which the
// policy does not gate but the log must show.
func (e *env) audit(ctx context.Context, tool string, args any) error {
	return e.auditAs(ctx, []string{"cli", "owner"}, gate.PhaseAdmin, tool, args)
}

// auditAs records an event that is not a gate call (a management change,
// an MCP resource read) for principal, in phase.
func (e *env) auditAs(ctx context.Context, principal []string, phase, toolName string, args any) error {
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
	return storeFailure(err)
}

// printJSON writes v as indented JSON on stdout.
func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// withEnv wraps a command action with env setup and teardown.
func withEnv(fn func(ctx context.Context, e *env) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		e, err := newEnv(c)
		if err != nil {
			return err
		}
		defer e.close()
		if err := fn(c.Context, e); err != nil {
			return storeFailure(err)
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
