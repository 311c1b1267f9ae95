package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/store"
)

// runSummary is the part of a run record that listings show. Runs are
// written by `warden run` and `warden workflow run`.
type runSummary struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Task    string `json:"task"`
	Status  string `json:"status"`
	Started string `json:"started"`
	Steps   int    `json:"steps"`
}

func runsCommand() *cli.Command {
	return &cli.Command{
		Name:  "runs",
		Usage: "recorded agent and workflow runs",
		Subcommands: []*cli.Command{
			{
				Name: "ls", Usage: "list runs, newest first",
				Flags: []cli.Flag{&cli.IntFlag{Name: "limit", Value: 50}, jsonFlag},
				Action: withEnv(func(ctx context.Context, e *env) error {
					st, err := e.store()
					if err != nil {
						return err
					}
					docs, err := st.ListRuns(ctx, e.c.Int("limit"))
					if err != nil {
						return err
					}
					if e.json {
						if docs == nil {
							docs = []json.RawMessage{}
						}
						return e.printJSON(docs)
					}
					if len(docs) == 0 {
						fmt.Fprintln(e.stdout, "no runs yet: `warden run TASK` and `warden workflow run FILE` record theirs here")
						return nil
					}
					tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "ID\tKIND\tSTATUS\tSTARTED\tSTEPS\tTASK")
					for _, d := range docs {
						var r runSummary
						_ = json.Unmarshal(d, &r)
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", r.ID, r.Kind, r.Status, r.Started, r.Steps, oneLine(r.Task, 50))
					}
					return tw.Flush()
				}),
			},
			{
				Name: "show", Usage: "show one run", ArgsUsage: "ID",
				Flags: []cli.Flag{jsonFlag},
				Action: withEnv(func(ctx context.Context, e *env) error {
					if e.c.NArg() != 1 {
						return usageErr("usage: warden runs show ID (see `warden runs ls`)", "runs show needs one run id")
					}
					st, err := e.store()
					if err != nil {
						return err
					}
					doc, err := st.Run(ctx, e.c.Args().First())
					if err != nil {
						return err
					}
					return e.printJSON(doc)
				}),
			},
			{
				Name: "export", Usage: "write a run's record and its audit excerpt to DIR/<run_id>/", ArgsUsage: "ID",
				Flags: []cli.Flag{&cli.StringFlag{Name: "dir", Value: "artifacts", Usage: "parent directory"}, jsonFlag},
				Action: withEnv(func(ctx context.Context, e *env) error {
					if e.c.NArg() != 1 {
						return usageErr("usage: warden runs export ID [--dir artifacts]", "runs export needs one run id")
					}
					id := e.c.Args().First()
					if filepath.Base(id) != id || id == "." || id == ".." {
						return usageErr("", "invalid run id %q", id)
					}
					st, err := e.store()
					if err != nil {
						return err
					}
					doc, err := st.Run(ctx, id)
					if err != nil {
						return err
					}
					dir := filepath.Join(e.c.String("dir"), id)
					if err := os.MkdirAll(dir, 0o700); err != nil {
						return usageErr("choose a writable --dir", "%v", err)
					}
					if err := os.WriteFile(filepath.Join(dir, "run.json"), doc, 0o600); err != nil {
						return err
					}
					f, err := os.OpenFile(filepath.Join(dir, "audit.jsonl"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
					if err != nil {
						return err
					}
					defer f.Close()
					recs, err := st.ListAudit(ctx, store.AuditFilter{RunID: id})
					if err != nil {
						return err
					}
					enc := json.NewEncoder(f)
					for _, r := range recs {
						if err := enc.Encode(r); err != nil {
							return err
						}
					}
					if e.json {
						return e.printJSON(map[string]any{"dir": dir, "audit_records": len(recs)})
					}
					fmt.Fprintf(e.stdout, "exported run %s to %s (%d audit records)\n", id, dir, len(recs))
					return nil
				}),
			},
		},
	}
}
