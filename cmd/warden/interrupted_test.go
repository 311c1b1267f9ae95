//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKilledRunIsMarkedInterrupted (found by TestCrashSoak): a workflow
// run whose process is SIGKILLed mid-step used to stay "running" for ever.
// While its process lives, another warden leaves it running; once the
// process is dead, the next warden to open the store marks it interrupted,
// naming the process, and drops its mark.
func TestKilledRunIsMarkedInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a warden process")
	}
	home, ws := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(home, "policy.yaml"), "version: 1\ngrants: [\"exec:sleep\", \"fs.read:**\", \"system.info\"]\nrules:\n  - {tool: shell, action: allow}\n")
	const marker = "3600.75"
	writeFile(t, filepath.Join(ws, "wf.yaml"), "version: 1\nname: sleeper\ngrants: [\"exec:sleep\", \"system.info\", \"fs.read:**\"]\nsteps:\n"+
		"  - {id: first, tool: system, args: {operation: get_info}}\n"+
		"  - {id: nap, tool: shell, args: {command: \"sleep "+marker+"\"}}\n")
	bin, err := exec.LookPath("warden") // this test binary as warden (TestMain)
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd := exec.Command(bin, "--home", home, "--workspace", ws, "workflow", "run", filepath.Join(ws, "wf.yaml"))
	cmd.Env = append(os.Environ(), "WARDEN_POLICY=", "WARDEN_APPROVE=")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	var sleeper []int
	for deadline := time.Now().Add(30 * time.Second); len(sleeper) == 0; {
		for _, p := range descendants(cmd.Process.Pid) {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); bytes.Contains(b, []byte(marker)) && bytes.HasPrefix(b, []byte("sleep")) {
				sleeper = append(sleeper, p)
			}
		}
		select {
		case <-exited:
			t.Fatalf("warden ended before the kill: %s", stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the step's program did not start: %s", stderr.String())
		}
	}
	run := func() (status, msg string) {
		t.Helper()
		r := runWarden(t, home, ws, nil, "runs", "ls", "--json")
		var docs []struct {
			Status string
			Error  *struct{ Message string }
		}
		if err := json.Unmarshal([]byte(r.stdout), &docs); err != nil || len(docs) != 1 {
			t.Fatalf("runs ls: %v\n%s%s", err, r.stdout, r.stderr)
		}
		if docs[0].Error != nil {
			msg = docs[0].Error.Message
		}
		return docs[0].Status, msg
	}
	if st, _ := run(); st != "running" {
		t.Errorf("while its process runs, the run is %s", st)
	}
	marks, _ := filepath.Glob(filepath.Join(home, "running", "*"))
	if len(marks) != 1 {
		t.Errorf("marks of running runs: %v", marks)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	for _, p := range sleeper {
		syscall.Kill(p, syscall.SIGKILL)
	}
	st, msg := run()
	want := fmt.Sprintf("the run was lost: process %d ended without finishing it", cmd.Process.Pid)
	if st != "interrupted" || !strings.HasPrefix(msg, want) {
		t.Errorf("after the kill: %s, %q; want interrupted, %q", st, msg, want)
	}
	if marks, _ := filepath.Glob(filepath.Join(home, "running", "*")); len(marks) != 0 {
		t.Errorf("marks left: %v", marks)
	}
	if r := runWarden(t, home, ws, nil, "audit", "verify"); r.code != 0 {
		t.Errorf("audit verify: %s%s", r.stdout, r.stderr)
	}
}
