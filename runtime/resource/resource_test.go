package resource

import "testing"

func TestLimitsOver(t *testing.T) {
	rule := Limits{CPUSeconds: 5}
	policy := Limits{CPUSeconds: 60, Processes: 10}
	got := rule.Over(policy).WithDefaults()
	want := Default
	want.CPUSeconds, want.Processes = 5, 10
	if got != want {
		t.Fatalf("%+v, want %+v", got, want)
	}
}
