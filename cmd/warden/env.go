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
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/wardenrt/warden/builtin"
	"github.com/wardenrt/warden/runtime"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/redact"
	"github.com/wardenrt/warden/store"
)

const defaultLockTimeout = 2 * time.Second

// env is everything a command needs, built once from the global flags. It is
// the one place that wires store + runtime + builtin together.
type env struct {
	c         *cli.Context
	home      string
	workspace string
	json      bool
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
	log       *slog.Logger
	logFile   *os.File
	redactor  *redact.Redactor
	st        *store.Store
	reg       *runtime.Registry
	started   time.Time
}

// newEnv resolves the home and workspace directories and sets up logging.
// The store is opened lazily by env.store().
func newEnv(c *cli.Context) (*env, error) {
	e := &env{c: c, json: c.Bool("json"), stdin: c.App.Reader, stdout: c.App.Writer, stderr: c.App.ErrWriter, started: time.Now()}
	home := c.String("home")
	if home == "" {
		if x := os.Getenv("XDG_DATA_HOME"); x != "" {
			home = filepath.Join(x, "warden")
		} else {
			h, err := os.UserHomeDir()
			if err != nil {
				return nil, usageErr("set --home or WARDEN_HOME", "cannot find a home directory: %v", err)
			}
			home = filepath.Join(h, ".local", "share", "warden")
		}
	}
	home, err := filepath.Abs(home)
	if err != nil {
		return nil, usageErr("", "--home: %v", err)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, usageErr("choose a writable --home", "cannot create %s: %v", home, err)
	}
	e.home = home
	ws := c.String("workspace")
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
	e.redactor = redact.New(secretEnvValues()...)
	if err := e.setupLog(c.String("log-level")); err != nil {
		return nil, err
	}
	return e, nil
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
			handlers = append(handlers, slog.NewJSONHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: redactAttr}))
		}
	}
	e.log = slog.New(slog.NewMultiHandler(handlers...))
	return nil
}

// store opens the store on first use.
func (e *env) store() (*store.Store, error) {
	if e.st != nil {
		return e.st, nil
	}
	st, err := store.Open(filepath.Join(e.home, "warden.db"), &store.Options{Timeout: e.c.Duration("lock-timeout")})
	if err != nil {
		return nil, storeFailure(err)
	}
	e.st = st
	return st, nil
}

func (e *env) close() {
	if e.st != nil {
		if err := e.st.Close(); err != nil {
			e.log.Warn("closing the store", "err", err)
		}
	}
	if e.logFile != nil {
		_ = e.logFile.Close()
	}
}

// policy loads the policy: --policy, else <workspace>/.warden/policy.yaml,
// else <home>/policy.yaml, else the built-in default.
func (e *env) policy() (*runtime.Policy, error) {
	file := e.c.String("policy")
	if file == "" {
		for _, f := range []string{filepath.Join(e.workspace, ".warden", "policy.yaml"), filepath.Join(e.home, "policy.yaml")} {
			if _, err := os.Stat(f); err == nil {
				file = f
				break
			}
		}
	}
	if file == "" {
		return runtime.DefaultPolicy(), nil
	}
	p, err := runtime.LoadPolicy(file)
	if err != nil {
		var pe *runtime.PolicyError
		if errors.As(err, &pe) || strings.Contains(err.Error(), ":") {
			return nil, usageErr("fix the policy file; check it with `warden policy check "+file+"`", "%v", err)
		}
		return nil, usageErr("", "%v", err)
	}
	return p, nil
}

// grants parses the --grant flags, warning about grants as wide as exec:*.
func (e *env) grants() ([]capability.Grant, error) {
	var out []capability.Grant
	for _, s := range e.c.StringSlice("grant") {
		g, err := capability.Parse(s)
		if err != nil {
			return nil, usageErr("see SPEC §3 or README \"Capabilities\" for the grammar", "--grant: %v", err)
		}
		if why := g.Broad(); why != "" {
			fmt.Fprintf(e.stderr, "warden: warning: --grant %s: %s\n", g, why)
		}
		out = append(out, g)
	}
	return out, nil
}

// approvalMode resolves --approve, then the policy's setting, then ask on a
// terminal and never otherwise.
func (e *env) approvalMode(p *runtime.Policy) (runtime.ApprovalMode, error) {
	if s := e.c.String("approve"); s != "" {
		m, err := runtime.ParseApprovalMode(s)
		if err != nil {
			return "", usageErr("", "--approve: %v", err)
		}
		return m, nil
	}
	if p.Approval != "" {
		return p.Approval, nil
	}
	if e.isTTY() {
		return runtime.ApproveAsk, nil
	}
	return runtime.ApproveNever, nil
}

func (e *env) isTTY() bool { return e.terminal() != nil }

// terminal returns stdin when it is a terminal, for prompts; nil otherwise.
func (e *env) terminal() *os.File {
	if f, ok := e.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return f
	}
	return nil
}

// registry builds the explicit list of enabled tools.
func (e *env) registry() (*runtime.Registry, error) {
	if e.reg != nil {
		return e.reg, nil
	}
	// Every tool warden can run is listed here, and only here.
	st := lazyStore{open: e.store}
	var tools []runtime.Tool
	tools = append(tools, &builtin.System{Version: version, Started: e.started, State: e.runtimeState})
	tools = append(tools, builtin.FSTools()...)
	tools = append(tools, builtin.ShellTools()...)
	tools = append(tools, builtin.GitTools(nil)...)
	tools = append(tools, builtin.NetTools(builtin.SearchConfigFromEnv(os.Getenv))...)
	tools = append(tools, (&builtin.AskUser{TTY: e.terminal(), Out: e.stderr}).Tools()...)
	tools = append(tools, builtin.MemoryTools(st)...)
	tools = append(tools, builtin.TextTools(builtin.LLMConfig{
		BaseURL: os.Getenv("OPENAI_BASE_URL"), APIKey: os.Getenv("OPENAI_API_KEY"), Model: os.Getenv("WARDEN_MODEL"),
	})...)
	// WARDEN_OPS_PATH: where the ops tools look for journalctl and systemctl
	// (absolute directories; default the system bin directories).
	tools = append(tools, (&builtin.Ops{Artifacts: st, Redactor: e.redactor, SearchPath: os.Getenv("WARDEN_OPS_PATH")}).Tools()...)
	reg := runtime.NewRegistry()
	if err := reg.Register(tools...); err != nil {
		return nil, err
	}
	if err := reg.Alias("run", "shell"); err != nil {
		return nil, err
	}
	e.reg = reg
	return reg, nil
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
	if p, err := e.policy(); err == nil {
		rs.Policy = p.Source
	}
	return rs, nil
}

// gate builds the gate for a tool-calling command.
func (e *env) gate() (*runtime.Gate, error) {
	p, err := e.policy()
	if err != nil {
		return nil, err
	}
	extra, err := e.grants()
	if err != nil {
		return nil, err
	}
	mode, err := e.approvalMode(p)
	if err != nil {
		return nil, err
	}
	reg, err := e.registry()
	if err != nil {
		return nil, fail(runtime.CodeInternal, exitFailed, "", "%v", err)
	}
	opts := runtime.GateOptions{
		Registry: reg, Policy: p, Workspace: e.workspace, Extra: extra,
		Approval: mode, DryRun: e.c.Bool("dry-run"), Logger: e.log, Redactor: e.redactor,
	}
	if mode == runtime.ApproveAsk {
		opts.Approver = &terminalApprover{in: e.stdin, out: e.stderr}
	}
	st, err := e.store()
	if err != nil {
		return nil, err
	}
	opts.Audit = st
	return runtime.NewGate(opts)
}

// audit records a management command's change (memory put/rm, …), which the
// policy does not gate but the log must show.
func (e *env) audit(ctx context.Context, tool string, args any) error {
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
	ev := runtime.AuditEvent{Phase: "admin", CallID: runtime.NewID(), Principal: []string{"cli", "owner"}, Tool: tool, Args: red, Outcome: "ok"}
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
