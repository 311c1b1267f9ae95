package gate

import "github.com/wardenrt/warden/internal/jsonw"

// marshalEvent is json.Marshal(ev) without reflection (two a call); its
// test fills every field, one added later included, and compares.
func marshalEvent(ev *AuditEvent) ([]byte, error) {
	o := jsonw.NewObject(eventSize(ev))
	o.String("phase", ev.Phase)
	o.String("call_id", ev.CallID)
	o.OptString("run_id", ev.RunID)
	o.Strings("principal", ev.Principal)
	o.String("tool", ev.Tool)
	o.OptRaw("args", ev.Args)
	o.OptString("args_text", ev.ArgsText)
	o.OptTrue("dry_run", ev.DryRun)
	o.OptStrings("needs", ev.Needs)
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
	return o.Bytes()
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
