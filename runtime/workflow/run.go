package workflow

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/redact"
	"github.com/wardenrt/warden/runtime/tool"
)

// Runs keeps run records (the store satisfies it).
type Runs = gate.Runs

// Run statuses (as the agent's: `runs ls` shows both).
const (
	StatusRunning   = gate.RunRunning
	StatusSucceeded = gate.RunSucceeded
	StatusFailed    = gate.RunFailed
	StatusCancelled = gate.RunCancelled
)

// Step statuses.
const (
	StepSucceeded = "succeeded"
	StepFailed    = "failed"
	StepSkipped   = "skipped"
)

// RunOptions configures [Run]. Gate is required.
type RunOptions struct {
	Gate *gate.Gate
	// Base is what the run may act with at most (default the gate's
	// grants): a workflow run by a tool call acts within that call's.
	Base *capability.Set
	// Params are the values given for the workflow's params (-p): strings
	// are converted to the param's type.
	Params map[string]any
	// Principal is who runs it (["cli"]); calls are made as Principal +
	// "workflow:NAME".
	Principal []string
	RunID     string
	// DryRun previews every step: nothing changes.
	DryRun bool
	// Open reads nested workflows (as Options.Open); Options checks them.
	Open  func(from, path string) (source string, data []byte, err error)
	Check Options
	// Agent runs an agent step and returns its final answer; nil: agent
	// steps fail saying a model is needed.
	Agent func(ctx context.Context, step AgentStep) (string, error)
	// Events, when set, is told as steps start and end (progress).
	Events func(Event)
	Runs   Runs
	// Resume is a failed run of this workflow to continue: the steps it
	// completed are kept, the run goes on from the step that failed.
	Resume   *Record
	Redactor *redact.Redactor
	// Vault keeps the run's masked secrets (see tool.Vault); default a
	// new one. A nested workflow and an agent step share their run's, and
	// a workflow started by a tool call shares that call's.
	Vault *tool.Vault
	Now   func() time.Time
	depth int
}

// AgentStep is an agent step as RunOptions.Agent runs it.
type AgentStep struct {
	Task   string
	Grants capability.Set // the run's: the agent acts within them
	DryRun bool
	Vault  *tool.Vault // the run's
}

// Event is a step starting or ending.
type Event struct {
	Start  bool
	Index  int // 0-based, among Total
	Total  int
	Step   string
	Item   int // foreach iteration, 1-based (0: none)
	Items  int
	Result *StepResult // when ending
	Depth  int
}

// Record is a workflow run as the store keeps it.
type Record struct {
	ID        string         `json:"id"`
	Kind      string         `json:"kind"` // "workflow"
	Task      string         `json:"task"` // the workflow's name
	File      string         `json:"file"`
	Digest    string         `json:"file_sha256"`
	Principal []string       `json:"principal"`
	Params    map[string]any `json:"params"`
	Grants    []string       `json:"grants"`
	DryRun    bool           `json:"dry_run,omitempty"`
	Status    string         `json:"status"`
	Error     *tool.Error    `json:"error,omitempty"`
	Steps     int            `json:"steps"`
	Started   time.Time      `json:"started"`
	Ended     *time.Time     `json:"ended,omitempty"`
	Results   []StepResult   `json:"results"`
	Outputs   map[string]any `json:"outputs,omitempty"`
	Resumed   int            `json:"resumed,omitempty"`
}

// StepResult is one step's outcome.
type StepResult struct {
	ID         string          `json:"id"`
	Kind       string          `json:"kind"`
	Tool       string          `json:"tool,omitempty"`
	Status     string          `json:"status"`
	Output     string          `json:"output"`
	Data       json.RawMessage `json:"data,omitempty"`
	Error      *tool.Error     `json:"error,omitempty"`
	Attempts   int             `json:"attempts,omitempty"`
	Items      int             `json:"items,omitempty"`
	CallIDs    []string        `json:"call_ids,omitempty"`
	AuditSeqs  []uint64        `json:"audit_seqs,omitempty"`
	DryRun     bool            `json:"dry_run,omitempty"`
	DurationMS int64           `json:"duration_ms"`
	// Warnings are its calls' (among them what masking changed).
	Warnings []string `json:"warnings,omitempty"`
	// Steps are a nested workflow's step results.
	Steps []StepResult `json:"steps,omitempty"`
}

// Run runs w through the gate. It returns the run's record whatever the
// outcome; the error is non-nil only when the run could not be carried
// on or recorded. Requested grants the policy does not give fail the run
// before its first step (CAPABILITY_DENIED, naming them).
func Run(ctx context.Context, w *Workflow, o RunOptions) (*Record, error) {
	if o.Gate == nil {
		return nil, errors.New("workflow: Gate is required")
	}
	o = withDefaults(o)
	r := &runner{w: w, o: o}
	rec := &Record{ID: o.RunID, Kind: "workflow", Task: w.Name, File: w.Source, Digest: w.Digest, Principal: o.Principal,
		DryRun: o.DryRun, Status: StatusRunning, Started: o.Now().UTC(), Results: []StepResult{}}
	if rec.ID == "" {
		rec.ID = tool.NewID()
	}
	if o.Resume != nil {
		if err := resumeInto(rec, w, o); err != nil {
			return nil, err
		}
	}
	r.rec = rec
	params, perr := bindParams(w, o.Params)
	rec.Params = params
	r.params = params
	base, requested, gerr := requestedGrants(w, o)
	if perr == nil && gerr != nil {
		perr = gerr
	}
	if perr != nil {
		return r.end(ctx, StatusFailed, tool.AsError(perr))
	}
	if missing := r.grant(base, requested); len(missing) > 0 {
		return r.end(ctx, StatusFailed, tool.NeedsGrants(missing,
			"workflow %s needs %s, which the policy does not grant; no step was run", w.Name, strings.Join(missing, ", ")))
	}
	if err := r.save(ctx); err != nil {
		return nil, err
	}
	for i := len(rec.Results); i < len(w.Steps); i++ {
		if ctx.Err() != nil {
			return r.cancelled(ctx)
		}
		res, err := r.step(ctx, i)
		if err != nil {
			return nil, err
		}
		rec.Results = append(rec.Results, res)
		rec.Steps = len(rec.Results)
		if err := r.save(ctx); err != nil {
			return nil, err
		}
		if ctx.Err() != nil {
			return r.cancelled(ctx)
		}
		if res.Status == StepFailed && !w.Steps[i].ContinueOnError {
			return r.end(ctx, StatusFailed, stepFailure(res, rec.ID))
		}
	}
	outs, oerr := r.outputs()
	if oerr != nil {
		return r.end(ctx, StatusFailed, oerr)
	}
	if len(outs) > 0 {
		rec.Outputs = outs
	}
	return r.end(ctx, StatusSucceeded, nil)
}

// withDefaults returns o with the options left unset filled in.
func withDefaults(o RunOptions) RunOptions {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Redactor == nil {
		o.Redactor = redact.New()
	}
	if o.Vault == nil {
		o.Vault = tool.NewVault()
	}
	if o.Principal == nil {
		o.Principal = []string{"cli"}
	}
	if o.Check.cache == nil {
		o.Check.cache = map[string]parsed{} // nested files are parsed once per run
	}
	return o
}

// resumeInto makes rec the resumption of the run o.Resume records,
// keeping its results up to its first failed step, or refuses to resume.
func resumeInto(rec *Record, w *Workflow, o RunOptions) error {
	prev := o.Resume
	// Results are reused by position: only for the same file, in the
	// same mode, with the same params.
	switch {
	case prev.Digest != w.Digest:
		return tool.Errorf(tool.CodeInvalidInput, "run the workflow anew",
			"%s changed since run %s (sha256 %s, then %s): its recorded steps no longer match", w.Source, prev.ID, w.Digest, prev.Digest)
	case prev.DryRun != o.DryRun:
		return tool.Errorf(tool.CodeInvalidInput, "resume it as it ran (with --dry-run or without), or run the workflow anew",
			"run %s was %s; a resume must be too", prev.ID, map[bool]string{true: "a dry run", false: "not a dry run"}[prev.DryRun])
	}
	for name, v := range o.Params {
		if s, ok := v.(string); ok && redact.ContainsAnyMask(s) {
			return tool.Errorf(tool.CodeInvalidInput, "run the workflow anew with -p "+name+"=…",
				"param %s was redacted in the record of run %s, so a resume cannot restore it", name, prev.ID)
		}
	}
	rec.ID, rec.Started, rec.Resumed = prev.ID, prev.Started, prev.Resumed+1
	for _, res := range prev.Results {
		if res.Status == StepFailed {
			break
		}
		rec.Results = append(rec.Results, res)
	}
	return nil
}

// requestedGrants returns the grants the run starts from and those the
// workflow requests, or the error parsing its grants: key.
func requestedGrants(w *Workflow, o RunOptions) (base, requested capability.Set, err error) {
	// No grants: key at all: the policy's grants, not narrowed; a list
	// (even empty): the policy's ∩ the list.
	base = o.Gate.Grants()
	if o.Base != nil {
		base = *o.Base
	}
	requested = base
	if w.Grants != nil {
		var gerr error
		requested, gerr = capability.ParseSet(o.Gate.Grants().Workspace(), w.Grants)
		if gerr != nil {
			err = tool.Errorf(tool.CodeInvalidInput, "", "grants: %v", gerr)
		}
	}
	return base, requested, err
}

// grant sets the run's grants (base ∩ requested) and records them,
// redacted; it returns the requested grants the base does not give.
func (r *runner) grant(base, requested capability.Set) []string {
	r.grants = base.Intersect(requested)
	granted := map[string]bool{}
	for _, g := range r.grants.Grants() {
		granted[g.String()] = true
		r.rec.Grants = append(r.rec.Grants, r.o.Redactor.String(g.String()))
	}
	var missing []string
	for _, g := range requested.Grants() {
		if !granted[g.String()] {
			missing = append(missing, g.String())
		}
	}
	return missing
}

// stepFailure is the error that ends the run at failed step res, with the
// hint to resume run runID from it.
func stepFailure(res StepResult, runID string) *tool.Error {
	e := res.Error
	if e == nil {
		e = tool.Errorf(tool.CodeToolError, "", "step %s failed", res.ID)
	}
	return tool.Errorf(e.Code, "fix it, then `warden workflow resume "+runID+"` continues from this step",
		"step %s failed: %s", res.ID, e.Message)
}

// outputs evaluates the workflow's outputs, in key order.
func (r *runner) outputs() (map[string]any, *tool.Error) {
	outs := map[string]any{}
	for _, name := range sortedKeys(r.w.Outputs) {
		v, err := substitute(r.w.Outputs[name], r.lookup(nil))
		if err != nil {
			return nil, tool.Errorf(tool.CodeInvalidInput, "", "output %s: %v", name, err)
		}
		outs[name] = v
	}
	return outs, nil
}

type runner struct {
	w      *Workflow
	o      RunOptions
	rec    *Record
	params map[string]any
	grants capability.Set
}

func (r *runner) save(ctx context.Context) error {
	if r.o.Runs == nil {
		return nil
	}
	doc, err := json.Marshal(r.rec)
	if err != nil {
		return err
	}
	if doc, err = r.o.Redactor.JSON(doc); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return r.o.Runs.PutRun(sctx, r.rec.ID, doc)
}

func (r *runner) end(ctx context.Context, status string, err *tool.Error) (*Record, error) {
	r.rec.Status, r.rec.Error = status, err
	now := r.o.Now().UTC()
	r.rec.Ended = &now
	return r.rec, r.save(ctx)
}

// cancelled ends a run whose context is done: cancelled (Ctrl-C, a daemon
// stopping), or stopped at its deadline (a scheduled job's timeout), which
// is a failure.
func (r *runner) cancelled(ctx context.Context) (*Record, error) {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return r.end(ctx, StatusFailed, tool.Errorf(tool.CodeTimeout, "`warden workflow resume "+r.rec.ID+"` continues it",
			"the run reached its deadline after %d step(s)", len(r.rec.Results)))
	}
	return r.end(ctx, StatusCancelled, tool.Errorf(tool.CodeUserCancelled, "`warden workflow resume "+r.rec.ID+"` continues it", "the run was cancelled"))
}

// lookup resolves references against the params, the results so far and
// the current foreach item.
func (r *runner) lookup(item any) lookupFunc {
	return func(ref ref) (any, error) {
		switch ref.root {
		case "params":
			v, ok := r.params[ref.name]
			if !ok {
				return nil, fmt.Errorf("no param %s", ref.name)
			}
			return v, nil
		case "item":
			return dig(item, ref.path, "item")
		}
		for _, res := range r.rec.Results {
			if res.ID != ref.name {
				continue
			}
			switch ref.field {
			case "output":
				return res.Output, nil
			case "success":
				return res.Status == StepSucceeded, nil
			case "failed":
				return res.Status == StepFailed, nil
			case "skipped":
				return res.Status == StepSkipped, nil
			}
			var data any
			if len(res.Data) > 0 {
				if err := json.Unmarshal(res.Data, &data); err != nil {
					return nil, err
				}
			}
			return dig(data, ref.path, "steps."+ref.name+".data")
		}
		return nil, fmt.Errorf("step %s has not run", ref.name)
	}
}

// dig follows fields (and list indexes) into v.
func dig(v any, path []string, what string) (any, error) {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			e, ok := x[p]
			if !ok {
				return nil, fmt.Errorf("%s has no field %s", what, p)
			}
			v = e
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("%s has no element %s", what, p)
			}
			v = x[i]
		default:
			return nil, fmt.Errorf("%s has no field %s", what, p)
		}
		what += "." + p
	}
	return v, nil
}

// step runs step i: its condition, its items, its attempts.
func (r *runner) step(ctx context.Context, i int) (StepResult, error) {
	s := &r.w.Steps[i]
	// A tool step is a dry run when its calls were (the gate runs
	// read-only tools for real even in a dry run).
	res := StepResult{ID: s.ID, Kind: s.Kind(), Tool: s.Tool, DryRun: s.Kind() != "tool" && (r.o.DryRun || s.DryRun)}
	start := time.Now()
	defer func() { res.DurationMS = time.Since(start).Milliseconds() }()
	ev := Event{Start: true, Index: i, Total: len(r.w.Steps), Step: s.ID, Depth: r.o.depth}
	r.emit(ev)
	finish := func() (StepResult, error) {
		res.DurationMS = time.Since(start).Milliseconds()
		ev.Start, ev.Result = false, &res
		r.emit(ev)
		return res, nil
	}
	if s.When != "" {
		c, err := parseCond(s.When)
		var v any
		if err == nil {
			v, err = c.eval(r.lookup(nil))
		}
		if err != nil {
			res.Status, res.Error = StepFailed, tool.Errorf(tool.CodeInvalidInput, "", "when: %v", err)
			return finish()
		}
		if !truthy(v) {
			res.Status = StepSkipped
			return finish()
		}
	}
	items := []any{nil}
	if s.Foreach != nil {
		list, err := substitute(s.Foreach, r.lookup(nil))
		arr, ok := list.([]any)
		switch {
		case err != nil:
			res.Status, res.Error = StepFailed, tool.Errorf(tool.CodeInvalidInput, "", "foreach: %v", err)
			return finish()
		case !ok:
			res.Status, res.Error = StepFailed, tool.Errorf(tool.CodeInvalidInput, "", "foreach: %s is not a list", text(list))
			return finish()
		case len(arr) > MaxForeach:
			res.Status, res.Error = StepFailed, tool.Errorf(tool.CodeTooLarge, "narrow the list", "foreach: %d items, at most %d", len(arr), MaxForeach)
			return finish()
		}
		items = arr
		res.Items = len(arr)
	}
	var outputs []string
	var datas []json.RawMessage
	res.Status = StepSucceeded
	for n, item := range items {
		if s.Foreach != nil {
			r.emit(Event{Start: true, Index: i, Total: len(r.w.Steps), Step: s.ID, Item: n + 1, Items: len(items), Depth: r.o.depth})
		}
		out, data, err := r.attempts(ctx, s, item, &res)
		if err != nil {
			return res, err
		}
		outputs = append(outputs, out)
		datas = append(datas, data)
		if res.Status == StepFailed {
			break
		}
	}
	if s.Foreach == nil {
		res.Output, res.Data = outputs[0], datas[0]
	} else {
		res.Output = strings.Join(outputs, "\n")
		list := make([]any, len(datas))
		for k, d := range datas {
			if len(d) > 0 {
				_ = json.Unmarshal(d, &list[k])
			}
		}
		res.Data, _ = json.Marshal(list)
	}
	return finish()
}

// attempts runs one item of a step, retrying a failure that is not a
// refusal. res accumulates status, error, attempts and call ids.
func (r *runner) attempts(ctx context.Context, s *Step, item any, res *StepResult) (string, json.RawMessage, error) {
	tries, delay := 1, time.Duration(0)
	if s.Retry != nil {
		tries = s.Retry.Attempts + 1
		delay, _ = time.ParseDuration(s.Retry.Delay)
	}
	for a := 1; ; a++ {
		res.Attempts++
		out, data, rerr, err := r.once(ctx, s, item, res)
		if err != nil {
			return "", nil, err
		}
		if rerr == nil {
			return out, data, nil
		}
		if a >= tries || rerr.Code.Denial() || ctx.Err() != nil {
			res.Status, res.Error = StepFailed, rerr
			return out, data, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			res.Status, res.Error = StepFailed, rerr
			return out, data, nil
		case <-t.C:
		}
	}
}

// once runs one attempt of one item. A step failure is rerr; err is a
// runtime failure (the audit log), which ends the run.
func (r *runner) once(ctx context.Context, s *Step, item any, res *StepResult) (out string, data json.RawMessage, rerr *tool.Error, err error) {
	if s.Timeout != "" {
		d, _ := time.ParseDuration(s.Timeout)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	look := r.lookup(item)
	dry := r.o.DryRun || s.DryRun
	switch s.Kind() {
	case "tool":
		args, serr := substitute(orEmpty(s.Args), look)
		if serr != nil {
			return "", nil, tool.Errorf(tool.CodeInvalidInput, "", "args: %v", serr), nil
		}
		raw, _ := json.Marshal(args)
		grants := r.grants
		result, cerr := r.o.Gate.Call(ctx, gate.Request{
			Tool: s.Tool, Args: raw, RunID: r.rec.ID, DryRun: dry, Restrict: &grants, Vault: r.o.Vault,
			Principal: append(append([]string(nil), r.o.Principal...), "workflow:"+r.w.Name),
		})
		if cerr != nil {
			return "", nil, nil, cerr
		}
		for _, w := range result.Warnings {
			if !slices.Contains(res.Warnings, w) {
				res.Warnings = append(res.Warnings, w)
			}
		}
		res.CallIDs = append(res.CallIDs, result.CallID)
		res.DryRun = res.DryRun || result.DryRun
		if result.AuditSeq > 0 {
			res.AuditSeqs = append(res.AuditSeqs, result.AuditSeq)
		}
		if !result.Success {
			return result.Output, result.Data, result.Error, nil
		}
		return result.Output, result.Data, nil, nil
	case "agent":
		task, serr := substitute(s.Agent, look)
		if serr != nil {
			return "", nil, tool.Errorf(tool.CodeInvalidInput, "", "agent: %v", serr), nil
		}
		if r.o.Agent == nil {
			return "", nil, tool.Errorf(tool.CodeLLMError, "set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (an OpenAI-compatible server) and WARDEN_MODEL",
				"step %s is a task for a model, and no model is configured", s.ID), nil
		}
		final, aerr := r.o.Agent(ctx, AgentStep{Task: text(task), Grants: r.grants, DryRun: dry, Vault: r.o.Vault})
		if aerr != nil {
			e := tool.AsError(aerr)
			if e == nil {
				e = tool.Errorf(tool.CodeLLMError, "", "%v", aerr)
			}
			return final, nil, e, nil
		}
		return final, nil, nil, nil
	case "workflow":
		return r.nested(ctx, s, look, res)
	}
	return "", nil, tool.Errorf(tool.CodeInvalidInput, "", "step %s has nothing to run", s.ID), nil
}

// nested runs a workflow step: the child file, checked, with its params,
// under this run's grants.
func (r *runner) nested(ctx context.Context, s *Step, look lookupFunc, res *StepResult) (string, json.RawMessage, *tool.Error, error) {
	if r.o.Open == nil {
		return "", nil, tool.Errorf(tool.CodeInvalidInput, "", "nested workflows cannot be opened here"), nil
	}
	limit := r.o.Check.MaxDepth
	if limit <= 0 {
		limit = DefaultMaxDepth
	}
	if r.o.depth+1 >= limit {
		return "", nil, tool.Errorf(tool.CodeInvalidInput, "", "workflows nest at most %d deep", limit), nil
	}
	src, data, err := r.o.Open(r.w.Source, s.Workflow)
	if err != nil {
		return "", nil, tool.Errorf(tool.CodeNotFound, "", "%v", err), nil
	}
	// A child is parsed once per run, whatever number of times its step
	// runs (a foreach): the run's cache holds it by path and digest.
	sum := sha256.Sum256(data)
	key := "run\x00" + src + "\x00" + string(sum[:])
	p, ok := r.o.Check.cache[key]
	if !ok {
		p.w, p.err = Parse(src, data, r.o.Check)
		r.o.Check.cache[key] = p
	}
	child, err := p.w, p.err
	if err != nil {
		return "", nil, tool.Errorf(tool.CodeInvalidInput, "", "%s: %v", s.Workflow, err), nil
	}
	params, serr := substitute(orEmpty(s.Params), look)
	if serr != nil {
		return "", nil, tool.Errorf(tool.CodeInvalidInput, "", "params: %v", serr), nil
	}
	// The child is a run of its own within this one: this run's grants as
	// its ceiling (∩ what it asks for, anything missing refused before its
	// first step), the same run id, no record of its own.
	co := r.o
	grants := r.grants
	co.Params, co.Resume, co.Runs, co.depth, co.RunID, co.Base = params.(map[string]any), nil, nil, r.o.depth+1, r.rec.ID, &grants
	childRec, err := Run(ctx, child, co)
	if err != nil {
		return "", nil, nil, err
	}
	res.Steps = childRec.Results
	outs, _ := json.Marshal(orEmpty(childRec.Outputs))
	if childRec.Status != StatusSucceeded {
		e := childRec.Error
		if e == nil {
			e = tool.Errorf(tool.CodeToolError, "", "%s %s", s.Workflow, childRec.Status)
		}
		return string(outs), outs, e, nil
	}
	return string(outs), outs, nil, nil
}

func (r *runner) emit(e Event) {
	if r.o.Events != nil {
		r.o.Events(e)
	}
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// bindParams checks the given params against the declared ones (unknown
// or missing required ones are errors), converts strings given on the
// command line to the declared type, and fills in defaults.
func bindParams(w *Workflow, given map[string]any) (map[string]any, error) {
	out := map[string]any{}
	for _, name := range sortedKeys(given) {
		if given[name] == nil {
			continue // an optional param given no value (as a resumed run records it)
		}
		p, ok := w.Params[name]
		if !ok {
			return nil, tool.Errorf(tool.CodeInvalidInput, "declared params: "+strings.Join(sortedKeys(w.Params), ", "), "workflow %s has no param %s", w.Name, name)
		}
		v := given[name]
		if s, isStr := v.(string); isStr && p.Type != "string" {
			var conv any
			if err := json.Unmarshal([]byte(s), &conv); err != nil {
				return nil, tool.Errorf(tool.CodeInvalidInput, "", "param %s: %q is not a %s", name, s, p.Type)
			}
			v = conv
		}
		if err := checkType(p.Type, v); err != nil {
			return nil, tool.Errorf(tool.CodeInvalidInput, "", "param %s: %v", name, err)
		}
		out[name] = v
	}
	for _, name := range sortedKeys(w.Params) {
		if _, ok := out[name]; ok {
			continue
		}
		p := w.Params[name]
		switch {
		case p.Default != nil:
			out[name] = p.Default
		case p.Required:
			return nil, tool.Errorf(tool.CodeInvalidInput, "give it with -p "+name+"=VALUE", "workflow %s needs param %s", w.Name, name)
		default:
			out[name] = nil
		}
	}
	return out, nil
}
