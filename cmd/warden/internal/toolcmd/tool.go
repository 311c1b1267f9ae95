package toolcmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/decode"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/wasmtool"
	"github.com/wardenrt/warden/store"
)

// approvedBy is who approves modules from the command line: the owner of
// the home directory (the management commands are the owner's; docs/cli.md).
const approvedBy = "owner"

// ToolCommand is `warden tool`.
func ToolCommand() *cli.Command {
	grantFlag := &cli.StringSliceFlag{Name: "grant", Usage: "grant the module KIND:SCOPE (repeatable); its tools act with the run's grants ∩ the module's"}
	nameFlag := &cli.StringFlag{Name: "name", Usage: "the module's name (default: the sidecar's name, else the file's)"}
	prefixFlag := &cli.StringFlag{Name: "prefix", Usage: "expose each of the module's tools as PREFIX + its own name (the module still gets its own names)"}
	aliasFlag := &cli.StringSliceFlag{Name: "alias", Usage: "expose the module's tool OWN as NEW: OWN=NEW (repeatable; wins over --prefix)"}
	return &cli.Command{
		Name:  "tool",
		Usage: "the owner's management of wasm tools in <home>/tools: install, approve, grant, inspect, remove",
		Subcommands: []*cli.Command{
			toolInstallCommand(nameFlag, grantFlag, prefixFlag, aliasFlag),
			toolBuildCommand(nameFlag, grantFlag, prefixFlag, aliasFlag),
			toolLsCommand(),
			toolInspectCommand(),
			toolApproveCommand(prefixFlag, aliasFlag),
			toolConfigCommand(),
			toolGrantCommand(),
			toolRevokeCommand(),
			toolRmCommand(),
		},
	}
}

// toolArgs checks that a tool subcommand got at least min arguments; usage
// is its synopsis after `warden tool`.
func toolArgs(e *env.Env, min int, usage string) error {
	if e.CLI().NArg() < min {
		return env.UsageErr("usage: warden tool "+usage, "wrong number of arguments")
	}
	return nil
}

// toolInstallCommand is `warden tool install`.
func toolInstallCommand(nameFlag, grantFlag, prefixFlag, aliasFlag cli.Flag) *cli.Command {
	return &cli.Command{
		Name: "install", Usage: "check a module (and the NAME.tool.yaml beside it), copy it into <home>/tools and approve it",
		ArgsUsage: "FILE.wasm",
		Flags:     []cli.Flag{nameFlag, grantFlag, prefixFlag, aliasFlag, env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if e.CLI().NArg() != 1 {
				return env.UsageErr("usage: warden tool install FILE.wasm [--name N] [--grant CAP ...] [--prefix P] [--alias OWN=NEW ...]", "install needs exactly one module file")
			}
			file := e.CLI().Args().First()
			if fi, err := os.Stat(file); err != nil || !fi.Mode().IsRegular() {
				if err == nil {
					err = fmt.Errorf("%s is not a regular file", file)
				}
				return env.UsageErr("give the path of a .wasm file", "%v", err)
			}
			return installModule(ctx, e, file, "")
		}),
	}
}

// toolBuildCommand is `warden tool build`.
func toolBuildCommand(nameFlag, grantFlag, prefixFlag, aliasFlag cli.Flag) *cli.Command {
	return &cli.Command{
		Name: "build", Usage: "build a Go tool for wasip1 (go build, GOOS=wasip1 GOARCH=wasm) and install it",
		ArgsUsage: "DIR",
		Flags: []cli.Flag{nameFlag, grantFlag, prefixFlag, aliasFlag, env.JSONFlag,
			&cli.BoolFlag{Name: "command", Usage: "build a WASI command (_start; the default when the sidecar says abi: wasi-command) instead of an Extism plugin (-buildmode=c-shared)"},
		},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if e.CLI().NArg() != 1 {
				return env.UsageErr("usage: warden tool build DIR [--name N] [--grant CAP ...] [--command]", "build needs exactly one directory")
			}
			return buildModule(ctx, e, e.CLI().Args().First())
		}),
	}
}

// toolLsCommand is `warden tool ls`.
func toolLsCommand() *cli.Command {
	return &cli.Command{
		Name: "ls", Usage: "list the modules in <home>/tools: state (ok, unapproved, changed, missing, error), tools, and why one is not loaded",
		Flags: []cli.Flag{env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			h, core, err := toolHost(e)
			if err != nil {
				return err
			}
			_, statuses, err := h.Load(ctx, core.Has)
			if err != nil {
				return toolFailure(err)
			}
			for i := range statuses {
				checkStatus(h, &statuses[i])
			}
			if e.JSON() {
				if statuses == nil {
					statuses = []wasmtool.Status{}
				}
				return e.PrintJSON(statuses)
			}
			if len(statuses) == 0 {
				fmt.Fprintf(e.Stdout(), "no wasm modules in %s: install one with `warden tool install FILE.wasm`\n", h.Dir())
				return nil
			}
			tw := tabwriter.NewWriter(e.Stdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "MODULE\tSTATE\tTOOLS\tREASON")
			for _, s := range statuses {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Module, s.State, ui.OrDash(strings.Join(s.Tools, ",")), s.Reason)
			}
			return tw.Flush()
		}),
	}
}

// toolInspectCommand is `warden tool inspect`.
func toolInspectCommand() *cli.Command {
	return &cli.Command{
		Name: "inspect", Usage: "describe a module: exports, imports, memory, requested and granted capabilities, limits, sha256, and what changed since approved",
		ArgsUsage: "NAME",
		Flags:     []cli.Flag{env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if e.CLI().NArg() != 1 {
				return env.UsageErr("usage: warden tool inspect NAME", "inspect needs exactly one module name")
			}
			h, core, err := toolHost(e)
			if err != nil {
				return err
			}
			in, err := h.Inspect(ctx, e.CLI().Args().First(), core.Has)
			if err != nil {
				return toolFailure(err)
			}
			return printInspection(e, in)
		}),
	}
}

// toolApproveCommand is `warden tool approve`.
func toolApproveCommand(prefixFlag, aliasFlag cli.Flag) *cli.Command {
	return &cli.Command{
		Name: "approve", Usage: "show how a module's files differ from what was approved (requested capabilities, tools and schemas), then approve them",
		ArgsUsage: "NAME",
		Flags: []cli.Flag{env.JSONFlag, prefixFlag, aliasFlag,
			&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "approve without asking (needed when stdin is not a terminal)"},
		},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if e.CLI().NArg() != 1 {
				return env.UsageErr("usage: warden tool approve NAME [--yes] [--prefix P] [--alias OWN=NEW ...]", "approve needs exactly one module name")
			}
			return approveModule(ctx, e, e.CLI().Args().First())
		}),
	}
}

// toolGrantCommand is `warden tool grant`.
func toolGrantCommand() *cli.Command {
	return &cli.Command{
		Name: "grant", Usage: "grant a module capabilities (its tools act with the run's grants ∩ the module's)",
		ArgsUsage: "NAME CAP...",
		Flags:     []cli.Flag{env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if err := toolArgs(e, 2, "grant NAME CAP..."); err != nil {
				return err
			}
			name, caps := e.CLI().Args().First(), e.CLI().Args().Tail()
			if err := checkGrants(e, caps, "warden tool grant"); err != nil {
				return err
			}
			h, _, err := toolHost(e)
			if err != nil {
				return err
			}
			p, warnings, err := h.Grant(ctx, name, caps)
			if err != nil {
				return toolFailure(err)
			}
			if err := e.Audit(ctx, "tool.grant", map[string]any{"module": name, "grants": caps, "granted": p.Granted}); err != nil {
				return err
			}
			return printGrants(e, p, "granted", caps, warnings)
		}),
	}
}

// toolRevokeCommand is `warden tool revoke`.
func toolRevokeCommand() *cli.Command {
	return &cli.Command{
		Name: "revoke", Usage: "take capabilities back from a module",
		ArgsUsage: "NAME CAP...",
		Flags:     []cli.Flag{env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if err := toolArgs(e, 2, "revoke NAME CAP..."); err != nil {
				return err
			}
			name, caps := e.CLI().Args().First(), e.CLI().Args().Tail()
			for _, s := range caps {
				if _, err := capability.Parse(s); err != nil {
					return env.UsageErr("see docs/capabilities.md for the grammar", "%v", err)
				}
			}
			h, _, err := toolHost(e)
			if err != nil {
				return err
			}
			p, err := h.Revoke(ctx, name, caps)
			if err != nil {
				return toolFailure(err)
			}
			if err := e.Audit(ctx, "tool.revoke", map[string]any{"module": name, "grants": caps, "granted": p.Granted}); err != nil {
				return err
			}
			return printGrants(e, p, "revoked", caps, nil)
		}),
	}
}

// toolRmCommand is `warden tool rm`.
func toolRmCommand() *cli.Command {
	return &cli.Command{
		Name: "rm", Usage: "remove a module: its files in <home>/tools and its approval",
		ArgsUsage: "NAME",
		Flags:     []cli.Flag{env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if e.CLI().NArg() != 1 {
				return env.UsageErr("usage: warden tool rm NAME", "rm needs exactly one module name")
			}
			name := e.CLI().Args().First()
			h, _, err := toolHost(e)
			if err != nil {
				return err
			}
			if err := h.Remove(ctx, name); err != nil {
				return toolFailure(err)
			}
			if err := e.Audit(ctx, "tool.rm", map[string]any{"module": name}); err != nil {
				return err
			}
			if e.JSON() {
				return e.PrintJSON(map[string]any{"module": name, "removed": true})
			}
			fmt.Fprintf(e.Stdout(), "removed module %s\n", name)
			return nil
		}),
	}
}

// toolHost opens the wasm tool host and builds the core registry, whose
// names a module's tools must not take.
func toolHost(e *env.Env) (*wasmtool.Host, *gate.Registry, error) {
	core, err := e.CoreRegistry()
	if err != nil {
		return nil, nil, err
	}
	h, err := e.WasmHost()
	if err != nil {
		return nil, nil, err
	}
	return h, core, nil
}

// toolFailure maps the wasm tool host's errors onto codes and exit
// statuses: a store failure as everywhere, an unknown module NOT_FOUND, an
// I/O error INTERNAL, and anything else (a module or sidecar that does not
// check, a collision, a bad grant) INVALID_INPUT with the usage status.
func toolFailure(err error) error {
	if err == nil {
		return nil
	}
	var f *env.Failure
	if errors.As(err, &f) {
		return f
	}
	switch {
	case env.IsStoreError(err):
		return env.StoreFailure(err)
	case errors.Is(err, gate.ErrNotFound), errors.Is(err, store.ErrNotFound):
		return env.Fail(tool.CodeNotFound, env.ExitFailed, "list the modules with `warden tool ls`", "%v", err)
	}
	// wasmtool has no sentinel for these; its messages are stable.
	if msg := err.Error(); strings.Contains(msg, "is already installed") || strings.Contains(msg, "already exists in") {
		return env.Fail(tool.CodeAlreadyExists, env.ExitFailed, "", "%v", err)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && !errors.Is(err, fs.ErrNotExist) {
		return env.Fail(tool.CodeInternal, env.ExitFailed, "check the permissions of <home>/tools", "%v", err)
	}
	var rerr *tool.Error
	if errors.As(err, &rerr) && rerr.Code != tool.CodeInvalidInput {
		return env.Fail(rerr.Code, env.ExitFailed, ui.CLIHint(rerr), "%v", err)
	}
	if errors.Is(err, decode.ErrTooLarge) {
		return env.ReadFailure(err, "")
	}
	return env.Fail(tool.CodeInvalidInput, env.ExitUsage, "", "%v", err)
}

// checkGrants parses grants for a module, warning about broad ones.
func checkGrants(e *env.Env, specs []string, cmd string) error {
	for _, s := range specs {
		g, err := capability.Parse(s)
		if err != nil {
			return env.UsageErr("see docs/capabilities.md for the grammar", "%s: %v", cmd, err)
		}
		if why := g.Broad(); why != "" {
			fmt.Fprintf(e.Stderr(), "warden: warning: grant %s: %s\n", g, why)
		}
	}
	return nil
}

// checkStatus fills in the tools of a module whose file is gone from its
// pin, and explains, for `tool ls`, why a module that is not loaded could
// not be approved as it is now (a malformed module, an import warden does
// not provide, a bad sidecar). The check runs none of the module's code:
// listing is no reason to run what nobody has approved (`tool inspect`
// and `tool approve` check it completely, describe included).
func checkStatus(h *wasmtool.Host, s *wasmtool.Status) {
	if len(s.Tools) == 0 && s.Pin != nil {
		s.Tools = toolNames(s.Pin)
	}
	if s.State != wasmtool.StateUnapproved && s.State != wasmtool.StateChanged {
		return
	}
	if err := h.Check(s.Module); err != nil {
		if s.State == wasmtool.StateUnapproved {
			s.State, s.Reason = wasmtool.StateError, "cannot be approved: "+ui.OneLine(err.Error(), 300)
			return
		}
		s.Reason += "; the new files cannot be approved: " + ui.OneLine(err.Error(), 300)
	}
}

// installModule installs file (with the sidecar beside it) and prints what
// was pinned. builtFrom is the source directory for `tool build`.
func installModule(ctx context.Context, e *env.Env, file, builtFrom string) error {
	grants := e.CLI().StringSlice("grant")
	if err := checkGrants(e, grants, "--grant"); err != nil {
		return err
	}
	naming, err := namingFlags(e)
	if err != nil {
		return err
	}
	h, core, err := toolHost(e)
	if err != nil {
		return err
	}
	in, err := h.Install(ctx, file, wasmtool.InstallOptions{Name: e.CLI().String("name"), Grants: grants, Naming: naming, Taken: core.Has, By: approvedBy})
	if err != nil {
		// Each refusal's hint is the command that resolves it: this one,
		// as given, with what it lacked.
		rerun := "warden tool install " + shellQuote(file)
		if builtFrom != "" {
			rerun = "warden tool build " + shellQuote(e.CLI().Args().First())
			if e.CLI().Bool("command") {
				rerun += " --command"
			}
		}
		for _, g := range grants {
			rerun += " --grant " + shellQuote(g)
		}
		var exists *wasmtool.ExistsError
		var badName *wasmtool.ModuleNameError
		switch {
		case errors.As(err, &exists) && exists.Free != "":
			if exists.Fix != nil && naming.Prefix == "" && len(naming.Aliases) == 0 {
				naming = *exists.Fix
			}
			hint := "install it under another name: " + rerun + " --name " + exists.Free + withNaming(naming)
			if exists.DroppedIn {
				hint = "review the dropped-in module with `warden tool approve " + exists.Module + "`, or " + hint
			}
			return env.Fail(tool.CodeAlreadyExists, env.ExitFailed, hint, "%v", err)
		case errors.As(err, &badName) && badName.Fix != "":
			return env.Fail(tool.CodeInvalidInput, env.ExitUsage, "name it: "+rerun+" --name "+badName.Fix+withNaming(naming), "%v", err)
		}
		if n := e.CLI().String("name"); n != "" {
			rerun += " --name " + shellQuote(n)
		}
		return namingFailure(err, rerun)
	}
	p := in.Pin
	rec := map[string]any{"module": p.Module, "file": file, "sha256": p.SHA256, "sidecar_sha256": p.SidecarSHA256, "abi": p.ABI,
		"tools": toolNames(p), "requested": p.Requested, "granted": p.Granted}
	if builtFrom != "" {
		rec["built_from"] = builtFrom
	}
	if err := e.Audit(ctx, "tool.install", rec); err != nil {
		return err
	}
	for _, w := range in.Warnings {
		fmt.Fprintf(e.Stderr(), "warden: warning: %s\n", w)
	}
	if e.JSON() {
		warnings := in.Warnings
		if warnings == nil {
			warnings = []string{}
		}
		return e.PrintJSON(map[string]any{"installed": true, "file": filepath.Join(h.Dir(), p.Module+".wasm"), "pin": p, "warnings": warnings})
	}
	fmt.Fprintf(e.Stdout(), "installed module %s\n", p.Module)
	printPin(e.Stdout(), h, p)
	return nil
}

// printPin prints what a pin holds, for a person.
func printPin(w io.Writer, h *wasmtool.Host, p *wasmtool.Pin) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  file\t%s\n", filepath.Join(h.Dir(), p.Module+".wasm"))
	fmt.Fprintf(tw, "  abi\t%s\n", p.ABI)
	fmt.Fprintf(tw, "  tools\t%s\n", strings.Join(toolNames(p), ", "))
	fmt.Fprintf(tw, "  sha256\t%s (%d bytes)\n", p.SHA256, p.Size)
	if p.SidecarSHA256 != "" {
		fmt.Fprintf(tw, "  sidecar\t%s.tool.yaml, sha256 %s\n", p.Module, p.SidecarSHA256)
	}
	fmt.Fprintf(tw, "  requested\t%s\n", orNoneList(p.Requested))
	fmt.Fprintf(tw, "  granted\t%s\n", orNoneList(p.Granted))
	if missing := notGranted(p); len(missing) > 0 {
		fmt.Fprintf(tw, "  not granted\t%s (`warden tool grant %s CAP` gives one)\n", strings.Join(missing, ", "), p.Module)
	}
	fmt.Fprintf(tw, "  limits\t%s\n", p.Limits.String())
	tw.Flush()
	for _, t := range p.Tools {
		for _, n := range t.Notes() {
			fmt.Fprintf(w, "  tool %s: %s\n", t.Name, ui.Printable(n))
		}
	}
}

func toolNames(p *wasmtool.Pin) []string {
	out := make([]string, len(p.Tools))
	for i, t := range p.Tools {
		out[i] = t.Name
	}
	return out
}

// notGranted lists the requested capabilities the owner has not granted.
func notGranted(p *wasmtool.Pin) []string {
	var out []string
	for _, r := range p.Requested {
		if !slices.Contains(p.Granted, r) {
			out = append(out, r)
		}
	}
	return out
}

func orNoneList(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

// printGrants prints a module's grants after grant or revoke.
func printGrants(e *env.Env, p *wasmtool.Pin, verb string, caps, warnings []string) error {
	for _, w := range warnings {
		fmt.Fprintf(e.Stderr(), "warden: warning: %s\n", w)
	}
	if e.JSON() {
		return e.PrintJSON(map[string]any{"module": p.Module, verb: caps, "granted": p.Granted, "requested": p.Requested})
	}
	fmt.Fprintf(e.Stdout(), "%s %s: %s\n", p.Module, verb, strings.Join(caps, ", "))
	fmt.Fprintf(e.Stdout(), "  granted now: %s\n", orNoneList(p.Granted))
	return nil
}

// approveModule shows the difference between a module's files and its pin
// and approves the files after a person confirms (or --yes).
func approveModule(ctx context.Context, e *env.Env, name string) error {
	h, core, err := toolHost(e)
	if err != nil {
		return err
	}
	var naming *wasmtool.Naming
	if e.CLI().IsSet("prefix") || e.CLI().IsSet("alias") {
		n, err := namingFlags(e)
		if err != nil {
			return err
		}
		naming = &n
	}
	ch, err := h.Diff(ctx, name, naming)
	if err != nil {
		return namingFailure(err, "warden tool approve "+shellQuote(name))
	}
	out := map[string]any{"module": name, "changed": ch.Changed(), "diff": ch.String(), "sha256": ch.New.SHA256,
		"requested_added": ui.OrEmpty(ch.Added), "requested_removed": ui.OrEmpty(ch.Removed),
		"tools_added": ui.OrEmpty(ch.ToolsAdded), "tools_removed": ui.OrEmpty(ch.ToolsRemoved), "tools_changed": ui.OrEmpty(ch.ToolsChanged)}
	if ch.Old != nil {
		out["approved_sha256"] = ch.Old.SHA256
	}
	if !e.JSON() {
		fmt.Fprint(e.Stdout(), ch.String())
	}
	if !ch.Changed() {
		out["approved"] = true
		if e.JSON() {
			return e.PrintJSON(out)
		}
		fmt.Fprintln(e.Stdout(), "nothing to approve")
		return nil
	}
	if !e.CLI().Bool("yes") {
		tty := e.Terminal()
		if tty == nil {
			out["approved"] = false
			if e.JSON() {
				if err := e.PrintJSON(out); err != nil {
					return err
				}
			}
			return env.Fail(tool.CodeApprovalRequired, env.ExitDenied, "review the difference above, then run `warden tool approve "+name+" --yes`",
				"approving module %s needs a person's confirmation and stdin is not a terminal", name)
		}
		ok, err := confirm(ctx, tty, e.Stderr(), fmt.Sprintf("Approve module %s as shown? [y/N] ", name))
		if err != nil {
			return err
		}
		if !ok {
			return env.Fail(tool.CodeUserRejected, env.ExitDenied, "", "module %s not approved", name)
		}
	}
	p, err := h.Approve(ctx, name, ch.New, approvedBy, core.Has)
	if err != nil {
		return namingFailure(err, "warden tool approve "+shellQuote(name)+" --yes")
	}
	rec := map[string]any{"module": name, "sha256": p.SHA256, "sidecar_sha256": p.SidecarSHA256, "tools": toolNames(p),
		"requested_added": ui.OrEmpty(ch.Added), "requested_removed": ui.OrEmpty(ch.Removed), "granted": p.Granted}
	if ch.Old != nil {
		rec["previous_sha256"] = ch.Old.SHA256
	}
	if err := e.Audit(ctx, "tool.approve", rec); err != nil {
		return err
	}
	if e.JSON() {
		out["approved"] = true
		out["pin"] = p
		return e.PrintJSON(out)
	}
	fmt.Fprintf(e.Stdout(), "approved module %s\n", name)
	printPin(e.Stdout(), h, p)
	return nil
}

// confirm asks a yes/no question on the terminal; cancelling ctx or the end
// of input is USER_CANCELLED.
func confirm(ctx context.Context, in io.Reader, out io.Writer, question string) (bool, error) {
	fmt.Fprint(out, question)
	type answer struct {
		line string
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(in).ReadString('\n')
		ch <- answer{line, err}
	}()
	select {
	case <-ctx.Done():
		fmt.Fprintln(out)
		return false, env.Fail(tool.CodeUserCancelled, env.ExitFailed, "", "cancelled")
	case a := <-ch:
		if a.err != nil && a.line == "" {
			fmt.Fprintln(out)
			return false, env.Fail(tool.CodeUserCancelled, env.ExitFailed, "", "no answer")
		}
		switch strings.ToLower(strings.TrimSpace(a.line)) {
		case "y", "yes":
			return true, nil
		}
		return false, nil
	}
}

// printInspection prints `tool inspect`.
func printInspection(e *env.Env, in *wasmtool.Inspection) error {
	pinned := ""
	if in.Pin != nil {
		pinned = in.Pin.SHA256
	}
	change := ""
	if in.Change != nil {
		change = in.Change.String()
	}
	if e.JSON() {
		return e.PrintJSON(struct {
			*wasmtool.Inspection
			PinnedSHA256 string `json:"pinned_sha256,omitempty"`
			Change       string `json:"change,omitempty"`
		}{in, pinned, change})
	}
	tw := tabwriter.NewWriter(e.Stdout(), 0, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, args...)) }
	row("module", "%s", in.Module)
	row("file", "%s", in.File)
	row("state", "%s", in.State)
	if in.Reason != "" {
		row("reason", "%s", in.Reason)
	}
	if in.ABI != "" {
		row("abi", "%s", in.ABI)
	}
	if len(in.Tools) > 0 {
		row("tools", "%s", strings.Join(in.Tools, ", "))
	}
	if in.SHA256 != "" {
		row("sha256", "%s (%d bytes)", in.SHA256, in.Size)
	}
	switch {
	case in.Pin == nil:
		row("pinned", "not approved")
	case pinned == in.SHA256:
		row("pinned", "same, approved %s by %s", in.Pin.ApprovedAt.Local().Format("2006-01-02 15:04"), ui.OrDash(in.Pin.ApprovedBy))
	default:
		row("pinned", "%s (approved %s by %s)", pinned, in.Pin.ApprovedAt.Local().Format("2006-01-02 15:04"), ui.OrDash(in.Pin.ApprovedBy))
	}
	if in.State != wasmtool.StateMissing {
		row("exports", "%s", orNoneList(in.Exports))
		row("imports", "%s", orNoneList(in.Imports))
		mem := fmt.Sprintf("min %d pages (%d KiB)", in.MemoryMinPages, in.MemoryMinPages*64)
		if in.MemoryMaxPages != nil {
			mem += fmt.Sprintf(", max %d pages (%d KiB)", *in.MemoryMaxPages, *in.MemoryMaxPages*64)
		} else {
			mem += ", no maximum declared (the tool's memory limit applies)"
		}
		row("memory", "%s", mem)
	}
	row("requested", "%s", orNoneList(in.Requested))
	row("granted", "%s", orNoneList(in.Granted))
	if in.Limits != nil {
		row("limits", "%s", in.Limits.String())
	}
	var cfg []string
	for _, c := range in.Config {
		switch c.Source {
		case "owner-env":
			cfg = append(cfg, fmt.Sprintf("%s (owner: from env:%s at each call)", c.Key, c.Env))
		default:
			cfg = append(cfg, fmt.Sprintf("%s (%s)", c.Key, c.Source))
		}
	}
	row("config", "%s", ui.Printable(orNoneList(cfg)))
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range in.ToolSpecs {
		fmt.Fprintf(e.Stdout(), "\ntool %s (export %s)\n%s\n  input schema: %s\n", t.Name, t.Export, ui.Indent(t.Description, "  "), ui.Printable(compact(t.InputSchema)))
		if len(t.ModuleSchema) > 0 {
			fmt.Fprintf(e.Stdout(), "  module's schema: %s\n", ui.Printable(compact(t.ModuleSchema)))
		}
		for _, n := range t.Notes() {
			fmt.Fprintf(e.Stdout(), "  %s\n", ui.Printable(n))
		}
	}
	if change != "" {
		fmt.Fprintf(e.Stdout(), "\n%s", change)
	}
	return nil
}

// buildModule builds the Go main package in dir for wasip1 into a
// temporary file named after its sidecar (or the directory), copies the
// sidecar beside it and installs both.
func buildModule(ctx context.Context, e *env.Env, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return env.UsageErr("", "%v", err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return env.UsageErr("give the directory of a Go main package", "%s is not a directory", dir)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return env.Fail(tool.CodeCommandNotFound, env.ExitFailed, "install Go 1.24 or newer (https://go.dev/dl/) and put it on PATH", "tool build needs the go command: %v", err)
	}
	sidecars, _ := filepath.Glob(filepath.Join(abs, "*.tool.yaml"))
	if len(sidecars) > 1 {
		return env.UsageErr("keep one NAME.tool.yaml in the directory", "%s has %d sidecars", dir, len(sidecars))
	}
	name := filepath.Base(abs)
	command := e.CLI().Bool("command")
	var sidecar []byte
	if len(sidecars) == 1 {
		name = strings.TrimSuffix(filepath.Base(sidecars[0]), ".tool.yaml")
		if sidecar, err = decode.ReadFile(sidecars[0], wasmtool.MaxSidecarBytes); err != nil {
			return env.ReadFailure(err, "")
		}
		sc, err := wasmtool.ParseSidecar(filepath.Base(sidecars[0]), sidecar)
		if err != nil {
			return env.ReadFailure(err, "fix the sidecar")
		}
		if sc.ABI == wasmtool.ABICommand {
			command = true
		}
	}
	if !gate.ValidToolName(name) {
		name = "tool"
	}
	tmp, err := os.MkdirTemp("", "warden-build-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, name+".wasm")
	args := []string{"build", "-trimpath"}
	if !command {
		args = append(args, "-buildmode=c-shared")
	}
	args = append(args, "-o", out, ".")
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return env.StoreFailure(ctx.Err())
		}
		e.Stderr().Write(b)
		return env.Fail(tool.CodeCommandFailed, env.ExitFailed, "fix the errors go build printed above",
			"GOOS=wasip1 GOARCH=wasm go %s in %s: %v", strings.Join(args, " "), dir, err)
	}
	if sidecar != nil {
		if err := os.WriteFile(filepath.Join(tmp, name+".tool.yaml"), sidecar, 0o600); err != nil {
			return err
		}
	}
	if !e.JSON() {
		kind := "Extism plugin"
		if command {
			kind = "WASI command"
		}
		fmt.Fprintf(e.Stdout(), "built %s from %s (%s)\n", name+".wasm", dir, kind)
	}
	return installModule(ctx, e, out, abs)
}

// compact is raw JSON on one line.
func compact(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
