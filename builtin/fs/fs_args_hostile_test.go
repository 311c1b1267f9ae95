//go:build unix

package fs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/tool"
)

// TestFSHostileArgumentSmuggling: arguments that one JSON reader reads
// otherwise than another — a key given twice (once spelled with an
// escape), a key in another case, a key the tool does not have, a value of
// the wrong type, a number out of a field's range — are refused through
// the gate, whichever decoder and binder read them, and nothing is read:
// the second "path" never replaces the first the grants were checked on.
func TestFSHostileArgumentSmuggling(t *testing.T) {
	ws, g, audit := testWS(t, testRO)
	tooltest.WriteFile(t, filepath.Join(ws, "ok.txt"), "FINE\n", 0o644)
	outside := t.TempDir()
	tooltest.WriteFile(t, filepath.Join(outside, "canary"), "OUTSIDE-CANARY\n", 0o644)
	canary := filepath.Join(outside, "canary")
	if _, err := os.Stat(canary); err != nil {
		t.Fatal(err)
	}
	for _, args := range []string{
		`{"path":"ok.txt","path":"` + canary + `"}`,
		`{"path":"ok.txt","\u0070ath":"` + canary + `"}`,
		`{"path":"ok.txt","pat\u0068":"` + canary + `"}`,
		`{"path":"ok.txt","Path":"` + canary + `"}`,
		`{"Path":"` + canary + `"}`,
		`{"PATH":"` + canary + `"}`,
		`{"path":"ok.txt","extra":"` + canary + `"}`,
		`{"path":["` + canary + `"]}`,
		`{"path":1}`,
		`{"path":"ok.txt","encoding":1}`,
		`{"path":"ok.txt"} {"path":"` + canary + `"}`,
		`{"path":"ok.txt",}`,
		`{"path":"ok.txt","nested":{"a":1,"a":2}}`,
		`{"file_paths":["ok.txt"],"file_paths":["` + canary + `"]}`,
	} {
		name := "fs_read"
		if strings.Contains(args, "file_paths") {
			name = "read_files"
		}
		res := tooltest.Call(t, g, name, args)
		if res.Success || res.Error == nil || res.Error.Code != tool.CodeInvalidInput {
			t.Errorf("%s %s: success=%v error=%v, want INVALID_INPUT", name, args, res.Success, res.Error)
		}
		if strings.Contains(res.Output, "CANARY") || strings.Contains(string(res.Data), "CANARY") {
			t.Errorf("%s %s: read the file outside: %q", name, args, res.Output)
		}
	}
	for _, ev := range audit.Events() {
		if ev.Phase == "intent" {
			t.Errorf("a refused call reached its intent: %+v", ev)
		}
	}
}
