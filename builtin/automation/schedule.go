package automation

import (
	"context"
	"encoding/json"
	"time"

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

var _ tool.Tool = (*ScheduleTask)(nil)

var scheduleTaskSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$", "description": "the job's name"},
    "workflow": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "a workflow file, relative to the workspace (pinned by sha256)"},
    "task": {"type": "string", "minLength": 1, "maxLength": 65536, "description": "an agent task, instead of a workflow"},
    "params": {"type": "object", "description": "the workflow's params",
      "patternProperties": {"^[A-Za-z_][A-Za-z0-9_]{0,63}$": {"type": ["string", "number", "integer", "boolean", "array", "null"]}},
      "additionalProperties": false},
    "grants": {"type": "array", "maxItems": 64, "items": {"type": "string", "minLength": 1, "maxLength": 4096},
      "description": "the grants the job runs with (default: the workflow's own; none for a task); each must be one this call holds"},
    "every": {"type": "string", "description": "an interval: 15m, 1h"},
    "cron": {"type": "string", "description": "a 5-field cron expression: minute hour day-of-month month day-of-week"},
    "tz": {"type": "string", "description": "the time zone of cron and at (default UTC)"},
    "at": {"type": "string", "description": "once, at a time (RFC 3339)"},
    "missed": {"enum": ["skip", "once"], "description": "firings missed while no daemon ran: skip (default) or run once"},
    "timeout_s": {"type": "integer", "minimum": 1, "maximum": 86400, "description": "a run's deadline in seconds (default 3600)"},
    "on_failure": {"type": "object", "description": "what runs when a run fails, under the job's grants",
      "properties": {
        "tool": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
        "args": {"type": "object", "patternProperties": {"^.{1,256}$": {}}, "additionalProperties": false}
      },
      "required": ["tool"],
      "additionalProperties": false}
  },
  "required": ["name"],
  "additionalProperties": false
}`)

type scheduleTaskArgs struct {
	Name      string         `json:"name"`
	Workflow  string         `json:"workflow"`
	Task      string         `json:"task"`
	Params    map[string]any `json:"params"`
	Grants    []string       `json:"grants"`
	Every     string         `json:"every"`
	Cron      string         `json:"cron"`
	TZ        string         `json:"tz"`
	At        string         `json:"at"`
	Missed    string         `json:"missed"`
	TimeoutS  int64          `json:"timeout_s"`
	OnFailure *struct {
		Tool string          `json:"tool"`
		Args json.RawMessage `json:"args"`
	} `json:"on_failure"`
}

// Spec implements tool.Tool.
func (t *ScheduleTask) Spec() tool.Spec {
	return tool.Spec{
		Name: "schedule_task",
		Description: "Propose a scheduled job: a workflow file or an agent task, run by `warden daemon` every interval (every: 15m), on a cron expression (cron, tz) or once (at), " +
			"with grants you hold yourself. A person approves it first, seeing its next firings and grants; it runs with its grants ∩ the policy in force then.",
		InputSchema:      scheduleTaskSchema,
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

// Needs implements tool.Tool: fs.read of the workflow file.
func (t *ScheduleTask) Needs(c *tool.Call) ([]capability.Need, error) {
	var a scheduleTaskArgs
	if err := c.Bind(&a); err != nil {
		return nil, err
	}
	if a.Workflow == "" {
		return nil, nil
	}
	return workflowFileNeeds(c.Workspace, a.Workflow)
}

// prepare makes the job the call proposes, checked against the call's own
// grants.
func (t *ScheduleTask) prepare(ctx context.Context, c *tool.Call) (schedule.Job, *tool.Error) {
	var a scheduleTaskArgs
	if err := c.Bind(&a); err != nil {
		return schedule.Job{}, tool.AsError(err)
	}
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

// Preview implements tool.Tool: the job, its next firings and grants.
func (t *ScheduleTask) Preview(ctx context.Context, c *tool.Call) tool.Outcome {
	j, err := t.prepare(ctx, c)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	return t.outcome(j, false)
}

// Run implements tool.Tool: the job is stored; `warden daemon` runs it.
func (t *ScheduleTask) Run(ctx context.Context, c *tool.Call) tool.Outcome {
	if t.Jobs == nil {
		return tool.Fail(tool.CodeOperationNotSupported, "", "no job store is configured")
	}
	j, err := t.prepare(ctx, c)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	j.Approval = "the call's approval (audit record " + c.ID + ")"
	if e := t.Jobs.CreateJob(ctx, j); e != nil {
		return tool.Fail(tool.CodeAlreadyExists, "choose another name", "%v", e)
	}
	return t.outcome(j, true)
}
