// Package agent is warden's agent loop: a task, a model choosing tool
// calls, and every call through the gate. A model can ask for anything;
// what happens is what the gate allows — an unknown tool, malformed
// arguments or a refusal becomes a result the model sees, never a crash
// and never a change of grants. Each run is recorded (transcript, model
// answers, tool calls linked to their audit records) so that it can be
// exported and replayed offline.
package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"

	"github.com/wardenrt/warden/internal/runpatch"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/redact"
	"github.com/wardenrt/warden/runtime/tool"
)

// Runs keeps run records; the store satisfies it. A record is written when
// the run starts, after every step and when it ends.
type Runs = gate.Runs

// Defaults.
const (
	DefaultMaxSteps        = 25
	DefaultMaxCallsPerTurn = 16
	// DefaultMaxToolOutput is how many characters of a tool's output the
	// model sees; the whole result is kept as an artifact.
	DefaultMaxToolOutput = 8000
	// maxLengthStreak ends a run whose replies keep being cut off.
	maxLengthStreak = 3
)

// Options configures [Run]. Gate, Model and Task are required.
type Options struct {
	Gate  *gate.Gate
	Model Model
	Task  string
	// ModelName and Endpoint (a host, never a key) are recorded.
	ModelName, Endpoint string
	// Tools is the subset offered to the model (registry names); nil: all.
	Tools []string
	// MaxSteps bounds the model's turns (default 25); MaxCallsPerTurn the
	// tool calls run from one answer (default 16, the rest are refused);
	// TokenBudget the run's total tokens (0: none).
	MaxSteps, MaxCallsPerTurn, TokenBudget int
	// System is added to the system prompt (--system FILE).
	System string
	// Principal is who started the run (["cli"]); the model's calls are
	// made as Principal + "model".
	Principal []string
	// RunID names the run (default a new sortable id).
	RunID string
	// Runs records the run (nil: not recorded); Artifacts keeps whole tool
	// results the model saw only part of; Memory holds the run's primed
	// context (prime_context), put into its prompt.
	Runs      Runs
	Artifacts gate.Artifacts
	Memory    gate.Memory
	// Events, when set, is told what happens as it happens (the terminal).
	Events func(Event)
	// DryRun makes every call a dry run (a replay's default).
	DryRun bool
	// Restrict, when set, narrows the run's grants to the gate's ∩
	// Restrict (an agent step acts with its workflow's grants).
	Restrict *capability.Set
	// MaxToolOutput: see DefaultMaxToolOutput.
	MaxToolOutput int
	// Kind is recorded ("agent", or "replay").
	Kind string
	// ReplayOf names the run a replay replays.
	ReplayOf string
	// Redactor masks secrets in the record before it is written (default
	// redact.New(); give it the API key as a literal).
	Redactor *redact.Redactor
	// Vault keeps the run's masked secrets, so that a mask the model
	// writes back into the file it came from is restored (default a new
	// one: each run has its own; an agent step of a workflow shares the
	// workflow's).
	Vault *tool.Vault
	Now   func() time.Time
}

// EventKind says what an [Event] is about.
type EventKind string

// Event kinds.
const (
	EventWaiting    EventKind = "waiting"     // a request to the model is on its way
	EventText       EventKind = "text"        // assistant text (a streamed piece, or all of it)
	EventAnswer     EventKind = "answer"      // the model answered (Step, Text: finish reason)
	EventToolCall   EventKind = "tool_call"   // about to call Tool with Args
	EventToolResult EventKind = "tool_result" // Result of the call
	EventNote       EventKind = "note"        // something the person should know (Text)
)

// Event is one thing that happened in a run.
type Event struct {
	Kind   EventKind
	Step   int
	Text   string
	Tool   string
	Args   json.RawMessage
	Result *tool.Result
}

// Run statuses.
const (
	StatusRunning   = gate.RunRunning
	StatusSucceeded = gate.RunSucceeded
	StatusFailed    = gate.RunFailed
	StatusCancelled = gate.RunCancelled
	// StatusStopped: a budget (steps, tokens, time) ended the run.
	StatusStopped = gate.RunStopped
)

// Record is a run as the store keeps it (docs/store.md) and `runs show` prints.
type Record struct {
	ID         string           `json:"id"`
	Kind       string           `json:"kind"`
	Task       string           `json:"task"`
	Model      string           `json:"model"`
	Endpoint   string           `json:"endpoint"`
	Principal  []string         `json:"principal"`
	Grants     []string         `json:"grants"`
	Tools      []string         `json:"tools"`
	DryRun     bool             `json:"dry_run,omitempty"`
	Status     string           `json:"status"`
	Error      *tool.Error      `json:"error,omitempty"`
	Steps      int              `json:"steps"`
	Usage      Usage            `json:"usage"`
	Started    time.Time        `json:"started"`
	Ended      *time.Time       `json:"ended,omitempty"`
	Timings    Timings          `json:"timings"`
	Final      string           `json:"final"`
	Transcript []Message        `json:"transcript"`
	Responses  []ModelResponse  `json:"responses"`
	ToolCalls  []ToolCallRecord `json:"tool_calls"`
	ReplayOf   string           `json:"replay_of,omitempty"`
	Diffs      []Difference     `json:"differences,omitempty"`
}

// Timings splits a run's time.
type Timings struct {
	TotalMS int64 `json:"total_ms"`
	ModelMS int64 `json:"model_ms"`
	ToolsMS int64 `json:"tools_ms"`
}

// ToolCallRecord is one tool call the model asked for, linked to its audit
// record.
type ToolCallRecord struct {
	Step        int             `json:"step"`
	ModelCallID string          `json:"model_call_id"`
	Tool        string          `json:"tool"`
	Args        json.RawMessage `json:"args"`
	CallID      string          `json:"call_id,omitempty"`
	AuditSeq    uint64          `json:"audit_seq,omitempty"`
	Success     bool            `json:"success"`
	Code        string          `json:"code,omitempty"`
	DryRun      bool            `json:"dry_run,omitempty"`
	// NeedsApproval marks a dry run the gate previewed although, run for
	// real, the call would need an approval no one can give now (a dry
	// run is previewed before the approval step): a replay compares it as
	// APPROVAL_REQUIRED.
	NeedsApproval bool  `json:"needs_approval,omitempty"`
	DurationMS    int64 `json:"duration_ms"`
	// Output is what the model was shown; Artifact the whole result when
	// the model was shown less.
	Output   string `json:"output"`
	Artifact string `json:"artifact,omitempty"`
	// Warnings are the result's (among them what masking changed).
	Warnings []string `json:"warnings,omitempty"`
}

// Run runs a task to its end and returns its record. The record is
// returned (and kept) whatever the outcome; the error is non-nil only
// when the run could not be carried on or recorded (the store failed).
// The run's status says how it ended: succeeded (a final answer), failed
// (Record.Error says why: LLM_ERROR …), stopped (a budget), cancelled.
func Run(ctx context.Context, o Options) (*Record, error) {
	l, err := newLoop(o)
	if err != nil {
		return nil, err
	}
	return l.run(ctx)
}

type loop struct {
	o       Options
	rec     *Record
	offered map[string]bool
	tools   []openai.Tool
	// msgs is the conversation the model is sent; rec.Transcript is its
	// redacted copy, each message redacted once, as it is added.
	msgs   []Message
	system string // the system prompt last sent
	red    *redact.Redactor
	// cache holds the JSON of the record's list elements, each marshalled
	// once (they are only ever appended; the system prompt, element 0 of
	// the transcript, is marshalled again when it changes).
	cache struct {
		transcript, responses, calls []json.RawMessage
	}
	// written is how many elements of each list (lists()) the store
	// holds, as of the last save in parts; sysChanged says the system
	// prompt changed since.
	written    [3]int
	sysChanged bool
	// recorded are the tool calls of the run a replay replays.
	recorded []ToolCallRecord
}

// push adds a message to the conversation and its redacted copy to the
// record.
func (l *loop) push(m Message) {
	red, raw := l.redactMsgJSON(m)
	l.pushRedacted(m, red, raw)
}

// pushRedacted adds m to the conversation and red, its redacted copy
// (raw: red's JSON, or nil), to the record.
func (l *loop) pushRedacted(m, red Message, raw json.RawMessage) {
	l.msgs = append(l.msgs, m)
	// The cache of marshalled transcript elements grows with it (marshal
	// pads it when it is behind).
	for len(l.cache.transcript) < len(l.rec.Transcript) {
		l.cache.transcript = append(l.cache.transcript, nil)
	}
	l.rec.Transcript = append(l.rec.Transcript, red)
	l.cache.transcript = append(l.cache.transcript, raw)
}

// pushTool answers tool call id with content, which is built from a result
// the gate redacted (or the loop's own words): only the model-chosen id
// needs redacting.
func (l *loop) pushTool(id, content string) {
	m := Message{Role: openai.ChatMessageRoleTool, ToolCallID: id, Content: content}
	red := m
	red.ToolCallID = l.red.String(id)
	raw, err := json.Marshal(red)
	if err != nil {
		raw = nil
	}
	l.pushRedacted(m, red, raw)
}

// setSystem puts the current system prompt first, redacting it for the
// record only when it changed.
func (l *loop) setSystem(s string) {
	if s == l.system && len(l.msgs) > 0 {
		return
	}
	l.system = s
	if len(l.msgs) == 0 {
		l.push(Message{Role: openai.ChatMessageRoleSystem, Content: s})
		return
	}
	l.msgs[0].Content = s
	l.rec.Transcript[0].Content = l.red.String(s)
	if len(l.cache.transcript) > 0 {
		l.cache.transcript[0] = nil
	}
	l.sysChanged = true
}

// redactMsg is m with every string in it redacted: text, reasoning,
// refusal, multi-part content, names, ids and tool-call arguments (a JSON
// round trip through the redactor, so no field is forgotten).
func (l *loop) redactMsg(m Message) Message {
	red, _ := l.redactMsgJSON(m)
	return red
}

// redactMsgJSON is redactMsg, with the redacted message's JSON. The round
// trip back to a Message is needed only when the redactor changed
// something.
func (l *loop) redactMsgJSON(m Message) (Message, json.RawMessage) {
	for i := range m.ToolCalls {
		if i == 0 {
			m.ToolCalls = append([]openai.ToolCall(nil), m.ToolCalls...)
		}
		// Arguments are JSON inside a string: redact them as JSON first,
		// so secret-looking keys are masked too.
		m.ToolCalls[i].Function.Arguments = l.redactText(m.ToolCalls[i].Function.Arguments)
	}
	b, err := json.Marshal(m)
	if err == nil {
		var rb []byte
		if rb, err = l.red.JSON(b); err == nil {
			if bytes.Equal(rb, b) {
				return m, b
			}
			var out Message
			if err = json.Unmarshal(rb, &out); err == nil {
				return out, rb
			}
		}
	}
	// Unreachable for a message go-openai produced; keep the text only.
	out := Message{Role: m.Role, Content: l.red.String(messageText(m)), ToolCallID: l.red.String(m.ToolCallID)}
	return out, nil
}

// messageText is a message's text: its content, or the text parts of a
// multi-part content.
func messageText(m Message) string {
	if m.Content != "" || len(m.MultiContent) == 0 {
		return m.Content
	}
	var b strings.Builder
	for _, p := range m.MultiContent {
		if p.Type == openai.ChatMessagePartTypeText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// redactText redacts JSON as JSON (secret-looking keys too), anything
// else as text.
func (l *loop) redactText(s string) string {
	if json.Valid([]byte(s)) {
		if b, err := l.red.JSON([]byte(s)); err == nil {
			return string(b)
		}
	}
	return l.red.String(s)
}

func newLoop(o Options) (*loop, error) {
	if o.Gate == nil || o.Model == nil {
		return nil, errors.New("agent: Gate and Model are required")
	}
	if strings.TrimSpace(o.Task) == "" {
		return nil, tool.Errorf(tool.CodeInvalidInput, "say what to do: warden run \"TASK\"", "the task is empty")
	}
	if o.MaxSteps <= 0 {
		o.MaxSteps = DefaultMaxSteps
	}
	if o.MaxCallsPerTurn <= 0 {
		o.MaxCallsPerTurn = DefaultMaxCallsPerTurn
	}
	if o.MaxToolOutput <= 0 {
		o.MaxToolOutput = DefaultMaxToolOutput
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RunID == "" {
		o.RunID = tool.NewID()
	}
	if o.Kind == "" {
		o.Kind = "agent"
	}
	if o.Principal == nil {
		o.Principal = []string{"cli"}
	}
	if o.Redactor == nil {
		o.Redactor = redact.New()
	}
	if o.Vault == nil {
		o.Vault = tool.NewVault()
	}
	l := &loop{o: o, red: o.Redactor}
	reg := o.Gate.Registry()
	specs := reg.Specs()
	if o.Tools != nil {
		l.offered = map[string]bool{}
		known := map[string]bool{}
		for _, s := range specs {
			known[s.Name] = true
		}
		for _, name := range o.Tools {
			t, ok := reg.Lookup(name)
			if !ok {
				return nil, tool.Errorf(tool.CodeUnknownTool, "list the tools with `warden tools`", "--tools names %q, which is not a tool", name)
			}
			l.offered[t.Spec().Name] = true
		}
	}
	names := []string{}
	for _, s := range specs {
		if l.offered != nil && !l.offered[s.Name] {
			continue
		}
		names = append(names, s.Name)
		l.tools = append(l.tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: s.Name, Description: s.Description, Parameters: s.InputSchema,
		}})
	}
	grants := []string{}
	effective := o.Gate.Grants()
	if o.Restrict != nil {
		effective = effective.Intersect(*o.Restrict)
	}
	for _, g := range effective.Grants() {
		grants = append(grants, g.String())
	}
	for i, g := range grants {
		grants[i] = l.red.String(g)
	}
	l.rec = &Record{
		ID: o.RunID, Kind: o.Kind, Task: l.red.String(o.Task), Model: l.red.String(o.ModelName), Endpoint: l.red.String(o.Endpoint),
		Principal: o.Principal, Grants: grants, Tools: names, DryRun: o.DryRun, Status: StatusRunning,
		Started: o.Now().UTC(), Transcript: []Message{}, Responses: []ModelResponse{}, ToolCalls: []ToolCallRecord{},
		ReplayOf: o.ReplayOf,
	}
	return l, nil
}

func (l *loop) emit(e Event) {
	if l.o.Events != nil {
		l.o.Events(e)
	}
}

// save writes the record. Everything in it was redacted as it came in
// (push, redactMsg, the tool call records, newLoop and end for the rest):
// redacting the whole document at every step would cost the square of
// its length. Where the store keeps runs in parts (runpatch.Writer), only
// the head and the list elements new or changed since the last save are
// written, so a step's write does not grow with the run; elsewhere the
// record is written whole. It runs even after ctx is cancelled: a
// cancelled run is still recorded.
func (l *loop) save(ctx context.Context) error {
	if l.o.Runs == nil {
		return nil
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if w, ok := l.o.Runs.(runpatch.Writer); ok {
		p, err := l.patch()
		if err == nil {
			err = w.PatchRun(sctx, l.rec.ID, p)
		}
		if errors.Is(err, runpatch.ErrConflict) {
			// Written whole since (a run marked interrupted by mistake, a
			// resume): send everything.
			l.written = [3]int{}
			if p, err = l.patch(); err == nil {
				err = w.PatchRun(sctx, l.rec.ID, p)
			}
		}
		if err == nil {
			for i, rl := range l.lists() {
				l.written[i] = rl.n
			}
			l.sysChanged = false
		}
		return err
	}
	doc, err := l.marshal()
	if err != nil {
		return err
	}
	return l.o.Runs.PutRun(sctx, l.rec.ID, doc)
}

// recList is one of the record's lists, with the JSON of its elements
// (each marshalled once: they are only ever appended, but for the system
// prompt, element 0 of the transcript, marshalled again when it changes).
type recList struct {
	field string
	cache *[]json.RawMessage
	n     int
	elem  func(int) any
}

func (l *loop) lists() [3]recList {
	return [3]recList{
		{"transcript", &l.cache.transcript, len(l.rec.Transcript), func(i int) any { return l.rec.Transcript[i] }},
		{"responses", &l.cache.responses, len(l.rec.Responses), func(i int) any { return l.rec.Responses[i] }},
		{"tool_calls", &l.cache.calls, len(l.rec.ToolCalls), func(i int) any { return l.rec.ToolCalls[i] }},
	}
}

// head is the record's JSON without its lists (each null), and the lists
// with every element marshalled.
func (l *loop) head() ([]byte, [3]recList, error) {
	h := *l.rec
	h.Transcript, h.Responses, h.ToolCalls = nil, nil, nil
	doc, err := json.Marshal(h)
	if err != nil {
		return nil, [3]recList{}, err
	}
	lists := l.lists()
	for _, rl := range lists {
		for len(*rl.cache) < rl.n {
			*rl.cache = append(*rl.cache, nil)
		}
		for i := range rl.n {
			if (*rl.cache)[i] == nil {
				b, err := json.Marshal(rl.elem(i))
				if err != nil {
					return nil, lists, err
				}
				(*rl.cache)[i] = b
			}
		}
	}
	return doc, lists, nil
}

// patch is the change to the record since the last save: the head, and
// the elements not written yet (and the system prompt if it changed).
func (l *loop) patch() (runpatch.Patch, error) {
	head, lists, err := l.head()
	if err != nil {
		return runpatch.Patch{}, err
	}
	p := runpatch.Patch{Head: head}
	for li, rl := range lists {
		set := make(map[int]json.RawMessage, rl.n-l.written[li])
		for i := l.written[li]; i < rl.n; i++ {
			set[i] = (*rl.cache)[i]
		}
		if li == 0 && l.sysChanged && rl.n > 0 {
			set[0] = (*rl.cache)[0]
		}
		p.Lists = append(p.Lists, runpatch.List{Field: rl.field, Len: rl.n, Set: set})
	}
	return p, nil
}

// marshal is json.Marshal(l.rec), from the head and the marshalled
// elements (marshalling the record whole at every step would cost the
// square of its length).
func (l *loop) marshal() ([]byte, error) {
	head, lists, err := l.head()
	if err != nil {
		return nil, err
	}
	var fields []string
	var elems [][][]byte
	for _, rl := range lists {
		fields = append(fields, rl.field)
		elems = append(elems, bytesOf((*rl.cache)[:rl.n]))
	}
	return runpatch.Assemble(head, fields, elems)
}

func bytesOf(raws []json.RawMessage) [][]byte {
	out := make([][]byte, len(raws))
	for i, r := range raws {
		out[i] = r
	}
	return out
}

func (l *loop) end(ctx context.Context, status string, err *tool.Error) (*Record, error) {
	err = err.MapText(l.red.String)
	l.rec.Status, l.rec.Error = status, err
	now := l.o.Now().UTC()
	l.rec.Ended = &now
	l.rec.Timings.TotalMS = now.Sub(l.rec.Started).Milliseconds()
	return l.rec, l.save(ctx)
}

func (l *loop) run(ctx context.Context) (*Record, error) {
	l.setSystem(l.systemPrompt(ctx))
	l.push(Message{Role: openai.ChatMessageRoleUser, Content: l.o.Task})
	if err := l.save(ctx); err != nil {
		return nil, err
	}
	lengthStreak := 0
	for step := 1; ; step++ {
		if ctx.Err() != nil {
			return l.cancelled(ctx)
		}
		if step > l.o.MaxSteps {
			return l.end(ctx, StatusStopped, tool.Errorf(tool.CodeLLMError, "raise --max-steps, or split the task",
				"the run took its %d steps without a final answer", l.o.MaxSteps))
		}
		if l.o.TokenBudget > 0 && l.rec.Usage.Total >= l.o.TokenBudget {
			return l.end(ctx, StatusStopped, tool.Errorf(tool.CodeLLMError, "raise --token-budget",
				"the run used %d tokens, its budget is %d", l.rec.Usage.Total, l.o.TokenBudget))
		}
		l.setSystem(l.systemPrompt(ctx))
		resp, err := l.complete(ctx, step)
		if err != nil {
			if ctx.Err() != nil {
				return l.cancelled(ctx)
			}
			rerr := tool.AsError(err)
			if rerr == nil {
				rerr = tool.Errorf(tool.CodeLLMError, "", "%v", err)
			}
			return l.end(ctx, StatusFailed, rerr)
		}
		l.rec.Steps = step
		msg := resp.Message
		msg.Role = openai.ChatMessageRoleAssistant
		recorded := resp
		redMsg, raw := l.redactMsgJSON(msg)
		recorded.Message = redMsg
		l.rec.Responses = append(l.rec.Responses, recorded)
		l.rec.Usage.add(resp.Usage)
		if msg.Content != "" || len(msg.MultiContent) > 0 || len(msg.ToolCalls) > 0 || resp.FinishReason != string(openai.FinishReasonLength) {
			// An assistant message with neither text nor tool calls is
			// refused by OpenAI and others: a reply cut off before
			// anything (a reasoning model that spent its output budget
			// thinking) is left out; the continuation below asks again.
			l.pushRedacted(msg, redMsg, raw)
		}
		l.emit(Event{Kind: EventAnswer, Step: step, Text: resp.FinishReason})

		if resp.FinishReason == string(openai.FinishReasonLength) {
			lengthStreak++
			if lengthStreak >= maxLengthStreak {
				return l.end(ctx, StatusFailed, tool.Errorf(tool.CodeLLMError, "raise the model's output limit, or ask for less at a time",
					"the model's replies were cut off at its output token limit %d times in a row (finish_reason=length)", lengthStreak))
			}
			l.emit(Event{Kind: EventNote, Step: step, Text: "the model's reply was cut off at its output token limit"})
			if len(msg.ToolCalls) > 0 {
				for _, tc := range msg.ToolCalls {
					l.refuse(step, tc, "not run: your reply was cut off at the output token limit (finish_reason=length), so these arguments may be incomplete; send the call again with shorter arguments")
				}
			} else {
				l.push(Message{Role: openai.ChatMessageRoleUser,
					Content: "Your reply was cut off at the output token limit. Continue from where it stopped, more briefly."})
			}
			if err := l.save(ctx); err != nil {
				return nil, err
			}
			continue
		}
		lengthStreak = 0
		if len(msg.ToolCalls) == 0 {
			l.rec.Final = l.red.String(messageText(msg))
			return l.end(ctx, StatusSucceeded, nil)
		}
		for i, tc := range msg.ToolCalls {
			if i >= l.o.MaxCallsPerTurn {
				l.refuse(step, tc, fmt.Sprintf("not run: at most %d tool calls are run from one reply; send the rest in your next reply", l.o.MaxCallsPerTurn))
				continue
			}
			if ctx.Err() != nil {
				l.refuse(step, tc, "not run: the run was cancelled")
				continue
			}
			if err := l.callTool(ctx, step, tc); err != nil {
				if ctx.Err() != nil {
					return l.cancelled(ctx)
				}
				return l.end(ctx, StatusFailed, tool.Errorf(tool.CodeInternal, "", "%v", err))
			}
		}
		if ctx.Err() != nil {
			return l.cancelled(ctx)
		}
		if err := l.save(ctx); err != nil {
			return nil, err
		}
	}
}

// cancelled ends a run whose context is done: cancelled by the person
// (Ctrl-C), or stopped at its deadline (--timeout), a budget like steps.
func (l *loop) cancelled(ctx context.Context) (*Record, error) {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return l.end(ctx, StatusStopped, tool.Errorf(tool.CodeTimeout, "raise --timeout, or split the task",
			"the run reached its time limit after %d step(s)", l.rec.Steps))
	}
	return l.end(ctx, StatusCancelled, tool.Errorf(tool.CodeUserCancelled, "", "the run was cancelled"))
}

// complete asks the model, trimming old tool outputs while the
// conversation overflows its context window.
func (l *loop) complete(ctx context.Context, step int) (ModelResponse, error) {
	for {
		l.emit(Event{Kind: EventWaiting, Step: step})
		start := time.Now()
		var onText func(string)
		if l.o.Events != nil {
			onText = func(s string) { l.emit(Event{Kind: EventText, Step: step, Text: s}) }
		}
		resp, err := l.o.Model.Complete(ctx, ModelRequest{Messages: l.msgs, Tools: l.tools}, onText)
		l.rec.Timings.ModelMS += time.Since(start).Milliseconds()
		if err == nil || !errors.Is(err, ErrContextOverflow) {
			return resp, err
		}
		if !l.trim() {
			return ModelResponse{}, tool.Errorf(tool.CodeLLMError, "use a model with a larger context window, or a shorter task and --system prompt",
				"the conversation does not fit the model's context window even with every tool output trimmed (%v)", err)
		}
		l.emit(Event{Kind: EventNote, Step: step, Text: "the conversation exceeded the model's context window: older tool outputs were trimmed"})
	}
}

// trimmedNote replaces a tool output trimmed to fit the context window.
const trimmedNote = "[trimmed to fit the model's context window; the whole result is in the run's record]"

// trim replaces the oldest half (at least one) of the untrimmed tool
// outputs with a note, keeping the system prompt, the task and the
// assistant messages. It reports whether anything was trimmed.
func (l *loop) trim() bool {
	var idx []int
	for i, m := range l.msgs {
		if m.Role == openai.ChatMessageRoleTool && m.Content != trimmedNote {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return false
	}
	for _, i := range idx[:max(1, len(idx)/2)] {
		l.msgs[i].Content = trimmedNote
	}
	return true
}

// refuse answers a tool call the loop does not run.
func (l *loop) refuse(step int, tc openai.ToolCall, why string) {
	content, _ := json.Marshal(map[string]any{"success": false, "error": map[string]string{"code": string(tool.CodeOperationNotSupported), "message": why}})
	l.pushTool(tc.ID, string(content))
	l.rec.ToolCalls = append(l.rec.ToolCalls, ToolCallRecord{
		Step: step, ModelCallID: l.red.String(tc.ID), Tool: l.red.String(tc.Function.Name), Args: argsForRecord(l.redactText(tc.Function.Arguments)),
		Code: string(tool.CodeOperationNotSupported), Output: why,
	})
}

// callTool sends one tool call through the gate and answers the model.
func (l *loop) callTool(ctx context.Context, step int, tc openai.ToolCall) error {
	args := strings.TrimSpace(tc.Function.Arguments)
	if args == "" {
		args = "{}" // a call with no arguments, as some models send it
	}
	l.emit(Event{Kind: EventToolCall, Step: step, Tool: tc.Function.Name, Args: argsForRecord(l.redactText(args))})
	start := time.Now()
	req := gate.Request{
		Tool: tc.Function.Name, Args: json.RawMessage(args), RunID: l.rec.ID,
		Principal: append(append([]string(nil), l.o.Principal...), "model"),
		Offered:   l.offered, DryRun: l.o.DryRun, Restrict: l.o.Restrict, Vault: l.o.Vault,
	}
	res, err := l.o.Gate.Call(ctx, req)
	l.rec.Timings.ToolsMS += time.Since(start).Milliseconds()
	if err != nil {
		return err
	}
	needsApproval := res.Success && res.DryRun && l.o.Gate.Explain(req).Verdict == gate.VerdictNeedsApproval
	l.emit(Event{Kind: EventToolResult, Step: step, Tool: tc.Function.Name, Result: &res})
	content, artifact := l.toolContent(ctx, res)
	if i := len(l.rec.ToolCalls); i < len(l.recorded) && l.recorded[i].Tool == l.red.String(tc.Function.Name) {
		// A replay: the recording's masks stand for what this result's do.
		l.o.Vault.Alias(l.recorded[i].Output, content)
	}
	l.pushTool(tc.ID, content)
	r := ToolCallRecord{
		Step: step, ModelCallID: l.red.String(tc.ID), Tool: l.red.String(tc.Function.Name), Args: argsForRecord(l.redactText(tc.Function.Arguments)),
		CallID: res.CallID, AuditSeq: res.AuditSeq, Success: res.Success, DryRun: res.DryRun, NeedsApproval: needsApproval,
		DurationMS: res.DurationMS, Output: content, Artifact: artifact, Warnings: res.Warnings,
	}
	if res.Error != nil {
		r.Code = string(res.Error.Code)
	}
	l.rec.ToolCalls = append(l.rec.ToolCalls, r)
	return nil
}

// argsForRecord keeps arguments as JSON when they are, else as a JSON
// string (a model's malformed arguments are recorded as sent).
func argsForRecord(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

// maxDataInline is the size of a result's data the model sees inline.
const maxDataInline = 4000

// toolContent is what the model is told of a result: success, output (cut
// to MaxToolOutput characters), data when small, warnings, the error with
// its hint. The whole result is kept as an artifact when the model sees
// less of it.
func (l *loop) toolContent(ctx context.Context, res tool.Result) (string, string) {
	view := map[string]any{"success": res.Success}
	cut := false
	out := res.Output
	if n := utf8.RuneCountInString(out); n > l.o.MaxToolOutput {
		out = string([]rune(out)[:l.o.MaxToolOutput])
		cut = true
		out += fmt.Sprintf("\n…[output cut: %d of %d characters shown]", l.o.MaxToolOutput, n)
	}
	view["output"] = out
	if len(res.Data) > 0 && string(res.Data) != "null" && string(res.Data) != "{}" {
		if len(res.Data) <= maxDataInline {
			view["data"] = res.Data
		} else {
			cut = true
			view["data_omitted"] = fmt.Sprintf("%d bytes of structured data not shown", len(res.Data))
		}
	}
	if res.DryRun {
		view["dry_run"] = true
	}
	if len(res.Warnings) > 0 {
		view["warnings"] = res.Warnings
	}
	if res.Error != nil {
		view["error"] = modelError(res.Error)
	}
	artifact := ""
	if cut && l.o.Artifacts != nil {
		whole, _ := json.Marshal(res)
		if d, err := l.o.Artifacts.PutArtifact(context.WithoutCancel(ctx), whole); err == nil {
			artifact = d
			view["artifact"] = d
		}
	}
	b, _ := json.Marshal(view)
	return string(b), artifact
}

// modelError is e with its hint worded for the model: what to ask the
// user for (the grants, an approval), which the model cannot give itself
// and which cannot change during the run.
func modelError(e *tool.Error) *tool.Error {
	out := *e
	switch {
	case len(e.Missing) > 0:
		out.Hint = "ask the user to grant " + strings.Join(e.Missing, ", ") + e.GrantsNote() +
			"; your grants cannot change during this run"
	case e.Approval != nil:
		out.Hint = "this call needs a person's approval, which no one can give during this run: " +
			"ask the user to approve it, or to allow it in warden's policy"
	}
	return &out
}

// writeRules lists rules for the system prompt.
func writeRules(b *strings.Builder, rules []policy.Rule) {
	for _, r := range rules {
		extra := ""
		if r.RequireApproval {
			extra += ", needs a person's approval"
		}
		if r.DryRunFirst {
			extra += ", previewed first"
		}
		on := strconv.Quote(r.Tool)
		if m := r.Matchers(); m != "" {
			on += " (" + m + ")"
		}
		fmt.Fprintf(b, "  - %s: %s%s\n", on, r.Action, extra)
	}
}

// systemPrompt tells the model what it is and what it is granted, and
// carries the run's primed context.
func (l *loop) systemPrompt(ctx context.Context) string {
	var b strings.Builder
	b.WriteString("You are an agent run by warden. You act only by calling the tools offered to you; every call passes warden's gate, " +
		"which checks it against the grants below and the policy's rules, records it, and may refuse it.\n")
	fmt.Fprintf(&b, "Workspace: %s (relative paths are inside it).\n", l.o.Gate.Grants().Workspace())
	b.WriteString("Your grants (they cannot change during this run, whatever you ask):\n")
	if len(l.rec.Grants) == 0 {
		b.WriteString("  (none)\n")
	}
	for _, g := range l.rec.Grants {
		fmt.Fprintf(&b, "  - %s\n", g)
	}
	pol := l.o.Gate.Policy()
	if rules := pol.Rules; len(rules) > 0 {
		b.WriteString("Policy rules (first match wins; a command is judged program by program):\n")
		writeRules(&b, rules)
	}
	if u := pol.Untrusted(); u != nil {
		// Only what narrows: an untrusted file's other rules do not apply.
		var restrict []policy.Rule
		for _, r := range u.Rules {
			if r.Action == policy.ActionDeny || r.RequireApproval || r.DryRunFirst {
				restrict = append(restrict, r)
			}
		}
		if len(restrict) > 0 {
			b.WriteString("Restrictions added by the workspace's policy (not trusted by its owner; they only narrow):\n")
			writeRules(&b, restrict)
		}
	}
	if l.o.DryRun {
		b.WriteString("This run is a dry run: every call returns a preview of what it would do and changes nothing.\n")
	}
	b.WriteString("A call refused with CAPABILITY_DENIED, POLICY_DENIED or APPROVAL_REQUIRED stays refused: do not repeat it; " +
		"do what you can within your grants, and say in your answer what was refused and which grant would allow it.\n" +
		"When you are done, answer with a final message and no tool call.\n")
	if l.o.System != "" {
		b.WriteString("\n")
		b.WriteString(l.o.System)
		b.WriteString("\n")
	}
	if l.o.Memory != nil {
		entries, err := l.o.Memory.ListMemory(ctx, gate.ContextNamespace(l.rec.ID), 0)
		if err == nil && len(entries) > 0 {
			sort.Slice(entries, func(i, j int) bool { return entries[i].Key < entries[j].Key })
			b.WriteString("\nContext primed for this run (prime_context; clear_context empties it):\n")
			for _, e := range entries {
				fmt.Fprintf(&b, "--- %s ---\n%s\n", e.Key, e.Value)
			}
		}
	}
	return b.String()
}
