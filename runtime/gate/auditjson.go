package gate

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// marshalEvent is json.Marshal(ev), byte for byte, written out: every call
// records two events, and encoding/json's reflection was the larger part
// of recording them. A string or the arguments holding anything but plain
// text (an escape, HTML's < > &, invalid UTF-8, U+2028 or U+2029, white
// space in the arguments) is left to encoding/json, which then writes it
// as it always has; so are the connections. TestMarshalEventIsJSONMarshal
// holds it to json.Marshal for every field, a field added later included.
func marshalEvent(ev *AuditEvent) ([]byte, error) {
	b := make([]byte, 0, 320+len(ev.Args)+len(ev.ArgsText)+len(ev.Preview)+len(ev.Message))
	b = append(b, `{"phase":`...)
	b = appendString(b, ev.Phase)
	b = append(b, `,"call_id":`...)
	b = appendString(b, ev.CallID)
	if ev.RunID != "" {
		b = append(b, `,"run_id":`...)
		b = appendString(b, ev.RunID)
	}
	b = append(b, `,"principal":`...)
	b = appendStrings(b, ev.Principal)
	b = append(b, `,"tool":`...)
	b = appendString(b, ev.Tool)
	if len(ev.Args) > 0 {
		b = append(b, `,"args":`...)
		var err error
		if b, err = appendRaw(b, ev.Args); err != nil {
			return nil, err
		}
	}
	b = appendOptString(b, `,"args_text":`, ev.ArgsText)
	if ev.DryRun {
		b = append(b, `,"dry_run":true`...)
	}
	if len(ev.Needs) > 0 {
		b = append(b, `,"needs":`...)
		b = appendStrings(b, ev.Needs)
	}
	b = appendOptString(b, `,"preview":`, ev.Preview)
	if d := ev.Decision; d != nil {
		b = append(b, `,"decision":{"action":`...)
		b = appendString(b, d.Action)
		b = appendOptString(b, `,"rule":`, d.Rule)
		if len(d.Grants) > 0 {
			b = append(b, `,"grants":`...)
			b = appendStrings(b, d.Grants)
		}
		b = appendOptString(b, `,"approval":`, d.Approval)
		b = appendOptString(b, `,"approver":`, d.Approver)
		b = append(b, '}')
	}
	b = appendOptString(b, `,"outcome":`, ev.Outcome)
	b = appendOptString(b, `,"message":`, ev.Message)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, ev.Duration, 10)
	b = appendOptString(b, `,"output_digest":`, ev.Digest)
	b = appendOptString(b, `,"sandbox":`, ev.Sandbox)
	if len(ev.Connections) > 0 {
		conns, err := json.Marshal(ev.Connections)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"connections":`...)
		b = append(b, conns...)
	}
	if ev.ConnectionsDropped != 0 {
		b = append(b, `,"connections_dropped":`...)
		b = strconv.AppendInt(b, int64(ev.ConnectionsDropped), 10)
	}
	if ev.IntentSeq != 0 {
		b = append(b, `,"intent_seq":`...)
		b = strconv.AppendUint(b, ev.IntentSeq, 10)
	}
	return append(b, '}'), nil
}

// plainJSON are the bytes json.Marshal writes as they are in a string and
// in compact JSON: printable ASCII but the quote, the backslash and HTML's
// < > &. (The quote and the backslash are allowed in raw JSON, below.)
var plainJSON = func() (set [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		set[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return set
}()

// appendString appends s as json.Marshal writes it.
func appendString(b []byte, s string) []byte {
	ascii := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			ascii = false
			continue
		}
		if !plainJSON[c] {
			return appendMarshalled(b, s)
		}
	}
	// Other text is written as it is when it is valid UTF-8 without the
	// line and paragraph separators, which JavaScript reads as line ends.
	if !ascii && (!utf8.ValidString(s) || strings.Contains(s, "\u2028") || strings.Contains(s, "\u2029")) {
		return appendMarshalled(b, s)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func appendMarshalled(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// appendOptString appends key and s, unless s is empty (omitempty).
func appendOptString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, key...), s)
}

// appendStrings appends ss as json.Marshal writes a []string (nil: null).
func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendRaw appends raw JSON as json.Marshal writes a json.RawMessage:
// checked, compacted, with < > & and U+2028, U+2029 escaped. Raw JSON of
// printable ASCII without white space (not even a space, which compacting
// would drop between values) or HTML's characters is written as it is,
// once checked.
func appendRaw(b []byte, raw json.RawMessage) ([]byte, error) {
	plain := true
	for _, c := range raw {
		if c == ' ' || !plainJSON[c] && c != '"' && c != '\\' {
			plain = false
			break
		}
	}
	if plain && json.Valid(raw) {
		return append(b, raw...), nil
	}
	out, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	return append(b, out...), nil
}
