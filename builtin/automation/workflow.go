// Package automation is the automation family: workflow_validate and
// workflow_run (workflows for the model) and schedule_task (jobs for warden
// daemon).
package automation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wardenrt/warden/builtin/internal/fspath"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/decode"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/schedule"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/workflow"
)

// Config configures the automation family.
type Config struct {
	// Runs records the runs of workflow_run (nil: not recorded).
	Runs workflow.Runs
	// Jobs keeps the jobs schedule_task adds.
	Jobs schedule.Store
}

// Tools returns the automation family: workflow_validate, workflow_run and
// schedule_task.
func Tools(cfg Config) []tool.Tool {
	return append(workflowTools(cfg.Runs), &ScheduleTask{Jobs: cfg.Jobs})
}

// workflowTools are workflow_validate and workflow_run: workflows for the
// model. A workflow run this way acts within
// the calling call's grants ∩ the workflow's, its steps go through the
// gate as the caller's (principal + workflow:NAME), and it is recorded in
// runs (nil: not recorded).
func workflowTools(runs workflow.Runs) []tool.Tool {
	return []tool.Tool{workflowValidateTool{}, workflowRunTool{runs: runs}}
}

var workflowValidateSchema = []byte(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "the workflow file, relative to the workspace"}
  },
  "required": ["path"],
  "additionalProperties": false
}`)

var workflowRunSchema = []byte(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "the workflow file, relative to the workspace"},
    "params": {"type": "object", "description": "values of the workflow's params, by name",
      "patternProperties": {"^[A-Za-z_][A-Za-z0-9_]{0,63}$": {"type": ["string", "number", "integer", "boolean", "array", "null"]}},
      "additionalProperties": false}
  },
  "required": ["path"],
  "additionalProperties": false
}`)

type workflowArgs struct {
	Path   string         `json:"path"`
	Params map[string]any `json:"params"`
}

// workflowNeeds is fs.read of the workflow file.
func workflowNeeds(c *tool.Call) ([]capability.Need, error) {
	var a workflowArgs
	if err := c.Bind(&a); err != nil {
		return nil, err
	}
	return workflowFileNeeds(c.Workspace, a.Path)
}

// workflowFileNeeds is fs.read of a workflow file.
func workflowFileNeeds(ws, p string) ([]capability.Need, error) {
	if e := fspath.CheckPath(p); e != nil {
		return nil, e
	}
	abs, e := fspath.Resolve(ws, p)
	if e != nil {
		return nil, e
	}
	return []capability.Need{{Kind: capability.FSRead, Resource: abs}}, nil
}

// workflowOpen reads a workflow file (the first, or a nested one relative
// to from) if the call's grants allow reading it, through an os.Root on
// its directory.
func workflowOpen(c *tool.Call) func(from, p string) (string, []byte, error) {
	return func(from, p string) (string, []byte, error) {
		if from != "" && !filepath.IsAbs(p) {
			rel, err := filepath.Rel(c.Workspace, filepath.Join(filepath.Dir(from), p))
			if err != nil {
				return "", nil, err
			}
			p = rel
		}
		abs, e := fspath.Resolve(c.Workspace, p)
		if e != nil {
			return "", nil, e
		}
		if !c.Grants.Allows(capability.Need{Kind: capability.FSRead, Resource: abs}) {
			return "", nil, tool.Errorf(tool.CodeCapabilityDenied, "grant fs.read of it", "reading %s is not granted", abs)
		}
		if entry, hidden := c.Hidden(abs); hidden {
			return "", nil, gate.HiddenError(abs, entry)
		}
		root, err := os.OpenRoot(filepath.Dir(abs))
		if err != nil {
			return "", nil, err
		}
		defer root.Close()
		b, err := decode.ReadRootFile(root, filepath.Base(abs), abs, workflow.MaxFileBytes)
		return abs, b, err
	}
}

// workflowCheck checks tools against the registry of the gate running the
// call.
func workflowCheck(ctx context.Context, c *tool.Call) workflow.Options {
	o := workflow.Options{Open: workflowOpen(c)}
	if g, ok := gate.GateFrom(ctx); ok {
		o.Tool = workflow.RegistryTools(g.Registry())
	}
	return o
}

// WorkflowProblem is one problem workflow_validate found.
type WorkflowProblem struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
}

// WorkflowValidateData is workflow_validate's data.
type WorkflowValidateData struct {
	Valid    bool              `json:"valid"`
	Name     string            `json:"name,omitempty"`
	Steps    int               `json:"steps,omitempty"`
	Problems []WorkflowProblem `json:"problems"`
}

type workflowValidateTool struct{}

func (workflowValidateTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "workflow_validate",
		Description: "Check a workflow file (schema v1): every problem with its line and column — unknown tools, bad arguments, " +
			"bad references, cycles, missing params. Needs fs.read of the file.",
		InputSchema:  workflowValidateSchema,
		Capabilities: []capability.Kind{capability.FSRead},
		ReadOnly:     true,
	}
}

func (workflowValidateTool) Needs(c *tool.Call) ([]capability.Need, error) {
	return workflowNeeds(c)
}

func (t workflowValidateTool) Preview(ctx context.Context, c *tool.Call) tool.Outcome {
	return t.Run(ctx, c)
}

func (workflowValidateTool) Run(ctx context.Context, c *tool.Call) tool.Outcome {
	var a workflowArgs
	if err := c.Bind(&a); err != nil {
		return tool.Outcome{Err: tool.AsError(err)}
	}
	o := workflowCheck(ctx, c)
	src, data, err := o.Open("", a.Path)
	if err != nil {
		return workflowOpenFailed(err)
	}
	d := WorkflowValidateData{Problems: []WorkflowProblem{}}
	w, err := workflow.Parse(src, data, o)
	if err == nil {
		d.Valid, d.Name, d.Steps = true, w.Name, len(w.Steps)
		return tool.Outcome{Output: fmt.Sprintf("%s: valid (workflow %s, %d steps)", a.Path, w.Name, len(w.Steps)), Data: d}
	}
	var out strings.Builder
	for _, p := range workflowProblems(err) {
		d.Problems = append(d.Problems, p)
		fmt.Fprintf(&out, "%s:%d:%d: %s\n", p.File, p.Line, p.Column, p.Message)
	}
	return tool.Outcome{Output: out.String(), Data: d}
}

func workflowProblems(err error) []WorkflowProblem {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var out []WorkflowProblem
	for _, e := range errs {
		var pe *gate.PositionError
		if errors.As(e, &pe) {
			out = append(out, WorkflowProblem{File: pe.Source, Line: pe.Line, Column: pe.Column, Message: pe.Message})
		} else {
			out = append(out, WorkflowProblem{Message: e.Error()})
		}
	}
	return out
}

func workflowOpenFailed(err error) tool.Outcome {
	if e := tool.AsError(err); e != nil {
		return tool.Outcome{Err: e}
	}
	if errors.Is(err, os.ErrNotExist) {
		return tool.Fail(tool.CodeNotFound, "", "%v", err)
	}
	return tool.Fail(tool.CodeToolError, "", "%v", err)
}

type workflowRunTool struct{ runs workflow.Runs }

func (workflowRunTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "workflow_run",
		Description: "Run a workflow file (schema v1): its steps call tools through the gate, within your grants ∩ the grants the " +
			"workflow asks for, and the run is recorded. Needs fs.read of the file; each step needs what its tool needs. " +
			"Agent steps are not run from here.",
		InputSchema:  workflowRunSchema,
		Capabilities: []capability.Kind{capability.FSRead},
	}
}

func (workflowRunTool) Needs(c *tool.Call) ([]capability.Need, error) {
	for _, p := range c.Principal {
		if strings.HasPrefix(p, "workflow:") {
			return nil, tool.Errorf(tool.CodeOperationNotSupported, "use a workflow step (nested workflows are depth-limited)",
				"workflow_run cannot be called from a workflow")
		}
	}
	return workflowNeeds(c)
}

// Preview runs the workflow with every step as a dry run: it shows what
// each would do and changes nothing.
func (t workflowRunTool) Preview(ctx context.Context, c *tool.Call) tool.Outcome {
	return t.Run(ctx, c)
}

func (t workflowRunTool) Run(ctx context.Context, c *tool.Call) tool.Outcome {
	var a workflowArgs
	if err := c.Bind(&a); err != nil {
		return tool.Outcome{Err: tool.AsError(err)}
	}
	g, ok := gate.GateFrom(ctx)
	if !ok {
		return tool.Fail(tool.CodeInternal, "", "workflow_run runs only through the gate")
	}
	o := workflowCheck(ctx, c)
	src, data, err := o.Open("", a.Path)
	if err != nil {
		return workflowOpenFailed(err)
	}
	w, err := workflow.Parse(src, data, o)
	if err != nil {
		var out strings.Builder
		for _, p := range workflowProblems(err) {
			fmt.Fprintf(&out, "%s:%d:%d: %s\n", p.File, p.Line, p.Column, p.Message)
		}
		return tool.Outcome{Output: out.String(), Err: tool.Errorf(tool.CodeInvalidInput, "fix it (workflow_validate lists every problem)", "%s is not a valid workflow", a.Path)}
	}
	grants := c.Grants
	rec, err := workflow.Run(ctx, w, workflow.RunOptions{
		Gate: g, Base: &grants, Params: a.Params, Principal: c.Principal, DryRun: c.DryRun,
		Open: o.Open, Check: o, Runs: t.runs, Vault: c.Vault(),
	})
	if err != nil {
		return tool.Fail(tool.CodeInternal, "", "%v", err)
	}
	var out strings.Builder
	for _, r := range rec.Results {
		fmt.Fprintf(&out, "%s: %s", r.ID, r.Status)
		if r.Error != nil {
			fmt.Fprintf(&out, " (%s: %s)", r.Error.Code, r.Error.Message)
		}
		out.WriteString("\n")
	}
	for k, v := range rec.Outputs {
		b, _ := json.Marshal(v)
		fmt.Fprintf(&out, "output %s: %s\n", k, b)
	}
	res := tool.Outcome{Output: out.String(), Data: rec}
	if rec.Status != workflow.StatusSucceeded {
		res.Err = rec.Error
		if res.Err == nil {
			res.Err = tool.Errorf(tool.CodeToolError, "", "workflow %s %s", w.Name, rec.Status)
		}
	}
	return res
}
