package jobs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/runs"
	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/runtime/agent"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/schedule"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/workflow"
	"github.com/wardenrt/warden/store"
)

// Scheduled jobs: the store adapter, the gate a job runs through, and the
// runner the scheduler calls.

// jobGate is the gate a scheduled job runs through: the policy in force in
// its workspace now (a workspace policy trusted or only narrowing, as for
// any command; --policy when the daemon was given one), no --grant flags,
// the remembered grants, and the policy's approval mode with nobody to ask
// (ask means never: there is no terminal).
func jobGate(ctx context.Context, e *env.Env, ws string) (*gate.Gate, error) {
	files := policy.PolicyFiles{
		Explicit:  env.GlobalString(e.CLI(), "policy"),
		Workspace: filepath.Join(ws, ".warden", "policy.yaml"),
		Home:      filepath.Join(e.Home(), "policy.yaml"),
	}
	pf, err := policy.ResolvePolicy(ctx, files, env.NewLazyStore(e.Store))
	if err != nil {
		return nil, err
	}
	for _, ig := range pf.Ignored {
		e.Log().Warn("untrusted workspace policy: ignored", "file", pf.File, "line", ig.Line, "what", ig.What)
	}
	mode := pf.Policy.Approval
	if mode == "" || mode == tool.ApproveAsk {
		mode = tool.ApproveNever
	}
	reg, err := e.Registry()
	if err != nil {
		return nil, err
	}
	st, err := e.Store()
	if err != nil {
		return nil, err
	}
	return gate.NewGate(gate.GateOptions{
		Registry: reg, Policy: pf.Policy, Workspace: ws, Grants: env.NewLazyStore(e.Store), Hide: e.OwnPaths(),
		Approval: mode, Logger: e.Log(), Redactor: e.Redactor(), Audit: st,
	})
}

// runJob runs one firing of j as run runID: its pinned workflow, or its
// agent task, with the job's grants ∩ the policy in force now.
func runJob(ctx context.Context, e *env.Env, j schedule.Job, runID string) schedule.Outcome {
	failed := func(err error) schedule.Outcome {
		// A store's failure keeps its code (STORE_LOCKED, STORE_FULL, …).
		var f *env.Failure
		if errors.As(env.StoreFailure(err), &f) && f.Code != tool.CodeInternal {
			return schedule.Outcome{Status: gate.RunFailed, Error: &tool.Error{Code: f.Code, Message: f.Msg, Hint: f.Hint}}
		}
		re := tool.AsError(err)
		if re == nil || re.Code == tool.CodeInternal && re.Message == "" {
			re = tool.Errorf(tool.CodeInternal, "", "%v", err)
		}
		return schedule.Outcome{Status: gate.RunFailed, Error: re}
	}
	g, err := jobGate(ctx, e, j.Workspace)
	if err != nil {
		return failed(err)
	}
	jobSet, err := j.GrantSet()
	if err != nil {
		return failed(err)
	}
	base := g.Grants().Intersect(jobSet)
	st, err := e.Store()
	if err != nil {
		return failed(err)
	}
	switch j.Kind {
	case schedule.KindWorkflow:
		w, err := pinnedWorkflow(j.Workflow, j.Digest, g.Registry(), j.ID)
		if err != nil {
			return failed(err)
		}
		o := workflow.RunOptions{
			Gate: g, Base: &base, Params: j.Params, Principal: j.Principal(), RunID: runID,
			Open: runs.OpenWorkflow, Check: runs.WorkflowOptions(g.Registry()), Runs: st, Redactor: e.Redactor(),
		}
		if cfg, err := e.ModelConfig(); err == nil {
			o.Agent = runs.AgentStep(e, g, st, cfg, w.Name)
		}
		rec, err := workflow.Run(ctx, w, o)
		if err != nil {
			return failed(err)
		}
		annotateRetry(ctx, st, runID, j.Running)
		var stepErr *tool.Error
		if n := len(rec.Results); n > 0 {
			stepErr = rec.Results[n-1].Error
		}
		return schedule.Outcome{Status: rec.Status, Error: jobDenied(j, g.Policy().Source, rec.Error, stepErr)}
	default:
		cfg, err := e.ModelConfig()
		if err != nil {
			return failed(err)
		}
		model, err := agent.NewOpenAI(cfg)
		if err != nil {
			return failed(err)
		}
		mem := env.NewLazyStore(e.Store)
		rec, err := agent.Run(ctx, agent.Options{
			Gate: g, Model: model, Task: j.Task, ModelName: cfg.Model, Endpoint: model.Host(), Restrict: &base,
			Principal: j.Principal(), RunID: runID, Runs: st, Artifacts: mem, Memory: mem, Redactor: e.Redactor(),
		})
		if err != nil {
			return failed(err)
		}
		annotateRetry(ctx, st, runID, j.Running)
		return schedule.Outcome{Status: rec.Status, Error: jobDenied(j, g.Policy().Source, rec.Error, nil)}
	}
}

// jobDenied rewrites the hint of a job's CAPABILITY_DENIED failure. The
// gate and the workflow runner name the grants that would allow the call
// (the error's Missing), which the daemon cannot take for one run (a job
// runs with the grants it was scheduled with ∩ the policy in force); the
// owner can give them in the policy, or add them to the job (its
// workflow's grants, approved again; or --with, scheduled again). The
// grants are the error's, else its failing step's (the runner words a
// step's failure as its own, with a resume hint). Other failures are
// returned as they are.
func jobDenied(j schedule.Job, policySource string, re, stepErr *tool.Error) *tool.Error {
	if re == nil || re.Code != tool.CodeCapabilityDenied {
		return re
	}
	caps := re.Missing
	if len(caps) == 0 && stepErr != nil {
		caps = stepErr.Missing
	}
	if len(caps) == 0 {
		return re // a refusal no grant lifts (hide:, protect:) keeps its hint
	}
	out := *re
	fix := fmt.Sprintf("if the job does not carry it, schedule it again with --with %s (`warden schedule rm %s` first)", strings.Join(caps, " --with "), j.ID)
	if j.Kind == schedule.KindWorkflow && j.GrantsFromWorkflow {
		fix = fmt.Sprintf("if the workflow's grants: lack it, add it there, then `warden schedule approve %s`", j.ID)
	}
	out.Hint = fmt.Sprintf("a job runs with its scheduled grants ∩ the policy in force (the daemon takes no --grant): grant %s in the policy (%s); %s",
		strings.Join(caps, ", "), policySource, fix)
	return &out
}

// pinnedWorkflow reads and checks a job's workflow file, refusing one that
// changed since it was scheduled.
func pinnedWorkflow(file, digest string, reg *gate.Registry, job string) (*workflow.Workflow, error) {
	src, data, err := runs.OpenWorkflow("", file)
	if err != nil {
		return nil, err
	}
	if sum := policy.SHA256Hex(data); sum != digest {
		return nil, tool.Errorf(tool.CodePolicyDenied, "review it, then `warden schedule approve "+job+"`",
			"%s changed since the job was scheduled (sha256 %s, scheduled %s): refused until approved again", file, ui.Short16(sum), ui.Short16(digest))
	}
	return workflow.Parse(src, data, runs.WorkflowOptions(reg))
}

// notifyJob runs a job's on_failure: a tool call or a workflow, under the
// job's grants, through the gate.
func notifyJob(ctx context.Context, e *env.Env, j schedule.Job, out schedule.Outcome) {
	n := j.OnFailure
	g, err := jobGate(ctx, e, j.Workspace)
	if err != nil {
		e.Log().Warn("schedule: on_failure could not run", "job", j.ID, "err", err)
		return
	}
	jobSet, err := j.GrantSet()
	if err != nil {
		return
	}
	principal := append(j.Principal(), "on_failure")
	if n.Tool != "" {
		res, err := g.Call(ctx, gate.Request{Tool: n.Tool, Args: n.Args, Principal: principal, RunID: out.RunID, Restrict: &jobSet})
		if err != nil || !res.Success {
			e.Log().Warn("schedule: on_failure failed", "job", j.ID, "tool", n.Tool, "err", err, "error", res.Error)
		}
		return
	}
	w, err := pinnedWorkflow(n.Workflow, n.Digest, g.Registry(), j.ID)
	if err == nil {
		base := g.Grants().Intersect(jobSet)
		st, serr := e.Store()
		if serr != nil {
			return
		}
		_, err = workflow.Run(ctx, w, workflow.RunOptions{Gate: g, Base: &base, Principal: principal, Runs: st,
			Params: map[string]any{}, Open: runs.OpenWorkflow, Check: runs.WorkflowOptions(g.Registry()), Redactor: e.Redactor()})
	}
	if err != nil {
		e.Log().Warn("schedule: on_failure workflow failed", "job", j.ID, "err", err)
	}
}

// markInterrupted records a run a dead process left running as
// interrupted, saying why.
func markInterrupted(ctx context.Context, st store.Backend, runID, reason string) error {
	_, err := env.MarkInterrupted(ctx, st, runID, reason)
	return err
}

// selfRunning identifies this process for the running marks: pid, host
// (WARDEN_HOST, else the host name), boot and the process's start time,
// so a reused pid is not taken for it.
func selfRunning() schedule.Running {
	o := env.Self()
	return schedule.Running{PID: o.PID, Host: o.Host, Boot: o.Boot, Start: o.Start}
}

// processAlive reports whether the process of a running mark still runs.
// A mark from another host cannot be checked and counts as alive (its
// lease says when it is not).
func processAlive(r schedule.Running) bool {
	return env.Owner{PID: r.PID, Host: r.Host, Boot: r.Boot, Start: r.Start}.Alive()
}
