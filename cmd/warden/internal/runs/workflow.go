package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/runtime/agent"
	"github.com/wardenrt/warden/runtime/decode"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/workflow"
)

// WorkflowCommand is `warden workflow`.
func WorkflowCommand() *cli.Command {
	return &cli.Command{
		Name:  "workflow",
		Usage: "workflows (schema v1): tools called in order, under the workflow's grants, with no model needed",
		Subcommands: []*cli.Command{
			{
				Name: "schema", Usage: "print the workflow format as a JSON Schema",
				Action: func(c *cli.Context) error {
					_, err := c.App.Writer.Write(workflow.Schema())
					return err
				},
			},
			{
				Name: "validate", Usage: "check a workflow: every error with its line and column (exit 1 when invalid)", ArgsUsage: "FILE",
				Flags: []cli.Flag{env.JSONFlag},
				Action: env.With(func(ctx context.Context, e *env.Env) error {
					if e.CLI().NArg() != 1 {
						return env.UsageErr("usage: warden workflow validate FILE", "validate needs one file")
					}
					w, err := loadWorkflow(e, e.CLI().Args().First())
					if err != nil {
						return err
					}
					if e.JSON() {
						return e.PrintJSON(map[string]any{"valid": true, "name": w.Name, "steps": len(w.Steps)})
					}
					fmt.Fprintf(e.Stdout(), "%s: valid (workflow %s, %d steps)\n", w.Source, w.Name, len(w.Steps))
					return nil
				}),
			},
			{
				Name: "run", Usage: "run a workflow: each step through the gate, recorded as a run", ArgsUsage: "FILE",
				Flags: []cli.Flag{
					&cli.StringSliceFlag{Name: "param", Aliases: []string{"p"}, Usage: "a param as key=value (repeatable)"},
					env.JSONFlag,
				},
				Action: env.With(func(ctx context.Context, e *env.Env) error {
					if e.CLI().NArg() != 1 {
						return env.UsageErr("usage: warden workflow run FILE [-p key=value ...]", "run needs one file")
					}
					params := map[string]any{}
					for _, kv := range e.CLI().StringSlice("param") {
						k, v, ok := strings.Cut(kv, "=")
						if !ok || k == "" {
							return env.UsageErr("write -p key=value", "-p %q has no key=value", kv)
						}
						params[k] = v
					}
					w, err := loadWorkflow(e, e.CLI().Args().First())
					if err != nil {
						return err
					}
					return runWorkflow(ctx, e, w, params, nil)
				}),
			},
			{
				Name: "resume", Usage: "continue a failed, cancelled or interrupted workflow run from the step that failed", ArgsUsage: "RUN_ID",
				Flags: []cli.Flag{env.JSONFlag},
				Action: env.With(func(ctx context.Context, e *env.Env) error {
					doc, err := runDoc(ctx, e, "warden workflow resume RUN_ID (see `warden runs ls`)")
					if err != nil {
						return err
					}
					var prev workflow.Record
					if err := json.Unmarshal(doc, &prev); err != nil || runKind(doc) != "workflow" {
						return env.UsageErr("resume continues workflow runs (`warden runs ls` shows their kind)", "run %s is not a workflow run", e.CLI().Args().First())
					}
					if prev.Status == workflow.StatusSucceeded || prev.Status == workflow.StatusRunning {
						return env.UsageErr("only a failed, cancelled or interrupted run can be resumed", "run %s is %s", prev.ID, prev.Status)
					}
					w, err := loadWorkflow(e, prev.File)
					if err != nil {
						return err
					}
					return runWorkflow(ctx, e, w, prev.Params, &prev)
				}),
			},
		},
	}
}

// WorkflowOptions checks tools against the registry (their schemas
// included) and opens nested files relative to the file that names them.
func WorkflowOptions(reg *gate.Registry) workflow.Options {
	return workflow.Options{Tool: workflow.RegistryTools(reg), Open: OpenWorkflow}
}

// OpenWorkflow reads a workflow file: path as written, relative to the
// directory of from ("" for the command line).
func OpenWorkflow(from, path string) (string, []byte, error) {
	if !filepath.IsAbs(path) && from != "" {
		path = filepath.Join(filepath.Dir(from), path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil, err
	}
	b, err := decode.ReadFile(abs, workflow.MaxFileBytes)
	return abs, b, err
}

// loadWorkflow reads and checks a workflow file; an invalid one fails with
// every problem on its own line (stdout) and INVALID_INPUT.
func loadWorkflow(e *env.Env, path string) (*workflow.Workflow, error) {
	src, data, err := OpenWorkflow("", path)
	if err != nil {
		return nil, env.ReadFailure(err, "check the path")
	}
	reg, err := e.Registry()
	if err != nil {
		return nil, err
	}
	w, err := workflow.Parse(src, data, WorkflowOptions(reg))
	if err == nil {
		return w, nil
	}
	var problems []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		problems = j.Unwrap()
	} else {
		problems = []error{err}
	}
	if e.JSON() {
		var out []map[string]any
		for _, p := range problems {
			var pe *gate.PositionError
			if errors.As(p, &pe) {
				out = append(out, map[string]any{"file": pe.Source, "line": pe.Line, "column": pe.Column, "message": pe.Message})
			} else {
				out = append(out, map[string]any{"message": p.Error()})
			}
		}
		if err := e.PrintJSON(map[string]any{"valid": false, "errors": out}); err != nil {
			return nil, err
		}
	} else {
		for _, p := range problems {
			fmt.Fprintln(e.Stdout(), ui.Printable(p.Error()))
		}
	}
	return nil, env.Fail(tool.CodeInvalidInput, env.ExitFailed, "fix the lines above; `warden workflow schema` prints the format",
		"%s: %d problem(s)", src, len(problems))
}

// runWorkflow runs (or resumes) w and reports how it went.
func runWorkflow(ctx context.Context, e *env.Env, w *workflow.Workflow, params map[string]any, resume *workflow.Record) error {
	g, err := e.Gate()
	if err != nil {
		return err
	}
	st, err := e.Store()
	if err != nil {
		return err
	}
	reg := g.Registry()
	runs := e.TrackRuns(st)
	o := workflow.RunOptions{
		Gate: g, Params: params, Principal: []string{"cli"}, DryRun: e.CLI().Bool("dry-run"),
		Open: OpenWorkflow, Check: WorkflowOptions(reg), Runs: runs, Resume: resume, Redactor: e.Redactor(),
	}
	// Agent steps: on the configured model; with none configured the
	// workflow package says the step needs one; a configuration that is
	// there but wrong says what is wrong.
	if cfg, err := e.ModelConfig(); err == nil {
		o.Agent = AgentStep(e, g, runs, cfg, w.Name)
	} else if os.Getenv("OPENAI_BASE_URL") != "" || os.Getenv("OPENAI_API_KEY") != "" {
		var f *env.Failure
		errors.As(err, &f)
		o.Agent = func(context.Context, workflow.AgentStep) (string, error) {
			if f != nil {
				return "", tool.Errorf(tool.CodeLLMError, f.Hint, "%s", f.Msg)
			}
			return "", err
		}
	}
	view := newWorkflowView(e.Stderr())
	o.Events = view.event
	rec, err := workflow.Run(ctx, w, o)
	view.stop()
	if err != nil {
		if e := tool.AsError(err); e != nil {
			return env.Fail(e.Code, env.ExitUsage, ui.CLIHint(e), "%s", e.Message)
		}
		return err
	}
	if e.JSON() {
		if err := e.PrintJSON(rec); err != nil {
			return err
		}
	} else {
		for _, name := range sortedKeysAny(rec.Outputs) {
			fmt.Fprintf(e.Stdout(), "%s: %s\n", name, ui.Printable(workflowText(rec.Outputs[name])))
		}
	}
	fmt.Fprintf(e.Stderr(), "warden: workflow %s %s (run %s, %d of %d steps) — `warden runs show %s`\n",
		w.Name, rec.Status, rec.ID, len(rec.Results), len(w.Steps), rec.ID)
	if rec.Status == workflow.StatusSucceeded {
		return nil
	}
	code, hint, msg := tool.CodeToolError, "", "the workflow "+rec.Status
	if rec.Error != nil {
		code, hint, msg = rec.Error.Code, ui.CLIHint(rec.Error), rec.Error.Message
	}
	exit := env.ExitFailed
	if code.Denial() {
		exit = env.ExitDenied
	}
	return env.Fail(code, exit, hint, "%s", msg)
}

// AgentStep runs an agent step's task with the configured model, under
// the workflow's grants; the run is recorded as an agent run of its own.
func AgentStep(e *env.Env, g *gate.Gate, runs agent.Runs, cfg agent.OpenAIConfig, name string) func(context.Context, workflow.AgentStep) (string, error) {
	return func(ctx context.Context, step workflow.AgentStep) (string, error) {
		cfg.Stream = false
		model, err := agent.NewOpenAI(cfg)
		if err != nil {
			return "", err
		}
		mem := env.NewLazyStore(e.Store)
		rec, err := agent.Run(ctx, agent.Options{
			Gate: g, Model: model, Task: step.Task, ModelName: cfg.Model, Endpoint: model.Host(), Restrict: &step.Grants, DryRun: step.DryRun,
			Principal: []string{"cli", "workflow:" + name}, Runs: runs, Artifacts: mem, Memory: mem, Redactor: e.Redactor(), Vault: step.Vault,
		})
		if err != nil {
			return "", err
		}
		if rec.Status != agent.StatusSucceeded {
			if rec.Error != nil {
				return rec.Final, rec.Error
			}
			return rec.Final, tool.Errorf(tool.CodeLLMError, "", "the agent run %s %s", rec.ID, rec.Status)
		}
		return rec.Final, nil
	}
}

func workflowText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func sortedKeysAny(m map[string]any) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// workflowView shows progress on stderr: on a terminal a spinner for the
// running step, then a line per step; elsewhere plain lines.
type workflowView struct {
	out  io.Writer
	tty  bool
	mu   sync.Mutex
	spin *spinner
}

func newWorkflowView(errw io.Writer) *workflowView {
	return &workflowView{out: errw, tty: ui.IsTerminal(errw)}
}

func (v *workflowView) event(ev workflow.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	indent := strings.Repeat("  ", ev.Depth)
	label := fmt.Sprintf("%s[%d/%d] %s", indent, ev.Index+1, ev.Total, ev.Step)
	if ev.Start {
		if !v.tty {
			return
		}
		v.stopLocked()
		desc := label
		if ev.Items > 0 {
			desc = fmt.Sprintf("%s (item %d of %d)", label, ev.Item, ev.Items)
		}
		v.spin = startSpinner(v.out, desc)
		return
	}
	v.stopLocked()
	r := ev.Result
	mark := map[string]string{workflow.StepSucceeded: "✓", workflow.StepFailed: "✗", workflow.StepSkipped: "–"}[r.Status]
	line := fmt.Sprintf("%s %s %s", mark, label, r.Status)
	if r.DryRun && r.Status == workflow.StepSucceeded {
		line += " (dry run)"
	}
	if r.Items > 0 {
		line += fmt.Sprintf(", %d item(s)", r.Items)
	}
	if r.Attempts > 1 {
		line += fmt.Sprintf(", %d attempts", r.Attempts)
	}
	line += fmt.Sprintf(" (%d ms)", r.DurationMS)
	if r.Error != nil {
		line += fmt.Sprintf(": %s: %s", r.Error.Code, ui.OneLine(r.Error.Message, 160))
	}
	fmt.Fprintln(v.out, line)
}

func (v *workflowView) stopLocked() {
	v.spin.stop()
	v.spin = nil
}

func (v *workflowView) stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.stopLocked()
}
