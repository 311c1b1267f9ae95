package statecmd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/builtin"
	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/store"
)

// MemoryCommand is `warden memory`.
func MemoryCommand() *cli.Command {
	nsFlag := &cli.StringFlag{Name: "ns", Value: "default", Usage: "namespace"}
	return &cli.Command{
		Name:  "memory",
		Usage: "the owner's access to warden's memory (namespaced notes with ranked search)",
		Subcommands: []*cli.Command{
			memoryPutCommand(nsFlag),
			memoryGetCommand(nsFlag),
			memorySearchCommand(),
			memoryLsCommand(),
			memoryIndexCommand(),
			memoryRmCommand(nsFlag),
		},
	}
}

// memoryArgs checks that a memory subcommand got n arguments; usage is its
// synopsis after `warden memory`.
func memoryArgs(e *env.Env, n int, usage string) error {
	if e.CLI().NArg() != n {
		return env.UsageErr("usage: warden memory "+usage, "wrong number of arguments")
	}
	return nil
}

// memoryPutCommand is `warden memory put`.
func memoryPutCommand(nsFlag cli.Flag) *cli.Command {
	return &cli.Command{
		Name: "put", Usage: "store a value (secrets in it are redacted first)", ArgsUsage: "KEY VALUE",
		Flags: []cli.Flag{nsFlag, env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if err := memoryArgs(e, 2, "put KEY VALUE [--ns NS]"); err != nil {
				return err
			}
			st, err := e.Store()
			if err != nil {
				return err
			}
			ns, key := e.CLI().String("ns"), e.CLI().Args().Get(0)
			if e.Redactor().Contains(ns) || e.Redactor().Contains(key) {
				return env.UsageErr("choose a key and namespace that are not secrets (the value is redacted, names are not)", "the key or namespace looks like a secret")
			}
			value := e.Redactor().String(e.CLI().Args().Get(1))
			if err := st.PutMemory(ctx, ns, key, value); err != nil {
				if errors.Is(err, store.ErrInvalid) {
					return env.UsageErr("namespaces and keys are 1-256 bytes of text without NUL", "%v", err)
				}
				return err
			}
			sum := sha256.Sum256([]byte(value))
			if err := e.Audit(ctx, "memory.put", map[string]any{"ns": ns, "key": key, "value_sha256": hex.EncodeToString(sum[:]), "value_bytes": len(value)}); err != nil {
				return err
			}
			if e.JSON() {
				return e.PrintJSON(map[string]any{"ns": ns, "key": key, "stored": true})
			}
			fmt.Fprintf(e.Stdout(), "stored %s/%s\n", ns, key)
			return nil
		}),
	}
}

// memoryGetCommand is `warden memory get`.
func memoryGetCommand(nsFlag cli.Flag) *cli.Command {
	return &cli.Command{
		Name: "get", Usage: "print a value", ArgsUsage: "KEY",
		Flags: []cli.Flag{nsFlag, env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if err := memoryArgs(e, 1, "get KEY [--ns NS]"); err != nil {
				return err
			}
			st, err := e.Store()
			if err != nil {
				return err
			}
			m, err := st.GetMemory(ctx, e.CLI().String("ns"), e.CLI().Args().First())
			if err != nil {
				return err
			}
			if e.JSON() {
				return e.PrintJSON(m)
			}
			fmt.Fprintln(e.Stdout(), m.Value)
			return nil
		}),
	}
}

// memorySearchCommand is `warden memory search`.
func memorySearchCommand() *cli.Command {
	return &cli.Command{
		Name: "search", Usage: "ranked text search (BM25)", ArgsUsage: "QUERY",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "ns", Value: "*", Usage: "namespace glob"},
			&cli.IntFlag{Name: "limit", Value: 10},
			env.JSONFlag,
		},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if e.CLI().NArg() == 0 {
				return env.UsageErr("usage: warden memory search QUERY [--ns GLOB] [--limit N]", "search needs a query")
			}
			st, err := e.Store()
			if err != nil {
				return err
			}
			glob := e.CLI().String("ns")
			if _, err := path.Match(glob, ""); err != nil {
				return env.UsageErr("", "--ns %q: %v", glob, err)
			}
			hits, err := st.SearchMemory(ctx, store.MemoryQuery{
				Text:      strings.Join(e.CLI().Args().Slice(), " "),
				Namespace: func(ns string) bool { ok, _ := path.Match(glob, ns); return ok },
				Limit:     e.CLI().Int("limit"),
			})
			if err != nil {
				return err
			}
			if e.JSON() {
				if hits == nil {
					hits = []store.MemoryHit{}
				}
				return e.PrintJSON(hits)
			}
			tw := tabwriter.NewWriter(e.Stdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SCORE\tNS\tKEY\tVALUE")
			for _, h := range hits {
				fmt.Fprintf(tw, "%.3f\t%s\t%s\t%s\n", h.Score, h.Namespace, h.Key, ui.OneLine(h.Value, 60))
			}
			return tw.Flush()
		}),
	}
}

// memoryLsCommand is `warden memory ls`.
func memoryLsCommand() *cli.Command {
	return &cli.Command{
		Name: "ls", Usage: "list entries",
		Flags: []cli.Flag{&cli.StringFlag{Name: "ns", Usage: "only this namespace (default: all)"}, &cli.IntFlag{Name: "limit"}, env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			st, err := e.Store()
			if err != nil {
				return err
			}
			ms, err := st.ListMemory(ctx, e.CLI().String("ns"), e.CLI().Int("limit"))
			if err != nil {
				return err
			}
			if e.JSON() {
				if ms == nil {
					ms = []store.MemoryEntry{}
				}
				return e.PrintJSON(ms)
			}
			tw := tabwriter.NewWriter(e.Stdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NS\tKEY\tUPDATED\tVALUE")
			for _, m := range ms {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Namespace, m.Key, m.Updated.Local().Format("2006-01-02 15:04"), ui.OneLine(m.Value, 60))
			}
			return tw.Flush()
		}),
	}
}

// memoryIndexCommand is `warden memory index`.
func memoryIndexCommand() *cli.Command {
	return &cli.Command{
		Name: "index", Usage: "index the workspace's text files for get_context (incremental: only changed files are read)",
		Flags: []cli.Flag{env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			p, err := e.Policy()
			if err != nil {
				return err
			}
			// What the policy hides (an untrusted workspace policy's
			// list too) and warden's own files are never indexed.
			_, hide := p.PathRules(e.OwnPaths()...)
			stats, err := builtin.IndexWorkspace(ctx, env.NewLazyStore(e.Store), e.Workspace(), &builtin.IndexOptions{Hide: hide})
			if err != nil {
				return err
			}
			if err := e.Audit(ctx, "memory.index", map[string]any{"workspace": e.Workspace(), "files": stats.Files}); err != nil {
				return err
			}
			if e.JSON() {
				return e.PrintJSON(stats)
			}
			fmt.Fprintf(e.Stdout(), "indexed %s: %d files (%d added, %d updated, %d unchanged, %d removed, %d skipped)\n",
				stats.Workspace, stats.Files, stats.Added, stats.Updated, stats.Unchanged, stats.Removed, stats.Skipped)
			if stats.Truncated {
				fmt.Fprintln(e.Stdout(), "note: the file limit was reached; some files are not indexed")
			}
			return nil
		}),
	}
}

// memoryRmCommand is `warden memory rm`.
func memoryRmCommand(nsFlag cli.Flag) *cli.Command {
	return &cli.Command{
		Name: "rm", Usage: "remove an entry", ArgsUsage: "KEY",
		Flags: []cli.Flag{nsFlag, env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if err := memoryArgs(e, 1, "rm KEY [--ns NS]"); err != nil {
				return err
			}
			st, err := e.Store()
			if err != nil {
				return err
			}
			ns, key := e.CLI().String("ns"), e.CLI().Args().First()
			if err := st.DeleteMemory(ctx, ns, key); err != nil {
				return err
			}
			if err := e.Audit(ctx, "memory.rm", map[string]any{"ns": ns, "key": key}); err != nil {
				return err
			}
			if e.JSON() {
				return e.PrintJSON(map[string]any{"ns": ns, "key": key, "removed": true})
			}
			fmt.Fprintf(e.Stdout(), "removed %s/%s\n", ns, key)
			return nil
		}),
	}
}
