package policycmd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/runtime/decode"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
)

// PolicyCommand is `warden policy`.
func PolicyCommand() *cli.Command {
	return &cli.Command{
		Name:  "policy",
		Usage: "check, test, explain and trust policies",
		Subcommands: append(append([]*cli.Command{
			policyCheckCommand(),
			policyExplainCommand(),
		}, policyTrustCommands()...), []*cli.Command{
			{
				Name: "default", Usage: "print the built-in default policy", Flags: []cli.Flag{env.JSONFlag},
				Action: func(c *cli.Context) error {
					if env.WantJSON(c) {
						p := policy.DefaultPolicy()
						return env.WriteJSON(c.App.Writer, map[string]any{"source": p.Source, "grants": p.Grants, "rules": p.Rules, "yaml": policy.DefaultPolicyYAML()})
					}
					_, err := fmt.Fprint(c.App.Writer, policy.DefaultPolicyYAML())
					return err
				},
			},
			policyPublishCommand(),
		}...),
	}
}

// policyCheckCommand is `warden policy check`.
func policyCheckCommand() *cli.Command {
	return &cli.Command{
		Name: "check", Usage: "validate a policy file; every problem with its line and column", ArgsUsage: "FILE",
		Flags: []cli.Flag{env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if e.CLI().NArg() != 1 {
				return env.UsageErr("usage: warden policy check FILE", "policy check needs one file")
			}
			file := e.CLI().Args().First()
			data, err := decode.ReadFile(file, policy.MaxPolicyBytes)
			if err != nil {
				return env.ReadFailure(err, "check the path")
			}
			p, err := policy.ParsePolicy(file, data)
			if err != nil {
				return policyProblems(e, file, err)
			}
			if err := runPolicyTests(e, file, p, false); err != nil {
				return err
			}
			if e.JSON() {
				return e.PrintJSON(map[string]any{"file": file, "valid": true, "grants": p.Grants, "rules": len(p.Rules), "approval": p.Approval})
			}
			fmt.Fprintf(e.Stdout(), "%s: OK (%d grants, %d rules", file, len(p.Grants), len(p.Rules))
			if len(p.Tests) > 0 {
				fmt.Fprintf(e.Stdout(), ", %d tests pass", len(p.Tests))
			}
			if p.Approval != "" {
				fmt.Fprintf(e.Stdout(), ", approval %s", p.Approval)
			}
			fmt.Fprintln(e.Stdout(), ")")
			for _, g := range p.GrantList() {
				if why := g.Broad(); why != "" {
					fmt.Fprintf(e.Stdout(), "  note: %s: %s\n", g, why)
				}
			}
			return nil
		}),
	}
}

// policyExplainCommand is `warden policy explain`.
func policyExplainCommand() *cli.Command {
	return &cli.Command{
		Name: "explain", Usage: "say which rule and which grants decide a call, and why", ArgsUsage: "TOOL",
		Flags: []cli.Flag{&cli.StringFlag{Name: "args", Usage: "the call's arguments as JSON"}, env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if e.CLI().NArg() != 1 {
				return env.UsageErr("usage: warden policy explain TOOL --args JSON", "policy explain needs one tool name")
			}
			pf, err := e.PolicyInForce()
			if err != nil {
				return err
			}
			g, err := e.Gate()
			if err != nil {
				return err
			}
			x := g.Explain(gate.Request{Tool: e.CLI().Args().First(), Args: []byte(e.CLI().String("args")), Principal: []string{"cli"}})
			x.Error = ui.CLIError(x.Error)
			for i, n := range x.Needs {
				if n.GrantedBy == "" && n.Grant != "" {
					x.Needs[i].Hint = "--grant " + n.Grant
				}
			}
			trust := policyTrustLine(pf)
			if e.JSON() {
				return e.PrintJSON(struct {
					gate.Explanation
					Trust string `json:"trust"`
				}{x, trust})
			}
			fmt.Fprintf(e.Stdout(), "tool:     %s\n", x.Tool)
			fmt.Fprintf(e.Stdout(), "policy:   %s\n", x.Policy)
			fmt.Fprintf(e.Stdout(), "trust:    %s\n", trust)
			grants := strings.Join(x.Grants, ", ")
			if grants == "" {
				grants = "(none)"
			}
			fmt.Fprintf(e.Stdout(), "grants:   %s\n", grants)
			if x.Rule != "" {
				fmt.Fprintf(e.Stdout(), "rule:     %s\n", x.Rule)
			}
			if x.Matched != "" {
				fmt.Fprintf(e.Stdout(), "matched:  %s\n", ui.Printable(x.Matched))
			}
			for _, n := range x.Needs {
				if n.GrantedBy != "" {
					fmt.Fprintf(e.Stdout(), "needs:    %s — allowed by %s\n", n.Need, n.GrantedBy)
				} else {
					hint := n.Hint
					if hint == "" {
						hint = "no grant can allow it"
					}
					fmt.Fprintf(e.Stdout(), "needs:    %s — NOT granted (%s)\n", n.Need, hint)
				}
			}
			fmt.Fprintf(e.Stdout(), "approval: %s\n", x.Approval)
			fmt.Fprintf(e.Stdout(), "verdict:  %s\n", x.Verdict)
			if x.Error != nil {
				fmt.Fprintf(e.Stdout(), "why:      %s: %s\n", x.Error.Code, x.Error.Message)
				if x.Error.Hint != "" {
					fmt.Fprintf(e.Stdout(), "to allow: %s\n", x.Error.Hint)
				}
			}
			return nil
		}),
	}
}

// policyTrustLine says which policy is in force and whether it is trusted.
func policyTrustLine(pf *policy.PolicyInForce) string {
	switch pf.State {
	case policy.TrustExplicit:
		return "trusted: named by you (--policy or WARDEN_POLICY)"
	case policy.TrustTrusted:
		return fmt.Sprintf("trusted: the workspace policy %s, unchanged since you trusted it (sha256 %s)", pf.File, pf.SHA256[:16])
	case policy.TrustHome:
		return "trusted: your home policy " + pf.File
	case policy.TrustBuiltIn:
		return "trusted: the built-in default"
	case policy.TrustMissing:
		return fmt.Sprintf("the workspace policy %s you trusted is gone; what it said still narrows %s (warden policy untrust %s)", pf.File, pf.Policy.Source, ui.ShellWord(pf.File))
	case policy.TrustChanged:
		return fmt.Sprintf("NOT trusted: the workspace policy %s changed since you trusted it; it only narrows %s (warden policy trust %s)", pf.File, pf.Base.Source, ui.ShellWord(pf.File))
	}
	return fmt.Sprintf("NOT trusted: the workspace policy %s only narrows %s (warden policy trust %s)", pf.File, pf.Base.Source, ui.ShellWord(pf.File))
}

// unjoin splits an errors.Join result into its parts.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	var pe *policy.PolicyError
	if errors.As(err, &pe) {
		return []error{pe}
	}
	return []error{err}
}
