package main

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
	"github.com/wardenrt/warden/store"
)

func memoryCommand() *cli.Command {
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
func memoryArgs(e *env, n int, usage string) error {
	if e.c.NArg() != n {
		return usageErr("usage: warden memory "+usage, "wrong number of arguments")
	}
	return nil
}

// memoryPutCommand is `warden memory put`.
func memoryPutCommand(nsFlag cli.Flag) *cli.Command {
	return &cli.Command{
		Name: "put", Usage: "store a value (secrets in it are redacted first)", ArgsUsage: "KEY VALUE",
		Flags: []cli.Flag{nsFlag, jsonFlag},
		Action: withEnv(func(ctx context.Context, e *env) error {
			if err := memoryArgs(e, 2, "put KEY VALUE [--ns NS]"); err != nil {
				return err
			}
			st, err := e.store()
			if err != nil {
				return err
			}
			ns, key := e.c.String("ns"), e.c.Args().Get(0)
			if e.redactor.Contains(ns) || e.redactor.Contains(key) {
				return usageErr("choose a key and namespace that are not secrets (the value is redacted, names are not)", "the key or namespace looks like a secret")
			}
			value := e.redactor.String(e.c.Args().Get(1))
			if err := st.PutMemory(ctx, ns, key, value); err != nil {
				if errors.Is(err, store.ErrInvalid) {
					return usageErr("namespaces and keys are 1-256 bytes of text without NUL", "%v", err)
				}
				return err
			}
			sum := sha256.Sum256([]byte(value))
			if err := e.audit(ctx, "memory.put", map[string]any{"ns": ns, "key": key, "value_sha256": hex.EncodeToString(sum[:]), "value_bytes": len(value)}); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(map[string]any{"ns": ns, "key": key, "stored": true})
			}
			fmt.Fprintf(e.stdout, "stored %s/%s\n", ns, key)
			return nil
		}),
	}
}

// memoryGetCommand is `warden memory get`.
func memoryGetCommand(nsFlag cli.Flag) *cli.Command {
	return &cli.Command{
		Name: "get", Usage: "print a value", ArgsUsage: "KEY",
		Flags: []cli.Flag{nsFlag, jsonFlag},
		Action: withEnv(func(ctx context.Context, e *env) error {
			if err := memoryArgs(e, 1, "get KEY [--ns NS]"); err != nil {
				return err
			}
			st, err := e.store()
			if err != nil {
				return err
			}
			m, err := st.GetMemory(ctx, e.c.String("ns"), e.c.Args().First())
			if err != nil {
				return err
			}
			if e.json {
				return e.printJSON(m)
			}
			fmt.Fprintln(e.stdout, m.Value)
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
			jsonFlag,
		},
		Action: withEnv(func(ctx context.Context, e *env) error {
			if e.c.NArg() == 0 {
				return usageErr("usage: warden memory search QUERY [--ns GLOB] [--limit N]", "search needs a query")
			}
			st, err := e.store()
			if err != nil {
				return err
			}
			glob := e.c.String("ns")
			if _, err := path.Match(glob, ""); err != nil {
				return usageErr("", "--ns %q: %v", glob, err)
			}
			hits, err := st.SearchMemory(ctx, store.MemoryQuery{
				Text:      strings.Join(e.c.Args().Slice(), " "),
				Namespace: func(ns string) bool { ok, _ := path.Match(glob, ns); return ok },
				Limit:     e.c.Int("limit"),
			})
			if err != nil {
				return err
			}
			if e.json {
				if hits == nil {
					hits = []store.MemoryHit{}
				}
				return e.printJSON(hits)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SCORE\tNS\tKEY\tVALUE")
			for _, h := range hits {
				fmt.Fprintf(tw, "%.3f\t%s\t%s\t%s\n", h.Score, h.Namespace, h.Key, oneLine(h.Value, 60))
			}
			return tw.Flush()
		}),
	}
}

// memoryLsCommand is `warden memory ls`.
func memoryLsCommand() *cli.Command {
	return &cli.Command{
		Name: "ls", Usage: "list entries",
		Flags: []cli.Flag{&cli.StringFlag{Name: "ns", Usage: "only this namespace (default: all)"}, &cli.IntFlag{Name: "limit"}, jsonFlag},
		Action: withEnv(func(ctx context.Context, e *env) error {
			st, err := e.store()
			if err != nil {
				return err
			}
			ms, err := st.ListMemory(ctx, e.c.String("ns"), e.c.Int("limit"))
			if err != nil {
				return err
			}
			if e.json {
				if ms == nil {
					ms = []store.MemoryEntry{}
				}
				return e.printJSON(ms)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NS\tKEY\tUPDATED\tVALUE")
			for _, m := range ms {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Namespace, m.Key, m.Updated.Local().Format("2006-01-02 15:04"), oneLine(m.Value, 60))
			}
			return tw.Flush()
		}),
	}
}

// memoryIndexCommand is `warden memory index`.
func memoryIndexCommand() *cli.Command {
	return &cli.Command{
		Name: "index", Usage: "index the workspace's text files for get_context (incremental: only changed files are read)",
		Flags: []cli.Flag{jsonFlag},
		Action: withEnv(func(ctx context.Context, e *env) error {
			p, err := e.policy()
			if err != nil {
				return err
			}
			// What the policy hides (an untrusted workspace policy's
			// list too) and warden's own files are never indexed.
			_, hide := p.PathRules(e.ownPaths()...)
			stats, err := builtin.IndexWorkspace(ctx, lazyStore{open: e.store}, e.workspace, &builtin.IndexOptions{Hide: hide})
			if err != nil {
				return err
			}
			if err := e.audit(ctx, "memory.index", map[string]any{"workspace": e.workspace, "files": stats.Files}); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(stats)
			}
			fmt.Fprintf(e.stdout, "indexed %s: %d files (%d added, %d updated, %d unchanged, %d removed, %d skipped)\n",
				stats.Workspace, stats.Files, stats.Added, stats.Updated, stats.Unchanged, stats.Removed, stats.Skipped)
			if stats.Truncated {
				fmt.Fprintln(e.stdout, "note: the file limit was reached; some files are not indexed")
			}
			return nil
		}),
	}
}

// memoryRmCommand is `warden memory rm`.
func memoryRmCommand(nsFlag cli.Flag) *cli.Command {
	return &cli.Command{
		Name: "rm", Usage: "remove an entry", ArgsUsage: "KEY",
		Flags: []cli.Flag{nsFlag, jsonFlag},
		Action: withEnv(func(ctx context.Context, e *env) error {
			if err := memoryArgs(e, 1, "rm KEY [--ns NS]"); err != nil {
				return err
			}
			st, err := e.store()
			if err != nil {
				return err
			}
			ns, key := e.c.String("ns"), e.c.Args().First()
			if err := st.DeleteMemory(ctx, ns, key); err != nil {
				return err
			}
			if err := e.audit(ctx, "memory.rm", map[string]any{"ns": ns, "key": key}); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(map[string]any{"ns": ns, "key": key, "removed": true})
			}
			fmt.Fprintf(e.stdout, "removed %s/%s\n", ns, key)
			return nil
		}),
	}
}

func oneLine(s string, n int) string {
	s = printable(strings.Join(strings.Fields(s), " "))
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
