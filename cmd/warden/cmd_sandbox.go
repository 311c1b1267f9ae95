package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/builtin"
	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/runtime/resource"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/tool"
)

func sandboxCommand() *cli.Command {
	return &cli.Command{
		Name:  "sandbox",
		Usage: "the sandbox every program a tool starts runs under (namespaces, Landlock, seccomp and resource limits)",
		Subcommands: []*cli.Command{
			{
				Name:  "check",
				Usage: "print what this machine supports: the level, the Landlock ABI, namespaces, what a program can reach (yes/no and why), how the process limit is held, and a probe",
				Flags: []cli.Flag{env.JSONFlag},
				Action: env.With(func(ctx context.Context, e *env.Env) error {
					s := sandbox.Detect()
					how, held := sandbox.ProcessLimit()
					probe := builtin.ProbeSandbox(ctx)
					p, err := e.Policy()
					if err != nil {
						return err
					}
					if e.JSON() {
						return e.PrintJSON(map[string]any{
							"abi": s.ABI, "level": s.Level(), "why": s.Why, "simulated": s.Simulated,
							"namespaces": s.Namespaces, "namespaces_why": s.NamespacesWhy, "namespaces_simulated": s.NamespacesSimulated,
							"points": s.Points(), "features": s.Features(), "process_limit": how, "process_limit_held": held,
							"default_limits": resource.Default, "probe": probe,
							"require_sandbox": p.RequireSandbox, "policy": p.Source,
						})
					}
					fmt.Fprintf(e.Stdout(), "level:          %s (what results and audit records say; full, fallback, partial or off)\n", s.Level())
					fmt.Fprintf(e.Stdout(), "landlock:       ABI %d (%s/%s)", s.ABI, runtime.GOOS, runtime.GOARCH)
					if s.Simulated {
						fmt.Fprint(e.Stdout(), ", simulated")
					}
					fmt.Fprintln(e.Stdout())
					if s.Why != "" {
						fmt.Fprintf(e.Stdout(), "                %s\n", s.Why)
					}
					if s.Namespaces {
						fmt.Fprintln(e.Stdout(), "namespaces:     yes (a network and a mount namespace per program)")
					} else {
						sim := ""
						if s.NamespacesSimulated {
							sim = ", simulated"
						}
						fmt.Fprintf(e.Stdout(), "namespaces:     no%s: %s\n", sim, s.NamespacesWhy)
					}
					fmt.Fprintln(e.Stdout(), "what a program can reach:")
					mark := func(on bool) string {
						if on {
							return "yes"
						}
						return "no "
					}
					for _, f := range s.Points() {
						fmt.Fprintf(e.Stdout(), "  %s  %s\n         %s\n", mark(f.On), f.What, f.Why)
					}
					fmt.Fprintln(e.Stdout(), "other protections:")
					for _, f := range s.Features() {
						fmt.Fprintf(e.Stdout(), "  %s  %s (%s)\n", mark(f.On), f.What, f.Why)
					}
					fmt.Fprintf(e.Stdout(), "process limit:  %s\n", how)
					switch l := sandbox.Launcher(); {
					case !sandbox.LimitsHeld():
					case l != "":
						fmt.Fprintf(e.Stdout(), "launcher:       %s (beside warden, from the same build)\n", l)
					default:
						fmt.Fprintf(e.Stdout(), "launcher:       warden's own binary, re-executed (no %s from this build beside it: a slower start)\n", sandbox.LauncherName)
					}
					l := resource.Default
					set := "policy: limits:"
					if !sandbox.LimitsHeld() {
						set = "not set on " + runtime.GOOS + ": programs start without the launcher"
					}
					fmt.Fprintf(e.Stdout(), "default limits: %d s CPU, %d MiB address space, %d open files, %d processes, %d MiB file size (%s)\n",
						l.CPUSeconds, l.AddressSpaceMB, l.OpenFiles, l.Processes, l.FileSizeMB, set)
					switch {
					case probe.Error != "":
						fmt.Fprintf(e.Stdout(), "probe:          FAILED: %s\n", probe.Error)
					case probe.Confined:
						fmt.Fprintln(e.Stdout(), "probe:          a program started under the sandbox read what it may and was refused what it may not")
					default:
						fmt.Fprintln(e.Stdout(), "probe:          a program started, and read a file outside its sandbox: nothing confines it here")
					}
					fmt.Fprintf(e.Stdout(), "require_sandbox: %v (%s)\n", p.RequireSandbox, p.Source)
					if probe.Error != "" {
						return env.Fail(tool.CodeInternal, env.ExitFailed, "see the message above; run with --log-level debug", "the sandbox probe failed")
					}
					if p.RequireSandbox && !s.Full() {
						return env.Fail(tool.CodePolicyDenied, env.ExitDenied, "programs will be refused: the policy requires a sandbox this machine does not give",
							"require_sandbox is set and the level here is %s", s.Level())
					}
					return nil
				}),
			},
		},
	}
}
