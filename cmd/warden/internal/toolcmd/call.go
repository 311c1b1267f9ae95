package toolcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/wasmtool"
)

// ToolsCommand is `warden tools`.
func ToolsCommand() *cli.Command {
	return &cli.Command{
		Name:      "tools",
		Usage:     "list every tool, built-in and wasm, with its description, input schema and the capabilities it can need (with NAME: one tool in full)",
		ArgsUsage: "[NAME]",
		Flags:     []cli.Flag{env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if e.CLI().NArg() > 1 {
				return env.UsageErr("usage: warden tools [NAME] [--json]", "tools takes at most one tool name")
			}
			reg, err := e.Registry()
			if err != nil {
				return err
			}
			specs := reg.Specs()
			if name := e.CLI().Args().First(); name != "" {
				t, ok := reg.Lookup(name)
				if !ok {
					hint := "list the tools with `warden tools`"
					if s, ok := e.ModuleStatus(name); ok {
						hint = s.Reason
					}
					return env.Fail(tool.CodeUnknownTool, env.ExitFailed, hint, "no tool named %q", name)
				}
				specs = []tool.Spec{t.Spec()}
			}
			if e.JSON() {
				type toolJSON struct {
					Name         string          `json:"name"`
					Description  string          `json:"description"`
					InputSchema  json.RawMessage `json:"input_schema"`
					Capabilities []string        `json:"capabilities"`
					ReadOnly     bool            `json:"read_only"`
					// Module is the wasm module a wasm tool comes from.
					Module string `json:"module,omitempty"`
				}
				out := make([]toolJSON, 0, len(specs))
				for _, s := range specs {
					out = append(out, toolJSON{s.Name, s.Description, s.InputSchema, capNames(s), s.ReadOnly, s.Wasm})
				}
				if e.CLI().NArg() == 1 {
					return e.PrintJSON(out[0])
				}
				return e.PrintJSON(out)
			}
			if e.CLI().NArg() == 1 {
				s := specs[0]
				var schema bytes.Buffer
				if err := json.Indent(&schema, s.InputSchema, "  ", "  "); err != nil {
					schema.Write(s.InputSchema)
				}
				fmt.Fprintf(e.Stdout(), "%s (%s)\n%s\n", s.Name, source(s), ui.Indent(s.Description, "  "))
				fmt.Fprintf(e.Stdout(), "capabilities: %s\n", orNoneList(capNames(s)))
				fmt.Fprintf(e.Stdout(), "input schema:\n  %s\n", schema.String())
				return nil
			}
			tw := tabwriter.NewWriter(e.Stdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOOL\tCAPABILITIES\tSOURCE\tDESCRIPTION")
			for _, s := range specs {
				desc, _, _ := strings.Cut(ui.OneLine(s.Description, 200), ". ")
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, strings.Join(capNames(s), ","), source(s), desc)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			var off []string
			for _, s := range e.WasmStatus() {
				if s.State != wasmtool.StateOK {
					off = append(off, s.Module+" ("+s.State+")")
				}
			}
			if len(off) > 0 {
				fmt.Fprintf(e.Stderr(), "warden: wasm modules not loaded: %s — see `warden tool ls`\n", strings.Join(off, ", "))
			}
			return nil
		}),
	}
}

// capNames lists a spec's capability kinds.
func capNames(s tool.Spec) []string {
	caps := make([]string, len(s.Capabilities))
	for i, k := range s.Capabilities {
		caps[i] = string(k)
	}
	return caps
}

// source says where a tool comes from: core, or wasm:MODULE.
func source(s tool.Spec) string {
	if s.Wasm != "" {
		return "wasm:" + s.Wasm
	}
	return "core"
}

// CallCommand is `warden call`.
func CallCommand() *cli.Command {
	return &cli.Command{
		Name:      "call",
		Usage:     "call one tool through the gate and print its result envelope",
		ArgsUsage: "TOOL",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "args", Usage: "arguments as one JSON object"},
			&cli.StringFlag{Name: "args-file", Usage: "read the arguments object from a file (- for stdin)"},
			&cli.StringSliceFlag{Name: "arg", Aliases: []string{"a"}, Usage: "one argument as key=value (repeatable; a value is JSON when the schema's type is not string, else text)"},
			env.JSONFlag,
		},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if e.CLI().NArg() != 1 {
				return env.UsageErr("usage: warden call TOOL [--args JSON] [-a key=value ...]; list tools with `warden tools`", "call needs exactly one tool name")
			}
			name := e.CLI().Args().First()
			g, err := e.Gate()
			if err != nil {
				return err
			}
			argsJSON := e.CLI().String("args")
			if f := e.CLI().String("args-file"); f != "" {
				if argsJSON != "" {
					return env.UsageErr("give the arguments once", "--args and --args-file are exclusive")
				}
				data, err := readArgsFile(e, f)
				if err != nil {
					return env.UsageErr("check the path", "--args-file: %v", err)
				}
				argsJSON = string(data)
			}
			args, err := buildArgs(g.Registry(), name, argsJSON, e.CLI().StringSlice("arg"))
			if err != nil {
				return err
			}
			res, err := g.Call(ctx, gate.Request{Tool: name, Args: args, Principal: []string{"cli"}})
			if err != nil {
				return err
			}
			if !res.Success && res.Error != nil && res.Error.Code == tool.CodeUnknownTool {
				// A wasm module that provides the tool but is not loaded
				// (changed, unapproved, colliding) says why and what to do.
				if s, ok := e.ModuleStatus(name); ok {
					res.Error.Hint = fmt.Sprintf("module %s is %s: %s", s.Module, s.State, s.Reason)
				}
			}
			return printResult(e, res)
		}),
	}
}

// buildArgs merges --args and -a key=value pairs into one JSON object.
// Pairs are added textually after the --args object so that the strict
// decoder still sees (and refuses) duplicate keys.
func buildArgs(reg *gate.Registry, tool, argsJSON string, pairs []string) (json.RawMessage, error) {
	if len(pairs) == 0 {
		return json.RawMessage(argsJSON), nil
	}
	types := map[string]string{}
	if t, ok := reg.Lookup(tool); ok {
		var sch struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
		}
		if json.Unmarshal(t.Spec().InputSchema, &sch) == nil {
			for k, p := range sch.Properties {
				if s, ok := p.Type.(string); ok {
					types[k] = s
				}
			}
		}
	}
	var b bytes.Buffer
	base := strings.TrimSpace(argsJSON)
	if base == "" {
		base = "{}"
	}
	if !strings.HasPrefix(base, "{") || !strings.HasSuffix(base, "}") {
		return nil, env.UsageErr(`--args must be a JSON object such as '{"path":"README.md"}'`, "--args is not a JSON object")
	}
	inner := strings.TrimSpace(base[1 : len(base)-1])
	b.WriteString("{")
	b.WriteString(inner)
	for i, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, env.UsageErr("write -a key=value", "-a %q has no key=value", p)
		}
		if inner != "" || i > 0 {
			b.WriteString(",")
		}
		kj, _ := json.Marshal(k)
		b.Write(kj)
		b.WriteString(":")
		if types[k] != "string" && json.Valid([]byte(v)) {
			b.WriteString(v)
		} else {
			vj, _ := json.Marshal(v)
			b.Write(vj)
		}
	}
	b.WriteString("}")
	return b.Bytes(), nil
}

// printResult prints an envelope (always as JSON: it is the result) and turns
// a failed call into the matching exit status.
func printResult(e *env.Env, res tool.Result) error {
	res.Error = ui.CLIError(res.Error)
	if err := e.PrintJSON(res); err != nil {
		return err
	}
	if res.Success {
		return nil
	}
	exit := env.ExitFailed
	if res.Error.Code.Denial() {
		exit = env.ExitDenied
	}
	return env.Fail(res.Error.Code, exit, res.Error.Hint, "%s: %s", res.Tool, res.Error.Message)
}

// readArgsFile reads at most one byte more than the gate accepts, so an
// oversized file is refused by the gate with TOO_LARGE, not read whole.
func readArgsFile(e *env.Env, name string) ([]byte, error) {
	var r io.Reader = e.Stdin()
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	return io.ReadAll(io.LimitReader(r, tool.MaxArgsBytes+1))
}
