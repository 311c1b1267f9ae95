package gate

import (
	"bytes"
	"slices"

	"github.com/wardenrt/warden/internal/jsonw"
)

// marshalEvent is json.Marshal(ev) without reflection (two a call); its
// test fills every field, one added later included, and compares.
func marshalEvent(ev *AuditEvent) ([]byte, error) { return marshalEventHead(ev, nil) }

// eventHead is the part of a call's events from call_id to needs, which
// its result repeats from its intent: written once, and written again as
// it is only while the fields it was written from hold what they held
// (the same text; the gate does not change a slice of an event it wrote
// in place, and the result records the principal the intent did).
type eventHead struct {
	callID, runID, tool, argsText string
	principal, needs              []string
	args                          []byte
	dryRun                        bool
	text                          []byte // nil: not written yet
}

// holds reports whether h was written from ev's fields as they are now.
func (h *eventHead) holds(ev *AuditEvent) bool {
	return h.text != nil && h.callID == ev.CallID && h.runID == ev.RunID && h.tool == ev.Tool && h.argsText == ev.ArgsText &&
		h.dryRun == ev.DryRun && bytes.Equal(h.args, ev.Args) && (h.args == nil) == (ev.Args == nil) &&
		slices.Equal(h.principal, ev.Principal) && (h.principal == nil) == (ev.Principal == nil) && slices.Equal(h.needs, ev.Needs)
}

// marshalEventHead is marshalEvent, writing the head from h when it holds
// for ev, and keeping it in h (when not nil) otherwise.
func marshalEventHead(ev *AuditEvent, h *eventHead) ([]byte, error) {
	o := jsonw.NewObject(eventSize(ev))
	o.String("phase", ev.Phase)
	var kept *eventHead // the head to keep in h, once the event is written whole
	if h != nil && h.holds(ev) {
		o.Fields(h.text)
	} else {
		mark := o.Mark()
		o.String("call_id", ev.CallID)
		o.OptString("run_id", ev.RunID)
		o.Strings("principal", ev.Principal)
		o.String("tool", ev.Tool)
		o.OptRaw("args", ev.Args)
		o.OptString("args_text", ev.ArgsText)
		o.OptTrue("dry_run", ev.DryRun)
		o.OptStrings("needs", ev.Needs)
		if h != nil {
			kept = &eventHead{callID: ev.CallID, runID: ev.RunID, tool: ev.Tool, argsText: ev.ArgsText,
				principal: ev.Principal, needs: ev.Needs, args: ev.Args, dryRun: ev.DryRun, text: o.Since(mark)}
		}
	}
	o.OptString("preview", ev.Preview)
	if d := ev.Decision; d != nil {
		o.Open("decision")
		o.String("action", d.Action)
		o.OptString("rule", d.Rule)
		o.OptStrings("grants", d.Grants)
		o.OptString("approval", d.Approval)
		o.OptString("approver", d.Approver)
		o.Close()
	}
	o.OptString("outcome", ev.Outcome)
	o.OptString("message", ev.Message)
	o.Int("duration_ms", ev.Duration)
	o.OptString("output_digest", ev.Digest)
	o.OptString("sandbox", ev.Sandbox)
	if len(ev.Connections) > 0 {
		o.Value("connections", ev.Connections)
	}
	o.OptInt("connections_dropped", int64(ev.ConnectionsDropped))
	o.OptUint("intent_seq", ev.IntentSeq)
	body, err := o.Bytes()
	if err == nil && kept != nil {
		*h = *kept // (a head that failed, its arguments not JSON, is never kept)
	}
	return body, err
}

// eventSize is about what marshalEvent writes of ev (JSON needing no
// escapes), so that its buffer is allocated once: the keys and
// punctuation, and the text of every field.
func eventSize(ev *AuditEvent) int {
	n := 320 + len(ev.Phase) + len(ev.CallID) + len(ev.RunID) + len(ev.Tool) + len(ev.Args) + len(ev.ArgsText) +
		len(ev.Preview) + len(ev.Outcome) + len(ev.Message) + len(ev.Digest) + len(ev.Sandbox) +
		stringsSize(ev.Principal) + stringsSize(ev.Needs)
	if d := ev.Decision; d != nil {
		n += 64 + len(d.Action) + len(d.Rule) + len(d.Approval) + len(d.Approver) + stringsSize(d.Grants)
	}
	return n
}

func stringsSize(ss []string) int {
	n := 0
	for _, s := range ss {
		n += len(s) + 3 // quotes and a comma
	}
	return n
}
