package env

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wardenrt/warden/internal/runpatch"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/store"
)

// A run is recorded "running" when it starts and with its outcome when it
// ends; a process killed in between (SIGKILL, a crash, the machine going
// down) leaves it "running" for ever. So while a run of this process is
// running, <home>/running/<run id> names the process (pid, host, boot,
// start time), and the next warden process to open the store marks the
// runs of dead processes interrupted (RATIONALE "A killed run is marked
// interrupted"). The mark is written before the run's first record and
// removed after its last, so a run left running always has one.

// RunInterrupted is the status of a run its process left running: it was
// killed or crashed.
const RunInterrupted = "interrupted"

// Owner is the process that runs something: a running run's mark, a
// scheduled job's.
type Owner struct {
	PID  int    `json:"pid"`
	Host string `json:"host"`
	Boot string `json:"boot,omitempty"`
	// Start is the process's start time, so a reused pid is not taken for it.
	Start string `json:"start,omitempty"`
}

// Self is this process as an Owner.
func Self() Owner {
	return Owner{PID: os.Getpid(), Host: HostName(), Boot: BootID(), Start: ProcStart(os.Getpid())}
}

// Alive reports whether the owner still runs. An owner on another host
// cannot be checked and counts as alive.
func (o Owner) Alive() bool {
	if o.Host != HostName() {
		return true
	}
	if b := BootID(); b != "" && o.Boot != "" && b != o.Boot {
		return false
	}
	if !procFS() {
		return pidAlive(o.PID) // no /proc (macOS, Windows): the pid alone
	}
	start := ProcStart(o.PID)
	return start != "" && (o.Start == "" || start == o.Start)
}

// HostName is this host's name in a fleet: WARDEN_HOST, else the host
// name.
func HostName() string {
	if h := os.Getenv("WARDEN_HOST"); h != "" {
		return h
	}
	h, _ := os.Hostname()
	return h
}

// BootID identifies this boot of the machine ("" without /proc).
func BootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// ProcStart is a process's start time (field 22 of /proc/PID/stat), ""
// when it does not exist (or there is no /proc).
func ProcStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

var procFS = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
})

// runMark is what <home>/running/<run id> holds.
type runMark struct {
	Run string `json:"run"`
	Owner
}

// runningDir is where the marks of running runs are kept.
func (e *Env) runningDir() string { return filepath.Join(e.home, "running") }

// TrackRuns wraps runs (the store, or what stands for it) so that a run
// recorded running is marked as this process's until it is recorded with
// its outcome. The commands that run agents and workflows record them
// through it.
func (e *Env) TrackRuns(runs gate.Runs) gate.Runs {
	t := &trackedRuns{dir: e.runningDir(), runs: runs, marked: map[string]bool{}}
	if w, ok := runs.(runpatch.Writer); ok {
		return &trackedPatches{t, w}
	}
	return t
}

// trackedPatches is trackedRuns of a store that keeps runs in parts.
type trackedPatches struct {
	*trackedRuns
	w runpatch.Writer
}

func (t *trackedPatches) PatchRun(ctx context.Context, id string, p runpatch.Patch) error {
	return t.track(id, p.Head, func() error { return t.w.PatchRun(ctx, id, p) })
}

type trackedRuns struct {
	dir  string
	runs gate.Runs

	mu     sync.Mutex
	marked map[string]bool
}

func (t *trackedRuns) PutRun(ctx context.Context, id string, doc json.RawMessage) error {
	return t.track(id, doc, func() error { return t.runs.PutRun(ctx, id, doc) })
}

// track runs write, the write of run id's record doc (or of its head),
// marking the run as this process's while its status is running.
func (t *trackedRuns) track(id string, doc json.RawMessage, write func() error) error {
	var s struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(doc, &s)
	running := s.Status == gate.RunRunning
	if running {
		t.mu.Lock()
		marked := t.marked[id]
		t.mu.Unlock()
		if !marked {
			if err := writeRunMark(t.dir, id); err != nil {
				return err
			}
			t.mu.Lock()
			t.marked[id] = true
			t.mu.Unlock()
		}
	}
	if err := write(); err != nil {
		return err
	}
	if !running {
		t.mu.Lock()
		marked := t.marked[id]
		delete(t.marked, id)
		t.mu.Unlock()
		if marked {
			_ = os.Remove(filepath.Join(t.dir, id))
		}
	}
	return nil
}

// writeRunMark writes dir/id naming this process, durably (temp file,
// fsync, rename, fsync of the directory): a mark lost when the machine
// goes down would leave its run running.
func writeRunMark(dir, id string) error {
	if filepath.Base(id) != id || strings.HasPrefix(id, ".") || id == "" {
		return fmt.Errorf("run id %q cannot name a file", id)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return store.Classify(dir, err)
	}
	b, _ := json.Marshal(runMark{Run: id, Owner: Self()})
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d.tmp", id, os.Getpid()))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return store.Classify(tmp, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, id))
	}
	if err != nil {
		os.Remove(tmp)
		return store.Classify(tmp, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// recoverRuns marks interrupted the runs that processes now dead left
// running, and removes their marks. It runs when a command first opens
// the store, and costs one directory read when no mark is there. Failures
// are logged: the next start tries again.
func (e *Env) recoverRuns(st store.Backend) {
	dir := e.runningDir()
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, d := range ents {
		name := d.Name()
		path := filepath.Join(dir, name)
		if strings.HasPrefix(name, ".") {
			// A mark being written, or one a killed process left half
			// written (its run was not recorded yet).
			if f := strings.Split(name, "."); len(f) == 4 && f[3] == "tmp" {
				if pid, err := strconv.Atoi(f[2]); err == nil && !pidAlive(pid) {
					_ = os.Remove(path)
				}
			}
			continue
		}
		b, err := readMark(path)
		if err != nil {
			e.Logger().Warn("a run mark that is not warden's", "file", path, "err", err)
			continue
		}
		var m runMark
		if err := json.Unmarshal(b, &m); err != nil || m.Run != name {
			e.Logger().Warn("a run mark that is not warden's", "file", path)
			continue
		}
		if m.Alive() {
			continue
		}
		why := fmt.Sprintf("process %d ended without finishing it (killed, or crashed)", m.PID)
		if m.Boot != "" && m.Boot != BootID() {
			why = fmt.Sprintf("the machine restarted while process %d ran it", m.PID)
		}
		// The mark is read again where the run is marked, and before it is
		// removed: a warden that resumed the run meanwhile wrote its own.
		same := func() bool {
			now, err := readMark(path)
			return err == nil && bytes.Equal(now, b)
		}
		marked, err := markInterrupted(ctx, st, name, why, same)
		if err != nil {
			e.Logger().Warn("a run left running could not be marked interrupted", "run", name, "err", err)
			continue
		}
		if marked {
			e.Logger().Info("a run left running was marked interrupted", "run", name, "why", why)
		}
		if same() {
			_ = os.Remove(path)
		}
	}
}

// maxMark bounds what is read of a run mark (a few hundred bytes of JSON).
const maxMark = 4 << 10

// readMark reads a run mark: a regular file of at most maxMark bytes,
// opened without following a symlink or blocking on a FIFO (the running
// directory is the home's, but what is planted there must not hang or
// swell every command that opens the store).
func readMark(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|markOpenFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxMark {
		return nil, fmt.Errorf("not a run mark (%s, %d bytes)", fi.Mode().Type(), fi.Size())
	}
	return io.ReadAll(io.LimitReader(f, maxMark))
}

// errLeftAlone aborts the update of a run that is no longer the one a dead
// process left running.
var errLeftAlone = errors.New("the run is no longer left running")

// MarkInterrupted records run runID, if it is still running, as
// interrupted, saying why; it reports whether it did. A run never
// recorded (its process died first) is no error. The check and the write
// are one store transaction (a compare-and-set): a run that ended
// meanwhile is left as it ended.
func MarkInterrupted(ctx context.Context, st store.Backend, runID, reason string) (bool, error) {
	return markInterrupted(ctx, st, runID, reason, nil)
}

// markInterrupted is MarkInterrupted that also asks still, inside the
// transaction, whether the run is still the dead process's: a run that
// another warden marked and resumed meanwhile is running again, under a
// mark of its own, and stays so.
func markInterrupted(ctx context.Context, st store.Backend, runID, reason string, still func() bool) (bool, error) {
	err := st.UpdateRun(ctx, runID, func(doc json.RawMessage) (json.RawMessage, error) {
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		if m["status"] != gate.RunRunning || still != nil && !still() {
			return nil, errLeftAlone
		}
		m["status"] = RunInterrupted
		m["error"] = tool.Errorf(tool.CodeInternal, "", "the run was lost: %s", reason)
		return json.Marshal(m)
	})
	if errors.Is(err, errLeftAlone) || errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
