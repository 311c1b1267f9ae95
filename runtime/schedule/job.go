package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// Job kinds.
const (
	KindWorkflow = "workflow"
	KindAgent    = "agent"
)

// Missed-run policies: what a job does about firings that passed while no
// daemon ran.
const (
	MissedSkip = "skip" // recorded as skipped; the job waits for its next firing
	MissedOnce = "once" // run once when the daemon starts, for all of them
)

// Limits of a job.
const (
	DefaultTimeout = time.Hour
	MaxTimeout     = 24 * time.Hour
)

// Job is one scheduled job as the store keeps it: what it runs, with what,
// when, and what became of its firings.
type Job struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // workflow | agent
	// Workflow is the workflow file (absolute) and Digest its sha256 when
	// the job was scheduled: a changed file is refused until re-approved.
	Workflow string         `json:"workflow,omitempty"`
	Digest   string         `json:"workflow_sha256,omitempty"`
	Task     string         `json:"task,omitempty"` // agent
	Params   map[string]any `json:"params,omitempty"`
	// Grants are what the job was scheduled with, never wider than its
	// scheduler's own then; it runs with them ∩ the policy in force.
	Grants []string `json:"grants"`
	// GrantsFromWorkflow: Grants are the workflow's own (none were given),
	// so approving a changed workflow takes its new ones.
	GrantsFromWorkflow bool   `json:"grants_from_workflow,omitempty"`
	Workspace          string `json:"workspace"`
	Spec               Spec   `json:"schedule"`
	Missed             string `json:"missed"`
	TimeoutS           int64  `json:"timeout_s"`
	// OnFailure runs when a firing fails: a tool call or a workflow, under
	// the job's grants, through the gate.
	OnFailure *Notify `json:"on_failure,omitempty"`

	Paused    bool      `json:"paused,omitempty"`
	Created   time.Time `json:"created"`
	CreatedBy []string  `json:"created_by"` // the principal that scheduled it
	Approval  string    `json:"approval"`   // how it was approved

	// Anchor is where an every schedule counts from (its creation).
	Anchor time.Time `json:"anchor"`
	// LastFire is the last firing handled (run, skipped or missed).
	LastFire time.Time `json:"last_fire,omitzero"`
	Last     *Outcome  `json:"last,omitempty"`
	Running  *Running  `json:"running,omitempty"`
	Done     bool      `json:"done,omitempty"` // an at job that has fired
	Skipped  int       `json:"skipped,omitempty"`
	Runs     int       `json:"runs,omitempty"`
	// Fence is the last fencing token LocalLeases gave a claim of this
	// job.
	Fence int64 `json:"fence,omitempty"`
}

// Notify is what runs when a job's firing fails.
type Notify struct {
	Tool     string          `json:"tool,omitempty"`
	Args     json.RawMessage `json:"args,omitempty"`
	Workflow string          `json:"workflow,omitempty"`
	// Digest pins the workflow as the job's own is pinned.
	Digest string `json:"workflow_sha256,omitempty"`
}

// Outcome is what became of a firing.
type Outcome struct {
	Fire    time.Time   `json:"fire"`
	RunID   string      `json:"run_id,omitempty"`
	Status  string      `json:"status"` // a run status, "skipped" or "interrupted"
	Started time.Time   `json:"started,omitzero"`
	Ended   time.Time   `json:"ended,omitzero"`
	Error   *tool.Error `json:"error,omitempty"`
	Reason  string      `json:"reason,omitempty"`
	// Attempt is the run's attempt at its firing when it is not the
	// first: an earlier run (Retry) was lost.
	Attempt int    `json:"attempt,omitempty"`
	Retry   *Retry `json:"retry,omitempty"`
}

// Retry names the lost run of a firing that a later attempt took over,
// and why it was lost.
type Retry struct {
	RunID  string `json:"run_id"`
	Host   string `json:"host"`
	PID    int    `json:"pid,omitempty"`
	Reason string `json:"reason"`
}

// Running marks a job whose firing is being run, by which process.
type Running struct {
	RunID string    `json:"run_id"`
	Fire  time.Time `json:"fire"`
	PID   int       `json:"pid"`
	Host  string    `json:"host"`
	Boot  string    `json:"boot,omitempty"`
	// Start is the process's start time, so a reused pid is not taken for it.
	Start   string    `json:"start,omitempty"`
	Started time.Time `json:"started"`
	// The claim: its fencing token, when its lease expires unless
	// renewed, which attempt at the firing it is (and the lost run it
	// took over).
	Token      int64     `json:"token,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	Attempt    int       `json:"attempt,omitempty"`
	Retry      *Retry    `json:"retry,omitempty"`
}

// Statuses of a firing besides the run statuses.
const (
	StatusSkipped     = "skipped"
	StatusInterrupted = "interrupted"
)

// Timeout is the job's timeout.
func (j *Job) Timeout() time.Duration {
	if j.TimeoutS <= 0 {
		return DefaultTimeout
	}
	return time.Duration(j.TimeoutS) * time.Second
}

// Schedule parses the job's schedule.
func (j *Job) Schedule() (*Schedule, error) { return Parse(j.Spec) }

// Resume lets a paused job fire again from its next firing after now:
// the firings that fell while it was paused were the owner's choice, not
// missed ones, so they are neither run (missed: once) nor counted as
// missed. A one-off (at) job keeps its firing: resumed after its time, it
// is handled by its missed-run policy, as after downtime.
func (j *Job) Resume(now time.Time) {
	j.Paused = false
	if sc, err := j.Schedule(); err == nil && !sc.Once() && j.LastFire.Before(now) {
		j.LastFire = now
	}
}

// Principal is the principal the job's calls are made as.
func (j *Job) Principal() []string { return []string{"schedule:" + j.ID} }

// Validate checks a job's definition.
func (j *Job) Validate() error {
	var errs []error
	if !gate.ValidToolName(j.ID) {
		errs = append(errs, fmt.Errorf("job name %q: use 1-64 letters, digits, _ or -", j.ID))
	}
	switch j.Kind {
	case KindWorkflow:
		if j.Workflow == "" || j.Digest == "" {
			errs = append(errs, errors.New("a workflow job needs its file and its sha256"))
		}
	case KindAgent:
		if j.Task == "" {
			errs = append(errs, errors.New("an agent job needs a task"))
		}
	default:
		errs = append(errs, fmt.Errorf("kind %q: use workflow or agent", j.Kind))
	}
	if _, err := Parse(j.Spec); err != nil {
		errs = append(errs, err)
	}
	switch j.Missed {
	case MissedSkip, MissedOnce:
	default:
		errs = append(errs, fmt.Errorf("missed %q: use skip or once", j.Missed))
	}
	if j.TimeoutS < 0 || time.Duration(j.TimeoutS)*time.Second > MaxTimeout {
		errs = append(errs, fmt.Errorf("timeout: at most %s", MaxTimeout))
	}
	for _, g := range j.Grants {
		if _, err := capability.Parse(g); err != nil {
			errs = append(errs, fmt.Errorf("grant %s: %v", g, err))
		}
	}
	if n := j.OnFailure; n != nil && (n.Tool == "") == (n.Workflow == "") {
		errs = append(errs, errors.New("on_failure: give a tool or a workflow"))
	}
	return errors.Join(errs...)
}

// GrantSet is the job's grants anchored to its workspace.
func (j *Job) GrantSet() (capability.Set, error) {
	return capability.ParseSet(j.Workspace, j.Grants)
}

// Within checks that every one of grants is allowed in full by held — a
// job's grants are never wider than its scheduler's — and returns those
// that are not.
func Within(workspace string, grants []string, held capability.Set) ([]string, error) {
	req, err := capability.ParseSet(workspace, grants)
	if err != nil {
		return nil, err
	}
	inter := req.Intersect(held)
	kept := map[string]bool{}
	for _, g := range inter.Grants() {
		kept[g.String()] = true
	}
	var wider []string
	for _, g := range req.Grants() {
		if !kept[g.String()] {
			wider = append(wider, g.String())
		}
	}
	return wider, nil
}

// Store keeps jobs. The store satisfies it; UpdateJob changes one job in
// one transaction (a pause from the CLI is not lost to a daemon recording
// a run).
type Store interface {
	ListJobs(ctx context.Context) ([]Job, error)
	GetJob(ctx context.Context, id string) (Job, error)
	// CreateJob adds a job; an id already taken is an error.
	CreateJob(ctx context.Context, j Job) error
	UpdateJob(ctx context.Context, id string, fn func(*Job) error) error
	DeleteJob(ctx context.Context, id string) error
}
