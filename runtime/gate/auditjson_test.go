package gate

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/wardenrt/warden/runtime/policy"
)

// eventStrings are strings that encoding/json writes as they are, and
// strings it escapes: quotes, backslashes, control characters, HTML's
// characters, U+2028, invalid UTF-8.
var eventStrings = []string{
	"", "intent", "01J0ABCDEFGHJKMNPQRSTVWXYZ", "fs_read", "fs.read:/work/**", "rules[2] tool=shell [command: ls]",
	"a \"quoted\" word", `back\slash`, "line\nbreak\ttab\r", "\x00\x01\x1f\x7f", "<script>&amp;</script>",
	"é ü 世界", "\xff\xfe invalid", "\u2028\u2029", "a ∩ b", "x\u2029", "é\xc3", "sha256:0123456789abcdef", "[REDACTED:token:0a1b]", " ",
}

// eventRaws are arguments: compact, spaced, with HTML's characters or
// U+2028, escaped, and not JSON at all.
var eventRaws = []string{
	`{"operation":"get_info"}`, `{"path":"a b.txt"}`, `{ "a" : [1, 2] }`, `{"html":"<b>&"}`, "{\"x\":\"\u2028\"}",
	`{"q":"\"\\\u00e9"}`, `[1,2,{"k":null}]`, `"str"`, `{"a":1}x`, `{"a":`, `not json`, `{"a":"\xff"}`, "{\n}",
}

// fillEvent sets every field v holds (a struct, at any depth) to one of
// several values, empty ones and nil included, so that a field added to
// AuditEvent is tested without a change here.
func fillEvent(rng *rand.Rand, v reflect.Value) {
	switch {
	case v.Type() == reflect.TypeOf(json.RawMessage(nil)):
		if rng.Intn(4) > 0 {
			v.SetBytes([]byte(eventRaws[rng.Intn(len(eventRaws))]))
		}
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillEvent(rng, v.Field(i))
			}
		}
	case reflect.String:
		v.SetString(eventStrings[rng.Intn(len(eventStrings))])
	case reflect.Bool:
		v.SetBool(rng.Intn(2) == 0)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt([]int64{0, 1, -1, 1 << 40, 7}[rng.Intn(5)])
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		v.SetUint([]uint64{0, 1, 1 << 63, 42}[rng.Intn(4)])
	case reflect.Pointer:
		if rng.Intn(3) > 0 {
			v.Set(reflect.New(v.Type().Elem()))
			fillEvent(rng, v.Elem())
		}
	case reflect.Slice:
		switch n := rng.Intn(4); n {
		case 0: // nil
		default:
			s := reflect.MakeSlice(v.Type(), n-1, n-1)
			for i := range n - 1 {
				fillEvent(rng, s.Index(i))
			}
			v.Set(s)
		}
	default:
		panic("fillEvent: a field of kind " + v.Kind().String() + "; teach the test (and marshalEvent) about it")
	}
}

// TestMarshalEventIsJSONMarshal: the audit event written out is
// json.Marshal's, byte for byte, and fails where json.Marshal does.
func TestMarshalEventIsJSONMarshal(t *testing.T) {
	rng := rand.New(rand.NewSource(18))
	for range 50000 {
		var ev AuditEvent
		fillEvent(rng, reflect.ValueOf(&ev).Elem())
		want, werr := json.Marshal(ev)
		got, gerr := marshalEvent(&ev)
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("%#v: json.Marshal: %v, marshalEvent: %v", ev, werr, gerr)
		}
		if werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("%#v:\n marshalEvent %s\n json.Marshal %s", ev, got, want)
		}
	}
}

// TestOutcomeDigest: the digest of an output hashed a piece at a time is
// the digest of the output and data as one text.
func TestOutcomeDigest(t *testing.T) {
	for _, n := range []int{0, 1, 4 << 10, 4<<10 + 1, 32 << 10, 100<<10 + 7} {
		out := strings.Repeat("0123456789abcdef", n/16+1)[:n]
		data := []byte(`{"n":1}`)
		want := fmt.Sprintf("sha256:%x", sha256.Sum256(append([]byte(out), data...)))
		if got := outcomeDigest(out, data); got != want {
			t.Fatalf("%d bytes: %s, want %s", n, got, want)
		}
	}
}

// TestOutcomeDigestAroundItsBuffer: an output around the size hashed from
// the stack, and over it, has the digest of the output and data as one
// text.
func TestOutcomeDigestAroundItsBuffer(t *testing.T) {
	for _, n := range []int{2, 511, 512, 513, 1024, 1025} {
		out := strings.Repeat("é0123456789abcd", n/16+1)[:n]
		data := []byte(`{"n":1}`)
		want := fmt.Sprintf("sha256:%x", sha256.Sum256(append([]byte(out), data...)))
		if got := outcomeDigest(out, data); got != want {
			t.Fatalf("%d bytes: %s, want %s", n, got, want)
		}
	}
}

// TestEventSizeHoldsTheEvent: the buffer marshalEvent allocates holds a
// plain event whole (it is not grown while written).
func TestEventSizeHoldsTheEvent(t *testing.T) {
	ev := AuditEvent{Phase: PhaseResult, CallID: "c-0123456789abcdef", RunID: "r-1", Principal: []string{"cli", "agent:x"},
		Tool: "fs_read", Args: []byte(`{"path":"a/b/c.go"}`), Needs: []string{"fs.read:/ws/a/b/c.go"},
		Decision: &Decision{Action: policy.ActionAllow, Rule: "rules[2] (fs_read: allow)", Grants: []string{"fs.read:/ws/**"}, Approval: ApprovalNotRequired},
		Outcome:  "ok", Duration: 12, Digest: outcomeDigest("x", nil), IntentSeq: 7}
	got, err := marshalEvent(&ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > eventSize(&ev) {
		t.Errorf("the event is %d bytes, its buffer %d", len(got), eventSize(&ev))
	}
}

// TestMarshalEventHeadIsJSONMarshal: a result event written with its
// intent's head is json.Marshal's, byte for byte — and so is one any of
// whose head fields differs from the intent's (a head written from other
// fields is never written again: were it, the record would show the
// intent's arguments, needs or principal, not the result's).
func TestMarshalEventHeadIsJSONMarshal(t *testing.T) {
	rng := rand.New(rand.NewSource(18))
	fill := func() AuditEvent {
		var ev AuditEvent
		fillEvent(rng, reflect.ValueOf(&ev).Elem())
		return ev
	}
	withHead := func(ev, from AuditEvent) AuditEvent {
		ev.CallID, ev.RunID, ev.Principal, ev.Tool = from.CallID, from.RunID, from.Principal, from.Tool
		ev.Args, ev.ArgsText, ev.DryRun, ev.Needs = from.Args, from.ArgsText, from.DryRun, from.Needs
		return ev
	}
	reused, changed := 0, 0
	for range 30000 {
		var h eventHead
		intent := fill()
		check := func(ev AuditEvent) {
			t.Helper()
			want, werr := json.Marshal(ev)
			got, gerr := marshalEventHead(&ev, &h)
			if (werr != nil) != (gerr != nil) {
				t.Fatalf("%#v: json.Marshal: %v, marshalEvent: %v", ev, werr, gerr)
			}
			if werr == nil && !bytes.Equal(got, want) {
				t.Fatalf("%#v:\n marshalEvent %s\n json.Marshal %s", ev, got, want)
			}
		}
		check(intent)
		result := withHead(fill(), intent)
		if h.text != nil && h.holds(&result) {
			reused++
		}
		check(result)
		// One head field from another event.
		other := withHead(result, fill())
		f := rng.Intn(8)
		ev := result
		switch f {
		case 0:
			ev.CallID = other.CallID
		case 1:
			ev.RunID = other.RunID
		case 2:
			ev.Principal = other.Principal
		case 3:
			ev.Tool = other.Tool
		case 4:
			ev.Args = other.Args
		case 5:
			ev.ArgsText = other.ArgsText
		case 6:
			ev.DryRun = other.DryRun
		case 7:
			ev.Needs = other.Needs
		}
		if h.text != nil && !h.holds(&ev) {
			changed++
		}
		check(ev)
	}
	if reused == 0 || changed == 0 {
		t.Fatalf("reused %d, changed %d: the test reads nothing", reused, changed)
	}
}
