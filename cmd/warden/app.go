package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/jobs"
	"github.com/wardenrt/warden/cmd/warden/internal/mcpserver"
	"github.com/wardenrt/warden/cmd/warden/internal/policycmd"
	"github.com/wardenrt/warden/cmd/warden/internal/runs"
	"github.com/wardenrt/warden/cmd/warden/internal/statecmd"
	"github.com/wardenrt/warden/cmd/warden/internal/toolcmd"
	"github.com/wardenrt/warden/cmd/warden/internal/ui"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

// The packages under internal report the version main was built with.
func init() { env.SetVersion(version) }

// run is main without os.Exit and without its signal handling, for tests.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdin, stdout, stderr)
}

// runContext runs a command until it ends or ctx does (main cancels it at
// the first SIGINT or SIGTERM).
func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := newApp(stdin, stdout, stderr)
	err := app.RunContext(ctx, reorderArgs(app, args))
	if err == nil {
		return env.ExitOK
	}
	var f *env.Failure
	if !errors.As(err, &f) {
		if ee, ok := err.(cli.ExitCoder); ok && ee.ExitCode() == 0 {
			return env.ExitOK
		}
		// urfave/cli reports bad flags and the like as plain errors.
		f = env.UsageErr("see `warden --help`", "%v", err)
	}
	if f.Exit != env.ExitOK {
		line := fmt.Sprintf("warden: %s: %s", f.Code, f.Msg)
		if f.Hint != "" {
			line += " — " + f.Hint
		}
		fmt.Fprintln(stderr, ui.Printable(strings.ReplaceAll(line, "\n", " ")))
	}
	return f.Exit
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:                 "warden",
		Usage:                "a WebAssembly-extensible agent runtime where every tool call goes through one gate",
		Version:              version,
		Reader:               stdin,
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: true,
		Suggest:              true,
		HideVersion:          true,
		Flags:                globalFlags(),
		ExitErrHandler:       func(*cli.Context, error) {}, // run() prints and exits
		Commands: []*cli.Command{
			toolcmd.ToolsCommand(),
			toolcmd.CallCommand(),
			runs.RunCommand(),
			runs.WorkflowCommand(),
			jobs.ScheduleCommand(),
			jobs.DaemonCommand(),
			mcpserver.MCPCommand(),
			sandboxCommand(),
			toolcmd.ToolCommand(),
			statecmd.AuditCommand(),
			statecmd.MemoryCommand(),
			runs.RunsCommand(),
			policycmd.PolicyCommand(),
			statecmd.StoreCommand(),
			policycmd.GrantCommand(),
			versionCommand(),
			completionCommand(),
		},
	}
	// A repeatable flag's value is taken whole, commas included: -a
	// text='Hello, World!' is one argument, a --grant or --param value may
	// hold commas. (--tools splits its comma-separated names itself.)
	app.DisableSliceFlagSeparator = true
	app.OnUsageError = func(c *cli.Context, err error, _ bool) error {
		return env.UsageErr("see `warden "+c.Command.Name+" --help`", "%v", err)
	}
	for _, c := range app.Commands {
		setUsageErrors(c)
	}
	return app
}

func setUsageErrors(c *cli.Command) { setUsageErrorsAt(c, "warden") }

// setUsageErrorsAt gives c (whose full name is path + c's name) and its
// subcommands a usage error naming the command's own --help.
func setUsageErrorsAt(c *cli.Command, path string) {
	full := path + " " + c.Name
	c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
		return env.UsageErr("see `"+full+" --help`", "%v", err)
	}
	for _, s := range c.Subcommands {
		setUsageErrorsAt(s, full)
	}
}

func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "home", EnvVars: []string{"WARDEN_HOME"}, Usage: "state directory (warden.db, tools/, cache/, logs/); default $XDG_DATA_HOME/warden or ~/.local/share/warden; on macOS ~/Library/Application Support/warden, on Windows %LocalAppData%\\warden"},
		&cli.StringFlag{Name: "workspace", EnvVars: []string{"WARDEN_WORKSPACE"}, Usage: "root for fs, git and shell tools (default: current directory)"},
		&cli.StringFlag{Name: "policy", EnvVars: []string{"WARDEN_POLICY"}, Usage: "policy file (default: <workspace>/.warden/policy.yaml, else <home>/policy.yaml, else the built-in default)"},
		&cli.StringSliceFlag{Name: "grant", Usage: "extra grant KIND:SCOPE for this invocation only (repeatable)"},
		&cli.BoolFlag{Name: "dry-run", Usage: "every side-effecting call returns its preview and changes nothing"},
		&cli.StringFlag{Name: "approve", EnvVars: []string{"WARDEN_APPROVE"}, Usage: "who approves require_approval calls: ask | auto | never (default: the policy's, else ask on a terminal, never otherwise)"},
		&cli.BoolFlag{Name: "json", Usage: "machine-readable output on stdout"},
		&cli.StringFlag{Name: "log-level", EnvVars: []string{"WARDEN_LOG_LEVEL"}, Value: "warn", Usage: "stderr log level: debug | info | warn | error (the log file under <home>/logs always gets info)"},
		&cli.StringFlag{Name: "store", EnvVars: []string{"WARDEN_STORE"}, Usage: "where state is kept: bbolt (the file <home>/warden.db, the default), bbolt:PATH, or postgres://USER@HOST:PORT/DB shared by many hosts (see `warden store`)"},
		&cli.DurationFlag{Name: "lock-timeout", EnvVars: []string{"WARDEN_LOCK_TIMEOUT"}, Value: env.DefaultLockTimeout, Usage: "how long to wait for another warden process to release the store"},
	}
}

// reorderArgs moves flags that follow positional arguments in front of them,
// so `warden call system --args '{}'` works (Go's flag parsing stops at the
// first positional argument). Everything after `--` is left alone.
func reorderArgs(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	// Shell completion asks with a flag that must stay last.
	var tail []string
	if last := args[len(args)-1]; last == "--generate-bash-completion" {
		args, tail = args[:len(args)-1], []string{last}
	}
	out := []string{args[0]}
	flags := app.Flags
	var cmds []*cli.Command = app.Commands
	i := 1
	var global []string
	// Walk the command path: global flags, then command names.
	for i < len(args) && args[i] != "--" {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			dst, set := &out, flags
			if len(out) > 1 && !hasFlag(flags, a) && hasFlag(app.Flags, a) {
				dst, set = &global, app.Flags // a global flag after a command name
			}
			*dst = append(*dst, a)
			if takesValue(set, a) && !strings.Contains(a, "=") && i+1 < len(args) {
				*dst = append(*dst, args[i+1])
				i++
			}
			i++
			continue
		}
		var next *cli.Command
		for _, c := range cmds {
			if c.HasName(a) {
				next = c
			}
		}
		if next == nil {
			break
		}
		out = append(out, a)
		flags, cmds = next.Flags, next.Subcommands
		i++
	}
	var fl, pos []string
	dashes := false
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			// Everything after -- is an argument, whatever it looks like.
			pos, dashes = append(pos, args[i+1:]...), true
			break
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			// A global flag the command does not define itself goes
			// before the command, where it belongs.
			dst, set := &fl, flags
			if !hasFlag(flags, a) && hasFlag(app.Flags, a) {
				dst, set = &global, app.Flags
			}
			*dst = append(*dst, a)
			if takesValue(set, a) && !strings.Contains(a, "=") && i+1 < len(args) {
				*dst = append(*dst, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	out = append(append([]string{out[0]}, global...), out[1:]...)
	out = append(out, fl...)
	if dashes {
		out = append(out, "--")
	}
	return append(append(out, pos...), tail...)
}

// hasFlag reports whether flags define the flag arg names (-x, --x, --x=v).
func hasFlag(flags []cli.Flag, arg string) bool {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

func takesValue(flags []cli.Flag, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	for _, f := range flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			if bf, ok := f.(*cli.BoolFlag); ok && bf != nil {
				return false
			}
			return true
		}
	}
	return false
}
