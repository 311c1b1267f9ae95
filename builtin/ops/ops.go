// Package ops is the ops family: journald logs, systemd services and
// configuration files of the machine warden runs on (see Config).
package ops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/wardenrt/warden/internal/lazyre"

	"github.com/wardenrt/warden/builtin/internal/proc"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/redact"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/tool"
)

// DefaultSearchPath is where the ops tools look for journalctl and
// systemctl when Config.SearchPath is empty. It never contains "." or a
// relative directory, and the caller's $PATH is never consulted.
const DefaultSearchPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// DefaultTimeout bounds each program an ops tool starts when Config.Timeout
// is zero.
const DefaultTimeout = 30 * time.Second

// Limits of the ops tools.
const (
	// maxLines is the most journal entries read_logs asks for.
	maxLines = 5000
	// defaultLines is read_logs' default.
	defaultLines = 100
	// maxStdout caps what a program may print before it is cut (the
	// journal's JSON for 5,000 entries fits comfortably).
	maxStdout = 16 << 20
	// maxStderr caps a program's error output.
	maxStderr = 64 << 10
	// maxConfigBytes is the largest config file read_config and
	// modify_config handle.
	maxConfigBytes = 1 << 20
	// maxUnitLen is systemd's limit on unit names.
	maxUnitLen = 255
)

// Config configures the ops family: journald logs,
// systemd services and configuration files of the machine warden runs on.
//
//   - read_logs        journalctl --unit=UNIT --output=json, parsed (exec:journalctl)
//   - service_status   systemctl show UNIT, parsed (exec:systemctl)
//   - restart_service  systemctl restart UNIT (exec:systemctl; the default
//     policy rule requires approval and shows the dry run first)
//   - read_config      a text file (fs.read:PATH)
//   - modify_config    line changes checked against the current file, written
//     atomically, the old version kept as an artifact (fs.read and fs.write:PATH)
//
// The zero value is usable except that modify_config refuses to write
// without Artifacts. The tools are safe for concurrent calls.
type Config struct {
	// Artifacts keeps the old version of every file modify_config changes.
	// modify_config refuses to write when it is nil.
	Artifacts gate.Artifacts
	// Redactor masks secrets in the old versions before they are kept as
	// artifacts (nothing is written unmasked: docs/redaction.md). nil means
	// redact.New(); pass the gate's redactor so environment secrets are
	// masked too.
	Redactor *redact.Redactor
	// SearchPath is a colon-separated list of absolute directories searched
	// for journalctl and systemctl, in order; "" means DefaultSearchPath.
	// Empty and relative entries (".") are ignored; the absolute ones are
	// also the PATH the programs are started with.
	SearchPath string
	// Sandbox adds to what journalctl and systemctl may read, write and
	// execute (a journal kept elsewhere; tests' fake programs that record
	// what they were asked, with the programs those scripts run).
	Sandbox sandbox.Spec
	// Timeout bounds each program started; 0 means DefaultTimeout.
	Timeout time.Duration
}

// Tools returns the five ops tools, sharing cfg.
func Tools(cfg Config) []tool.Tool { return cfg.tools() }

// tools returns the five ops tools, sharing o.
func (o *Config) tools() []tool.Tool {
	return []tool.Tool{
		tool.Adapt[readLogsArgs](&readLogs{o}),
		tool.Adapt[unitArgs](&serviceStatus{o}),
		tool.Adapt[unitArgs](&restartService{o}),
		tool.Adapt[pathArgs](&readConfig{o}),
		tool.Adapt[modifyArgs](&modifyConfig{o}),
	}
}

var (
	_ tool.Typed[readLogsArgs]        = (*readLogs)(nil)
	_ tool.Typed[unitArgs]            = (*serviceStatus)(nil)
	_ tool.Typed[unitArgs]            = (*restartService)(nil)
	_ tool.TypedPreviewer[unitArgs]   = (*restartService)(nil)
	_ tool.Typed[pathArgs]            = (*readConfig)(nil)
	_ tool.Typed[modifyArgs]          = (*modifyConfig)(nil)
	_ tool.TypedPreviewer[modifyArgs] = (*modifyConfig)(nil)
	_ tool.TypedSinker[modifyArgs]    = (*modifyConfig)(nil)
	_ tool.SchemaRefiner              = (*serviceStatus)(nil)
	_ tool.SchemaRefiner              = (*restartService)(nil)
)

func (o *Config) searchPath() string {
	if o.SearchPath == "" {
		return DefaultSearchPath
	}
	return o.SearchPath
}

func (o *Config) timeout() time.Duration {
	if o.Timeout <= 0 {
		return DefaultTimeout
	}
	return o.Timeout
}

func (o *Config) redactor() *redact.Redactor {
	if o.Redactor == nil {
		return redact.New()
	}
	return o.Redactor
}

// childPath is the search path without empty or relative entries: the PATH
// the programs are started with.
func (o *Config) childPath() string {
	var dirs []string
	for _, d := range filepath.SplitList(o.searchPath()) {
		if d != "" && filepath.IsAbs(d) {
			dirs = append(dirs, filepath.Clean(d))
		}
	}
	return strings.Join(dirs, string(filepath.ListSeparator))
}

// lookPath finds prog (a bare name) in the search path: the first absolute
// directory holding a regular, executable file of that name. It never looks
// in "." or any relative directory, whatever the search path says.
func (o *Config) lookPath(prog string) (string, *tool.Error) {
	sp := o.searchPath()
	for _, dir := range filepath.SplitList(sp) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(filepath.Clean(dir), prog)
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			continue
		}
		return p, nil
	}
	return "", tool.Errorf(tool.CodeCommandNotFound,
		"systemd is not available here: the ops tools need a machine managed by systemd (journald and systemctl)",
		"%s is not installed (searched %s)", prog, sp)
}

// opsProc is a finished program run.
type opsProc struct {
	Argv     []string
	ExitCode int
	Stdout   *proc.CappedBuffer
	Stderr   *proc.CappedBuffer
}

// stderrText is the program's error output, trimmed and cut for a message.
func (p *opsProc) stderrText() string {
	s := strings.TrimSpace(p.Stderr.String())
	if len(s) > 2000 {
		s = strings.ToValidUTF8(s[:2000], "") + " …"
	}
	return s
}

// argv resolves prog and returns the exact argv run would start.
func (o *Config) argv(prog string, args ...string) ([]string, *tool.Error) {
	path, err := o.lookPath(prog)
	if err != nil {
		return nil, err
	}
	return append([]string{path}, args...), nil
}

// readPaths are what journalctl and systemctl read besides the system's:
// the journal, systemd's state and units, the machine id, and /proc
// (processes and their cgroups, which service status shows).
var readPaths = []string{
	"/var/log/journal", "/run/log/journal", "/run/systemd", "/etc/systemd", "/usr/lib/systemd",
	"/etc/machine-id", "/var/lib/systemd", "/proc", "/sys/fs/cgroup",
}

// box is the sandbox of journalctl and systemctl: read-only on what they
// read and on the search path (where they were found), no TCP, the call's
// limits.
func (o *Config) box(c *tool.Call) sandbox.Spec {
	read := append(slices.Clone(readPaths), filepath.SplitList(o.childPath())...)
	return sandbox.Spec{
		Read:  append(read, o.Sandbox.Read...),
		Write: slices.Clone(o.Sandbox.Write),
		// journalctl and systemctl themselves (proc.Run adds the one
		// started), and what Sandbox adds.
		Exec:    sandbox.ExecClosure(o.Sandbox.Exec, filepath.SplitList(o.childPath())),
		ExecAny: o.Sandbox.ExecAny,
		Limits:  c.Limits,
		// systemctl talks to systemd over its unix socket.
		UnixSockets: true,
	}
}

// env is the whole environment of the programs started: nothing of warden's
// own environment is passed on.
func (o *Config) env() []string {
	return []string{
		"PATH=" + o.childPath(),
		"LC_ALL=C.UTF-8",
		"SYSTEMD_PAGER=",
		"SYSTEMD_COLORS=0",
		"SYSTEMD_URLIFY=0",
	}
}

// run starts argv (from o.argv) through proc.Run with the minimal environment,
// the tool's deadline and capped output. A non-zero exit is not an error
// here: callers judge the exit code.
func (o *Config) run(ctx context.Context, c *tool.Call, argv []string) (*opsProc, *tool.Error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout())
	defer cancel()
	p := &opsProc{
		Argv:   argv,
		Stdout: &proc.CappedBuffer{Max: maxStdout},
		Stderr: &proc.CappedBuffer{Max: maxStderr},
	}
	code, err := proc.Run(ctx, proc.Spec{
		Path: argv[0], Args: argv, Dir: "/", Env: o.env(),
		Stdout: p.Stdout, Stderr: p.Stderr,
		Box: o.box(c), RequireBox: c.RequireSandbox,
	})
	p.ExitCode = code
	switch {
	case err == nil:
		return p, nil
	case errors.Is(err, proc.ErrSandboxRequired):
		return p, proc.SandboxRequiredError(err)
	case errors.Is(err, proc.ErrKilled) && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return p, tool.Errorf(tool.CodeCommandTimeout,
			"the program did not finish in time; the machine may be overloaded, try again later",
			"%s did not finish in time (at most %s, within the caller's deadline) and was killed", filepath.Base(argv[0]), o.timeout())
	case errors.Is(err, proc.ErrKilled):
		return p, tool.Errorf(tool.CodeToolError, "the call was cancelled before the program finished; run it again if it is still needed",
			"%s was stopped: the call was cancelled", filepath.Base(argv[0]))
	default:
		return p, tool.Errorf(tool.CodeCommandFailed, "check that the program is a working executable",
			"%s could not be started: %v", argv[0], err)
	}
}

// failed turns a non-zero exit into COMMAND_FAILED with the exit code and the
// program's error output.
func (p *opsProc) failed() *tool.Error {
	msg := p.stderrText()
	hint := "read the program's error output above"
	if noSystemd(msg) {
		hint = "systemd is not running on this machine (not booted with systemd, or no system bus): the ops tools need a systemd host"
	}
	if msg == "" {
		msg = "(no error output)"
	}
	return tool.Errorf(tool.CodeCommandFailed, hint, "%s exited with status %d: %s",
		strings.Join(quoteArgv(p.Argv), " "), p.ExitCode, msg)
}

// noSystemd recognises systemctl's and journalctl's ways of saying that
// systemd is not the running init system.
func noSystemd(stderr string) bool {
	for _, s := range []string{"not been booted with systemd", "Failed to connect to bus", "Failed to connect to system scope bus"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

// quoteArgv renders argv for a person: arguments that a shell would split
// or interpret are single-quoted. It is for display only; nothing is ever
// run through a shell.
func quoteArgv(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+%", r))
		}) < 0 {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return out
}

// unitPattern is the unit names the ops tools accept: systemd's unit name
// characters (letters, digits, ":", "_", ".", "@", "-", "\" for its \x2d
// escapes), never starting with "-" (so a name cannot be read as an option)
// and without glob characters (systemctl would expand "*" to every unit).
// The same pattern is in the schemas (the pattern tags of readLogsArgs and
// unitArgs; TestOpsUnitSchemaPattern).
var unitPattern = lazyre.New(`^[A-Za-z0-9_][A-Za-z0-9:_.@\\-]*$`)

// unitTypes are systemd's unit type suffixes.
var unitTypes = []string{".service", ".socket", ".device", ".mount", ".automount", ".swap",
	".target", ".path", ".timer", ".slice", ".scope"}

// opsUnit validates a unit name and returns it in full: a name without a
// unit type suffix gets ".service", as systemctl would add it, so the argv
// shown is exactly what runs.
func opsUnit(name string) (string, *tool.Error) {
	hint := `name a systemd unit such as "nginx" or "nginx.service": letters, digits and :_.@-\ , not starting with "-"`
	if !unitPattern.MatchString(name) || strings.Count(name, "@") > 1 {
		return "", tool.Errorf(tool.CodeInvalidInput, hint, "%q is not a valid unit name", name)
	}
	full := name
	known := false
	for _, t := range unitTypes {
		if strings.HasSuffix(name, t) && len(name) > len(t) {
			known = true
			break
		}
	}
	if !known {
		full += ".service"
	}
	if len(full) > maxUnitLen {
		return "", tool.Errorf(tool.CodeInvalidInput, hint, "unit name is %d bytes; systemd allows %d", len(full), maxUnitLen)
	}
	return full, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
