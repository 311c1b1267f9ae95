//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/wardenrt/warden/internal/llmtest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/schedule"
	"github.com/wardenrt/warden/runtime/tool"
)

// daemonWorld is a home with a policy that lets jobs write out/ and run
// sleep, and a workspace with two workflows: tick (writes a file) and nap
// (sleeps for a marked while).
type daemonWorld struct {
	t        testing.TB
	bin      string
	home, ws string
	marker   string
}

func newDaemonWorld(t testing.TB) *daemonWorld {
	t.Helper()
	bin, err := exec.LookPath("warden")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w := &daemonWorld{t: t, bin: bin, home: filepath.Join(dir, "home"), ws: filepath.Join(dir, "ws"),
		marker: strconv.Itoa(400 + os.Getpid()%500)}
	for _, d := range []string{w.home, w.ws} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(w.home, "policy.yaml"): `version: 1
grants: ["fs.read:**", "fs.write:out/**", "exec:sleep", "system.info"]
rules:
  - {tool: shell, action: allow}
`,
		filepath.Join(w.ws, "tick.yaml"): `version: 1
name: tick
grants: ["fs.read:**", "fs.write:out/**"]
steps:
  - {id: w, tool: fs_write, args: {path: out/tick.txt, content: "tick\n", overwrite: true}}
`,
		filepath.Join(w.ws, "nap.yaml"): `version: 1
name: nap
grants: ["fs.read:**", "exec:sleep"]
steps:
  - {id: nap, tool: shell, args: {command: "sleep ` + w.marker + `.5", timeout_ms: 600000}}
  - {id: after, tool: fs_write, args: {path: out/after.txt, content: "x"}}
`,
	}
	for f, c := range files {
		if err := os.WriteFile(f, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *daemonWorld) command(args ...string) *exec.Cmd {
	cmd := exec.Command(w.bin, append([]string{"--home", w.home, "--workspace", w.ws}, args...)...)
	cmd.Env = append(os.Environ(), "WARDEN_APPROVE=", "WARDEN_LOG_LEVEL=error")
	return cmd
}

func (w *daemonWorld) run(args ...string) string {
	w.t.Helper()
	out, err := w.command(args...).CombinedOutput()
	if err != nil {
		w.t.Fatalf("warden %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (w *daemonWorld) job(id string) schedule.Job {
	w.t.Helper()
	var j schedule.Job
	if err := json.Unmarshal([]byte(w.run("schedule", "show", id, "--json")), &j); err != nil {
		w.t.Fatal(err)
	}
	return j
}

// start starts the daemon (polling the store every 200 ms unless args
// say otherwise).
func (w *daemonWorld) start(args ...string) (*exec.Cmd, *bytes.Buffer) {
	w.t.Helper()
	if len(args) == 0 {
		args = []string{"--poll", "200ms"}
	}
	cmd := w.command(append([]string{"daemon"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, &out
}

// waitFor polls cond (reading the store through the CLI) for up to a
// minute.
func (w *daemonWorld) waitFor(what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			w.t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// marked lists the processes whose command line holds the nap's marker.
func (w *daemonWorld) marked() []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte("sleep\x00"+w.marker+".5")) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestDaemon: a real daemon runs a job every second, while other warden
// commands use the store; SIGTERM during a running job cancels it, kills
// its program and records the run as cancelled; SIGKILL leaves a run that
// the next daemon marks interrupted.
func TestDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a daemon for seconds")
	}
	w := newDaemonWorld(t)
	w.run("schedule", "add", "tick", "--workflow", filepath.Join(w.ws, "tick.yaml"), "--every", "1s", "--yes")
	d, out := w.start()
	w.waitFor("three runs", func() bool {
		// Meanwhile, other commands work: a call, the audit log.
		if o, err := w.command("call", "system", "--args", `{"operation":"get_info"}`).CombinedOutput(); err != nil {
			t.Fatalf("warden call while the daemon runs: %v\n%s", err, o)
		}
		if o, err := w.command("audit", "ls", "--tool", "fs_write").CombinedOutput(); err != nil {
			t.Fatalf("warden audit ls while the daemon runs: %v\n%s", err, o)
		}
		return w.job("tick").Runs >= 3
	})
	j := w.job("tick")
	if j.Last == nil || j.Last.Status != gate.RunSucceeded {
		t.Fatalf("tick: %+v", j.Last)
	}
	if b, _ := os.ReadFile(filepath.Join(w.ws, "out", "tick.txt")); string(b) != "tick\n" {
		t.Fatalf("out/tick.txt: %q", b)
	}
	if s := w.run("audit", "ls", "--tool", "fs_write", "--json"); !strings.Contains(s, `"schedule:tick"`) {
		t.Fatalf("the job's calls are not recorded as schedule:tick:\n%s", s)
	}
	w.run("schedule", "pause", "tick")

	// SIGTERM while a job runs.
	w.run("schedule", "add", "nap", "--workflow", filepath.Join(w.ws, "nap.yaml"), "--every", "1s", "--yes")
	w.waitFor("the nap to start", func() bool { return len(w.marked()) > 0 })
	if err := d.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(); err != nil {
		t.Fatalf("the daemon's exit after SIGTERM: %v\n%s", err, out)
	}
	if left := w.marked(); len(left) > 0 {
		t.Fatalf("processes left after SIGTERM: %v", left)
	}
	j = w.job("nap")
	if j.Running != nil || j.Last == nil || j.Last.Status != gate.RunCancelled {
		t.Fatalf("nap after SIGTERM: running %+v last %+v", j.Running, j.Last)
	}
	if s := w.run("runs", "show", j.Last.RunID); !strings.Contains(s, "cancelled") {
		t.Fatalf("runs show %s:\n%s", j.Last.RunID, s)
	}
	if _, err := os.Stat(filepath.Join(w.ws, "out", "after.txt")); err == nil {
		t.Fatal("the step after the cancelled one ran")
	}

	// SIGKILL while a job runs: the next daemon marks the run interrupted.
	d, _ = w.start()
	w.waitFor("the nap to start again", func() bool { return w.job("nap").Running != nil && len(w.marked()) > 0 })
	runID := w.job("nap").Running.RunID
	d.Process.Kill()
	d.Wait()
	for _, pid := range w.marked() { // the sandboxed sleep may outlive a SIGKILLed warden
		if p, err := strconv.Atoi(pid); err == nil {
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
	w.run("schedule", "pause", "nap")
	w.run("daemon", "--once")
	j = w.job("nap")
	if j.Running != nil || j.Last == nil || j.Last.Status != schedule.StatusInterrupted || j.Last.RunID != runID {
		t.Fatalf("nap after SIGKILL and a restart: running %+v last %+v", j.Running, j.Last)
	}
	if s := w.run("runs", "show", runID); !strings.Contains(s, "interrupted") {
		t.Fatalf("runs show %s:\n%s", runID, s)
	}
	if s := w.run("audit", "verify"); !strings.Contains(s, "OK") {
		t.Fatalf("audit verify: %s", s)
	}
}

// TestJobNarrowedByPolicy: a grant the policy drops after the job was
// scheduled is dropped for the job too: the run is refused with
// CAPABILITY_DENIED and nothing runs.
func TestJobNarrowedByPolicy(t *testing.T) {
	w := newDaemonWorld(t)
	w.run("schedule", "add", "tick", "--workflow", filepath.Join(w.ws, "tick.yaml"), "--every", "1s", "--yes")
	if err := os.WriteFile(filepath.Join(w.home, "policy.yaml"), []byte("version: 1\ngrants: [\"fs.read:**\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // let the first firing come due
	w.run("daemon", "--once")
	j := w.job("tick")
	if j.Last == nil || j.Last.Status != gate.RunFailed || j.Last.Error == nil || j.Last.Error.Code != tool.CodeCapabilityDenied {
		t.Fatalf("tick after the policy dropped fs.write: %+v", j.Last)
	}
	// The hint says what the owner can do: the daemon takes no --grant.
	if h := j.Last.Error.Hint; strings.Contains(h, "add --grant") || !strings.Contains(h, "grant fs.write:out/** in the policy (") ||
		!strings.Contains(h, "add it there, then `warden schedule approve tick`") {
		t.Errorf("the hint of the refused job: %q", h)
	}
	if _, err := os.Stat(filepath.Join(w.ws, "out")); err == nil {
		t.Fatal("the job wrote out/ without the grant")
	}
}

// TestScheduleTaskFromModel: a model's schedule_task needs approval (none
// with no terminal), is scheduled with --approve auto, and cannot carry a
// grant the model's own run lacks.
func TestScheduleTaskFromModel(t *testing.T) {
	w := newDaemonWorld(t)
	propose := func(args string) llmtest.ToolCall { return llmtest.ToolCall{Name: "schedule_task", Arguments: args} }
	for _, tc := range []struct {
		name    string
		flags   []string
		call    llmtest.ToolCall
		want    string
		created bool
	}{
		{"no approval", nil, propose(`{"name":"t1","workflow":"tick.yaml","every":"1h"}`), "APPROVAL_REQUIRED", false},
		{"approved", []string{"--approve", "auto"}, propose(`{"name":"t2","workflow":"tick.yaml","every":"1h"}`), `"scheduled":true`, true},
		{"wider grants", []string{"--approve", "auto"}, propose(`{"name":"t3","workflow":"tick.yaml","every":"1h","grants":["fs.write:out/**","net:*"]}`), "CAPABILITY_DENIED", false},
		{"task with a grant not held", []string{"--approve", "auto"}, propose(`{"name":"t4","task":"look around","cron":"0 9 * * *","grants":["exec:*"]}`), "CAPABILITY_DENIED", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t,
				llmtest.Step{ToolCalls: []llmtest.ToolCall{tc.call}},
				llmtest.Step{Content: "done", Check: func(t testing.TB, req openai.ChatCompletionRequest) {
					if res := toolResults(req); len(res) != 1 || !strings.Contains(res[0], tc.want) {
						t.Errorf("schedule_task result %q, want %s", res, tc.want)
					}
				}},
			)
			cmd := w.command(append(tc.flags, "run", "schedule the tick")...)
			cmd.Env = append(cmd.Env, "OPENAI_BASE_URL="+srv.URL, "OPENAI_API_KEY=", "WARDEN_MODEL=scripted")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("warden run: %v\n%s", err, out)
			}
			name := strings.TrimPrefix(strings.SplitN(tc.call.Arguments, `"`, 5)[3], "")
			_, err := w.command("schedule", "show", name).Output()
			if (err == nil) != tc.created {
				t.Fatalf("job %s exists=%v, want %v", name, err == nil, tc.created)
			}
		})
	}
	j := w.job("t2")
	if j.CreatedBy[len(j.CreatedBy)-1] != "model" || j.Digest == "" || strings.Join(j.Grants, ",") != "fs.read:**,fs.write:out/**" {
		t.Fatalf("the model's job: %+v", j)
	}
}

// TestJobOnFailure: a failed run calls the job's on_failure tool, under the
// job's grants, through the gate.
func TestJobOnFailure(t *testing.T) {
	w := newDaemonWorld(t)
	if err := os.WriteFile(filepath.Join(w.home, "policy.yaml"), []byte("version: 1\ngrants: [\"fs.read:**\", \"memory.write:alerts\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.ws, "broken.yaml"), []byte(`version: 1
name: broken
grants: ["fs.read:**"]
steps:
  - {id: r, tool: fs_read, args: {path: missing.txt}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	w.run("schedule", "add", "broken", "--workflow", filepath.Join(w.ws, "broken.yaml"), "--every", "1h", "--yes",
		"--with", "fs.read:**", "--with", "memory.write:alerts",
		"--on-failure-tool", "write_memory", "--on-failure-args", `{"namespace":"alerts","key":"broken","value":"the nightly job failed"}`)
	if out, err := w.command("schedule", "run-now", "broken").CombinedOutput(); err == nil || !strings.Contains(string(out), "NOT_FOUND") {
		t.Fatalf("run-now of a failing job: %v\n%s", err, out)
	}
	if out := w.run("memory", "get", "--ns", "alerts", "broken"); !strings.Contains(out, "the nightly job failed") {
		t.Fatalf("on_failure did not write the alert: %s", out)
	}
	if s := w.run("audit", "ls", "--tool", "write_memory", "--json"); !strings.Contains(s, `"on_failure"`) {
		t.Fatalf("the on_failure call is not on the record as the job's:\n%s", s)
	}
}

// TestJobTimeout: a run that reaches the job's --timeout is failed with
// TIMEOUT (not cancelled), its program is killed, and on_failure runs.
func TestJobTimeout(t *testing.T) {
	w := newDaemonWorld(t)
	if err := os.WriteFile(filepath.Join(w.home, "policy.yaml"), []byte(`version: 1
grants: ["fs.read:**", "fs.write:out/**", "exec:sleep", "memory.write:alerts"]
rules:
  - {tool: shell, action: allow}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	w.run("schedule", "add", "nap", "--workflow", filepath.Join(w.ws, "nap.yaml"), "--every", "1h", "--timeout", "2s", "--yes",
		"--with", "fs.read:**", "--with", "exec:sleep", "--with", "memory.write:alerts",
		"--on-failure-tool", "write_memory", "--on-failure-args", `{"namespace":"alerts","key":"nap","value":"the nap timed out"}`)
	start := time.Now()
	out, err := w.command("schedule", "run-now", "nap").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "TIMEOUT") {
		t.Fatalf("run-now of a job past its timeout: %v\n%s", err, out)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the run took %s: the timeout did not stop it", d)
	}
	if left := w.marked(); len(left) > 0 {
		t.Fatalf("processes left after the timeout: %v", left)
	}
	j := w.job("nap")
	if j.Last == nil || j.Last.Status != gate.RunFailed || j.Last.Error == nil || j.Last.Error.Code != tool.CodeTimeout {
		t.Fatalf("nap after its timeout: %+v", j.Last)
	}
	var rec struct {
		Status string      `json:"status"`
		Error  *tool.Error `json:"error"`
	}
	if err := json.Unmarshal([]byte(w.run("runs", "show", j.Last.RunID, "--json")), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Status != gate.RunFailed || rec.Error == nil || rec.Error.Code != tool.CodeTimeout {
		t.Fatalf("the run's record: %+v", rec)
	}
	if out := w.run("memory", "get", "--ns", "alerts", "nap"); !strings.Contains(out, "the nap timed out") {
		t.Fatalf("on_failure did not run after the timeout: %s", out)
	}
	if _, err := os.Stat(filepath.Join(w.ws, "out", "after.txt")); err == nil {
		t.Fatal("the step after the one that timed out ran")
	}
}
