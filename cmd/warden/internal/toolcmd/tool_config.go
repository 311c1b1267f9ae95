package toolcmd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/wardenrt/warden/internal/lazyre"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/wasmtool"
)

// toolConfigCommand is `warden tool config NAME [KEY=VALUE | KEY=env:VAR]...
// [--unset KEY]`: the owner's config of a module, served by config_get.
func toolConfigCommand() *cli.Command {
	return &cli.Command{
		Name: "config",
		Usage: "set a module's config (config_get): KEY=VALUE, or KEY=env:VAR for a secret read from warden's environment " +
			"at each call (needs env:VAR granted to the module; never stored, logged or audited); no KEY lists the keys",
		ArgsUsage: "NAME [KEY=VALUE | KEY=env:VAR ...]",
		Flags: []cli.Flag{env.JSONFlag,
			&cli.StringSliceFlag{Name: "unset", Usage: "remove the owner's KEY (repeatable)"},
		},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if e.CLI().NArg() < 1 {
				return env.UsageErr("usage: warden tool config NAME [KEY=VALUE | KEY=env:VAR ...] [--unset KEY]", "config needs a module name")
			}
			name := e.CLI().Args().First()
			set := map[string]string{}
			for _, kv := range e.CLI().Args().Tail() {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return env.UsageErr("give KEY=VALUE, or KEY=env:VAR for a secret", "config: %q is not KEY=VALUE", kv)
				}
				if _, dup := set[k]; dup {
					return env.UsageErr("", "config: %s given twice", k)
				}
				set[k] = v
			}
			unset := e.CLI().StringSlice("unset")
			h, _, err := toolHost(e)
			if err != nil {
				return err
			}
			var p *wasmtool.Pin
			if len(set) == 0 && len(unset) == 0 {
				in, err := h.Inspect(ctx, name, nil)
				if err != nil {
					return toolFailure(err)
				}
				return printConfig(e, name, in.Config, nil)
			}
			if p, err = h.SetConfig(ctx, name, set, unset); err != nil {
				return toolFailure(err)
			}
			// The audit record names the keys and the variables, never a
			// secret's value (an env:VAR value is only a reference).
			if err := e.Audit(ctx, "tool.config", map[string]any{"module": name, "set": slices.Sorted(maps.Keys(set)), "unset": ui.OrEmpty(unset), "config": configRecord(p)}); err != nil {
				return err
			}
			in, err := h.Inspect(ctx, name, nil)
			if err != nil {
				return toolFailure(err)
			}
			var warnings []string
			for _, k := range slices.Sorted(maps.Keys(set)) {
				if v, ok := wasmtool.EnvRef(set[k]); ok && !slices.Contains(p.Granted, "env:"+v) {
					warnings = append(warnings, fmt.Sprintf("%s reads env:%s, which %s is not granted: `warden tool grant %s env:%s`", k, v, name, name, v))
				}
			}
			return printConfig(e, name, in.Config, warnings)
		}),
	}
}

// configRecord is the owner's config for the audit log: values and env:VAR
// references, which are not secrets.
func configRecord(p *wasmtool.Pin) map[string]string {
	out := map[string]string{}
	maps.Copy(out, p.OwnerConfig)
	return out
}

func printConfig(e *env.Env, name string, cfg []wasmtool.ConfigEntry, warnings []string) error {
	for _, w := range warnings {
		fmt.Fprintf(e.Stderr(), "warden: warning: %s\n", w)
	}
	if e.JSON() {
		return e.PrintJSON(map[string]any{"module": name, "config": cfg, "warnings": ui.OrEmpty(warnings)})
	}
	if len(cfg) == 0 {
		fmt.Fprintf(e.Stdout(), "%s has no config: set one with `warden tool config %s KEY=VALUE`\n", name, name)
		return nil
	}
	for _, c := range cfg {
		switch c.Source {
		case "owner-env":
			fmt.Fprintf(e.Stdout(), "%s = env:%s (read from warden's environment at each call)\n", c.Key, c.Env)
		default:
			fmt.Fprintf(e.Stdout(), "%s = %s (%s)\n", c.Key, ui.Printable(c.Value), c.Source)
		}
	}
	return nil
}

// namingFlags reads --prefix and --alias OWN=NEW.
func namingFlags(e *env.Env) (wasmtool.Naming, error) {
	n := wasmtool.Naming{Prefix: e.CLI().String("prefix")}
	for _, a := range e.CLI().StringSlice("alias") {
		own, alias, ok := strings.Cut(a, "=")
		if !ok {
			return n, env.UsageErr("give --alias OWN=NEW, e.g. --alias search=bsky_search", "--alias %q is not OWN=NEW", a)
		}
		if n.Aliases == nil {
			n.Aliases = map[string]string{}
		}
		if _, dup := n.Aliases[own]; dup {
			return n, env.UsageErr("", "--alias: %s given twice", own)
		}
		n.Aliases[own] = alias
	}
	if err := wasmtool.CheckNaming(n); err != nil {
		return n, env.UsageErr("", "%v", err)
	}
	return n, nil
}

// namingFailure words a refused install or approval: a name collision or
// an invalid tool name gets, as its hint, the command that resolves it
// (rerun, the command as given, with naming flags).
func namingFailure(err error, rerun string) error {
	var ce *wasmtool.CollisionError
	if errors.As(err, &ce) {
		hint := "remove one of the two modules (`warden tool rm NAME`)"
		if ce.Fix != nil {
			hint = "rename the module's tools: " + rerun + " " + wasmtool.NamingFlags(*ce.Fix)
		}
		return env.Fail(tool.CodeInvalidInput, env.ExitUsage, hint, "%v", err)
	}
	var ne *wasmtool.ToolNameError
	if errors.As(err, &ne) {
		hint := "give the tool a valid name with --alias OWN=NEW"
		if ne.Fix != nil {
			hint = "rename it: " + rerun + " " + wasmtool.NamingFlags(*ne.Fix)
		}
		return env.Fail(tool.CodeInvalidInput, env.ExitUsage, hint, "%v", err)
	}
	return toolFailure(err)
}

// withNaming renders the naming flags given, to repeat them in a hint.
func withNaming(n wasmtool.Naming) string {
	if f := wasmtool.NamingFlags(n); f != "" {
		return " " + f
	}
	return ""
}

var shellPlain = lazyre.New(`^[a-zA-Z0-9_=./:@+,-]+$`)

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if shellPlain.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
