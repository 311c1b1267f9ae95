package tool

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestErrorData: a refusal carries what is missing as data, serialized in
// the envelope as missing_grants and approval; its hint is worded for no
// reader in particular, and a front end keeps what it adds to the grants.
func TestErrorData(t *testing.T) {
	e := NeedsGrants([]string{"env:TOKEN"}, "env TOKEN cannot be set")
	e.Hint += " (exactly this name)"
	if e.Code != CodeCapabilityDenied || e.Hint != "needs the grant env:TOKEN (exactly this name)" || e.GrantsNote() != " (exactly this name)" {
		t.Fatalf("%+v, note %q", e, e.GrantsNote())
	}
	if h := GrantsHint([]string{"a", "b"}); h != "needs the grants a, b" {
		t.Fatal(h)
	}
	if n := (&Error{Hint: "something else", Missing: []string{"a"}}).GrantsNote(); n != "" {
		t.Fatalf("a hint of its own is no note: %q", n)
	}
	b, _ := json.Marshal(e)
	if !strings.Contains(string(b), `"missing_grants":["env:TOKEN"]`) || strings.Contains(string(b), `"approval"`) {
		t.Fatal(string(b))
	}
	a := &Error{Code: CodeApprovalRequired, Message: "m", Approval: &ApprovalNeeded{Rule: "r SECRET", Mode: ApproveAsk, Failed: "no SECRET terminal"}}
	b, _ = json.Marshal(a)
	if !strings.Contains(string(b), `"approval":{"rule":"r SECRET","mode":"ask","failed":"no SECRET terminal"}`) || strings.Contains(string(b), "missing_grants") {
		t.Fatal(string(b))
	}
	// MapText (redaction) reaches every text field and leaves e alone.
	up := func(s string) string { return strings.ReplaceAll(s, "SECRET", "***") }
	m := a.MapText(up)
	if m.Approval.Rule != "r ***" || m.Approval.Failed != "no *** terminal" || a.Approval.Rule != "r SECRET" {
		t.Fatalf("%+v / %+v", m.Approval, a.Approval)
	}
	s := (&Error{Message: "SECRET", Hint: "SECRET", Missing: []string{"fs.read:SECRET/**"}}).MapText(up)
	if s.Message != "***" || s.Hint != "***" || !slices.Equal(s.Missing, []string{"fs.read:***/**"}) {
		t.Fatalf("%+v", s)
	}
	if (*Error)(nil).MapText(up) != nil {
		t.Fatal("nil")
	}
}
