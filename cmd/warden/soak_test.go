//go:build unix

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/wardenrt/warden/internal/llmtest"
	"github.com/wardenrt/warden/internal/wasmfixture"
)

// The crash soak's workloads.
const (
	soakAppends  = "appends"
	soakWorkflow = "workflow run"
	soakInstall  = "install"
)

// soakCalls is how many write_memory calls an appends run makes (turns of
// soakPerTurn calls) and how many steps the soak workflow has.
const (
	soakTurns   = 6
	soakPerTurn = 4
	soakSteps   = 24
)

// TestCrashSoak (issue 17): warden SIGKILLed at random moments, over and
// over, on one lived-in home — in an agent run writing memory call after
// call, in a multi-step workflow run, in a wasm install — and after each
// kill: every call warden had reported done is on record (its memory entry
// and its intent and result records), `warden audit verify` passes, the
// bbolt file passes bbolt's consistency check, a run the dead process left
// running is marked interrupted at the next start, and an install is either
// complete (pinned to the file's bytes, and callable) or not there
// (nothing pinned, nothing loadable). Iterations: $WARDEN_SOAK (default
// 20); CI runs 200, `task soak` 1000.
func TestCrashSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("builds warden and kills it hundreds of times")
	}
	n := 20
	if s := os.Getenv("WARDEN_SOAK"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("WARDEN_SOAK=%q: want a positive number of iterations", s)
		}
		n = v
	}
	randSeed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WARDEN_SOAK_SEED"); s != "" {
		randSeed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("random source %d (WARDEN_SOAK_SEED reproduces the kills' order and delays, not their timing)", randSeed)
	s := &soak{t: t, rng: rand.New(rand.NewPCG(randSeed, randSeed^0x9e3779b97f4a7c15)), home: t.TempDir(), ws: t.TempDir()}
	s.bin = filepath.Join(t.TempDir(), "warden")
	goBuild(t, s.bin, ".")
	s.module = wasmfixture.Stage(t, "examples/textstats", "soakmod", false)
	b, err := os.ReadFile(s.module)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	s.moduleSum, s.moduleSize = hex.EncodeToString(sum[:]), len(b)
	s.workflow = filepath.Join(s.ws, "soak.yaml")
	writeFile(t, s.workflow, soakWorkflowYAML())

	// How long each workload takes to its end, so the kills can be spread
	// over it: measured at the start, and again every 100 iterations as
	// the home fills.
	start := time.Now()
	s.coldInstall = s.iteration(soakInstall, -1) // wazero's cache is cold
	t.Logf("install, compiling the module: %v to its end", s.coldInstall.Round(time.Millisecond))
	// The warm cache, put back after an install that compiled anew: one
	// killed while compiling would leave the next cold too.
	s.warmCache = filepath.Join(t.TempDir(), "cache")
	if err := os.CopyFS(s.warmCache, os.DirFS(filepath.Join(s.home, "cache"))); err != nil {
		t.Fatal(err)
	}
	workloads := []string{soakAppends, soakWorkflow, soakInstall}
	measure := func() {
		var line []string
		for _, w := range workloads {
			var d []time.Duration
			for range 3 {
				d = append(d, s.iteration(w, -1))
			}
			s.took[w] = median(d)
			line = append(line, fmt.Sprintf("%s %v", w, s.took[w].Round(time.Millisecond)))
		}
		t.Logf("to their end (median of 3): %s", strings.Join(line, ", "))
	}
	s.count = soakCount{}
	for i := 0; i < n && !t.Failed(); i++ {
		if i%100 == 0 {
			count := s.count
			measure()
			s.count = count
		}
		s.iteration(workloads[s.rng.IntN(len(workloads))], i)
	}
	c := s.count
	t.Logf("%d iterations (%d appends, %d workflow runs, %d installs): %d acknowledged records lost, %d corruptions, audit verify passed %d times, %d half-installed modules, %d interrupted runs marked",
		c.iterations, c.by[soakAppends], c.by[soakWorkflow], c.by[soakInstall], c.lost, c.corrupt, c.verified, c.halfInstalled, c.interrupted)
	t.Logf("details: %d calls acknowledged and found; %d runs finished before the kill, %d not yet recorded; installs: %d complete, %d absent; in %v",
		c.acked, c.finished, c.unrecorded, c.installed, c.absent, time.Since(start).Round(time.Second))
	soakHeld := "yes"
	if c.lost+c.corrupt+c.halfInstalled > 0 {
		soakHeld = "NO"
	}
	t.Logf("security-report: crash soak (SIGKILL) | %d iterations: %d acknowledged records lost, %d corruptions, audit verify passed %d times, %d half-installed modules, %d interrupted runs marked | %s",
		c.iterations, c.lost, c.corrupt, c.verified, c.halfInstalled, c.interrupted, soakHeld)
}

type soakCount struct {
	iterations, verified, lost, corrupt, halfInstalled, interrupted int
	acked, finished, unrecorded, installed, absent                  int
	by                                                              map[string]int
}

type soak struct {
	t                 *testing.T
	rng               *rand.Rand
	bin, home, ws     string
	module, moduleSum string
	moduleSize        int
	workflow          string
	took              map[string]time.Duration
	coldInstall       time.Duration // an install that compiles the module
	measured          int           // measuring runs so far
	warmCache         string        // a copy of wazero's cache holding the module
	count             soakCount
}

func soakWorkflowYAML() string {
	var b strings.Builder
	b.WriteString("version: 1\nname: soak\nparams:\n  ns: {type: string}\ngrants: [\"memory.write:*\"]\nsteps:\n")
	for j := 0; j < soakSteps; j++ {
		fmt.Fprintf(&b, "  - id: w%d\n    tool: write_memory\n    args: {namespace: \"${{ params.ns }}\", key: \"k%d\", value: \"v%d\"}\n", j, j, j)
	}
	return b.String()
}

// soakTB gives llmtest a cleanup the soak runs at the end of each
// iteration, not of the test.
type soakTB struct {
	testing.TB
	cleanups []func()
}

func (s *soakTB) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }

// Errorf passes on llmtest's failures but one: a request the kill cut
// short.
func (s *soakTB) Errorf(format string, args ...any) {
	if msg := fmt.Sprintf(format, args...); strings.HasPrefix(msg, "llmtest: cannot decode request body") {
		return
	}
	s.TB.Errorf(format, args...)
}

func (s *soakTB) done() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}

// iteration runs workload w, killing it after a random delay (i < 0: lets
// it end, and returns how long it took), and checks the home after.
func (s *soak) iteration(w string, i int) time.Duration {
	t := s.t
	t.Helper()
	if s.took == nil {
		s.took = map[string]time.Duration{}
	}
	if s.count.by == nil {
		s.count.by = map[string]int{}
	}
	var tag string
	if i >= 0 {
		tag = strconv.Itoa(i)
	} else {
		s.measured++
		tag = "m" + strconv.Itoa(s.measured) // a measuring run's
	}
	ns := "s" + tag
	var (
		args []string
		env  []string
		tb   *soakTB
	)
	switch w {
	case soakAppends:
		tb = &soakTB{TB: t}
		defer tb.done()
		var steps []llmtest.Step
		for turn := 0; turn < soakTurns; turn++ {
			var calls []llmtest.ToolCall
			for j := 0; j < soakPerTurn; j++ {
				k := turn*soakPerTurn + j
				calls = append(calls, llmtest.ToolCall{Name: "write_memory", Arguments: fmt.Sprintf(`{"namespace":%q,"key":"k%d","value":"v%d"}`, ns, k, k)})
			}
			steps = append(steps, llmtest.Step{ToolCalls: calls})
		}
		steps = append(steps, llmtest.Step{Content: "done."})
		srv := llmtest.New(tb, steps...)
		env = []string{"OPENAI_BASE_URL=" + srv.URL, "OPENAI_API_KEY=", "WARDEN_MODEL=scripted"}
		args = []string{"--grant", "memory.write:*", "run", "--no-stream", "write the soak's entries"}
	case soakWorkflow:
		args = []string{"--grant", "memory.write:*", "workflow", "run", s.workflow, "-p", "ns=" + ns}
	case soakInstall:
		args = []string{"tool", "install", s.module, "--name", "soak" + tag}
	}
	took := s.took[w]
	if w == soakInstall && i >= 0 && s.rng.IntN(8) == 0 {
		// One install in eight compiles the module again, so kills land
		// while it is compiled and its native code cached too.
		cache := filepath.Join(s.home, "cache")
		if err := os.RemoveAll(cache); err != nil {
			t.Fatal(err)
		}
		took = s.coldInstall
		defer func() {
			if err := os.RemoveAll(cache); err != nil {
				t.Fatal(err)
			}
			if err := os.CopyFS(cache, os.DirFS(s.warmCache)); err != nil {
				t.Fatal(err)
			}
		}()
	}
	var stdout, stderr lockedBuffer
	cmd := exec.Command(s.bin, append([]string{"--home", s.home, "--workspace", s.ws}, args...)...)
	cmd.Env = append(append(os.Environ(), "WARDEN_POLICY=", "WARDEN_APPROVE=", "WARDEN_LOG_LEVEL=warn"), env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var delay time.Duration
	if i >= 0 {
		// Before, during and after the writes: over the whole time the
		// workload takes, and a little past it.
		delay = time.Duration(s.rng.Int64N(int64(took*115/100) + 1))
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	killed := false
	if i >= 0 {
		select {
		case <-exited:
		case <-time.After(delay):
			killed = cmd.Process.Signal(syscall.SIGKILL) == nil
			<-exited
		}
	} else {
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Fatalf("%s did not end in 60 s: %s", w, stderr.String())
		}
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", w, code, stdout.String(), stderr.String())
		}
	}
	took = time.Since(start)
	out, errs := stdout.String(), stderr.String()
	if i >= 0 {
		s.count.iterations++
		s.count.by[w]++
	}
	what := fmt.Sprintf("iteration %s (%s, killed after %v: %v)", tag, w, delay.Round(time.Millisecond), killed)

	// The file as the dead process left it: bbolt's own check.
	if err := s.boltCheck(); err != nil {
		s.count.corrupt++
		t.Errorf("%s: the bbolt file: %v", what, err)
	}
	if r := s.warden(nil, "audit", "verify"); r.code != 0 {
		s.count.corrupt++
		t.Errorf("%s: audit verify: exit %d\n%s%s", what, r.code, r.stdout, r.stderr)
	} else {
		s.count.verified++
	}
	switch w {
	case soakAppends:
		acked := ackedCalls(errs)
		s.checkAcked(what, ns, acked)
		s.checkRun(what, "agent", ns, errs, len(acked))
	case soakWorkflow:
		acked := ackedSteps(errs)
		s.checkAcked(what, ns, acked)
		s.checkRun(what, "workflow", ns, errs, len(acked))
	case soakInstall:
		s.checkInstall(what, "soak"+tag, out, errs)
	}
	return took
}

// ackedCalls are the keys of the write_memory calls a `warden run` reported
// done: "→ write_memory {args}" followed by "  ✓ ok".
func ackedCalls(stderr string) []string {
	var keys []string
	pending := ""
	for _, line := range strings.Split(stderr, "\n") {
		if rest, ok := strings.CutPrefix(line, "→ write_memory "); ok {
			var a struct{ Key string }
			if json.Unmarshal([]byte(rest), &a) == nil {
				pending = a.Key
			}
			continue
		}
		if strings.HasPrefix(line, "  ✓ ok") && pending != "" && strings.HasSuffix(line, ")") {
			keys = append(keys, pending)
		}
		pending = ""
	}
	return keys
}

var stepDone = regexp.MustCompile(`(?m)^✓ \[\d+/\d+\] w(\d+) succeeded \(\d+ ms\)$`)

// ackedSteps are the keys the steps a `warden workflow run` reported done
// wrote.
func ackedSteps(stderr string) []string {
	var keys []string
	for _, m := range stepDone.FindAllStringSubmatch(stderr, -1) {
		keys = append(keys, "k"+m[1])
	}
	return keys
}

// checkAcked: each acknowledged call's memory entry is there, and so are
// its intent and result records.
func (s *soak) checkAcked(what, ns string, keys []string) {
	t := s.t
	if len(keys) == 0 {
		return
	}
	r := s.warden(nil, "memory", "ls", "--ns", ns, "--json")
	if r.code != 0 {
		t.Errorf("%s: memory ls: %s", what, r.stderr)
		return
	}
	var entries []struct{ Key string }
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil {
		t.Errorf("%s: memory ls: %v\n%s", what, err, r.stdout)
	}
	have := map[string]bool{}
	for _, e := range entries {
		have[e.Key] = true
	}
	r = s.warden(nil, "audit", "ls", "--json", "--limit", strconv.Itoa(4*soakSteps+20))
	var recs []struct {
		Event struct {
			Phase  string `json:"phase"`
			CallID string `json:"call_id"`
			Args   struct {
				Namespace, Key string
			} `json:"args"`
		} `json:"event"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil {
		t.Errorf("%s: audit ls: %v\n%s%s", what, err, r.stdout, r.stderr)
	}
	intent := map[string]string{} // call id → key
	result := map[string]bool{}   // key → a result record
	for _, rec := range recs {
		e := rec.Event
		switch e.Phase {
		case "intent":
			if e.Args.Namespace == ns {
				intent[e.CallID] = e.Args.Key
			}
		case "result":
			if k, ok := intent[e.CallID]; ok {
				result[k] = true
			}
		}
	}
	for _, k := range keys {
		s.count.acked++
		var missing []string
		if !have[k] {
			missing = append(missing, "its memory entry")
		}
		if !result[k] {
			missing = append(missing, "its intent and result records")
		}
		if len(missing) > 0 {
			s.count.lost++
			s.count.acked--
			t.Errorf("%s: write_memory %s/%s was reported done, and %s lost", what, ns, k, strings.Join(missing, " and "))
		}
	}
}

// checkRun: the run the process recorded is, at the next start, finished
// (when the process said so) or interrupted — never left running.
func (s *soak) checkRun(what, kind, ns, stderr string, acked int) {
	t := s.t
	r := s.warden(nil, "runs", "ls", "--json", "--limit", "5")
	if r.code != 0 {
		t.Errorf("%s: runs ls: %s", what, r.stderr)
		return
	}
	var docs []json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &docs); err != nil {
		t.Errorf("%s: runs ls: %v", what, err)
		return
	}
	for _, d := range docs {
		var run struct {
			ID, Kind, Task, Status string
			Params                 map[string]any
			Error                  *struct{ Code, Message string }
		}
		if err := json.Unmarshal(d, &run); err != nil {
			t.Errorf("%s: a run record: %v", what, err)
			continue
		}
		mine := false
		switch kind {
		case "agent":
			mine = run.Kind == "agent" && strings.Contains(stderr, "run "+run.ID+" ")
		case "workflow":
			mine = run.Kind == "workflow" && run.Params["ns"] == ns
		}
		if !mine {
			continue
		}
		ended := strings.Contains(stderr, " succeeded (run "+run.ID) || strings.Contains(stderr, "run "+run.ID+" succeeded")
		switch {
		case run.Status == "succeeded":
			// Finished: the kill may land after its last record and
			// before it printed the end.
			s.count.finished++
		case run.Status == "interrupted" && !ended:
			s.count.interrupted++
			if rs := s.warden(nil, "runs", "show", run.ID); rs.code != 0 || !strings.Contains(rs.stdout, "interrupted") {
				t.Errorf("%s: runs show %s: exit %d\n%s%s", what, run.ID, rs.code, rs.stdout, rs.stderr)
			}
		default:
			t.Errorf("%s: %s run %s is %s after the process died (it said it ended: %v)\n%s", what, kind, run.ID, run.Status, ended, d)
		}
		return
	}
	// No record: the process died before it recorded the run, so before
	// its first call.
	s.count.unrecorded++
	if acked > 0 {
		t.Errorf("%s: no record of the %s run that made %d calls\n%s", what, kind, acked, r.stdout)
	}
}

// checkInstall: the module is installed and works, or it is not there:
// never pinned to bytes other than its file's, never a file that is
// listed as loadable without a pin.
func (s *soak) checkInstall(what, name, stdout, stderr string) {
	t := s.t
	r := s.warden(nil, "tool", "ls", "--json")
	if r.code != 0 {
		t.Errorf("%s: tool ls: exit %d\n%s", what, r.code, r.stderr)
		return
	}
	var mods []struct {
		Module, File, State string
		Pin                 *struct {
			SHA256 string `json:"sha256"`
			Size   int    `json:"size"`
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &mods); err != nil {
		t.Errorf("%s: tool ls: %v", what, err)
		return
	}
	file := filepath.Join(s.home, "tools", name+".wasm")
	fb, ferr := os.ReadFile(file)
	fsum := sha256.Sum256(fb)
	listed := false
	for _, m := range mods {
		if m.Module != name {
			continue
		}
		listed = true
		switch {
		case m.State == "ok":
			if m.Pin == nil || m.Pin.SHA256 != s.moduleSum || m.Pin.Size != s.moduleSize || ferr != nil || hex.EncodeToString(fsum[:]) != s.moduleSum {
				s.count.halfInstalled++
				t.Errorf("%s: %s is listed ok, but its pin %+v does not match the file (%d bytes, %v) or the module", what, name, m.Pin, len(fb), ferr)
				break
			}
			c := s.warden(nil, "call", name, "--args", `{"text":"one two two"}`)
			if c.code != 0 || !strings.Contains(c.stdout, `"words": 3`) {
				s.count.halfInstalled++
				t.Errorf("%s: %s is installed but its call fails: exit %d\n%s%s", what, name, c.code, c.stdout, c.stderr)
				break
			}
			s.count.installed++
		default:
			s.count.halfInstalled++
			t.Errorf("%s: %s is half-installed: state %s, pin %+v, file %d bytes (%v)\n%s", what, name, m.State, m.Pin, len(fb), ferr, r.stdout)
		}
	}
	if !listed {
		if ferr == nil {
			s.count.halfInstalled++
			t.Errorf("%s: %s is not listed but its file is there", what, name)
		} else {
			s.count.absent++
		}
		if strings.Contains(stdout, "installed module "+name) {
			s.count.lost++
			t.Errorf("%s: the install of %s was reported, and is lost", what, name)
		}
	}
	// Nothing staged is left once warden has started again.
	if left, _ := filepath.Glob(filepath.Join(s.home, "tools", ".install.*."+name+".*")); len(left) > 0 {
		t.Errorf("%s: staged files of %s left after the next start: %v", what, name, left)
	}
	// The lived-in home keeps no module: each one loaded at every start
	// would slow the soak down.
	if listed || ferr == nil {
		if r := s.warden(nil, "tool", "rm", name); r.code != 0 {
			t.Errorf("%s: tool rm %s: exit %d\n%s", what, name, r.code, r.stderr)
		}
	}
}

// boltCheck opens the dead process's bbolt file read-only and runs bbolt's
// consistency check on it.
func (s *soak) boltCheck() error {
	db, err := bolt.Open(filepath.Join(s.home, "warden.db"), 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if errors.Is(err, os.ErrNotExist) {
		return nil // killed before it made one
	}
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
}

// warden runs the soak's warden binary on its home to its end.
func (s *soak) warden(env []string, args ...string) wardenRun {
	s.t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(s.bin, append([]string{"--home", s.home, "--workspace", s.ws}, args...)...)
	cmd.Env = append(append(os.Environ(), "WARDEN_POLICY=", "WARDEN_APPROVE=", "WARDEN_LOG_LEVEL=warn"), env...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := wardenRun{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			s.t.Fatal(err)
		}
	}
	r.code = cmd.ProcessState.ExitCode()
	return r
}
