package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/runtime/agent"
	"github.com/wardenrt/warden/runtime/redact"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/workflow"
	"github.com/wardenrt/warden/store"
)

// RunSummary is the part of a run record that listings show. Runs are
// written by `warden run` and `warden workflow run`.
type RunSummary struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Task    string `json:"task"`
	Status  string `json:"status"`
	Started string `json:"started"`
	Steps   int    `json:"steps"`
}

// RunsCommand is `warden runs`.
func RunsCommand() *cli.Command {
	return &cli.Command{
		Name:  "runs",
		Usage: "recorded agent and workflow runs",
		Subcommands: []*cli.Command{
			runsLsCommand(),
			runsShowCommand(),
			runsExportCommand(),
			runsReplayCommand(),
		},
	}
}

// runsLsCommand is `warden runs ls`.
func runsLsCommand() *cli.Command {
	return &cli.Command{
		Name: "ls", Usage: "list runs, newest first",
		Flags: []cli.Flag{&cli.IntFlag{Name: "limit", Value: 50}, env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			st, err := e.Store()
			if err != nil {
				return err
			}
			docs, err := st.ListRuns(ctx, e.CLI().Int("limit"))
			if err != nil {
				return err
			}
			if e.JSON() {
				if docs == nil {
					docs = []json.RawMessage{}
				}
				return e.PrintJSON(docs)
			}
			if len(docs) == 0 {
				fmt.Fprintln(e.Stdout(), "no runs yet: `warden run TASK` and `warden workflow run FILE` record theirs here")
				return nil
			}
			tw := tabwriter.NewWriter(e.Stdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tKIND\tSTATUS\tSTARTED\tSTEPS\tTASK")
			for _, d := range docs {
				var r RunSummary
				_ = json.Unmarshal(d, &r)
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", r.ID, r.Kind, r.Status, r.Started, r.Steps, ui.OneLine(r.Task, 50))
			}
			return tw.Flush()
		}),
	}
}

// runsShowCommand is `warden runs show`.
func runsShowCommand() *cli.Command {
	return &cli.Command{
		Name: "show", Usage: "show one run: status, usage, each tool call with its audit record, the final answer (--json: the whole record)", ArgsUsage: "ID",
		Flags: []cli.Flag{env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			doc, err := runDoc(ctx, e, "warden runs show ID (see `warden runs ls`)")
			if err != nil {
				return err
			}
			if e.JSON() {
				return e.PrintJSON(doc)
			}
			if runKind(doc) == "workflow" {
				var wr workflow.Record
				if err := json.Unmarshal(doc, &wr); err != nil {
					return env.Fail(tool.CodeStoreCorrupt, env.ExitFailed, "", "run %s: %v", e.CLI().Args().First(), err)
				}
				showWorkflowRun(e.Stdout(), &wr)
				return nil
			}
			var rec agent.Record
			if err := json.Unmarshal(doc, &rec); err != nil {
				return env.Fail(tool.CodeStoreCorrupt, env.ExitFailed, "", "run %s: %v", e.CLI().Args().First(), err)
			}
			showRun(e.Stdout(), &rec)
			return nil
		}),
	}
}

// runsExportCommand is `warden runs export`.
func runsExportCommand() *cli.Command {
	return &cli.Command{
		Name: "export", Usage: "write a run to DIR/<run_id>/: run.json, audit.jsonl, and transcript.jsonl, final.md, tool-outputs/ (agent runs) or steps.jsonl, outputs.json (workflow runs)", ArgsUsage: "ID",
		Flags: []cli.Flag{&cli.StringFlag{Name: "dir", Value: "artifacts", Usage: "parent directory"}, env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			doc, err := runDoc(ctx, e, "warden runs export ID [--dir artifacts]")
			if err != nil {
				return err
			}
			id := e.CLI().Args().First()
			if filepath.Base(id) != id || id == "." || id == ".." {
				return env.UsageErr("", "invalid run id %q", id)
			}
			st, err := e.Store()
			if err != nil {
				return err
			}
			dir := filepath.Join(e.CLI().String("dir"), id)
			n, err := exportRun(ctx, st, e.Redactor(), id, doc, dir)
			if err != nil {
				return err
			}
			if e.JSON() {
				return e.PrintJSON(map[string]any{"dir": dir, "audit_records": n})
			}
			fmt.Fprintf(e.Stdout(), "exported run %s to %s (%d audit records)\n", id, dir, n)
			return nil
		}),
	}
}

// runsReplayCommand is `warden runs replay`.
func runsReplayCommand() *cli.Command {
	return &cli.Command{
		Name: "replay", Usage: "re-run a recorded agent run offline: the recorded model answers, their tool calls through today's gate (dry runs unless --live); reports where results differ", ArgsUsage: "ID",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "live", Usage: "execute the calls instead of previewing them (with the arguments as recorded: redacted secrets stay redacted)"}, env.JSONFlag},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			doc, err := runDoc(ctx, e, "warden runs replay ID [--live]")
			if err != nil {
				return err
			}
			st, err := e.Store()
			if err != nil {
				return err
			}
			var rec agent.Record
			if err := json.Unmarshal(doc, &rec); err != nil {
				return env.Fail(tool.CodeStoreCorrupt, env.ExitFailed, "", "run %s: %v", e.CLI().Args().First(), err)
			}
			if len(rec.Responses) == 0 {
				return env.UsageErr("only agent runs (warden run) record model answers", "run %s has no recorded model answers to replay", rec.ID)
			}
			g, err := e.Gate()
			if err != nil {
				return err
			}
			view := newRunView(e.Stdout(), e.Stderr(), !e.JSON())
			defer view.stop()
			mem := env.NewLazyStore(e.Store)
			out, err := agent.Replay(ctx, &rec, agent.Options{
				Gate: g, DryRun: !e.CLI().Bool("live"), Principal: []string{"cli", "replay"}, RunID: tool.NewID(),
				Runs: e.TrackRuns(st), Artifacts: mem, Memory: mem, Redactor: e.Redactor(), Events: view.event,
			})
			view.stop()
			if err != nil {
				return err
			}
			if e.JSON() {
				if err := e.PrintJSON(runSummaryOf(out)); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(e.Stdout(), "replay %s of run %s: %s, %d tool call(s), %d difference(s)\n", out.ID, rec.ID, out.Status, len(out.ToolCalls), len(out.Diffs))
				for _, d := range out.Diffs {
					fmt.Fprintf(e.Stdout(), "  %s\n", ui.Printable(d.String()))
				}
			}
			if len(out.Diffs) > 0 {
				return env.Fail(tool.CodeToolError, env.ExitFailed, "see `warden runs show "+out.ID+"`", "the replay differs from run %s in %d place(s)", rec.ID, len(out.Diffs))
			}
			return nil
		}),
	}
}

// showRun prints a run for a person.
func showRun(w io.Writer, rec *agent.Record) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t%s\n", k, ui.Printable(fmt.Sprintf(format, args...)))
	}
	row("run", "%s (%s)", rec.ID, rec.Kind)
	if rec.ReplayOf != "" {
		row("replay of", "%s", rec.ReplayOf)
	}
	row("task", "%s", ui.OneLine(rec.Task, 200))
	row("status", "%s", rec.Status)
	if rec.Error != nil {
		row("error", "%s: %s", rec.Error.Code, rec.Error.Message)
	}
	row("model", "%s at %s", rec.Model, rec.Endpoint)
	row("started", "%s", rec.Started.Format(time.RFC3339))
	if rec.Ended != nil {
		row("ended", "%s (%d ms: model %d ms, tools %d ms)", rec.Ended.Format(time.RFC3339), rec.Timings.TotalMS, rec.Timings.ModelMS, rec.Timings.ToolsMS)
	}
	row("steps", "%d", rec.Steps)
	row("tokens", "%d (prompt %d, completion %d)", rec.Usage.Total, rec.Usage.Prompt, rec.Usage.Completion)
	row("grants", "%s", strings.Join(rec.Grants, " "))
	tw.Flush()
	if len(rec.ToolCalls) > 0 {
		fmt.Fprintln(w, "\ntool calls:")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "STEP\tAUDIT\tTOOL\tOUTCOME\tARGS")
		for _, c := range rec.ToolCalls {
			outcome := "ok"
			if !c.Success {
				outcome = c.Code
			}
			if c.DryRun {
				outcome += " (dry run)"
			}
			seq := "-"
			if c.AuditSeq > 0 {
				seq = fmt.Sprint(c.AuditSeq)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", c.Step, seq, ui.Printable(c.Tool), outcome, ui.OneLine(string(c.Args), 80))
		}
		tw.Flush()
		for _, c := range rec.ToolCalls {
			for _, wn := range c.Warnings {
				fmt.Fprintf(w, "warning (step %d, %s): %s\n", c.Step, ui.Printable(c.Tool), ui.Printable(wn))
			}
		}
	}
	for _, d := range rec.Diffs {
		fmt.Fprintf(w, "difference: %s\n", ui.Printable(d.String()))
	}
	if rec.Final != "" {
		fmt.Fprintf(w, "\nfinal answer:\n%s\n", ui.Printable(rec.Final))
	}
}

// showWorkflowRun prints a workflow run for a person.
func showWorkflowRun(w io.Writer, rec *workflow.Record) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t%s\n", k, ui.Printable(fmt.Sprintf(format, args...)))
	}
	row("run", "%s (workflow)", rec.ID)
	row("workflow", "%s (%s)", rec.Task, rec.File)
	row("status", "%s", rec.Status)
	if rec.Error != nil {
		row("error", "%s: %s", rec.Error.Code, rec.Error.Message)
	}
	row("started", "%s", rec.Started.Format(time.RFC3339))
	if rec.Ended != nil {
		row("ended", "%s", rec.Ended.Format(time.RFC3339))
	}
	if rec.Resumed > 0 {
		row("resumed", "%d time(s)", rec.Resumed)
	}
	row("grants", "%s", strings.Join(rec.Grants, " "))
	tw.Flush()
	fmt.Fprintln(w, "\nsteps:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tKIND\tSTATUS\tAUDIT\tOUTPUT")
	for _, r := range rec.Results {
		status := r.Status
		if r.Error != nil {
			status += " " + string(r.Error.Code)
		}
		var seqs []string
		for _, s := range r.AuditSeqs {
			seqs = append(seqs, fmt.Sprint(s))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ui.Printable(r.ID), r.Kind, status, ui.OrDash(strings.Join(seqs, ",")), ui.OneLine(r.Output, 60))
	}
	tw.Flush()
	for _, r := range rec.Results {
		for _, wn := range r.Warnings {
			fmt.Fprintf(w, "warning (step %s): %s\n", ui.Printable(r.ID), ui.Printable(wn))
		}
	}
	for _, k := range sortedKeysAny(rec.Outputs) {
		fmt.Fprintf(w, "output %s: %s\n", ui.Printable(k), ui.Printable(workflowText(rec.Outputs[k])))
	}
}

// exportRun writes a run's files to dir: run.json (the record),
// transcript.jsonl (one message a line), final.md, tool-outputs/ (each tool
// call's whole result: its artifact, else what the model was shown) and
// audit.jsonl (the run's audit records). Everything in them was redacted
// before it was stored; it is redacted again on the way out.
func exportRun(ctx context.Context, st store.Backend, red *redact.Redactor, runID string, doc []byte, dir string) (int, error) {
	// Everything is written through an os.Root on --dir: a symlink planted
	// at DIR/<id> (or below) cannot send the files elsewhere.
	parent, id := filepath.Dir(dir), filepath.Base(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return 0, env.UsageErr("choose a writable --dir", "%v", err)
	}
	top, err := os.OpenRoot(parent)
	if err != nil {
		return 0, env.UsageErr("choose a writable --dir", "%v", err)
	}
	defer top.Close()
	if err := top.MkdirAll(filepath.Join(id, "tool-outputs"), 0o700); err != nil {
		return 0, env.UsageErr("choose a writable --dir", "%v", err)
	}
	root, err := top.OpenRoot(id)
	if err != nil {
		return 0, env.UsageErr("choose a writable --dir", "%v", err)
	}
	defer root.Close()
	write := func(name string, data []byte) error {
		return root.WriteFile(name, red.Bytes(data), 0o600)
	}
	if err := write("run.json", doc); err != nil {
		return 0, err
	}
	kind := runKind(doc)
	if kind == "workflow" {
		// A workflow run: its step results, one a line, and its outputs.
		var wr workflow.Record
		if err := json.Unmarshal(doc, &wr); err == nil {
			var steps bytes.Buffer
			for _, r := range wr.Results {
				line, _ := json.Marshal(r)
				steps.Write(line)
				steps.WriteByte('\n')
			}
			if err := write("steps.jsonl", steps.Bytes()); err != nil {
				return 0, err
			}
			outs, _ := json.MarshalIndent(wr.Outputs, "", "  ")
			if err := write("outputs.json", append(outs, '\n')); err != nil {
				return 0, err
			}
		}
	}
	var rec agent.Record
	if kind != "workflow" && json.Unmarshal(doc, &rec) == nil && rec.Kind != "" {
		var tr bytes.Buffer
		for _, m := range rec.Transcript {
			line, _ := json.Marshal(m)
			tr.Write(line)
			tr.WriteByte('\n')
		}
		if err := write("transcript.jsonl", tr.Bytes()); err != nil {
			return 0, err
		}
		if err := write("final.md", []byte(rec.Final+"\n")); err != nil {
			return 0, err
		}
		for i, c := range rec.ToolCalls {
			data := []byte(c.Output)
			if c.Artifact != "" {
				if a, err := st.Artifact(ctx, c.Artifact); err == nil {
					data = a
				}
			}
			name := fmt.Sprintf("%03d-%s.json", i+1, safeName(c.Tool))
			if err := write(filepath.Join("tool-outputs", name), data); err != nil {
				return 0, err
			}
		}
	}
	recs, err := st.ListAudit(ctx, store.AuditFilter{RunID: runID})
	if err != nil {
		return 0, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return 0, err
		}
	}
	return len(recs), write("audit.jsonl", buf.Bytes())
}

// safeName keeps a tool name usable as a file name (a model may call a
// tool name that does not exist).
func safeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// runDoc loads the run the command's one argument names; usage is the
// command's synopsis for a usage error.
func runDoc(ctx context.Context, e *env.Env, usage string) (json.RawMessage, error) {
	if e.CLI().NArg() != 1 {
		return nil, env.UsageErr("usage: "+usage, "%s needs one run id", e.CLI().Command.FullName())
	}
	st, err := e.Store()
	if err != nil {
		return nil, err
	}
	return st.Run(ctx, e.CLI().Args().First())
}

// runKind is a run record's kind: "agent", "replay" or "workflow".
func runKind(doc []byte) string {
	var k struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(doc, &k)
	return k.Kind
}
