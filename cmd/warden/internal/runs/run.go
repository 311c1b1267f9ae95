package runs

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/runtime/agent"
	"github.com/wardenrt/warden/runtime/decode"
	"github.com/wardenrt/warden/runtime/tool"
)

// RunCommand is `warden run`.
func RunCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run a task with an OpenAI-compatible model; every tool call it makes goes through the gate, and the run is recorded",
		ArgsUsage: "TASK",
		Description: "The model is OpenAI's with OPENAI_API_KEY, or any OpenAI-compatible server with OPENAI_BASE_URL " +
			"(Ollama, vLLM, llama.cpp's server, LM Studio). The run acts with the policy's grants and --grant; nothing the model " +
			"says changes them. `warden runs show ID` shows the record, `warden runs replay ID` replays it offline.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", EnvVars: []string{"WARDEN_MODEL"}, Usage: "the model's name (default " + env.OpenAIDefaultModel + " on OpenAI)"},
			&cli.IntFlag{Name: "max-steps", Value: agent.DefaultMaxSteps, Usage: "the model's turns at most"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Minute, Usage: "the whole run's time at most"},
			&cli.IntFlag{Name: "token-budget", Usage: "the run's total tokens at most (0: no budget)"},
			&cli.IntFlag{Name: "max-calls-per-turn", Value: agent.DefaultMaxCallsPerTurn, Usage: "tool calls run from one reply at most"},
			&cli.StringSliceFlag{Name: "tools", Usage: "offer only these tools (repeatable or comma-separated)"},
			&cli.StringFlag{Name: "system", Usage: "a file whose text is added to the system prompt"},
			&cli.BoolFlag{Name: "no-stream", Usage: "ask for whole replies instead of streamed text"},
			env.JSONFlag,
		},
		Action: env.With(func(ctx context.Context, e *env.Env) error {
			if e.CLI().NArg() == 0 {
				return env.UsageErr(`usage: warden run "TASK"`, "run needs a task")
			}
			task := strings.Join(e.CLI().Args().Slice(), " ")
			cfg, err := e.ModelConfig()
			if err != nil {
				return err
			}
			cfg.Stream = !e.CLI().Bool("no-stream")
			model, err := agent.NewOpenAI(cfg)
			if err != nil {
				return env.Fail(tool.CodeLLMError, env.ExitUsage, tool.AsError(err).Hint, "%s", tool.AsError(err).Message)
			}
			var system string
			if f := e.CLI().String("system"); f != "" {
				b, err := decode.ReadFile(f, decode.DefaultMaxBytes)
				if err != nil {
					return env.ReadFailure(fmt.Errorf("--system: %w", err), "check the path")
				}
				system = string(b)
			}
			var tools []string
			for _, t := range e.CLI().StringSlice("tools") {
				for _, name := range strings.Split(t, ",") {
					if name = strings.TrimSpace(name); name != "" {
						tools = append(tools, name)
					}
				}
			}
			g, err := e.Gate()
			if err != nil {
				return err
			}
			st, err := e.Store()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, e.CLI().Duration("timeout"))
			defer cancel()
			view := newRunView(e.Stdout(), e.Stderr(), !e.JSON())
			defer view.stop()
			mem := env.NewLazyStore(e.Store)
			o := agent.Options{
				Gate: g, Model: model, Task: task, ModelName: cfg.Model, Endpoint: model.Host(),
				Tools: tools, MaxSteps: e.CLI().Int("max-steps"), MaxCallsPerTurn: e.CLI().Int("max-calls-per-turn"),
				TokenBudget: e.CLI().Int("token-budget"), System: system, Principal: []string{"cli"},
				RunID: tool.NewID(), Runs: e.TrackRuns(st), Artifacts: mem, Memory: mem, Redactor: e.Redactor(),
				Events: view.event,
			}
			fmt.Fprintf(e.Stderr(), "warden: run %s on %s (%s); Ctrl-C cancels\n", o.RunID, cfg.Model, model.Host())
			rec, err := agent.Run(ctx, o)
			view.stop()
			if err != nil {
				var rerr *tool.Error
				if rerr = tool.AsError(err); rerr != nil {
					return env.Fail(rerr.Code, env.ExitUsage, ui.CLIHint(rerr), "%s", rerr.Message)
				}
				return err
			}
			if e.JSON() {
				if err := e.PrintJSON(runSummaryOf(rec)); err != nil {
					return err
				}
			}
			fmt.Fprintf(e.Stderr(), "warden: run %s %s after %d step(s), %d tool call(s), %d tokens — `warden runs show %s`\n",
				rec.ID, rec.Status, rec.Steps, len(rec.ToolCalls), rec.Usage.Total, rec.ID)
			if rec.Status == agent.StatusSucceeded {
				return nil
			}
			code, hint, msg := tool.CodeLLMError, "", "the run "+rec.Status
			if rec.Error != nil {
				code, hint, msg = rec.Error.Code, ui.CLIHint(rec.Error), rec.Error.Message
			}
			if rec.Status == agent.StatusCancelled {
				code, hint, msg = tool.CodeUserCancelled, "", "the run was cancelled; its record is kept"
			}
			return env.Fail(code, env.ExitFailed, hint, "%s", msg)
		}),
	}
}

// runSummaryOf is what `warden run --json` prints.
func runSummaryOf(rec *agent.Record) map[string]any {
	return map[string]any{
		"id": rec.ID, "kind": rec.Kind, "status": rec.Status, "error": rec.Error, "steps": rec.Steps, "usage": rec.Usage,
		"tool_calls": len(rec.ToolCalls), "final": rec.Final, "model": rec.Model, "endpoint": rec.Endpoint,
		"started": rec.Started, "ended": rec.Ended, "timings": rec.Timings, "differences": rec.Diffs,
	}
}

// runView shows a run on the terminal: the assistant's text on stdout as
// it arrives (not with --json: stdout is the summary's), and on stderr
// each tool call with its decision and, on a terminal, a spinner while
// the model thinks.
type runView struct {
	out, err io.Writer
	text     bool
	tty      bool

	mu      sync.Mutex
	midLine bool
	spin    *spinner
}

func newRunView(out, errw io.Writer, text bool) *runView {
	return &runView{out: out, err: errw, text: text, tty: ui.IsTerminal(errw)}
}

func (v *runView) event(ev agent.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if ev.Kind != agent.EventWaiting {
		v.stopLocked()
	}
	switch ev.Kind {
	case agent.EventWaiting:
		if v.tty && v.spin == nil {
			v.spin = startSpinner(v.err, fmt.Sprintf("step %d: waiting for the model", ev.Step))
		}
	case agent.EventText:
		if v.text {
			fmt.Fprint(v.out, ui.Printable(ev.Text))
			v.midLine = !strings.HasSuffix(ev.Text, "\n")
		}
	case agent.EventAnswer:
		v.endLine()
	case agent.EventToolCall:
		v.endLine()
		fmt.Fprintf(v.err, "→ %s %s\n", ev.Tool, ui.OneLine(string(ev.Args), 160))
	case agent.EventToolResult:
		r := ev.Result
		switch {
		case r.Success && r.DryRun:
			fmt.Fprintf(v.err, "  ○ dry run (%d ms): %s\n", r.DurationMS, ui.OneLine(r.Output, 120))
		case r.Success:
			fmt.Fprintf(v.err, "  ✓ ok (%d ms)\n", r.DurationMS)
		default:
			fmt.Fprintf(v.err, "  ✗ %s: %s\n", r.Error.Code, ui.OneLine(r.Error.Message, 160))
		}
	case agent.EventNote:
		v.endLine()
		fmt.Fprintf(v.err, "warden: %s\n", ui.Printable(ev.Text))
	}
}

func (v *runView) endLine() {
	if v.midLine {
		fmt.Fprintln(v.out)
		v.midLine = false
	}
}

func (v *runView) stopLocked() {
	v.spin.stop()
	v.spin = nil
}

// spinner animates a progressbar spinner with a description on a
// terminal until stopped, then clears its line.
type spinner struct {
	bar  *progressbar.ProgressBar
	done chan struct{}
}

func startSpinner(w io.Writer, desc string) *spinner {
	s := &spinner{
		bar: progressbar.NewOptions(-1, progressbar.OptionSetWriter(w), progressbar.OptionSpinnerType(14),
			progressbar.OptionSetDescription(desc), progressbar.OptionClearOnFinish(), progressbar.OptionSetElapsedTime(true)),
		done: make(chan struct{}),
	}
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				_ = s.bar.Add(1)
			}
		}
	}()
	return s
}

// stop ends the animation and clears the line; a nil spinner is a no-op.
func (s *spinner) stop() {
	if s != nil {
		close(s.done)
		_ = s.bar.Clear()
	}
}

func (v *runView) stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.stopLocked()
	v.endLine()
}
