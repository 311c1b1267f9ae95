package agent

import (
	"context"
	"fmt"

	"github.com/wardenrt/warden/runtime/tool"
)

// replayModel answers with a recorded run's model responses, in order,
// whatever it is asked: the replay sends the recorded tool calls through
// today's gate.
type replayModel struct {
	responses []ModelResponse
	next      int
}

func (m *replayModel) Complete(_ context.Context, _ ModelRequest, onText func(string)) (ModelResponse, error) {
	if m.next >= len(m.responses) {
		return ModelResponse{}, tool.Errorf(tool.CodeLLMError, "",
			"the recording has no more model answers (it had %d)", len(m.responses))
	}
	r := m.responses[m.next]
	m.next++
	if onText != nil && r.Message.Content != "" {
		onText(r.Message.Content)
	}
	return r, nil
}

// Difference is a tool call whose outcome in a replay differs from the
// recording's.
type Difference struct {
	// Index is the call's position among the run's tool calls.
	Index    int    `json:"index"`
	Step     int    `json:"step"`
	Tool     string `json:"tool"`
	Recorded string `json:"recorded"` // "ok", an error code, or "-" (no such call)
	Now      string `json:"now"`
	Detail   string `json:"detail,omitempty"`
}

func (d Difference) String() string {
	s := fmt.Sprintf("call %d (step %d, %s): recorded %s, now %s", d.Index+1, d.Step, d.Tool, d.Recorded, d.Now)
	if d.Detail != "" {
		s += ": " + d.Detail
	}
	return s
}

func outcome(c ToolCallRecord) string {
	if c.NeedsApproval {
		return string(tool.CodeApprovalRequired)
	}
	if c.Success {
		return "ok"
	}
	if c.Code == "" {
		return "failed"
	}
	return c.Code
}

// Replay re-runs a recorded run offline: the recorded model answers, in
// order, with their tool calls sent through today's gate (o.Gate) — as
// dry runs when o.DryRun is set (the CLI sets it unless --live; a live
// replay sends the arguments as recorded, that is redacted) — and
// reports every call whose
// outcome differs from the recording (Record.Diffs), e.g. a call a policy
// change now refuses. o's Model, Task, Tools and Kind are set from rec.
func Replay(ctx context.Context, rec *Record, o Options) (*Record, error) {
	o.Model = &replayModel{responses: rec.Responses}
	o.Task, o.Kind, o.ReplayOf = rec.Task, "replay", rec.ID
	o.ModelName, o.Endpoint = rec.Model, rec.Endpoint
	o.MaxSteps = max(len(rec.Responses), 1)
	// Offer what was offered, as far as it still exists: a tool gone since
	// is a difference the replay reports, not a reason not to replay.
	reg := o.Gate.Registry()
	o.Tools = []string{}
	for _, name := range rec.Tools {
		if reg.Has(name) {
			o.Tools = append(o.Tools, name)
		}
	}
	l, err := newLoop(o)
	if err != nil {
		return nil, err
	}
	l.recorded = rec.ToolCalls
	out, err := l.run(ctx)
	if err != nil {
		return out, err
	}
	out.Diffs = diff(rec.ToolCalls, out.ToolCalls)
	if out.Final != rec.Final && out.Status == StatusSucceeded && rec.Status == StatusSucceeded {
		// Same answers replayed: the final text can differ only if the
		// run took another path.
		out.Diffs = append(out.Diffs, Difference{Index: len(out.ToolCalls), Tool: "(final answer)", Recorded: "ok", Now: "ok", Detail: "the final answer differs"})
	}
	if rec.Status != out.Status && out.Status != StatusSucceeded {
		out.Diffs = append(out.Diffs, Difference{Index: len(out.ToolCalls), Tool: "(run)", Recorded: rec.Status, Now: out.Status})
	}
	return out, l.save(ctx)
}

func diff(recorded, now []ToolCallRecord) []Difference {
	var out []Difference
	for i := 0; i < max(len(recorded), len(now)); i++ {
		switch {
		case i >= len(now):
			r := recorded[i]
			out = append(out, Difference{Index: i, Step: r.Step, Tool: r.Tool, Recorded: outcome(r), Now: "-", Detail: "not called in the replay"})
		case i >= len(recorded):
			n := now[i]
			out = append(out, Difference{Index: i, Step: n.Step, Tool: n.Tool, Recorded: "-", Now: outcome(n), Detail: "not in the recording"})
		default:
			r, n := recorded[i], now[i]
			if r.Tool != n.Tool {
				out = append(out, Difference{Index: i, Step: n.Step, Tool: n.Tool, Recorded: r.Tool, Now: n.Tool, Detail: "another tool"})
			} else if outcome(r) != outcome(n) {
				out = append(out, Difference{Index: i, Step: n.Step, Tool: n.Tool, Recorded: outcome(r), Now: outcome(n)})
			}
		}
	}
	return out
}
