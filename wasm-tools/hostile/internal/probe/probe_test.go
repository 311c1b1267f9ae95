package probe

import (
	"encoding/json"
	"runtime"
	"testing"
)

// Natively the probe has ambient authority, so it must say so: this checks
// the probe itself, not a sandbox.
func TestRunNativeSeesTheWorld(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("expects a Linux host")
	}
	r := Run()
	if !r.ReadDirRoot.OK || !r.ClockPlausible || !r.RandomDiffers {
		t.Fatalf("native probe saw too little: %+v", r)
	}
	found := false
	for _, c := range r.Could {
		found = found || c == "read_dir_root"
	}
	if !found {
		t.Fatalf("Could = %v, want read_dir_root in it", r.Could)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"could", "read_passwd", "environ", "net_dial", "clock_unix_nano", "random", "stdout_write"} {
		if _, ok := m[k]; !ok {
			t.Errorf("report lacks %q", k)
		}
	}
}
