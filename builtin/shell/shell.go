// Package shell is the shell tool. A command is parsed with
// mvdan.cc/sh/v3/syntax and run by its interpreter (mvdan.cc/sh/v3/interp)
// inside warden, never by /bin/sh, so every program the command starts —
// after && or ;, in a pipe, in $(…) or backticks, in a subshell, through
// eval, source or a trap — reaches the exec
// handler (shell_exec.go), which checks it against the exec grants and its
// arguments against the guards (shell_guard.go) at the moment it would start,
// and every file the shell itself opens (redirections, source, $(<file)) reaches
// the open handler, which checks the fs grants and opens through os.Root.
//
// Before anything runs, Needs walks the parsed program (shell_plan.go) and asks
// for every capability it can see statically: exec:NAME for each literal program
// name, fs.read / fs.write for each literal redirection target, fs.read of the
// working directory. What is only known at run time ($(echo rm), eval of a
// variable, a sourced file) is checked when it happens; a refusal there stops
// the whole command (nothing after it runs) and the call fails with
// CAPABILITY_DENIED naming the program and the grant.
package shell

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// Limits and defaults of the shell tool.
const (
	defaultTimeout = 30 * time.Second
	maxTimeout     = 10 * time.Minute // the schema's maximum of timeout_ms
	maxOutput      = 1 << 20          // per stream
	maxCommand     = 64 << 10
	// defaultPath is the only PATH programs are found on (and the PATH
	// they see): absolute system directories, never ".", a relative
	// directory or the workspace.
	defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// stopGrace bounds how long a call waits, after its deadline, for the
	// interpreter and the programs it started to finish being killed.
	stopGrace = 700 * time.Millisecond
)

// Shell is the `shell` tool:
// {command, cwd?, env?, timeout_ms?, silent?} → data {exit_code, stdout,
// stderr, timed_out}. cmd/warden registers it once and adds the alias `run`
// (Registry.Alias("run", "shell")). The zero value is ready to use; the
// fields exist for tests and for a later configuration file.
type Shell struct {
	// DefaultTimeout applies when the call gives no timeout_ms; 0 means 30 s.
	DefaultTimeout time.Duration
	// MaxTimeout caps timeout_ms; 0 (or more than 10 min) means 10 min.
	MaxTimeout time.Duration
	// MaxOutput caps stdout and stderr each (the rest is counted and
	// marked); 0 means 1 MiB.
	MaxOutput int
	// Path is the fixed PATH programs are looked up on, a colon-separated
	// list of absolute directories; "" means defaultPath. Relative
	// elements, "." and directories inside the workspace are dropped.
	Path string
	// Environ returns the host environment the allowlisted and env-granted
	// variables are taken from; nil means os.Environ.
	Environ func() []string
}

var (
	_ tool.Typed[Args]          = (*Shell)(nil)
	_ tool.TypedPreviewer[Args] = (*Shell)(nil)
	_ tool.TypedSinker[Args]    = (*Shell)(nil)
)

// Tools returns the shell family as cmd/warden registers it: the shell
// tool with its defaults. cmd then adds the alias: Registry.Alias("run", "shell").
func Tools() []tool.Tool {
	return []tool.Tool{tool.Adapt[Args](&Shell{})}
}

// Spec implements tool.Typed.
func (s *Shell) Spec() tool.Spec {
	return tool.Spec{
		Name: "shell",
		Description: "Run a shell command in the workspace and return its exit code, stdout and stderr. " +
			"The command is interpreted by warden (bash syntax): each program it starts — also in pipes, $(…), eval or source — must be granted (exec:NAME), " +
			"each redirection must be granted (fs.read / fs.write), programs come only from a fixed PATH, and the environment holds only safe variables plus env: grants. " +
			"Dangerous options of allowed programs are refused (git -c, find -exec, rg --pre, sed e/w, …). Output is capped at 1 MiB per stream; on timeout all its processes are killed.",
		Capabilities: []capability.Kind{capability.Exec, capability.FSRead, capability.FSWrite, capability.Env},
	}
}

// Args are the shell tool's arguments; its input schema is derived from
// them (tool.SchemaFor).
type Args struct {
	Command   string            `json:"command" minLength:"1" maxLength:"65536" jsonschema:"Shell command (bash syntax: pipes, &&, ;, $(…), redirections, loops). Every program it starts needs an exec:NAME grant, every file it redirects to or from an fs.write / fs.read grant; programs are found only on warden's fixed PATH, never by a path like ./tool."`
	Cwd       string            `json:"cwd,omitempty" minLength:"1" maxLength:"4096" jsonschema:"Working directory, relative to the workspace or absolute (needs fs.read of it). Default: the workspace."`
	Env       map[string]string `json:"env,omitempty" maxProperties:"64" keyPattern:"^[A-Za-z_][A-Za-z0-9_]{0,127}$" values.maxLength:"32768" jsonschema:"Extra environment variables for the command. PATH cannot be set; variables that change what code programs load (LD_*, BASH_ENV, GIT_* configuration, PYTHONPATH, NODE_OPTIONS, …) need an exact env:NAME grant."`
	TimeoutMS *int64            `json:"timeout_ms,omitempty" minimum:"1" maximum:"600000" jsonschema:"Deadline in milliseconds (default 30000). On expiry every process the command started is killed and the call fails with COMMAND_TIMEOUT."`
	Silent    bool              `json:"silent,omitempty" jsonschema:"Do not return the command's output (stdout is dropped; stderr is kept only when the command fails). Default false."`
}

// Result is the shell tool's data.
// ExitCode is -1 when the command was killed at its deadline.
type Result struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	TimedOut bool   `json:"timed_out"`
}

// call is one call, decoded, parsed and checked statically.
type call struct {
	args    Args
	file    *syntax.File
	cwd     string // resolved, absolute
	timeout time.Duration
	plan    *analysis
}

// prepare checks and parses the call and analyses the program. An error is
// a refusal (INVALID_INPUT, CAPABILITY_DENIED) of the whole call.
func (s *Shell) prepare(c *tool.Call, a *Args) (*call, *tool.Error) {
	if strings.ContainsRune(a.Command, 0) {
		return nil, tool.Errorf(tool.CodeInvalidInput, "remove the NUL byte from the command", "command contains a NUL byte")
	}
	if len(a.Command) > maxCommand {
		return nil, tool.Errorf(tool.CodeInvalidInput, "", "command is %d bytes; the limit is %d", len(a.Command), maxCommand)
	}
	sc := &call{args: *a, timeout: s.defaultTimeout()}
	if a.TimeoutMS != nil {
		d := time.Duration(*a.TimeoutMS) * time.Millisecond
		if d > s.maxTimeout() {
			return nil, tool.Errorf(tool.CodeInvalidInput, fmt.Sprintf("use at most %d", s.maxTimeout().Milliseconds()),
				"timeout_ms %d is above the limit of %d", *a.TimeoutMS, s.maxTimeout().Milliseconds())
		}
		sc.timeout = d
	}
	file, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(a.Command), "")
	if err != nil {
		var pe syntax.ParseError
		if errors.As(err, &pe) {
			return nil, tool.Errorf(tool.CodeInvalidInput, "fix the shell syntax (bash)",
				"command does not parse at line %d, column %d: %s", pe.Pos.Line(), pe.Pos.Col(), pe.Text)
		}
		return nil, tool.Errorf(tool.CodeInvalidInput, "fix the shell syntax (bash)", "command does not parse: %v", err)
	}
	sc.file = file

	cwd := a.Cwd
	if cwd == "" {
		cwd = "."
	}
	resolved, rerr := capability.ResolvePath(c.Workspace, cwd)
	if rerr != nil {
		return nil, tool.Errorf(tool.CodeInvalidInput, "give an existing directory", "cwd %q cannot be resolved: %v", a.Cwd, rerr)
	}
	sc.cwd = resolved

	// The env argument: PATH is fixed; guarded names need an exact grant.
	for _, k := range sortedKeys(a.Env) {
		v := a.Env[k]
		if strings.ContainsRune(v, 0) {
			return nil, tool.Errorf(tool.CodeInvalidInput, "", "env %s contains a NUL byte", k)
		}
		if k == "PATH" {
			return nil, tool.Errorf(tool.CodeInvalidInput, "programs are found on warden's fixed PATH; name them without a path",
				"env PATH cannot be set: warden runs programs only from %s", s.pathValue(c.Workspace))
		}
		if why := envGuarded(k); why != "" && !exactEnvGrant(c.Grants, k) {
			e := tool.NeedsGrants([]string{"env:" + k}, "env %s cannot be set without an exact env:%s grant (env:* does not open it): %s", k, k, why)
			e.Hint += " (exactly this name; env:* does not open it)"
			return nil, e
		}
	}

	sc.plan = analyze(analyzeInput{
		file: file, ws: c.Workspace, cwd: resolved, grants: c.Grants, path: s.pathValue(c.Workspace),
	})
	if sc.plan.refusal != nil {
		return sc, sc.plan.refusal
	}
	return sc, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Needs implements tool.Typed: fs.read of the working directory, exec of
// every statically known program, fs.read / fs.write of every statically
// known redirection target, and env of the guarded variables the call sets.
func (s *Shell) Needs(c *tool.Call, a *Args) ([]capability.Need, error) {
	sc, err := s.prepare(c, a)
	if err != nil {
		return nil, err
	}
	c.ReportPrograms(sc.plan.programs)
	needs := []capability.Need{{Kind: capability.FSRead, Resource: sc.cwd}}
	for _, k := range sortedKeys(sc.args.Env) {
		if envGuarded(k) != "" {
			needs = append(needs, capability.Need{Kind: capability.Env, Resource: k})
		}
	}
	seen := map[capability.Need]bool{needs[0]: true}
	for _, n := range sc.plan.needs {
		if !seen[n] {
			seen[n] = true
			needs = append(needs, n)
		}
	}
	return needs, nil
}

// Preview implements tool.TypedPreviewer: the parsed plan — every command with its
// argv as far as it is known before running (dynamic words marked ‹…›), its
// redirections and the capabilities it needs — and nothing runs.
func (s *Shell) Preview(ctx context.Context, c *tool.Call, a *Args) tool.Outcome {
	sc, err := s.prepare(c, a)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	p := sc.plan.plan
	p.Cwd = sc.cwd
	p.TimeoutMS = sc.timeout.Milliseconds()
	p.Env = sortedKeys(sc.args.Env)
	p.Path = s.pathValue(c.Workspace)
	needs, _ := s.Needs(c, a)
	for _, n := range needs {
		p.Needs = append(p.Needs, n.String())
	}
	return tool.Outcome{Output: p.text(), Data: p, Warnings: sc.plan.warnings}
}

// Run implements tool.Typed.
func (s *Shell) Run(ctx context.Context, c *tool.Call, a *Args) tool.Outcome {
	sc, rerr := s.prepare(c, a)
	if rerr != nil {
		return tool.Outcome{Err: rerr}
	}
	if fi, err := os.Stat(sc.cwd); err != nil || !fi.IsDir() {
		return tool.Fail(tool.CodeNotFound, "give an existing directory as cwd", "cwd %s is not an existing directory", sc.cwd)
	}
	res := s.execute(ctx, c, sc)
	if res.refused != nil {
		return tool.Outcome{Err: res.refused}
	}
	return s.outcome(sc, res)
}

func (s *Shell) defaultTimeout() time.Duration {
	if s.DefaultTimeout > 0 && s.DefaultTimeout <= s.maxTimeout() {
		return s.DefaultTimeout
	}
	return min(defaultTimeout, s.maxTimeout())
}

func (s *Shell) maxTimeout() time.Duration {
	if s.MaxTimeout > 0 && s.MaxTimeout <= maxTimeout {
		return s.MaxTimeout
	}
	return maxTimeout
}

func (s *Shell) maxOutput() int {
	if s.MaxOutput > 0 {
		return s.MaxOutput
	}
	return maxOutput
}

// pathValue returns the PATH programs are found on: the configured list
// without relative elements and without directories inside the workspace.
func (s *Shell) pathValue(workspace string) string {
	p := s.Path
	if p == "" {
		p = defaultPath
	}
	var keep []string
	for _, d := range strings.Split(p, ":") {
		if d == "" || !strings.HasPrefix(d, "/") || d != filepath.Clean(d) {
			continue
		}
		if workspace != "" && within(workspace, d) {
			continue
		}
		keep = append(keep, d)
	}
	return strings.Join(keep, ":")
}

// outcome turns what ran into the tool's outcome.
func (s *Shell) outcome(sc *call, r *runResult) tool.Outcome {
	data := Result{ExitCode: r.exitCode, Stdout: r.stdout.String(), Stderr: r.stderr.String(), TimedOut: r.timedOut}
	failed := r.denial != nil || r.timedOut || r.cancelled || r.exitCode != 0
	var warnings []string
	warnings = append(warnings, r.warnings...)
	if r.stdout.Truncated() {
		warnings = append(warnings, fmt.Sprintf("stdout was cut at %d bytes (the rest was discarded)", s.maxOutput()))
	}
	if r.stderr.Truncated() {
		warnings = append(warnings, fmt.Sprintf("stderr was cut at %d bytes (the rest was discarded)", s.maxOutput()))
	}
	if sc.args.Silent {
		data.Stdout = ""
		if !failed {
			data.Stderr = ""
		}
	}
	out := outputText(data, sc.args.Silent)
	o := tool.Outcome{Output: out, Data: data, Warnings: warnings}
	switch {
	case r.denial != nil:
		d := r.denial
		o.Err = tool.Errorf(d.code, d.hint, "%s; the command was stopped there (exit code %d)", d.message, r.exitCode)
		o.Err.Missing = d.missing
	case r.timedOut:
		o.Err = tool.Errorf(tool.CodeCommandTimeout, fmt.Sprintf("raise timeout_ms (at most %d) or do less in one call", s.maxTimeout().Milliseconds()),
			"command timed out after %s; every process it started was killed", sc.timeout)
	case r.cancelled:
		o.Err = tool.Errorf(tool.CodeCommandTimeout, "", "command was cancelled; every process it started was killed")
	case r.exitCode != 0 && r.limit != "":
		o.Err = tool.Errorf(tool.CodeResourceLimit, "raise the limit in the policy rule for shell (limits:), or do less in one call",
			"a program was stopped at its %s; the command failed with exit code %d%s", r.limit, r.exitCode, lastLine(data.Stderr))
	case r.exitCode == 127 && len(r.notFound) > 0:
		o.Err = tool.Errorf(tool.CodeCommandNotFound, "install it, or check the name; warden looks only on its PATH ("+r.path+")",
			"%s: command not found (exit code 127)", strings.Join(r.notFound, ", "))
	case r.exitCode != 0:
		o.Err = tool.Errorf(tool.CodeCommandFailed, "read stderr in the result's data", "command failed with exit code %d%s", r.exitCode, lastLine(data.Stderr))
	}
	return o
}

// lastLine returns ": <last non-empty line of s>" (shortened), or "".
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return ""
	}
	if len(last) > 200 {
		last = strings.ToValidUTF8(last[:200], "") + "…"
	}
	return ": " + last
}

// outputText is the envelope's human/model-readable output.
func outputText(d Result, silent bool) string {
	var b strings.Builder
	if silent {
		fmt.Fprintf(&b, "[exit code %d; output suppressed (silent)]", d.ExitCode)
		if d.Stderr != "" {
			b.WriteString("\n[stderr]\n" + d.Stderr)
		}
		return b.String()
	}
	b.WriteString(d.Stdout)
	if d.Stderr != "" {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("[stderr]\n" + d.Stderr)
	}
	if b.Len() == 0 && d.ExitCode == 0 && !d.TimedOut {
		return "[exit code 0; no output]"
	}
	if d.ExitCode != 0 || d.TimedOut {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		if d.TimedOut {
			b.WriteString("[timed out; processes killed]")
		} else {
			fmt.Fprintf(&b, "[exit code %d]", d.ExitCode)
		}
	}
	return b.String()
}

// within reports whether p is dir or inside it (both absolute, clean).
func within(dir, p string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}
