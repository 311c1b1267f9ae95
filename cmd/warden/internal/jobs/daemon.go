package jobs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/runtime/schedule"
)

// DaemonCommand is `warden daemon`.
func DaemonCommand() *cli.Command {
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
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if e.CLI().Bool("print-unit") {
				return printUnit(e)
			}
			if len(e.CLI().StringSlice("grant")) > 0 {
				return env.UsageErr("jobs run with the grants they were scheduled with", "the daemon takes no --grant")
			}
			s, err := scheduler(ctx, e)
			if err != nil {
				return err
			}
			if e.CLI().Bool("once") {
				return s.Once(ctx)
			}
			s.SetPoll(e.CLI().Duration("poll"))
			// On a fleet's store: sync what other hosts publish, and load
			// the wasm tools again when it changes.
			wctx, stopWatch := context.WithCancel(ctx)
			watching := e.WatchFleet(wctx, func() {
				if _, err := e.ReloadRegistry(); err != nil {
					e.Log().Warn("daemon: reloading the tools", "err", err)
				}
			})
			defer func() { stopWatch(); watching.Wait() }()
			e.Log().Info("daemon started", "pid", os.Getpid(), "home", e.Home())
			fmt.Fprintf(e.Stderr(), "warden: daemon running (pid %d); jobs: `warden schedule ls`\n", os.Getpid())
			err = s.Loop(ctx)
			fmt.Fprintln(e.Stderr(), "warden: daemon stopped")
			if err == nil {
				StoppedCleanly.Store(true)
			}
			return err
		}),
	}
}

// printUnit prints a systemd user unit for the daemon.
func printUnit(e *env.Env) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout(), `# ~/.config/systemd/user/warden.service — then:
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
`, ui.ShellWord(exe), ui.ShellWord(e.Home()))
	return nil
}

// StoppedCleanly is set by a service (warden daemon) whose signal is its
// normal way to stop, once it has stopped and recorded everything: it then
// exits 0, as a service manager expects.
var StoppedCleanly atomic.Bool
