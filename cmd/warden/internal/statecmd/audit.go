package statecmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/store"
)

// AuditCommand is `warden audit`.
func AuditCommand() *cli.Command {
	return &cli.Command{
		Name:  "audit",
		Usage: "read and check the tamper-evident audit log",
		Subcommands: []*cli.Command{
			{
				Name:  "ls",
				Usage: "list audit records (every call: allowed, denied and invalid)",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "run", Usage: "only records of this run id"},
					&cli.StringFlag{Name: "tool", Usage: "only records of this tool"},
					&cli.IntFlag{Name: "last", Aliases: []string{"limit"}, Value: 0, Usage: "only the newest N records (shown oldest first; 0 = all)"},
					env.JSONFlag,
				},
				Action: env.With(auditLs),
			},
			{
				Name:      "show",
				Usage:     "show one audit record in full",
				ArgsUsage: "SEQ",
				Flags:     []cli.Flag{env.JSONFlag},
				Action: env.With(func(ctx context.Context, e *env.Env) error {
					seq, err := strconv.ParseUint(e.CLI().Args().First(), 10, 64)
					if err != nil || e.CLI().NArg() != 1 {
						return env.UsageErr("usage: warden audit show SEQ (see `warden audit ls`)", "audit show needs one sequence number")
					}
					st, err := e.Store()
					if err != nil {
						return err
					}
					rec, err := st.AuditRecord(ctx, seq)
					if err != nil {
						return err
					}
					return e.PrintJSON(rec)
				}),
			},
			{
				Name:  "verify",
				Usage: "check the hash chain and the head anchor; name the first bad record",
				Flags: []cli.Flag{env.JSONFlag},
				Action: env.With(func(ctx context.Context, e *env.Env) error {
					st, err := e.Store()
					if err != nil {
						return err
					}
					rep, err := st.VerifyAudit(ctx)
					if e.JSON() {
						if perr := e.PrintJSON(rep); perr != nil {
							return perr
						}
					}
					if err != nil {
						if errors.Is(err, store.ErrTampered) {
							return env.Fail(tool.CodeAuditTampered, env.ExitFailed, "the log was altered after it was written; keep warden.db and audit.head for investigation",
								"audit log tampered: first bad record #%d: %s", rep.FirstBad, rep.Reason)
						}
						return err
					}
					if !e.JSON() {
						fmt.Fprintf(e.Stdout(), "audit log OK: %d records, head #%d %s (anchor #%d)\n", rep.Records, rep.HeadSeq, short(rep.HeadHash), rep.AnchorSeq)
					}
					return nil
				}),
			},
			{
				Name:  "reanchor",
				Usage: "after investigating a tampering report, accept the current log as the new head (refused if the records themselves do not verify)",
				Flags: []cli.Flag{env.JSONFlag},
				Action: env.With(func(ctx context.Context, e *env.Env) error {
					st, err := e.Store()
					if err != nil {
						return err
					}
					rep, err := st.Reanchor(ctx)
					if err != nil {
						if errors.Is(err, store.ErrTampered) {
							return env.Fail(tool.CodeAuditTampered, env.ExitFailed, "records themselves are altered; restore warden.db from a backup",
								"cannot reanchor: first bad record #%d: %s", rep.FirstBad, rep.Reason)
						}
						return err
					}
					if err := e.Audit(ctx, "audit.reanchor", map[string]any{"head_seq": rep.HeadSeq, "head_hash": rep.HeadHash}); err != nil {
						return err
					}
					if e.JSON() {
						return e.PrintJSON(rep)
					}
					fmt.Fprintf(e.Stdout(), "audit anchor moved to head #%d %s\n", rep.HeadSeq, short(rep.HeadHash))
					return nil
				}),
			},
			{
				Name:  "export",
				Usage: "write the whole audit log as JSON Lines",
				Flags: []cli.Flag{&cli.StringFlag{Name: "out", Usage: "file to write (default: stdout)"}},
				Action: env.With(func(ctx context.Context, e *env.Env) error {
					st, err := e.Store()
					if err != nil {
						return err
					}
					var w io.Writer = e.Stdout()
					if out := e.CLI().String("out"); out != "" {
						f, err := os.OpenFile(out, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
						if err != nil {
							return env.UsageErr("choose a writable --out path", "%v", err)
						}
						defer f.Close()
						w = f
					}
					return st.ExportAudit(ctx, w)
				}),
			},
		},
	}
}

func auditLs(ctx context.Context, e *env.Env) error {
	st, err := e.Store()
	if err != nil {
		return err
	}
	last := e.CLI().Int("last")
	if last < 0 {
		return env.UsageErr("give --last a positive number of records, or 0 for all", "--last %d is negative", last)
	}
	recs, err := st.ListAudit(ctx, store.AuditFilter{RunID: e.CLI().String("run"), Tool: e.CLI().String("tool"), Limit: last, Newest: true})
	if err != nil {
		return err
	}
	if e.JSON() {
		if recs == nil {
			recs = []store.AuditRecord{}
		}
		return e.PrintJSON(recs)
	}
	tw := tabwriter.NewWriter(e.Stdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tPHASE\tTOOL\tPRINCIPAL\tDECISION\tOUTCOME")
	for _, r := range recs {
		var ev gate.AuditEvent
		_ = json.Unmarshal(r.Event, &ev)
		decision := "-"
		if ev.Decision != nil {
			decision = ev.Decision.Action
			if ev.Decision.Approval != "" && ev.Decision.Approval != gate.ApprovalNotRequired {
				decision += "/" + ev.Decision.Approval
			}
		}
		outcome := ev.Outcome
		if outcome == "" {
			outcome = "-"
		}
		if ev.DryRun {
			outcome += " (dry run)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.Time.Local().Format("2006-01-02 15:04:05"),
			ev.Phase, ev.Tool, strings.Join(ev.Principal, ">"), decision, outcome)
	}
	return tw.Flush()
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
