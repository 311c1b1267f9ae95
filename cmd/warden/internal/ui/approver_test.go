package ui

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/wardenrt/warden/runtime/gate"
)

// TestTerminalApproverAnswers: yes approves once, always approves the tool
// for the rest of the run without asking again, anything else refuses;
// answers piped in one after another are each read once.
func TestTerminalApproverAnswers(t *testing.T) {
	var out bytes.Buffer
	a := &TerminalApprover{In: strings.NewReader("y\nn\na\n"), Out: &out}
	ask := func(tool string) gate.Approval {
		t.Helper()
		ap, err := a.Approve(context.Background(), gate.ApprovalRequest{Tool: tool, Principal: []string{"cli", "model"}, Args: []byte(`{}`), Lasting: true})
		if err != nil {
			t.Fatal(err)
		}
		return ap
	}
	if !ask("shell").Approved {
		t.Error("y did not approve")
	}
	if ask("shell").Approved {
		t.Error("n approved")
	}
	if ap := ask("shell"); !ap.Approved || ap.By != "user (rest of run)" {
		t.Errorf("a: %+v", ap)
	}
	before := strings.Count(out.String(), "Approve?")
	for range 3 {
		if !ask("shell").Approved {
			t.Fatal("not approved for the rest of the run")
		}
	}
	if strings.Count(out.String(), "Approve?") != before {
		t.Error("asked again after always")
	}
	// "always" is not offered, nor honoured, for what cannot last (words
	// known only at run time, an untrusted policy's rule).
	b := &TerminalApprover{In: strings.NewReader("a\n"), Out: &out}
	if ap, err := b.Approve(context.Background(), gate.ApprovalRequest{Tool: "shell"}); err != nil || ap.Approved {
		t.Errorf("always for a call that cannot last: %+v %v", ap, err)
	}
	// Another tool is asked about; stdin is at its end: cancelled.
	if _, err := a.Approve(context.Background(), gate.ApprovalRequest{Tool: "fs_remove"}); err != gate.ErrCancelled {
		t.Errorf("at EOF: %v", err)
	}
}
