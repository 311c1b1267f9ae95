package gate

import (
	"slices"
	"testing"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/redact"
)

// TestRedactGrantsAsEachAlone: a grant recorded for a call is redacted as
// it would be alone — a grant that reads as a need takes the need's
// redaction, any other is redacted itself — and the decision's own list
// is never written to.
func TestRedactGrantsAsEachAlone(t *testing.T) {
	const key = "sk-ant-api03-" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	red := redact.New("hunter2hunter2")
	needs := []capability.Need{
		{Kind: capability.FSRead, Resource: "/ws/" + key},
		{Kind: "system.info"},
		{Kind: capability.FSRead, Resource: "/ws/hunter2hunter2.txt"},
	}
	shown := redactNeeds(red, needs)
	grants := []string{
		"system.info",
		"fs.read:/ws/" + key,             // reads as needs[0]
		"fs.read:/ws/**",                 // reads as none
		"fs.read:/ws/hunter2hunter2*",    // a literal, in a grant that reads as no need
		"fs.read:/ws/hunter2hunter2.txt", // reads as needs[2]
		"fs.read:/ws/" + key + " ∩ fs.read:**",
	}
	before := slices.Clone(grants)
	for _, i := range []int{1, 3, 4, 5} {
		if red.String(grants[i]) == grants[i] {
			t.Fatalf("grant %d holds nothing to mask: the test reads nothing", i)
		}
	}
	got := redactGrants(red, grants, needs, shown)
	for i, g := range before {
		if want := red.String(g); got[i] != want {
			t.Errorf("grant %d: %q, want %q", i, got[i], want)
		}
	}
	if !slices.Equal(grants, before) {
		t.Fatalf("the decision's grants were written to: %q", grants)
	}
	// Nothing to mask: the list as it is.
	clean := []string{"system.info"}
	if out := redactGrants(red, clean, needs[1:2], shown[1:2]); &out[0] != &clean[0] || out[0] != "system.info" {
		t.Fatalf("%q", out)
	}
	if out := redactGrants(red, nil, needs, shown); out != nil {
		t.Fatalf("%q", out)
	}
}
