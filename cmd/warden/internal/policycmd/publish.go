package policycmd

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/runtime/policy"
)

func policyPublishCommand() *cli.Command {
	return &cli.Command{
		Name:      "publish",
		ArgsUsage: "[FILE]",
		Usage: "publish a policy (default <home>/policy.yaml) to every host sharing this PostgreSQL store: each writes it as its home policy " +
			"(unless its own was edited there); daemons use it from their next run, a running mcp serve from its restart",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "remove", Usage: "stop publishing: hosts keep the policy they have"},
			env.JSONFlag,
		},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			pg := e.PGStore()
			if pg == nil {
				if _, err := e.Store(); err != nil {
					return err
				}
				return env.UsageErr("use --store postgres://… (WARDEN_STORE): a fleet shares a PostgreSQL store", "a bbolt store is this host's alone: there is no fleet to publish to")
			}
			if e.CLI().Bool("remove") {
				if err := pg.Unpublish(ctx, env.PublishedPolicy); err != nil {
					return err
				}
				if err := e.Audit(ctx, "policy.unpublish", map[string]string{}); err != nil {
					return err
				}
				fmt.Fprintln(e.Stdout(), "the policy is no longer published; hosts keep the one they have")
				return nil
			}
			file := e.CLI().Args().First()
			if file == "" {
				file = filepath.Join(e.Home(), env.PublishedPolicy)
			}
			data, err := policy.ReadPolicyFile(file)
			if err != nil {
				return env.UsageErr("name a policy file", "%v", err)
			}
			if _, err := policy.ParsePolicy(file, data); err != nil {
				return env.UsageErr("fix the policy file; check it with `warden policy check "+file+"`", "%v", err)
			}
			p, err := pg.Publish(ctx, env.PublishedPolicy, data)
			if err != nil {
				return err
			}
			if err := e.Audit(ctx, "policy.publish", map[string]string{"file": file, "sha256": p.SHA256}); err != nil {
				return err
			}
			if err := e.NotePublishedPolicy(file, p.SHA256); err != nil {
				return err
			}
			if file != filepath.Join(e.Home(), env.PublishedPolicy) {
				e.FleetResync(ctx) // this host takes it too
			}
			if e.JSON() {
				return e.PrintJSON(p)
			}
			fmt.Fprintf(e.Stdout(), "published %s (sha256 %s) to every host of %s\n", file, ui.Short16(p.SHA256), pg.URL())
			return nil
		}),
	}
}
