package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/runtime"
	"github.com/wardenrt/warden/runtime/schedule"
	"github.com/wardenrt/warden/runtime/workflow"
	"github.com/wardenrt/warden/store/postgres"
)

// warden schedule add|ls|show|pause|resume|rm|run-now|approve, and warden
// daemon: jobs in the store, run through the gate under the grants they
// were scheduled with ∩ the policy in force when they run.

func scheduleCommand() *cli.Command {
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
func jobArg(e *env) (string, error) {
	if e.c.NArg() != 1 {
		return "", usageErr("name one job (see `warden schedule ls`)", "one job name is needed")
	}
	return e.c.Args().First(), nil
}

// setPaused is the action of schedule pause (true) and resume (false).
func setPaused(paused bool) cli.ActionFunc {
	return withEnv(func(ctx context.Context, e *env) error {
		id, err := jobArg(e)
		if err != nil {
			return err
		}
		if err := (lazyStore{open: e.store}).UpdateJob(ctx, id, func(j *schedule.Job) error {
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
		if err := e.audit(ctx, verb, map[string]string{"job": id}); err != nil {
			return err
		}
		if e.json {
			return e.printJSON(map[string]any{"job": id, "paused": paused})
		}
		fmt.Fprintf(e.stdout, "%s %s\n", id, map[bool]string{true: "paused", false: "resumed"}[paused])
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
			jsonFlag,
		},
		Action: withEnv(scheduleAdd),
	}
}

// scheduleLsCommand is `warden schedule ls`.
func scheduleLsCommand() *cli.Command {
	return &cli.Command{
		Name: "ls", Usage: "every job: its schedule, next firing and last outcome", Flags: []cli.Flag{jsonFlag},
		Action: withEnv(func(ctx context.Context, e *env) error {
			jobs, err := lazyStore{open: e.store}.ListJobs(ctx)
			if err != nil {
				return err
			}
			now := time.Now()
			if e.json {
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
				return e.printJSON(out)
			}
			if len(jobs) == 0 {
				fmt.Fprintln(e.stdout, "no jobs (add one with `warden schedule add`)")
				return nil
			}
			tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
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
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", j.ID, sched, next, printable(last), j.Runs)
			}
			return tw.Flush()
		}),
	}
}

// scheduleShowCommand is `warden schedule show`.
func scheduleShowCommand() *cli.Command {
	return &cli.Command{
		Name: "show", ArgsUsage: "NAME", Usage: "one job in full, with its next five firings", Flags: []cli.Flag{jsonFlag},
		Action: withEnv(func(ctx context.Context, e *env) error {
			id, err := jobArg(e)
			if err != nil {
				return err
			}
			j, err := lazyStore{open: e.store}.GetJob(ctx, id)
			if err != nil {
				return jobNotFound(id, err)
			}
			if e.json {
				return e.printJSON(j)
			}
			fmt.Fprintln(e.stdout, printable(j.Describe(time.Now(), 5)))
			if j.Paused {
				fmt.Fprintln(e.stdout, "  paused:   yes (warden schedule resume "+j.ID+")")
			}
			if l := j.Last; l != nil {
				fmt.Fprintf(e.stdout, "  last:     %s of %s", l.Status, l.Fire.Format(time.RFC3339))
				if l.RunID != "" {
					fmt.Fprintf(e.stdout, " (warden runs show %s)", l.RunID)
				}
				if l.Error != nil {
					fmt.Fprintf(e.stdout, ": %s: %s", l.Error.Code, printable(l.Error.Message))
				}
				if l.Reason != "" {
					fmt.Fprintf(e.stdout, ": %s", l.Reason)
				}
				if r := l.Retry; r != nil {
					fmt.Fprintf(e.stdout, "; attempt %d, after run %s on %s was lost: %s", l.Attempt, r.RunID, printable(r.Host), printable(r.Reason))
				}
				fmt.Fprintln(e.stdout)
			}
			if r := j.Running; r != nil {
				fmt.Fprintf(e.stdout, "  running:  run %s on %s (pid %d)", r.RunID, printable(r.Host), r.PID)
				if !r.LeaseUntil.IsZero() {
					fmt.Fprintf(e.stdout, ", lease until %s", r.LeaseUntil.Local().Format(time.DateTime))
				}
				fmt.Fprintln(e.stdout)
			}
			fmt.Fprintf(e.stdout, "  runs:     %d, skipped %d; scheduled %s by %s (%s)\n", j.Runs, j.Skipped,
				j.Created.Format(time.RFC3339), strings.Join(j.CreatedBy, ">"), j.Approval)
			return nil
		}),
	}
}

// schedulePauseCommand is `warden schedule pause`.
func schedulePauseCommand() *cli.Command {
	return &cli.Command{Name: "pause", ArgsUsage: "NAME", Usage: "stop a job firing until resumed", Flags: []cli.Flag{jsonFlag}, Action: setPaused(true)}
}

// scheduleResumeCommand is `warden schedule resume`.
func scheduleResumeCommand() *cli.Command {
	return &cli.Command{Name: "resume", ArgsUsage: "NAME", Usage: "let a paused job fire again (from its next firing)", Flags: []cli.Flag{jsonFlag}, Action: setPaused(false)}
}

// scheduleRmCommand is `warden schedule rm`.
func scheduleRmCommand() *cli.Command {
	return &cli.Command{
		Name: "rm", ArgsUsage: "NAME", Usage: "remove a job", Flags: []cli.Flag{jsonFlag},
		Action: withEnv(func(ctx context.Context, e *env) error {
			id, err := jobArg(e)
			if err != nil {
				return err
			}
			if err := (lazyStore{open: e.store}).DeleteJob(ctx, id); err != nil {
				return jobNotFound(id, err)
			}
			if err := e.audit(ctx, "schedule.rm", map[string]string{"job": id}); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(map[string]any{"job": id, "removed": true})
			}
			fmt.Fprintf(e.stdout, "removed %s\n", id)
			return nil
		}),
	}
}

// scheduleRunNowCommand is `warden schedule run-now`.
func scheduleRunNowCommand() *cli.Command {
	return &cli.Command{
		Name: "run-now", ArgsUsage: "NAME", Usage: "run a job now, in this process, as the daemon would (one run at a time per job)",
		Flags: []cli.Flag{jsonFlag},
		Action: withEnv(func(ctx context.Context, e *env) error {
			id, err := jobArg(e)
			if err != nil {
				return err
			}
			if e.c.Bool("dry-run") || len(e.c.StringSlice("grant")) > 0 {
				return usageErr("a job runs as the daemon runs it: with its grants ∩ the policy, approving as the policy says; `warden schedule show` previews it",
					"schedule run-now takes no --dry-run or --grant")
			}
			s, err := e.scheduler(ctx)
			if err != nil {
				return err
			}
			runID, err := s.StartRun(ctx, id, time.Now(), false)
			if err != nil {
				if errors.Is(err, schedule.ErrBusy) {
					return fail(runtime.CodeToolError, exitFailed, "wait for it, or see `warden schedule show "+id+"`", "%s: %v", id, err)
				}
				return jobNotFound(id, err)
			}
			s.Wait()
			j, err := lazyStore{open: e.store}.GetJob(context.WithoutCancel(ctx), id)
			if err != nil {
				return err
			}
			if e.json {
				return e.printJSON(j.Last)
			}
			fmt.Fprintf(e.stderr, "warden: job %s %s (run %s) — `warden runs show %s`\n", id, j.Last.Status, runID, runID)
			if j.Last.Status != runtime.RunSucceeded {
				if le := j.Last.Error; le != nil {
					return fail(le.Code, exitFailed, le.Hint, "%s", le.Message)
				}
				return fail(runtime.CodeToolError, exitFailed, "", "the run %s", j.Last.Status)
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
		Flags: []cli.Flag{&cli.BoolFlag{Name: "yes", Usage: "without asking"}, jsonFlag},
		Action: withEnv(func(ctx context.Context, e *env) error {
			id, err := jobArg(e)
			if err != nil {
				return err
			}
			j, err := lazyStore{open: e.store}.GetJob(ctx, id)
			if err != nil {
				return jobNotFound(id, err)
			}
			if j.Kind != schedule.KindWorkflow {
				return usageErr("", "%s is not a workflow job", id)
			}
			_, data, err := openWorkflow("", j.Workflow)
			if err != nil {
				return usageErr("", "%v", err)
			}
			sum := runtime.SHA256Hex(data)
			if sum == j.Digest {
				if e.json {
					return e.printJSON(map[string]any{"job": id, "workflow": j.Workflow, "sha256": sum, "grants": orEmpty(j.Grants), "unchanged": true})
				}
				fmt.Fprintf(e.stdout, "%s: %s is unchanged\n", id, j.Workflow)
				return nil
			}
			fmt.Fprintf(e.stderr, "%s changed: sha256 %s → %s\n%s\n", j.Workflow, short16(j.Digest), short16(sum), indent(string(data), "  "))
			grants := j.Grants
			if j.GrantsFromWorkflow {
				// The job runs with the workflow's own grants: its new
				// ones, which must be in the policy in force.
				g, err := e.gate()
				if err != nil {
					return err
				}
				w, err := workflow.Parse(j.Workflow, data, workflowOptions(g.Registry()))
				if err != nil {
					return readFailure(err, "fix the workflow; check it with `warden workflow validate "+j.Workflow+"`")
				}
				grants = w.Grants
				wider, err := schedule.Within(j.Workspace, grants, g.Grants())
				if err != nil {
					return usageErr("", "%v", err)
				}
				if len(wider) > 0 {
					return fail(runtime.CodeCapabilityDenied, exitDenied, "add them to the policy in force ("+g.Policy().Source+"), then approve again",
						"the workflow now needs grants the policy does not give: %s", strings.Join(wider, ", "))
				}
				fmt.Fprintf(e.stderr, "grants: %s → %s\n", strings.Join(j.Grants, ", "), strings.Join(grants, ", "))
			}
			if err := e.confirm("Pin it for job "+id+"?", e.c.Bool("yes")); err != nil {
				return err
			}
			if err := e.audit(ctx, "schedule.approve", map[string]any{"job": id, "sha256": sum, "grants": grants}); err != nil {
				return err
			}
			if err := (lazyStore{open: e.store}).UpdateJob(ctx, id, func(j *schedule.Job) error { j.Digest, j.Grants = sum, grants; return nil }); err != nil {
				return jobNotFound(id, err)
			}
			if e.json {
				return e.printJSON(map[string]any{"job": id, "workflow": j.Workflow, "sha256": sum, "grants": orEmpty(grants), "approved": true})
			}
			fmt.Fprintf(e.stdout, "%s: %s pinned again (sha256 %s)\n", id, j.Workflow, short16(sum))
			return nil
		}),
	}
}

func jobNotFound(id string, err error) error {
	if errors.Is(err, runtime.ErrNotFound) {
		return fail(runtime.CodeNotFound, exitFailed, "see `warden schedule ls`", "no job named %s", id)
	}
	return err
}

// confirm asks on the terminal, or takes --yes.
func (e *env) confirm(question string, yes bool) error {
	if yes {
		return nil
	}
	tty := e.terminal()
	if tty == nil {
		return fail(runtime.CodeApprovalRequired, exitDenied, "run it on a terminal, or pass --yes once you have read it", "this needs your answer and there is no terminal to ask")
	}
	fmt.Fprint(e.stderr, question+" [y/N]: ")
	line, _ := bufio.NewReader(tty).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
		return fail(runtime.CodeUserRejected, exitDenied, "", "not done")
	}
	return nil
}

func scheduleAdd(ctx context.Context, e *env) error {
	if e.c.NArg() != 1 {
		return usageErr("usage: warden schedule add NAME --workflow FILE|--task TEXT --every D|--cron EXPR|--at TIME", "one job name is needed")
	}
	req := schedule.Request{
		Name: e.c.Args().First(), Task: e.c.String("task"), Missed: e.c.String("missed"),
		TimeoutS: int64(e.c.Duration("timeout") / time.Second),
		Spec:     schedule.Spec{Every: e.c.String("every"), Cron: e.c.String("cron"), TZ: e.c.String("tz"), At: e.c.String("at")},
	}
	if f := e.c.String("workflow"); f != "" {
		src, data, err := openWorkflow("", f)
		if err != nil {
			return usageErr("check the path", "%v", err)
		}
		req.Workflow, req.Data = src, data
	}
	if ps := e.c.StringSlice("param"); len(ps) > 0 {
		req.Params = map[string]any{}
		for _, p := range ps {
			k, v, ok := strings.Cut(p, "=")
			if !ok {
				return usageErr("write -p KEY=VALUE", "param %q", p)
			}
			req.Params[k] = v
		}
	}
	if t := e.c.String("on-failure-tool"); t != "" {
		req.OnFailure = &schedule.Notify{Tool: t, Args: json.RawMessage(e.c.String("on-failure-args"))}
	}
	if f := e.c.String("on-failure-workflow"); f != "" {
		src, data, err := openWorkflow("", f)
		if err != nil {
			return usageErr("check the path", "%v", err)
		}
		req.OnFailure, req.OnFailureData = &schedule.Notify{Workflow: src}, data
	}
	// A job runs with its grants ∩ the policy in force when it runs, so
	// what it may carry is what the policy in force here gives now: a
	// --grant for this invocation would be gone by then.
	if len(e.c.StringSlice("grant")) > 0 {
		return usageErr("name the job's grants with --with; each must be in the policy (jobs run with the grants the policy gives when they run)",
			"schedule add takes no --grant")
	}
	g, err := e.gate()
	if err != nil {
		return err
	}
	held := g.Grants()
	if with := e.c.StringSlice("with"); len(with) > 0 {
		req.Grants = with
	}
	j, err := schedule.Prepare(req, e.workspace, []string{"cli", "owner"}, held, time.Now(), workflowOptions(g.Registry()))
	if err != nil {
		if re := runtime.AsError(err); re != nil {
			if re.Code == runtime.CodeCapabilityDenied {
				re.Hint = "add them to the policy in force (" + g.Policy().Source + "): a job runs with its grants ∩ the policy when it runs"
			}
			exit := exitFailed
			if re.Code.Denial() {
				exit = exitDenied
			}
			return fail(re.Code, exit, re.Hint, "%s", re.Message)
		}
		return err
	}
	if req.OnFailure != nil && req.OnFailure.Tool != "" {
		if err := g.Registry().CheckArgs(req.OnFailure.Tool, req.OnFailure.Args); err != nil {
			re := runtime.AsError(err)
			return fail(re.Code, exitUsage, re.Hint, "--on-failure-tool: %s", re.Message)
		}
	}
	fmt.Fprintln(e.stderr, printable(j.Describe(time.Now(), 5)))
	if err := e.confirm("Schedule it?", e.c.Bool("yes")); err != nil {
		return err
	}
	j.Approval = "user"
	if e.c.Bool("yes") {
		j.Approval = "user (--yes)"
	}
	if err := e.audit(ctx, "schedule.add", j); err != nil {
		return err
	}
	if err := (lazyStore{open: e.store}).CreateJob(ctx, j); err != nil {
		return fail(runtime.CodeAlreadyExists, exitFailed, "choose another name, or `warden schedule rm "+j.ID+"` first", "%v", err)
	}
	if e.json {
		return e.printJSON(j)
	}
	fmt.Fprintf(e.stdout, "scheduled %s; `warden daemon` runs it (`warden daemon --print-unit` for a systemd unit)\n", j.ID)
	return nil
}

// scheduler builds the scheduler over the store, with this process as the
// one marking its runs.
func (e *env) scheduler(ctx context.Context) (*schedule.Scheduler, error) {
	st, err := e.store()
	if err != nil {
		return nil, err
	}
	self := selfRunning()
	var leases schedule.Leases
	if pg, ok := st.(*postgres.Store); ok {
		leases = pgLeases{st: pg, holder: fmt.Sprintf("%s pid %d", self.Host, self.PID)}
	}
	var lease time.Duration
	if e.c != nil && e.c.IsSet("lease") {
		lease = e.c.Duration("lease")
	}
	return schedule.New(schedule.Options{
		Store: lazyStore{open: e.store}, Run: e.runJob, Notify: e.notifyJob, Self: self, Alive: processAlive,
		Leases: leases, Lease: lease,
		Record: func(ctx context.Context, ev runtime.AuditEvent) error {
			body, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			_, err = st.AppendAudit(ctx, body)
			return err
		},
		Interrupted: func(ctx context.Context, runID, reason string) error { return markInterrupted(ctx, st, runID, reason) },
		Log:         e.log,
	})
}

func daemonCommand() *cli.Command {
	return &cli.Command{
		Name: "daemon",
		Usage: "run scheduled jobs when they are due, each through the gate as schedule:<job> with its grants ∩ the policy in force; " +
			"SIGTERM cancels the running ones and exits",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "once", Usage: "run what is due now, wait for it, and exit (for cron or CI)"},
			&cli.BoolFlag{Name: "print-unit", Usage: "print a systemd user unit that runs the daemon, and exit"},
			&cli.DurationFlag{Name: "poll", Value: schedule.DefaultPoll, Usage: "how often to look for jobs added or changed by other commands"},
			&cli.DurationFlag{Name: "lease", Value: schedule.DefaultLease, Usage: "how long a run holds its firing unrenewed (renewed every third of it): " +
				"how long another daemon sharing the store waits before running the firing of a daemon that died"},
		},
		Action: withEnv(func(ctx context.Context, e *env) error {
			if e.c.Bool("print-unit") {
				return printUnit(e)
			}
			if len(e.c.StringSlice("grant")) > 0 {
				return usageErr("jobs run with the grants they were scheduled with", "the daemon takes no --grant")
			}
			s, err := e.scheduler(ctx)
			if err != nil {
				return err
			}
			if e.c.Bool("once") {
				return s.Once(ctx)
			}
			s.SetPoll(e.c.Duration("poll"))
			// On a fleet's store: sync what other hosts publish, and load
			// the wasm tools again when it changes.
			wctx, stopWatch := context.WithCancel(ctx)
			watching := e.watchFleet(wctx, func() {
				if _, err := e.reloadRegistry(); err != nil {
					e.log.Warn("daemon: reloading the tools", "err", err)
				}
			})
			defer func() { stopWatch(); watching.Wait() }()
			e.log.Info("daemon started", "pid", os.Getpid(), "home", e.home)
			fmt.Fprintf(e.stderr, "warden: daemon running (pid %d); jobs: `warden schedule ls`\n", os.Getpid())
			err = s.Loop(ctx)
			fmt.Fprintln(e.stderr, "warden: daemon stopped")
			if err == nil {
				stoppedCleanly.Store(true)
			}
			return err
		}),
	}
}

// printUnit prints a systemd user unit for the daemon.
func printUnit(e *env) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, `# ~/.config/systemd/user/warden.service — then:
#   systemctl --user daemon-reload && systemctl --user enable --now warden.service
[Unit]
Description=warden: scheduled jobs (warden schedule ls)
After=network-online.target

[Service]
Type=simple
ExecStart=%s --home %s daemon
Restart=on-failure
RestartSec=5
KillSignal=SIGTERM
TimeoutStopSec=15

[Install]
WantedBy=default.target
`, shellWord(exe), shellWord(e.home))
	return nil
}
