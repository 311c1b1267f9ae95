package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/workflow"
)

// Request is a job someone asks for: the CLI's `schedule add` or a
// model's schedule_task.
type Request struct {
	Name string `json:"name"`
	// Workflow is the workflow file (absolute); Data its bytes as read
	// under the scheduler's grants.
	Workflow string `json:"workflow,omitempty"`
	Data     []byte `json:"-"`
	Task     string `json:"task,omitempty"`
	Params   map[string]any
	// Grants the job runs with; nil: the workflow's own grants (none for
	// an agent task).
	Grants    []string
	Spec      Spec
	Missed    string
	TimeoutS  int64
	OnFailure *Notify
	// OnFailureData is the on_failure workflow's bytes.
	OnFailureData []byte
}

// Prepare checks a request and makes the job it asks for, scheduled by
// principal in workspace ws at now. held is the scheduler's own grants: a
// job's grants must be within them (CAPABILITY_DENIED naming the wider
// ones otherwise). check validates a workflow against the tools.
func Prepare(req Request, ws string, principal []string, held capability.Set, now time.Time, check workflow.Options) (Job, error) {
	j := Job{
		ID: req.Name, Params: req.Params, Workspace: ws, Spec: req.Spec, Missed: req.Missed, TimeoutS: req.TimeoutS,
		OnFailure: req.OnFailure, Created: now.UTC(), Anchor: now.UTC(), CreatedBy: principal,
	}
	if j.Missed == "" {
		j.Missed = MissedSkip
	}
	grants := req.Grants
	switch {
	case req.Workflow != "" && req.Task != "":
		return Job{}, tool.Errorf(tool.CodeInvalidInput, "", "give a workflow or a task, not both")
	case req.Workflow != "":
		j.Kind, j.Workflow, j.Digest = KindWorkflow, req.Workflow, policy.SHA256Hex(req.Data)
		w, err := workflow.Parse(req.Workflow, req.Data, check)
		if err != nil {
			return Job{}, tool.Errorf(tool.CodeInvalidInput, "check it with `warden workflow validate`", "workflow %s: %v", req.Workflow, err)
		}
		if grants == nil {
			grants, j.GrantsFromWorkflow = w.Grants, true
		}
	case req.Task != "":
		j.Kind, j.Task = KindAgent, req.Task
	default:
		return Job{}, tool.Errorf(tool.CodeInvalidInput, "", "give a workflow file or an agent task")
	}
	if n := j.OnFailure; n != nil && n.Workflow != "" {
		if _, err := workflow.Parse(n.Workflow, req.OnFailureData, check); err != nil {
			return Job{}, tool.Errorf(tool.CodeInvalidInput, "", "on_failure workflow %s: %v", n.Workflow, err)
		}
		n.Digest = policy.SHA256Hex(req.OnFailureData)
	}
	j.Grants = []string{}
	for _, g := range grants {
		pg, err := capability.Parse(g)
		if err != nil {
			return Job{}, tool.Errorf(tool.CodeInvalidInput, "", "grant %s: %v", g, err)
		}
		j.Grants = append(j.Grants, pg.String())
	}
	if err := j.Validate(); err != nil {
		return Job{}, tool.Errorf(tool.CodeInvalidInput, "", "%v", err)
	}
	wider, err := Within(ws, j.Grants, held)
	if err != nil {
		return Job{}, tool.Errorf(tool.CodeInvalidInput, "", "%v", err)
	}
	if len(wider) > 0 {
		return Job{}, tool.Errorf(tool.CodeCapabilityDenied, "schedule it with grants its scheduler holds",
			"a job cannot carry grants wider than its scheduler's: %s", strings.Join(wider, ", "))
	}
	return j, nil
}

// Describe says what a job is, what it runs with, and when it fires next
// (n firings after now).
func (j *Job) Describe(now time.Time, n int) string {
	var b strings.Builder
	what := "workflow " + j.Workflow + " (sha256 " + shortSum(j.Digest) + ")"
	if j.Kind == KindAgent {
		what = fmt.Sprintf("agent task %q", j.Task)
	}
	fmt.Fprintf(&b, "job %s: %s\n", j.ID, what)
	grants := strings.Join(j.Grants, ", ")
	if grants == "" {
		grants = "(none)"
	}
	fmt.Fprintf(&b, "  grants:   %s (∩ the policy in force when it runs)\n", grants)
	fmt.Fprintf(&b, "  in:       %s, as principal schedule:%s\n", j.Workspace, j.ID)
	if sc, err := j.Schedule(); err == nil {
		fmt.Fprintf(&b, "  schedule: %s; missed runs: %s; timeout %s\n", sc, j.Missed, j.Timeout())
		from := now
		if j.LastFire.After(from) {
			from = j.LastFire
		}
		for _, f := range sc.Firings(j.Anchor, from, n) {
			fmt.Fprintf(&b, "  next:     %s\n", f.In(sc.loc).Format(time.RFC3339))
		}
	}
	if n := j.OnFailure; n != nil {
		if n.Tool != "" {
			fmt.Fprintf(&b, "  on failure: call %s %s\n", n.Tool, n.Args)
		} else {
			fmt.Fprintf(&b, "  on failure: workflow %s\n", n.Workflow)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// NextFiring is the job's next firing after now (zero when none).
func (j *Job) NextFiring(now time.Time) time.Time {
	if j.Done {
		return time.Time{}
	}
	sc, err := j.Schedule()
	if err != nil {
		return time.Time{}
	}
	from := j.LastFire
	if from.IsZero() {
		from = j.Created
	}
	next, ok := sc.Next(j.Anchor, from)
	if !ok {
		return time.Time{}
	}
	return next
}

func shortSum(s string) string {
	if len(s) > 16 {
		return s[:16]
	}
	return s
}
