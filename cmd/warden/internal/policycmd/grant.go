package policycmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// grant add | ls | rm: grants remembered in the store with an expiry, for
// one workspace (and optionally one tool). Every gate reads them at each
// call, so one that expires or is removed stops applying at once — also in
// a running `warden mcp serve` or `warden run`.
func GrantCommand() *cli.Command {
	return &cli.Command{
		Name:  "grant",
		Usage: "grants that expire: add one for a while, list them, remove one",
		Subcommands: []*cli.Command{
			grantAddCommand(),
			grantLsCommand(),
			grantRmCommand(),
		},
	}
}

// grantAddCommand is `warden grant add`.
func grantAddCommand() *cli.Command {
	return &cli.Command{
		Name: "add", ArgsUsage: "CAP",
		Usage: "remember a grant for this workspace until it expires (--for 8h)",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "for", Usage: "how long it lasts (required; at most 720h)"},
			&cli.StringFlag{Name: "workspace", Usage: "the workspace it applies in (default: the current one)"},
			&cli.StringFlag{Name: "tool", Usage: "only calls of this tool"},
			env.JSONFlag,
		},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if e.CLI().NArg() != 1 {
				return env.UsageErr("usage: warden grant add CAP --for 8h [--workspace DIR] [--tool T]", "grant add needs one capability")
			}
			g, err := capability.Parse(e.CLI().Args().First())
			if err != nil {
				return env.UsageErr("see README \"Capabilities\" for the grammar", "%v", err)
			}
			d := e.CLI().Duration("for")
			if d <= 0 || d > gate.MaxTimedGrant {
				return env.UsageErr("say how long with --for (e.g. --for 8h; at most 720h)", "grant add needs --for between 1s and %s", gate.MaxTimedGrant)
			}
			ws := e.Workspace()
			if dir := e.CLI().String("workspace"); dir != "" {
				if ws, err = filepath.Abs(dir); err == nil {
					ws, err = filepath.EvalSymlinks(ws)
				}
				if err != nil {
					return env.UsageErr("name an existing directory", "--workspace: %v", err)
				}
			}
			toolName := e.CLI().String("tool")
			if toolName != "" {
				reg, err := e.Registry()
				if err != nil {
					return err
				}
				if !reg.Has(toolName) {
					return env.UsageErr("name a tool as `warden tools` lists it", "--tool %q: no such tool", toolName)
				}
				toolName = reg.Names(toolName)[0] // an alias stands for its tool
			}
			if why := g.Broad(); why != "" {
				fmt.Fprintf(e.Stderr(), "warden: warning: %s: %s\n", g, why)
			}
			now := time.Now().UTC()
			t := gate.TimedGrant{ID: "g-" + tool.NewID(), Kind: gate.TimedGrantKind, Grant: g.String(), Tool: toolName,
				Workspace: ws, Added: now, Expires: now.Add(d), By: grantOwner()}
			if err := e.Audit(ctx, "grant.add", t); err != nil {
				return err
			}
			if err := env.NewLazyStore(e.Store).PutGrant(ctx, t); err != nil {
				return err
			}
			if e.JSON() {
				return e.PrintJSON(t)
			}
			fmt.Fprintf(e.Stdout(), "%s: %s in %s until %s\n", t.ID, describeGrant(t), ws, t.Expires.Format(time.RFC3339))
			return nil
		}),
	}
}

// grantLsCommand is `warden grant ls`.
func grantLsCommand() *cli.Command {
	return &cli.Command{
		Name: "ls", Usage: "the grants and approvals remembered with an expiry, in every workspace (expired ones are not listed)",
		Flags: []cli.Flag{env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			all, err := env.NewLazyStore(e.Store).ListGrants(ctx)
			if err != nil {
				return err
			}
			now := time.Now()
			live := []gate.TimedGrant{}
			for _, t := range all {
				if now.Before(t.Expires) {
					live = append(live, t)
					continue
				}
				// Expired: removed, and on the record (once: another
				// process may have done both).
				if err := env.NewLazyStore(e.Store).DeleteGrant(ctx, t.ID); err == nil {
					if err := e.AuditAs(ctx, []string{"warden"}, gate.PhaseAdmin, "grant", map[string]string{"id": t.ID, "expired": t.String()}); err != nil {
						return err
					}
				}
			}
			if e.JSON() {
				return e.PrintJSON(live)
			}
			if len(live) == 0 {
				fmt.Fprintln(e.Stdout(), "no grants with an expiry")
			}
			for _, t := range live {
				fmt.Fprintf(e.Stdout(), "%s  %-40s  %s  until %s (%s left)\n", t.ID, describeGrant(t), t.Workspace,
					t.Expires.UTC().Format(time.RFC3339), time.Until(t.Expires).Round(time.Second))
			}
			return nil
		}),
	}
}

// grantRmCommand is `warden grant rm`.
func grantRmCommand() *cli.Command {
	return &cli.Command{
		Name: "rm", ArgsUsage: "ID", Usage: "remove a remembered grant or approval now",
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if e.CLI().NArg() != 1 {
				return env.UsageErr("usage: warden grant rm ID (see `warden grant ls`)", "grant rm needs one id")
			}
			id := e.CLI().Args().First()
			if err := env.NewLazyStore(e.Store).DeleteGrant(ctx, id); err != nil {
				return err
			}
			if err := e.Audit(ctx, "grant.rm", map[string]string{"id": id}); err != nil {
				return err
			}
			fmt.Fprintf(e.Stdout(), "removed %s\n", id)
			return nil
		}),
	}
}

// describeGrant renders a remembered grant or approval in a few words.
func describeGrant(t gate.TimedGrant) string {
	if t.Kind == gate.TimedApprovalKind {
		return "approval of " + t.Tool
	}
	if t.Tool != "" {
		return t.Grant + " for " + t.Tool
	}
	return t.Grant
}

// grantOwner names who added a grant, for the record.
func grantOwner() string {
	if u := os.Getenv("USER"); u != "" {
		return "user " + u
	}
	return "user"
}
