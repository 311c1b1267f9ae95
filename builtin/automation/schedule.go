package automation

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/schedule"
	"github.com/wardenrt/warden/runtime/tool"
)

// ScheduleTask is schedule_task ("add
// scheduled jobs"): a model or a workflow proposes a job — a workflow file
// or an agent task, with grants, on a schedule. The built-in default
// policy requires approval for it, with its dry run first: the approver
// sees the job, its schedule, its next five firings and its grants. A job
// never carries a grant the call itself does not hold.
type ScheduleTask struct {
	Jobs schedule.Store
	Now  func() time.Time
}

var (
	_ tool.Typed[scheduleTaskArgs]          = (*ScheduleTask)(nil)
	_ tool.TypedPreviewer[scheduleTaskArgs] = (*ScheduleTask)(nil)
	_ tool.SchemaRefiner                    = (*ScheduleTask)(nil)
)

// scheduleTaskArgs are schedule_task's arguments; their schema is its
// input schema (RefineSchema adds what tags cannot say).
type scheduleTaskArgs struct {
	Name      string             `json:"name" pattern:"^[a-zA-Z0-9_-]{1,64}$" jsonschema:"the job's name"`
	Workflow  string             `json:"workflow,omitempty" minLength:"1" maxLength:"4096" jsonschema:"a workflow file, relative to the workspace (pinned by sha256)"`
	Task      string             `json:"task,omitempty" minLength:"1" maxLength:"65536" jsonschema:"an agent task, instead of a workflow"`
	Params    map[string]any     `json:"params,omitempty" keyPattern:"^[A-Za-z_][A-Za-z0-9_]{0,63}$" jsonschema:"the workflow's params"`
	Grants    []string           `json:"grants,omitempty" maxItems:"64" items.minLength:"1" items.maxLength:"4096" jsonschema:"the grants the job runs with (default: the workflow's own; none for a task); each must be one this call holds"`
	Every     string             `json:"every,omitempty" jsonschema:"an interval: 15m, 1h"`
	Cron      string             `json:"cron,omitempty" jsonschema:"a 5-field cron expression: minute hour day-of-month month day-of-week"`
	TZ        string             `json:"tz,omitempty" jsonschema:"the time zone of cron and at (default UTC)"`
	At        string             `json:"at,omitempty" jsonschema:"once, at a time (RFC 3339)"`
	Missed    string             `json:"missed,omitempty" enum:"skip,once" jsonschema:"firings missed while no daemon ran: skip (default) or run once"`
	TimeoutS  int64              `json:"timeout_s,omitempty" minimum:"1" maximum:"86400" jsonschema:"a run's deadline in seconds (default 3600)"`
	OnFailure *scheduleOnFailure `json:"on_failure,omitempty" jsonschema:"what runs when a run fails, under the job's grants"`
}

// scheduleOnFailure is the tool a job calls when a run fails.
type scheduleOnFailure struct {
	Tool string `json:"tool" pattern:"^[a-zA-Z0-9_-]{1,64}$"`
	// Args are the tool's arguments, kept as sent (the tool's own schema
	// checks them).
	Args json.RawMessage `json:"args,omitempty"`
}

// RefineSchema implements tool.SchemaRefiner: the values params may hold,
// and on_failure.args, an object of any values (its Go type keeps the
// arguments as sent, raw bytes, whose derived schema is an array).
func (t *ScheduleTask) RefineSchema(s *jsonschema.Schema) {
	workflowParamValues(s.Properties["params"])
	args := s.Properties["on_failure"].Properties["args"]
	*args = jsonschema.Schema{
		Type:        "object",
		Description: args.Description,
		PatternProperties: map[string]*jsonschema.Schema{
			"^.{1,256}$": {Description: "an argument of the tool, any JSON value"},
		},
		AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}},
	}
}

// Spec implements tool.Typed.
func (t *ScheduleTask) Spec() tool.Spec {
	return tool.Spec{
		Name: "schedule_task",
		Description: "Propose a scheduled job: a workflow file or an agent task, run by `warden daemon` every interval (every: 15m), on a cron expression (cron, tz) or once (at), " +
			"with grants you hold yourself. A person approves it first, seeing its next firings and grants; it runs with its grants ∩ the policy in force then.",
		Capabilities:     []capability.Kind{capability.FSRead},
		ApprovalRequired: true,
	}
}

func (t *ScheduleTask) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// Needs implements tool.Typed: fs.read of the workflow file.
func (t *ScheduleTask) Needs(c *tool.Call, a *scheduleTaskArgs) ([]capability.Need, error) {
	if a.Workflow == "" {
		return nil, nil
	}
	return workflowFileNeeds(c.Workspace, a.Workflow)
}

// prepare makes the job the call proposes, checked against the call's own
// grants.
func (t *ScheduleTask) prepare(ctx context.Context, c *tool.Call, a *scheduleTaskArgs) (schedule.Job, *tool.Error) {
	req := schedule.Request{
		Name: a.Name, Task: a.Task, Params: a.Params, Grants: a.Grants, Missed: a.Missed, TimeoutS: a.TimeoutS,
		Spec: schedule.Spec{Every: a.Every, Cron: a.Cron, TZ: a.TZ, At: a.At},
	}
	if req.Grants == nil && a.Workflow == "" {
		req.Grants = []string{}
	}
	check := workflowCheck(ctx, c)
	if a.Workflow != "" {
		src, data, err := check.Open("", a.Workflow)
		if err != nil {
			return schedule.Job{}, tool.AsError(err)
		}
		req.Workflow, req.Data = src, data
	}
	if a.OnFailure != nil {
		args := a.OnFailure.Args
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		req.OnFailure = &schedule.Notify{Tool: a.OnFailure.Tool, Args: args}
		if g, ok := gate.GateFrom(ctx); ok {
			if err := g.Registry().CheckArgs(a.OnFailure.Tool, args); err != nil {
				return schedule.Job{}, tool.AsError(err)
			}
		}
	}
	j, err := schedule.Prepare(req, c.Workspace, c.Principal, c.Grants, t.now(), check)
	if err != nil {
		return schedule.Job{}, tool.AsError(err)
	}
	return j, nil
}

// ScheduleTaskData is schedule_task's data.
type ScheduleTaskData struct {
	Job       schedule.Job `json:"job"`
	Next      []time.Time  `json:"next"`
	Scheduled bool         `json:"scheduled"`
}

func (t *ScheduleTask) outcome(j schedule.Job, scheduled bool) tool.Outcome {
	d := ScheduleTaskData{Job: j, Scheduled: scheduled}
	if sc, err := j.Schedule(); err == nil {
		d.Next = sc.Firings(j.Anchor, t.now(), 5)
	}
	out := j.Describe(t.now(), 5)
	if scheduled {
		out = "scheduled:\n" + out
	} else {
		out = "would schedule (nothing was changed):\n" + out
	}
	return tool.Outcome{Output: out, Data: d}
}

// Preview implements tool.TypedPreviewer: the job, its next firings and
// grants.
func (t *ScheduleTask) Preview(ctx context.Context, c *tool.Call, a *scheduleTaskArgs) tool.Outcome {
	j, err := t.prepare(ctx, c, a)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	return t.outcome(j, false)
}

// Run implements tool.Typed: the job is stored; `warden daemon` runs it.
func (t *ScheduleTask) Run(ctx context.Context, c *tool.Call, a *scheduleTaskArgs) tool.Outcome {
	if t.Jobs == nil {
		return tool.Fail(tool.CodeOperationNotSupported, "", "no job store is configured")
	}
	j, err := t.prepare(ctx, c, a)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	j.Approval = "the call's approval (audit record " + c.ID + ")"
	if e := t.Jobs.CreateJob(ctx, j); e != nil {
		return tool.Fail(tool.CodeAlreadyExists, "choose another name", "%v", e)
	}
	return t.outcome(j, true)
}
