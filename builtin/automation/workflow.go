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

	"github.com/google/jsonschema-go/jsonschema"

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
	return append(workflowTools(cfg.Runs), tool.Adapt[scheduleTaskArgs](&ScheduleTask{Jobs: cfg.Jobs}))
}

// workflowTools are workflow_validate and workflow_run: workflows for the
// model. A workflow run this way acts within
// the calling call's grants ∩ the workflow's, its steps go through the
// gate as the caller's (principal + workflow:NAME), and it is recorded in
// runs (nil: not recorded).
func workflowTools(runs workflow.Runs) []tool.Tool {
	return []tool.Tool{
		tool.Adapt[workflowValidateArgs](workflowValidateTool{}),
		tool.Adapt[workflowRunArgs](workflowRunTool{runs: runs}),
	}
}

// workflowValidateArgs are workflow_validate's arguments; their schema is
// its input schema.
type workflowValidateArgs struct {
	Path string `json:"path" minLength:"1" maxLength:"4096" jsonschema:"the workflow file, relative to the workspace"`
}

// workflowRunArgs are workflow_run's arguments; their schema is its input
// schema (RefineSchema says which values params may hold).
type workflowRunArgs struct {
	Path   string         `json:"path" minLength:"1" maxLength:"4096" jsonschema:"the workflow file, relative to the workspace"`
	Params map[string]any `json:"params,omitempty" keyPattern:"^[A-Za-z_][A-Za-z0-9_]{0,63}$" jsonschema:"values of the workflow's params, by name"`
}

// workflowParamValues says what a workflow param's value may be, in the
// schema p of a params map (derived from map[string]any with a
// keyPattern): a string, a number, a boolean, an array or null — not an
// object. A value schema of several types is more than struct tags say.
func workflowParamValues(p *jsonschema.Schema) {
	for _, v := range p.PatternProperties {
		v.Types = []string{"string", "number", "integer", "boolean", "array", "null"}
	}
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

var _ tool.Typed[workflowValidateArgs] = workflowValidateTool{}

func (workflowValidateTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "workflow_validate",
		Description: "Check a workflow file (schema v1): every problem with its line and column — unknown tools, bad arguments, " +
			"bad references, cycles, missing params. Needs fs.read of the file.",
		Capabilities: []capability.Kind{capability.FSRead},
		ReadOnly:     true,
	}
}

// Needs implements tool.Typed: fs.read of the workflow file.
func (workflowValidateTool) Needs(c *tool.Call, a *workflowValidateArgs) ([]capability.Need, error) {
	return workflowFileNeeds(c.Workspace, a.Path)
}

func (workflowValidateTool) Run(ctx context.Context, c *tool.Call, a *workflowValidateArgs) tool.Outcome {
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

var (
	_ tool.Typed[workflowRunArgs]          = workflowRunTool{}
	_ tool.TypedPreviewer[workflowRunArgs] = workflowRunTool{}
	_ tool.SchemaRefiner                   = workflowRunTool{}
)

func (workflowRunTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "workflow_run",
		Description: "Run a workflow file (schema v1): its steps call tools through the gate, within your grants ∩ the grants the " +
			"workflow asks for, and the run is recorded. Needs fs.read of the file; each step needs what its tool needs. " +
			"Agent steps are not run from here.",
		Capabilities: []capability.Kind{capability.FSRead},
	}
}

// RefineSchema implements tool.SchemaRefiner: the values params may hold.
func (workflowRunTool) RefineSchema(s *jsonschema.Schema) {
	workflowParamValues(s.Properties["params"])
}

// Needs implements tool.Typed: fs.read of the workflow file; never from
// a workflow.
func (workflowRunTool) Needs(c *tool.Call, a *workflowRunArgs) ([]capability.Need, error) {
	for _, p := range c.Principal {
		if strings.HasPrefix(p, "workflow:") {
			return nil, tool.Errorf(tool.CodeOperationNotSupported, "use a workflow step (nested workflows are depth-limited)",
				"workflow_run cannot be called from a workflow")
		}
	}
	return workflowFileNeeds(c.Workspace, a.Path)
}

// Preview runs the workflow with every step as a dry run: it shows what
// each would do and changes nothing.
func (t workflowRunTool) Preview(ctx context.Context, c *tool.Call, a *workflowRunArgs) tool.Outcome {
	return t.Run(ctx, c, a)
}

func (t workflowRunTool) Run(ctx context.Context, c *tool.Call, a *workflowRunArgs) tool.Outcome {
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
