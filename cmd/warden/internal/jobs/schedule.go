package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/runs"
	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/schedule"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/workflow"
	"github.com/wardenrt/warden/store/postgres"
)

// warden schedule add|ls|show|pause|resume|rm|run-now|approve, and warden
// daemon: jobs in the store, run through the gate under the grants they
// were scheduled with ∩ the policy in force when they run.

// ScheduleCommand is `warden schedule`.
func ScheduleCommand() *cli.Command {
	return &cli.Command{
		Name:  "schedule",
		Usage: "scheduled jobs: a pinned workflow or an agent task, on a schedule, with the grants it was scheduled with (warden daemon runs them)",
		Subcommands: []*cli.Command{
			scheduleAddCommand(),
			scheduleLsCommand(),
			scheduleShowCommand(),
			schedulePauseCommand(),
			scheduleResumeCommand(),
			scheduleRmCommand(),
			scheduleRunNowCommand(),
			scheduleApproveCommand(),
		},
	}
}

// jobArg is the one job name a schedule subcommand takes.
func jobArg(e *env.Env) (string, error) {
	if e.CLI().NArg() != 1 {
		return "", env.UsageErr("name one job (see `warden schedule ls`)", "one job name is needed")
	}
	return e.CLI().Args().First(), nil
}

// setPaused is the action of schedule pause (true) and resume (false).
func setPaused(paused bool) cli.ActionFunc {
	return env.With(func(ctx context.Context, e *env.Env) error {
		id, err := jobArg(e)
		if err != nil {
			return err
		}
		if err := env.NewLazyStore(e.Store).UpdateJob(ctx, id, func(j *schedule.Job) error {
			if paused {
				j.Paused = true
			} else {
				j.Resume(time.Now())
			}
			return nil
		}); err != nil {
			return jobNotFound(id, err)
		}
		verb := map[bool]string{true: "schedule.pause", false: "schedule.resume"}[paused]
		if err := e.Audit(ctx, verb, map[string]string{"job": id}); err != nil {
			return err
		}
		if e.JSON() {
			return e.PrintJSON(map[string]any{"job": id, "paused": paused})
		}
		fmt.Fprintf(e.Stdout(), "%s %s\n", id, map[bool]string{true: "paused", false: "resumed"}[paused])
		return nil
	})
}

// scheduleAddCommand is `warden schedule add`.
func scheduleAddCommand() *cli.Command {
	return &cli.Command{
		Name: "add", ArgsUsage: "NAME",
		Usage: "schedule a workflow (--workflow FILE) or an agent task (--task TEXT): --every 15m, --cron '0 9 * * 1-5' --tz Europe/Paris, or --at TIME; " +
			"it runs with the workflow's grants (or --with ones) ∩ the policy in force when it runs; shows it all and asks",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "workflow", Usage: "the workflow `FILE` (pinned by sha256)"},
			&cli.StringFlag{Name: "task", Usage: "an agent task (needs a model: OPENAI_BASE_URL / OPENAI_API_KEY)"},
			&cli.StringSliceFlag{Name: "param", Aliases: []string{"p"}, Usage: "a workflow param KEY=VALUE"},
			&cli.StringSliceFlag{Name: "with", Usage: "a grant `CAP` the job runs with (repeatable; default: the workflow's own grants, none for a task); each must be in the policy in force"},
			&cli.StringFlag{Name: "every", Usage: "an interval (15m, 1h)"},
			&cli.StringFlag{Name: "cron", Usage: "a 5-field cron expression (minute hour day month weekday) or @daily, @hourly, …"},
			&cli.StringFlag{Name: "tz", Usage: "the time zone of --cron and --at (default UTC)"},
			&cli.StringFlag{Name: "at", Usage: "once, at a `TIME` (RFC 3339, or \"2026-11-25 09:00\" in --tz)"},
			&cli.StringFlag{Name: "missed", Value: schedule.MissedSkip, Usage: "firings missed while no daemon ran: skip, or once (run once on start-up)"},
			&cli.DurationFlag{Name: "timeout", Value: schedule.DefaultTimeout, Usage: "a run's deadline"},
			&cli.StringFlag{Name: "on-failure-tool", Usage: "a `TOOL` to call when a run fails (with --on-failure-args), under the job's grants"},
			&cli.StringFlag{Name: "on-failure-args", Value: "{}", Usage: "the arguments of --on-failure-tool, as JSON"},
			&cli.StringFlag{Name: "on-failure-workflow", Usage: "a workflow `FILE` to run when a run fails, under the job's grants"},
			&cli.BoolFlag{Name: "yes", Usage: "schedule without asking (for scripts; you have read what it runs)"},
			env.JSONFlag,
		},
		Action: env.With(scheduleAdd),
	}
}

// scheduleLsCommand is `warden schedule ls`.
func scheduleLsCommand() *cli.Command {
	return &cli.Command{
		Name: "ls", Usage: "every job: its schedule, next firing and last outcome", Flags: []cli.Flag{env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			jobs, err := env.NewLazyStore(e.Store).ListJobs(ctx)
			if err != nil {
				return err
			}
			now := time.Now()
			if e.JSON() {
				type row struct {
					schedule.Job
					Next *time.Time `json:"next,omitempty"`
				}
				out := []row{}
				for _, j := range jobs {
					r := row{Job: j}
					if n := j.NextFiring(now); !n.IsZero() && !j.Paused {
						r.Next = &n
					}
					out = append(out, r)
				}
				return e.PrintJSON(out)
			}
			if len(jobs) == 0 {
				fmt.Fprintln(e.Stdout(), "no jobs (add one with `warden schedule add`)")
				return nil
			}
			tw := tabwriter.NewWriter(e.Stdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tSCHEDULE\tNEXT\tLAST\tRUNS")
			for _, j := range jobs {
				sched := "?"
				if sc, err := j.Schedule(); err == nil {
					sched = sc.String()
				}
				next := "-"
				switch n := j.NextFiring(now); {
				case j.Paused:
					next = "paused"
				case j.Done:
					next = "done"
				case !n.IsZero():
					next = n.Local().Format("2006-01-02 15:04:05")
				}
				last := "-"
				if l := j.Last; l != nil {
					last = l.Status
					if l.Error != nil {
						last += " " + string(l.Error.Code)
					}
					if !l.Fire.IsZero() {
						last += " (" + l.Fire.Local().Format("01-02 15:04:05") + ")"
					}
				}
				if j.Running != nil {
					last = "running (" + j.Running.RunID + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", j.ID, sched, next, ui.Printable(last), j.Runs)
			}
			return tw.Flush()
		}),
	}
}

// scheduleShowCommand is `warden schedule show`.
func scheduleShowCommand() *cli.Command {
	return &cli.Command{
		Name: "show", ArgsUsage: "NAME", Usage: "one job in full, with its next five firings", Flags: []cli.Flag{env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			id, err := jobArg(e)
			if err != nil {
				return err
			}
			j, err := env.NewLazyStore(e.Store).GetJob(ctx, id)
			if err != nil {
				return jobNotFound(id, err)
			}
			if e.JSON() {
				return e.PrintJSON(j)
			}
			fmt.Fprintln(e.Stdout(), ui.Printable(j.Describe(time.Now(), 5)))
			if j.Paused {
				fmt.Fprintln(e.Stdout(), "  paused:   yes (warden schedule resume "+j.ID+")")
			}
			if l := j.Last; l != nil {
				fmt.Fprintf(e.Stdout(), "  last:     %s of %s", l.Status, l.Fire.Format(time.RFC3339))
				if l.RunID != "" {
					fmt.Fprintf(e.Stdout(), " (warden runs show %s)", l.RunID)
				}
				if l.Error != nil {
					fmt.Fprintf(e.Stdout(), ": %s: %s", l.Error.Code, ui.Printable(l.Error.Message))
				}
				if l.Reason != "" {
					fmt.Fprintf(e.Stdout(), ": %s", l.Reason)
				}
				if r := l.Retry; r != nil {
					fmt.Fprintf(e.Stdout(), "; attempt %d, after run %s on %s was lost: %s", l.Attempt, r.RunID, ui.Printable(r.Host), ui.Printable(r.Reason))
				}
				fmt.Fprintln(e.Stdout())
			}
			if r := j.Running; r != nil {
				fmt.Fprintf(e.Stdout(), "  running:  run %s on %s (pid %d)", r.RunID, ui.Printable(r.Host), r.PID)
				if !r.LeaseUntil.IsZero() {
					fmt.Fprintf(e.Stdout(), ", lease until %s", r.LeaseUntil.Local().Format(time.DateTime))
				}
				fmt.Fprintln(e.Stdout())
			}
			fmt.Fprintf(e.Stdout(), "  runs:     %d, skipped %d; scheduled %s by %s (%s)\n", j.Runs, j.Skipped,
				j.Created.Format(time.RFC3339), strings.Join(j.CreatedBy, ">"), j.Approval)
			return nil
		}),
	}
}

// schedulePauseCommand is `warden schedule pause`.
func schedulePauseCommand() *cli.Command {
	return &cli.Command{Name: "pause", ArgsUsage: "NAME", Usage: "stop a job firing until resumed", Flags: []cli.Flag{env.JSONFlag}, Action: setPaused(true)}
}

// scheduleResumeCommand is `warden schedule resume`.
func scheduleResumeCommand() *cli.Command {
	return &cli.Command{Name: "resume", ArgsUsage: "NAME", Usage: "let a paused job fire again (from its next firing)", Flags: []cli.Flag{env.JSONFlag}, Action: setPaused(false)}
}

// scheduleRmCommand is `warden schedule rm`.
func scheduleRmCommand() *cli.Command {
	return &cli.Command{
		Name: "rm", ArgsUsage: "NAME", Usage: "remove a job", Flags: []cli.Flag{env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			id, err := jobArg(e)
			if err != nil {
				return err
			}
			if err := env.NewLazyStore(e.Store).DeleteJob(ctx, id); err != nil {
				return jobNotFound(id, err)
			}
			if err := e.Audit(ctx, "schedule.rm", map[string]string{"job": id}); err != nil {
				return err
			}
			if e.JSON() {
				return e.PrintJSON(map[string]any{"job": id, "removed": true})
			}
			fmt.Fprintf(e.Stdout(), "removed %s\n", id)
			return nil
		}),
	}
}

// scheduleRunNowCommand is `warden schedule run-now`.
func scheduleRunNowCommand() *cli.Command {
	return &cli.Command{
		Name: "run-now", ArgsUsage: "NAME", Usage: "run a job now, in this process, as the daemon would (one run at a time per job)",
		Flags: []cli.Flag{env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			id, err := jobArg(e)
			if err != nil {
				return err
			}
			if e.CLI().Bool("dry-run") || len(e.CLI().StringSlice("grant")) > 0 {
				return env.UsageErr("a job runs as the daemon runs it: with its grants ∩ the policy, approving as the policy says; `warden schedule show` previews it",
					"schedule run-now takes no --dry-run or --grant")
			}
			s, err := scheduler(ctx, e)
			if err != nil {
				return err
			}
			runID, err := s.StartRun(ctx, id, time.Now(), false)
			if err != nil {
				if errors.Is(err, schedule.ErrBusy) {
					return env.Fail(tool.CodeToolError, env.ExitFailed, "wait for it, or see `warden schedule show "+id+"`", "%s: %v", id, err)
				}
				return jobNotFound(id, err)
			}
			s.Wait()
			j, err := env.NewLazyStore(e.Store).GetJob(context.WithoutCancel(ctx), id)
			if err != nil {
				return err
			}
			if e.JSON() {
				return e.PrintJSON(j.Last)
			}
			fmt.Fprintf(e.Stderr(), "warden: job %s %s (run %s) — `warden runs show %s`\n", id, j.Last.Status, runID, runID)
			if j.Last.Status != gate.RunSucceeded {
				if le := j.Last.Error; le != nil {
					return env.Fail(le.Code, env.ExitFailed, le.Hint, "%s", le.Message)
				}
				return env.Fail(tool.CodeToolError, env.ExitFailed, "", "the run %s", j.Last.Status)
			}
			return nil
		}),
	}
}

// scheduleApproveCommand is `warden schedule approve`.
func scheduleApproveCommand() *cli.Command {
	return &cli.Command{
		Name: "approve", ArgsUsage: "NAME",
		Usage: "pin a job's workflow again after it changed (shows the old and new sha256, asks)",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "yes", Usage: "without asking"}, env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			id, err := jobArg(e)
			if err != nil {
				return err
			}
			j, err := env.NewLazyStore(e.Store).GetJob(ctx, id)
			if err != nil {
				return jobNotFound(id, err)
			}
			if j.Kind != schedule.KindWorkflow {
				return env.UsageErr("", "%s is not a workflow job", id)
			}
			_, data, err := runs.OpenWorkflow("", j.Workflow)
			if err != nil {
				return env.UsageErr("", "%v", err)
			}
			sum := policy.SHA256Hex(data)
			if sum == j.Digest {
				if e.JSON() {
					return e.PrintJSON(map[string]any{"job": id, "workflow": j.Workflow, "sha256": sum, "grants": ui.OrEmpty(j.Grants), "unchanged": true})
				}
				fmt.Fprintf(e.Stdout(), "%s: %s is unchanged\n", id, j.Workflow)
				return nil
			}
			fmt.Fprintf(e.Stderr(), "%s changed: sha256 %s → %s\n%s\n", j.Workflow, ui.Short16(j.Digest), ui.Short16(sum), ui.Indent(string(data), "  "))
			grants := j.Grants
			if j.GrantsFromWorkflow {
				// The job runs with the workflow's own grants: its new
				// ones, which must be in the policy in force.
				g, err := e.Gate()
				if err != nil {
					return err
				}
				w, err := workflow.Parse(j.Workflow, data, runs.WorkflowOptions(g.Registry()))
				if err != nil {
					return env.ReadFailure(err, "fix the workflow; check it with `warden workflow validate "+j.Workflow+"`")
				}
				grants = w.Grants
				wider, err := schedule.Within(j.Workspace, grants, g.Grants())
				if err != nil {
					return env.UsageErr("", "%v", err)
				}
				if len(wider) > 0 {
					return env.Fail(tool.CodeCapabilityDenied, env.ExitDenied, "add them to the policy in force ("+g.Policy().Source+"), then approve again",
						"the workflow now needs grants the policy does not give: %s", strings.Join(wider, ", "))
				}
				fmt.Fprintf(e.Stderr(), "grants: %s → %s\n", strings.Join(j.Grants, ", "), strings.Join(grants, ", "))
			}
			if err := e.Confirm("Pin it for job "+id+"?", e.CLI().Bool("yes")); err != nil {
				return err
			}
			if err := e.Audit(ctx, "schedule.approve", map[string]any{"job": id, "sha256": sum, "grants": grants}); err != nil {
				return err
			}
			if err := env.NewLazyStore(e.Store).UpdateJob(ctx, id, func(j *schedule.Job) error { j.Digest, j.Grants = sum, grants; return nil }); err != nil {
				return jobNotFound(id, err)
			}
			if e.JSON() {
				return e.PrintJSON(map[string]any{"job": id, "workflow": j.Workflow, "sha256": sum, "grants": ui.OrEmpty(grants), "approved": true})
			}
			fmt.Fprintf(e.Stdout(), "%s: %s pinned again (sha256 %s)\n", id, j.Workflow, ui.Short16(sum))
			return nil
		}),
	}
}

func jobNotFound(id string, err error) error {
	if errors.Is(err, gate.ErrNotFound) {
		return env.Fail(tool.CodeNotFound, env.ExitFailed, "see `warden schedule ls`", "no job named %s", id)
	}
	return err
}

func scheduleAdd(ctx context.Context, e *env.Env) error {
	if e.CLI().NArg() != 1 {
		return env.UsageErr("usage: warden schedule add NAME --workflow FILE|--task TEXT --every D|--cron EXPR|--at TIME", "one job name is needed")
	}
	req := schedule.Request{
		Name: e.CLI().Args().First(), Task: e.CLI().String("task"), Missed: e.CLI().String("missed"),
		TimeoutS: int64(e.CLI().Duration("timeout") / time.Second),
		Spec:     schedule.Spec{Every: e.CLI().String("every"), Cron: e.CLI().String("cron"), TZ: e.CLI().String("tz"), At: e.CLI().String("at")},
	}
	if f := e.CLI().String("workflow"); f != "" {
		src, data, err := runs.OpenWorkflow("", f)
		if err != nil {
			return env.UsageErr("check the path", "%v", err)
		}
		req.Workflow, req.Data = src, data
	}
	if ps := e.CLI().StringSlice("param"); len(ps) > 0 {
		req.Params = map[string]any{}
		for _, p := range ps {
			k, v, ok := strings.Cut(p, "=")
			if !ok {
				return env.UsageErr("write -p KEY=VALUE", "param %q", p)
			}
			req.Params[k] = v
		}
	}
	if t := e.CLI().String("on-failure-tool"); t != "" {
		req.OnFailure = &schedule.Notify{Tool: t, Args: json.RawMessage(e.CLI().String("on-failure-args"))}
	}
	if f := e.CLI().String("on-failure-workflow"); f != "" {
		src, data, err := runs.OpenWorkflow("", f)
		if err != nil {
			return env.UsageErr("check the path", "%v", err)
		}
		req.OnFailure, req.OnFailureData = &schedule.Notify{Workflow: src}, data
	}
	// A job runs with its grants ∩ the policy in force when it runs, so
	// what it may carry is what the policy in force here gives now: a
	// --grant for this invocation would be gone by then.
	if len(e.CLI().StringSlice("grant")) > 0 {
		return env.UsageErr("name the job's grants with --with; each must be in the policy (jobs run with the grants the policy gives when they run)",
			"schedule add takes no --grant")
	}
	g, err := e.Gate()
	if err != nil {
		return err
	}
	held := g.Grants()
	if with := e.CLI().StringSlice("with"); len(with) > 0 {
		req.Grants = with
	}
	j, err := schedule.Prepare(req, e.Workspace(), []string{"cli", "owner"}, held, time.Now(), runs.WorkflowOptions(g.Registry()))
	if err != nil {
		if re := tool.AsError(err); re != nil {
			if re.Code == tool.CodeCapabilityDenied {
				re.Hint = "add them to the policy in force (" + g.Policy().Source + "): a job runs with its grants ∩ the policy when it runs"
			}
			exit := env.ExitFailed
			if re.Code.Denial() {
				exit = env.ExitDenied
			}
			return env.Fail(re.Code, exit, re.Hint, "%s", re.Message)
		}
		return err
	}
	if req.OnFailure != nil && req.OnFailure.Tool != "" {
		if err := g.Registry().CheckArgs(req.OnFailure.Tool, req.OnFailure.Args); err != nil {
			re := tool.AsError(err)
			return env.Fail(re.Code, env.ExitUsage, re.Hint, "--on-failure-tool: %s", re.Message)
		}
	}
	fmt.Fprintln(e.Stderr(), ui.Printable(j.Describe(time.Now(), 5)))
	if err := e.Confirm("Schedule it?", e.CLI().Bool("yes")); err != nil {
		return err
	}
	j.Approval = "user"
	if e.CLI().Bool("yes") {
		j.Approval = "user (--yes)"
	}
	if err := e.Audit(ctx, "schedule.add", j); err != nil {
		return err
	}
	if err := env.NewLazyStore(e.Store).CreateJob(ctx, j); err != nil {
		return env.Fail(tool.CodeAlreadyExists, env.ExitFailed, "choose another name, or `warden schedule rm "+j.ID+"` first", "%v", err)
	}
	if e.JSON() {
		return e.PrintJSON(j)
	}
	fmt.Fprintf(e.Stdout(), "scheduled %s; `warden daemon` runs it (`warden daemon --print-unit` for a systemd unit)\n", j.ID)
	return nil
}

// scheduler builds the scheduler over the store, with this process as the
// one marking its runs.
func scheduler(ctx context.Context, e *env.Env) (*schedule.Scheduler, error) {
	st, err := e.Store()
	if err != nil {
		return nil, err
	}
	self := selfRunning()
	var leases schedule.Leases
	if pg, ok := st.(*postgres.Store); ok {
		leases = pgLeases{st: pg, holder: fmt.Sprintf("%s pid %d", self.Host, self.PID)}
	}
	var lease time.Duration
	if e.CLI() != nil && e.CLI().IsSet("lease") {
		lease = e.CLI().Duration("lease")
	}
	return schedule.New(schedule.Options{
		Store: env.NewLazyStore(e.Store),
		Run: func(ctx context.Context, j schedule.Job, runID string) schedule.Outcome {
			return runJob(ctx, e, j, runID)
		},
		Notify: func(ctx context.Context, j schedule.Job, out schedule.Outcome) { notifyJob(ctx, e, j, out) },
		Self:   self, Alive: processAlive,
		Leases: leases, Lease: lease,
		Record: func(ctx context.Context, ev gate.AuditEvent) error {
			body, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			_, err = st.AppendAudit(ctx, body)
			return err
		},
		Interrupted: func(ctx context.Context, runID, reason string) error { return markInterrupted(ctx, st, runID, reason) },
		Log:         e.Log(),
	})
}
