package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/store"
	"github.com/wardenrt/warden/store/postgres"
)

// The store backend: --store (WARDEN_STORE) says where state is kept — the
// bbolt file <home>/warden.db by default, or a PostgreSQL database shared
// by a fleet of hosts — and `warden store` migrates, copies and reports.

// storeSpec is a parsed --store value.
type storeSpec struct {
	kind string // "bbolt" or "postgres"
	path string // bbolt: the database file
	url  string // postgres
}

// parseStoreSpec reads a --store value: "" or "bbolt" (the file in home),
// "bbolt:PATH", or a postgres:// (postgresql://) URL.
func parseStoreSpec(s, home string) (storeSpec, error) {
	switch {
	case s == "" || s == "bbolt":
		return storeSpec{kind: "bbolt", path: filepath.Join(home, "warden.db")}, nil
	case strings.HasPrefix(s, "bbolt:"):
		p := strings.TrimPrefix(s, "bbolt:")
		if p == "" {
			return storeSpec{}, usageErr("write bbolt:PATH", "--store bbolt: needs a path")
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return storeSpec{}, usageErr("", "--store %s: %v", s, err)
		}
		return storeSpec{kind: "bbolt", path: abs}, nil
	case strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://"):
		return storeSpec{kind: "postgres", url: s}, nil
	}
	return storeSpec{}, usageErr("use bbolt, bbolt:PATH or postgres://USER@HOST:PORT/DB", "--store %q: unknown store", redactURL(s))
}

// storePassword returns the password a --store URL carries, if any, so
// that it is redacted wherever it might appear.
func storePassword(s string) []string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return nil
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		return []string{pw}
	}
	return nil
}

// redactURL hides a password in a URL-like string.
func redactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return s
	}
	user, _, hasPw := strings.Cut(rest[:at], ":")
	if !hasPw {
		return s
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

func (e *env) storeSpec() (storeSpec, error) {
	return parseStoreSpec(globalString(e.c, "store"), e.home)
}

// ownPaths are the files warden keeps for its owner, which no tool and no
// program may read or change whatever the grants: the home, a bbolt store
// kept elsewhere (--store bbolt:PATH) and its audit anchor, and a policy
// named with --policy.
func (e *env) ownPaths() []string {
	out := []string{e.home}
	if spec, err := e.storeSpec(); err == nil && spec.kind != "postgres" && spec.path != "" {
		out = append(out, spec.path, filepath.Join(filepath.Dir(spec.path), "audit.head"))
	}
	if f := globalString(e.c, "policy"); f != "" {
		if abs, err := filepath.Abs(f); err == nil {
			out = append(out, abs)
		}
	}
	return out
}

// openStore opens the store --store names. A PostgreSQL store keeps this
// host's audit anchors under <home>/anchors; WARDEN_HOST names the host
// (default: its host name).
func (e *env) openStore() (store.Backend, error) {
	spec, err := e.storeSpec()
	if err != nil {
		return nil, err
	}
	if spec.kind == "postgres" {
		return postgres.Open(e.ctx(), spec.url, &postgres.Options{AnchorDir: filepath.Join(e.home, "anchors"), Host: os.Getenv("WARDEN_HOST")})
	}
	timeout := defaultLockTimeout
	if e.c != nil {
		timeout = e.c.Duration("lock-timeout")
	}
	return store.OpenContext(e.ctx(), spec.path, &store.Options{Timeout: timeout})
}

func storeCommand() *cli.Command {
	return &cli.Command{
		Name:  "store",
		Usage: "the store backend: status, migrate a PostgreSQL store's schema, copy a bbolt store into PostgreSQL",
		Subcommands: []*cli.Command{
			{
				Name:   "status",
				Usage:  "backend, schema version, size, audit head, and how far this host's anchor lags it",
				Flags:  []cli.Flag{jsonFlag},
				Action: withEnv(storeStatus),
			},
			{
				Name: "migrate",
				Usage: "create or upgrade the warden schema of the PostgreSQL store --store names (idempotent; run it as the schema's owner, " +
					"and give warden's own role its privileges with --grant-to)",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "grant-to", Usage: "a `ROLE` to grant what warden needs (it may append audit records, never change or remove one)"},
					jsonFlag,
				},
				Action: withEnv(storeMigrate),
			},
			{
				Name:  "copy",
				Usage: "copy a bbolt store (audit log verbatim, memory, runs, artifacts, pins, grants, trust, jobs) into a PostgreSQL store whose log is empty, and verify the copy",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "from", Usage: "the source: bbolt:PATH (default: this home's warden.db)"},
					&cli.StringFlag{Name: "to", Usage: "the destination: postgres://… (default: --store)"},
					jsonFlag,
				},
				Action: withEnv(storeCopy),
			},
		},
	}
}

func storeStatus(ctx context.Context, e *env) error {
	spec, err := e.storeSpec()
	if err != nil {
		return err
	}
	st, err := e.store()
	if err != nil {
		return err
	}
	if pg, ok := st.(*postgres.Store); ok {
		s, err := pg.Status(ctx)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(s)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
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
	anchorPath := filepath.Join(filepath.Dir(spec.path), "audit.head")
	a, found, ok, _ := store.ReadAnchor(anchorPath)
	status := map[string]any{"backend": "bbolt", "path": s.Path, "format": "warden.store/v1", "size_bytes": s.SizeBytes,
		"audit_head_seq": s.AuditHeadSeq, "anchor_path": anchorPath, "anchor_seq": a.Seq, "anchor_lag": s.AuditHeadSeq - min(a.Seq, s.AuditHeadSeq)}
	if e.json {
		return e.printJSON(status)
	}
	anchor := fmt.Sprintf("#%d in %s (lag %d)", a.Seq, anchorPath, status["anchor_lag"])
	if !found || !ok {
		anchor = anchorPath + " missing or garbled: run `warden audit verify`"
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
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

func storeMigrate(ctx context.Context, e *env) error {
	spec, err := e.storeSpec()
	if err != nil {
		return err
	}
	if spec.kind != "postgres" {
		return usageErr("name the database: warden --store postgres://USER@HOST:PORT/DB store migrate (or set WARDEN_STORE)",
			"a bbolt store needs no migration")
	}
	res, err := postgres.Migrate(ctx, spec.url, &postgres.MigrateOptions{GrantTo: e.c.String("grant-to")})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(res)
	}
	if len(res.Applied) == 0 {
		fmt.Fprintf(e.stdout, "schema up to date: version %d (store %s)\n", res.To, res.StoreID)
	} else {
		fmt.Fprintf(e.stdout, "schema migrated from version %d to %d (store %s)\n", res.From, res.To, res.StoreID)
	}
	if g := e.c.String("grant-to"); g != "" {
		fmt.Fprintf(e.stdout, "granted %s what warden needs: it appends audit records and cannot change or remove them\n", g)
	}
	return nil
}

func storeCopy(ctx context.Context, e *env) error {
	from, to := e.c.String("from"), e.c.String("to")
	if from == "" {
		from = "bbolt"
	}
	if to == "" {
		to = globalString(e.c, "store")
	}
	src, err := parseStoreSpec(from, e.home)
	if err != nil {
		return err
	}
	dst, err := parseStoreSpec(to, e.home)
	if err != nil {
		return err
	}
	if src.kind != "bbolt" || dst.kind != "postgres" {
		return usageErr("warden store copy --from bbolt:PATH --to postgres://USER@HOST:PORT/DB", "copy goes from a bbolt store to a PostgreSQL store")
	}
	if _, err := os.Stat(src.path); err != nil {
		return usageErr("name an existing warden.db with --from bbolt:PATH", "%v", err)
	}
	s, err := store.Open(src.path, &store.Options{Timeout: e.c.Duration("lock-timeout")})
	if err != nil {
		return storeFailure(err)
	}
	defer s.Close()
	d, err := postgres.Open(ctx, dst.url, &postgres.Options{AnchorDir: filepath.Join(e.home, "anchors"), Host: os.Getenv("WARDEN_HOST")})
	if err != nil {
		return storeFailure(err)
	}
	defer d.Close()
	rep, err := d.CopyFrom(ctx, s, func(what string, n int) {
		if !e.json {
			fmt.Fprintf(e.stderr, "warden: copied %d %s\n", n, what)
		}
	})
	if err != nil {
		if errors.Is(err, store.ErrTampered) {
			return fail(tool.CodeAuditTampered, exitFailed, "run `warden audit verify` on the source; nothing unverified is copied", "%v", err)
		}
		if errors.Is(err, store.ErrInvalid) {
			return fail(tool.CodeInvalidInput, exitFailed, "copy into a new database (warden store migrate creates its schema)", "%v", err)
		}
		return err
	}
	// The copy itself goes on the copy's log.
	e.st = d
	if err := e.audit(ctx, "store.copy", map[string]any{"from": src.path, "to": d.URL(), "audit_head_seq": rep.AuditHeadSeq, "audit_head_hash": rep.AuditHeadHash}); err != nil {
		return err
	}
	e.st = nil
	if e.json {
		return e.printJSON(rep)
	}
	fmt.Fprintf(e.stdout, "copied %s to %s: %d audit records (head #%d %s, verified), %d memory entries, %d runs, %d artifacts, %d pins, %d grants, %d trust records, %d jobs\n",
		src.path, d.URL(), rep.AuditRecords, rep.AuditHeadSeq, short(rep.AuditHeadHash), rep.Memory, rep.Runs, rep.Artifacts, rep.Pins, rep.Grants, rep.Trust, rep.Jobs)
	return nil
}
