package policycmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/internal/unidiff"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/store"
)

// policy trust, untrust and test: the owner decides which workspace
// policies are in force as written, and a policy proves itself.

func policyTrustCommands() []*cli.Command {
	return []*cli.Command{
		{
			Name: "trust", ArgsUsage: "[FILE]",
			Usage: "trust a workspace policy (default <workspace>/.warden/policy.yaml): show it and what changed since you last trusted it, ask, and record its sha256; --list shows what you trust",
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "yes", Usage: "trust without asking (for scripts; you have read the file)"},
				&cli.BoolFlag{Name: "list", Usage: "list the trusted policy files and whether each is unchanged"},
				env.JSONFlag,
			},
			Action: env.With(func(ctx context.Context, e *env.Env) error {
				if e.CLI().Bool("list") {
					return trustList(ctx, e)
				}
				return trustPolicy(ctx, e)
			}),
		},
		{
			Name: "untrust", ArgsUsage: "[FILE]",
			Usage: "stop trusting a workspace policy (default <workspace>/.warden/policy.yaml): it can then only narrow",
			Action: env.With(func(ctx context.Context, e *env.Env) error {
				file, err := policyFileArg(e)
				if err != nil {
					return err
				}
				st, err := e.Store()
				if err != nil {
					return err
				}
				if err := st.DeleteTrust(ctx, env.TrustKey(file)); err != nil {
					if errors.Is(err, store.ErrNotFound) {
						return env.Fail(tool.CodeNotFound, env.ExitFailed, "see `warden policy trust --list`", "%s is not trusted", file)
					}
					return err
				}
				if err := e.Audit(ctx, "policy.untrust", map[string]any{"path": file}); err != nil {
					return err
				}
				fmt.Fprintf(e.Stdout(), "%s is no longer trusted: it can only narrow the policy in force\n", file)
				return nil
			}),
		},
		{
			Name: "test", ArgsUsage: "[FILE]",
			Usage: "run a policy's tests (its tests: key) through the gate as dry decisions — nothing runs; exit 1 when one fails (default: the policy in force's file)",
			Flags: []cli.Flag{env.JSONFlag},
			Action: env.With(func(ctx context.Context, e *env.Env) error {
				file := e.CLI().Args().First()
				if e.CLI().NArg() > 1 {
					return env.UsageErr("usage: warden policy test [FILE]", "policy test takes at most one file")
				}
				if file == "" {
					pf, err := e.PolicyInForce()
					if err != nil {
						return err
					}
					if file = pf.File; file == "" {
						return env.UsageErr("name a policy file", "the built-in default policy is in force; it has no tests")
					}
				}
				data, err := policy.ReadPolicyFile(file)
				if err != nil {
					return env.UsageErr("check the path", "%v", err)
				}
				p, err := policy.ParsePolicy(file, data)
				if err != nil {
					return policyProblems(e, file, err)
				}
				return runPolicyTests(e, file, p, true)
			}),
		},
	}
}

// policyFileArg is the FILE argument, absolute, or the workspace policy.
func policyFileArg(e *env.Env) (string, error) {
	if e.CLI().NArg() > 1 {
		return "", env.UsageErr("name one file", "too many arguments")
	}
	file := e.CLI().Args().First()
	if file == "" {
		return policy.CanonicalPolicyPath(e.PolicyFiles().Workspace), nil
	}
	return policy.CanonicalPolicyPath(file), nil
}

func trustPolicy(ctx context.Context, e *env.Env) error {
	file, err := policyFileArg(e)
	if err != nil {
		return err
	}
	data, err := policy.ReadPolicyFile(file)
	if err != nil {
		return env.UsageErr("write the policy first, or name it", "%v", err)
	}
	p, err := policy.ParsePolicy(file, data)
	if err != nil {
		return policyProblems(e, file, err)
	}
	sum := policy.SHA256Hex(data)
	prev, had, err := env.NewLazyStore(e.Store).TrustRecord(ctx, file)
	if err != nil {
		return err
	}
	if had && prev.SHA256 == sum {
		fmt.Fprintf(e.Stdout(), "%s is already trusted (sha256 %s, since %s)\n", file, sum[:16], prev.TrustedAt.UTC().Format(time.RFC3339))
		return nil
	}
	out := e.Stderr()
	if had {
		d, _ := unidiff.Unified("trusted "+prev.TrustedAt.UTC().Format(time.RFC3339), "now", prev.Content, string(data), 64<<10)
		fmt.Fprintf(out, "%s changed since you trusted it:\n%s\n", file, ui.Printable(d))
	} else {
		fmt.Fprintf(out, "%s (sha256 %s):\n%s\n", file, sum[:16], ui.Indent(string(data), "  "))
	}
	fmt.Fprintf(out, "In force as written, it gives: grants %s; %d rules", strings.Join(p.Grants, ", "), len(p.Rules))
	if p.Approval != "" {
		fmt.Fprintf(out, "; approval %s", p.Approval)
	}
	fmt.Fprintln(out)
	for _, g := range p.GrantList() {
		if why := g.Broad(); why != "" {
			fmt.Fprintf(out, "  note: %s: %s\n", g, why)
		}
	}
	if !e.CLI().Bool("yes") {
		tty := e.Terminal()
		if tty == nil {
			return env.Fail(tool.CodeApprovalRequired, env.ExitDenied, "run it on a terminal, or pass --yes once you have read the file",
				"trusting %s needs your answer and there is no terminal to ask", file)
		}
		fmt.Fprint(out, "Trust this policy? [y/N]: ")
		line, _ := bufio.NewReader(tty).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			return env.Fail(tool.CodeUserRejected, env.ExitDenied, "", "%s was not trusted", file)
		}
	}
	rec := policy.TrustRecord{Path: file, SHA256: sum, Content: string(data), TrustedAt: time.Now().UTC(), By: "user"}
	doc, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	st, err := e.Store()
	if err != nil {
		return err
	}
	// On the record first: a trust that is not audited does not happen.
	if err := e.Audit(ctx, "policy.trust", map[string]any{"path": file, "sha256": sum, "previous_sha256": prev.SHA256}); err != nil {
		return err
	}
	if err := st.PutTrust(ctx, env.TrustKey(file), doc); err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout(), "trusted %s (sha256 %s); it is untrusted again as soon as it changes\n", file, sum[:16])
	return nil
}

func trustList(ctx context.Context, e *env.Env) error {
	st, err := e.Store()
	if err != nil {
		return err
	}
	docs, err := st.ListTrust(ctx)
	if err != nil {
		return err
	}
	type row struct {
		Path      string    `json:"path"`
		SHA256    string    `json:"sha256"`
		TrustedAt time.Time `json:"trusted_at"`
		State     string    `json:"state"` // unchanged | changed | missing
	}
	rows := []row{}
	for _, doc := range docs {
		var r policy.TrustRecord
		if json.Unmarshal(doc, &r) != nil || len(r.SHA256) < 16 {
			continue
		}
		path := r.Path
		state := "unchanged"
		if data, err := policy.ReadPolicyFile(path); err != nil {
			state = "missing"
		} else if policy.SHA256Hex(data) != r.SHA256 {
			state = "changed (untrusted until trusted again)"
		}
		rows = append(rows, row{Path: path, SHA256: r.SHA256, TrustedAt: r.TrustedAt, State: state})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Path < rows[j].Path })
	if e.JSON() {
		return e.PrintJSON(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(e.Stdout(), "no trusted policy files")
	}
	for _, r := range rows {
		fmt.Fprintf(e.Stdout(), "%s  sha256 %s  trusted %s  %s\n", r.Path, r.SHA256[:16], r.TrustedAt.UTC().Format(time.RFC3339), r.State)
	}
	return nil
}

// policyProblems prints a policy's problems and fails.
func policyProblems(e *env.Env, file string, err error) error {
	var problems []string
	for _, pe := range unjoin(err) {
		problems = append(problems, pe.Error())
	}
	if e.JSON() {
		_ = e.PrintJSON(map[string]any{"file": file, "valid": false, "errors": problems})
	} else {
		for _, s := range problems {
			fmt.Fprintln(e.Stdout(), s)
		}
	}
	return env.Fail(tool.CodeInvalidInput, env.ExitFailed, "fix the lines above", "%s: %d problem(s)", file, len(problems))
}

// runPolicyTests runs p's tests against the registry of this warden and
// reports every failure with its line.
func runPolicyTests(e *env.Env, file string, p *policy.Policy, print bool) error {
	if len(p.Tests) == 0 {
		if print && !e.JSON() {
			fmt.Fprintf(e.Stdout(), "%s: no tests\n", file)
		}
		return nil
	}
	reg, err := e.Registry()
	if err != nil {
		return err
	}
	results, err := gate.RunTests(p, reg, e.Workspace())
	if err != nil {
		return err
	}
	failed := 0
	type jsonResult struct {
		Line    int    `json:"line"`
		Test    string `json:"test"`
		Expect  string `json:"expect"`
		Got     string `json:"got,omitempty"`
		Rule    string `json:"rule"`
		Pass    bool   `json:"pass"`
		Problem string `json:"problem,omitempty"`
	}
	var js []jsonResult
	for i, r := range results {
		js = append(js, jsonResult{Line: r.Test.Line, Test: r.Test.String(), Expect: r.Test.Expect, Got: r.Got, Rule: r.GotRule, Pass: r.Pass, Problem: r.Problem})
		if r.Pass {
			continue
		}
		failed++
		if e.JSON() {
			continue
		}
		got := r.Got + " by " + r.GotRule
		if r.Problem != "" {
			got = "a call the gate cannot judge: " + r.Problem
		}
		want := r.Test.Expect
		if r.Test.Rule != "" {
			want += " by rule " + r.Test.Rule
		}
		fmt.Fprintf(e.Stdout(), "%s:%d: test %d FAILED: %s: got %s, want %s\n", file, r.Test.Line, i+1, ui.Printable(r.Test.String()), got, want)
	}
	if e.JSON() && print {
		_ = e.PrintJSON(map[string]any{"file": file, "tests": js, "failed": failed})
	} else if print && failed == 0 {
		fmt.Fprintf(e.Stdout(), "%s: %d tests, all pass\n", file, len(results))
	}
	if failed > 0 {
		return env.Fail(tool.CodeInvalidInput, env.ExitFailed, "fix the policy or the tests at the lines above", "%s: %d of %d policy tests failed", file, failed, len(results))
	}
	return nil
}
