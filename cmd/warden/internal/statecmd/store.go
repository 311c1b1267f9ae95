package statecmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/store"
	"github.com/wardenrt/warden/store/postgres"
)

// The store backend: --store (WARDEN_STORE) says where state is kept — the
// bbolt file <home>/warden.db by default, or a PostgreSQL database shared
// by a fleet of hosts — and `warden store` migrates, copies and reports.

// StoreCommand is `warden store`.
func StoreCommand() *cli.Command {
	return &cli.Command{
		Name:  "store",
		Usage: "the store backend: status, migrate a PostgreSQL store's schema, copy a bbolt store into PostgreSQL",
		Subcommands: []*cli.Command{
			{
				Name:   "status",
				Usage:  "backend, schema version, size, audit head, and how far this host's anchor lags it",
				Flags:  []cli.Flag{env.JSONFlag},
				Action: env.With(storeStatus),
			},
			{
				Name: "migrate",
				Usage: "create or upgrade the warden schema of the PostgreSQL store --store names (idempotent; run it as the schema's owner, " +
					"and give warden's own role its privileges with --grant-to)",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "grant-to", Usage: "a `ROLE` to grant what warden needs (it may append audit records, never change or remove one)"},
					env.JSONFlag,
				},
				Action: env.With(storeMigrate),
			},
			{
				Name:  "copy",
				Usage: "copy a bbolt store (audit log verbatim, memory, runs, artifacts, pins, grants, trust, jobs) into a PostgreSQL store whose log is empty, and verify the copy",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "from", Usage: "the source: bbolt:PATH (default: this home's warden.db)"},
					&cli.StringFlag{Name: "to", Usage: "the destination: postgres://… (default: --store)"},
					env.JSONFlag,
				},
				Action: env.With(storeCopy),
			},
		},
	}
}

func storeStatus(ctx context.Context, e *env.Env) error {
	spec, err := e.StoreSpec()
	if err != nil {
		return err
	}
	st, err := e.Store()
	if err != nil {
		return err
	}
	if pg, ok := st.(*postgres.Store); ok {
		s, err := pg.Status(ctx)
		if err != nil {
			return err
		}
		if e.JSON() {
			return e.PrintJSON(s)
		}
		tw := tabwriter.NewWriter(e.Stdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "backend\tpostgres (PostgreSQL %s, round trip %s)\n", s.Server, s.Latency)
		fmt.Fprintf(tw, "store\t%s (id %s, schema version %d)\n", s.URL, s.StoreID, s.SchemaVersion)
		fmt.Fprintf(tw, "size\t%s\n", humanBytes(s.SizeBytes))
		fmt.Fprintf(tw, "audit head\t#%d\n", s.AuditHeadSeq)
		fmt.Fprintf(tw, "this host\t%s: anchor #%d in %s (lag %d)\n", s.Host, s.AnchorSeq, s.AnchorPath, s.AnchorLag)
		for _, h := range s.Hosts {
			fmt.Fprintf(tw, "host\t%s: anchor #%d (lag %d), %s\n", h.Host, h.Seq, s.AuditHeadSeq-min(h.Seq, s.AuditHeadSeq), h.Updated.Local().Format("2006-01-02 15:04:05"))
		}
		return tw.Flush()
	}
	s, err := st.Stats(ctx)
	if err != nil {
		return err
	}
	anchorPath := filepath.Join(filepath.Dir(spec.Path), "audit.head")
	a, found, ok, _ := store.ReadAnchor(anchorPath)
	status := map[string]any{"backend": "bbolt", "path": s.Path, "format": "warden.store/v1", "size_bytes": s.SizeBytes,
		"audit_head_seq": s.AuditHeadSeq, "anchor_path": anchorPath, "anchor_seq": a.Seq, "anchor_lag": s.AuditHeadSeq - min(a.Seq, s.AuditHeadSeq)}
	if e.JSON() {
		return e.PrintJSON(status)
	}
	anchor := fmt.Sprintf("#%d in %s (lag %d)", a.Seq, anchorPath, status["anchor_lag"])
	if !found || !ok {
		anchor = anchorPath + " missing or garbled: run `warden audit verify`"
	}
	tw := tabwriter.NewWriter(e.Stdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "backend\tbbolt (format warden.store/v1)\nstore\t%s\nsize\t%s\naudit head\t#%d\nanchor\t%s\n", s.Path, humanBytes(s.SizeBytes), s.AuditHeadSeq, anchor)
	return tw.Flush()
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func storeMigrate(ctx context.Context, e *env.Env) error {
	spec, err := e.StoreSpec()
	if err != nil {
		return err
	}
	if spec.Kind != "postgres" {
		return env.UsageErr("name the database: warden --store postgres://USER@HOST:PORT/DB store migrate (or set WARDEN_STORE)",
			"a bbolt store needs no migration")
	}
	res, err := postgres.Migrate(ctx, spec.URL, &postgres.MigrateOptions{GrantTo: e.CLI().String("grant-to")})
	if err != nil {
		return err
	}
	if e.JSON() {
		return e.PrintJSON(res)
	}
	if len(res.Applied) == 0 {
		fmt.Fprintf(e.Stdout(), "schema up to date: version %d (store %s)\n", res.To, res.StoreID)
	} else {
		fmt.Fprintf(e.Stdout(), "schema migrated from version %d to %d (store %s)\n", res.From, res.To, res.StoreID)
	}
	if g := e.CLI().String("grant-to"); g != "" {
		fmt.Fprintf(e.Stdout(), "granted %s what warden needs: it appends audit records and cannot change or remove them\n", g)
	}
	return nil
}

func storeCopy(ctx context.Context, e *env.Env) error {
	from, to := e.CLI().String("from"), e.CLI().String("to")
	if from == "" {
		from = "bbolt"
	}
	if to == "" {
		to = env.GlobalString(e.CLI(), "store")
	}
	src, err := env.ParseStoreSpec(from, e.Home())
	if err != nil {
		return err
	}
	dst, err := env.ParseStoreSpec(to, e.Home())
	if err != nil {
		return err
	}
	if src.Kind != "bbolt" || dst.Kind != "postgres" {
		return env.UsageErr("warden store copy --from bbolt:PATH --to postgres://USER@HOST:PORT/DB", "copy goes from a bbolt store to a PostgreSQL store")
	}
	if _, err := os.Stat(src.Path); err != nil {
		return env.UsageErr("name an existing warden.db with --from bbolt:PATH", "%v", err)
	}
	s, err := store.Open(src.Path, &store.Options{Timeout: e.CLI().Duration("lock-timeout")})
	if err != nil {
		return env.StoreFailure(err)
	}
	defer s.Close()
	d, err := postgres.Open(ctx, dst.URL, &postgres.Options{AnchorDir: filepath.Join(e.Home(), "anchors"), Host: os.Getenv("WARDEN_HOST")})
	if err != nil {
		return env.StoreFailure(err)
	}
	defer d.Close()
	rep, err := d.CopyFrom(ctx, s, func(what string, n int) {
		if !e.JSON() {
			fmt.Fprintf(e.Stderr(), "warden: copied %d %s\n", n, what)
		}
	})
	if err != nil {
		if errors.Is(err, store.ErrTampered) {
			return env.Fail(tool.CodeAuditTampered, env.ExitFailed, "run `warden audit verify` on the source; nothing unverified is copied", "%v", err)
		}
		if errors.Is(err, store.ErrInvalid) {
			return env.Fail(tool.CodeInvalidInput, env.ExitFailed, "copy into a new database (warden store migrate creates its schema)", "%v", err)
		}
		return err
	}
	// The copy itself goes on the copy's log.
	e.SetStore(d)
	if err := e.Audit(ctx, "store.copy", map[string]any{"from": src.Path, "to": d.URL(), "audit_head_seq": rep.AuditHeadSeq, "audit_head_hash": rep.AuditHeadHash}); err != nil {
		return err
	}
	e.SetStore(nil)
	if e.JSON() {
		return e.PrintJSON(rep)
	}
	fmt.Fprintf(e.Stdout(), "copied %s to %s: %d audit records (head #%d %s, verified), %d memory entries, %d runs, %d artifacts, %d pins, %d grants, %d trust records, %d jobs\n",
		src.Path, d.URL(), rep.AuditRecords, rep.AuditHeadSeq, short(rep.AuditHeadHash), rep.Memory, rep.Runs, rep.Artifacts, rep.Pins, rep.Grants, rep.Trust, rep.Jobs)
	return nil
}
