//go:build unix

package jobs

import (
	"strings"
	"testing"

	"github.com/wardenrt/warden/runtime/schedule"
	"github.com/wardenrt/warden/runtime/tool"
)

// TestJobDeniedHint: a job's CAPABILITY_DENIED failure names what the owner
// can do, the grants read from the error's missing grants or its failing
// step's; a refusal no grant lifts keeps its hint, other failures are left
// alone.
func TestJobDeniedHint(t *testing.T) {
	j := schedule.Job{ID: "nightly"}
	wf := tool.NeedsGrants([]string{"fs.write:out/**", "net:example.com:443"}, "workflow w needs a, b")
	step := &tool.Error{Code: tool.CodeCapabilityDenied, Message: "step s failed: …", Hint: "fix it, then `warden workflow resume R` continues from this step"}
	stepRes := tool.NeedsGrants([]string{"fs.write:elsewhere/x.txt"}, "fs_write needs …")
	hide := &tool.Error{Code: tool.CodeCapabilityDenied, Message: "hidden", Hint: "the policy's hide: list keeps it out of reach of every tool and program; no grant opens it"}
	other := &tool.Error{Code: tool.CodeNotFound, Message: "gone", Hint: "needs the grant x", Missing: []string{"x"}}
	for _, tc := range []struct {
		name    string
		err     *tool.Error
		stepErr *tool.Error
		want    string
	}{
		{"workflow grants", wf, nil, "grant fs.write:out/**, net:example.com:443 in the policy (/p.yaml); if the job does not carry it, schedule it again with --with fs.write:out/** --with net:example.com:443 (`warden schedule rm nightly` first)"},
		{"a step's", step, stepRes, "grant fs.write:elsewhere/x.txt in the policy (/p.yaml); if the job does not"},
		{"hidden", hide, nil, hide.Hint},
		{"not a denial", other, nil, "needs the grant x"},
	} {
		got := jobDenied(j, "/p.yaml", tc.err, tc.stepErr)
		if !strings.Contains(got.Hint, tc.want) || got.Code != tc.err.Code || got.Message != tc.err.Message {
			t.Errorf("%s: %+v, want a hint with %q", tc.name, got, tc.want)
		}
	}
	wj := schedule.Job{ID: "nightly", Kind: schedule.KindWorkflow, GrantsFromWorkflow: true}
	if got := jobDenied(wj, "/p.yaml", wf, nil); !strings.Contains(got.Hint, "in the policy (/p.yaml); if the workflow's grants: lack it, add it there, then `warden schedule approve nightly`") {
		t.Errorf("a job with its workflow's grants: %q", got.Hint)
	}
	if jobDenied(j, "/p.yaml", nil, nil) != nil {
		t.Error("no error became one")
	}
	if wf.Hint != "needs the grants fs.write:out/**, net:example.com:443" {
		t.Error("the error passed in was changed")
	}
}
