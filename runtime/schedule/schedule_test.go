package schedule_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/schedule"
	"github.com/wardenrt/warden/runtime/tool"
)

func mustParse(t *testing.T, s schedule.Spec) *schedule.Schedule {
	t.Helper()
	sc, err := schedule.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func fmtAll(ts []time.Time, loc *time.Location) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.In(loc).Format("2006-01-02 15:04 MST")
	}
	return out
}

func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// TestFiringsAcrossDST: cron expressions fire once per wall-clock time in
// their zone — a time in the spring-forward gap right after it, a time
// that happens twice on the fall-back day once — and every schedules keep
// their interval in absolute time.
func TestFiringsAcrossDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	// Spring forward: 2026-03-08 02:00 EST → 03:00 EDT.
	sc := mustParse(t, schedule.Spec{Cron: "30 2 * * *", TZ: "America/New_York"})
	from := time.Date(2026, 3, 6, 12, 0, 0, 0, ny)
	same(t, "daily 02:30 over spring forward", fmtAll(sc.Firings(time.Time{}, from, 4), ny),
		[]string{"2026-03-07 02:30 EST", "2026-03-08 03:30 EDT", "2026-03-09 02:30 EDT", "2026-03-10 02:30 EDT"})
	// Fall back: 2026-11-01 02:00 EDT → 01:00 EST; 01:30 happens twice.
	sc = mustParse(t, schedule.Spec{Cron: "30 1 * * *", TZ: "America/New_York"})
	from = time.Date(2026, 10, 30, 12, 0, 0, 0, ny)
	same(t, "daily 01:30 over fall back", fmtAll(sc.Firings(time.Time{}, from, 3), ny),
		[]string{"2026-10-31 01:30 EDT", "2026-11-01 01:30 EDT", "2026-11-02 01:30 EST"})
	sc = mustParse(t, schedule.Spec{Cron: "*/30 * * * *", TZ: "America/New_York"})
	from = time.Date(2026, 11, 1, 0, 45, 0, 0, ny)
	same(t, "half-hourly over fall back", fmtAll(sc.Firings(time.Time{}, from, 4), ny),
		[]string{"2026-11-01 01:00 EDT", "2026-11-01 01:30 EDT", "2026-11-01 02:00 EST", "2026-11-01 02:30 EST"})
	// Every: absolute intervals, whatever the wall clock does.
	anchor := time.Date(2026, 3, 8, 0, 0, 0, 0, ny)
	sc = mustParse(t, schedule.Spec{Every: "1h"})
	same(t, "every hour over spring forward", fmtAll(sc.Firings(anchor, anchor.Add(time.Hour), 3), ny),
		[]string{"2026-03-08 03:00 EDT", "2026-03-08 04:00 EDT", "2026-03-08 05:00 EDT"})
	// At: once.
	sc = mustParse(t, schedule.Spec{At: "2026-11-25 09:00", TZ: "Europe/Paris"})
	paris, _ := time.LoadLocation("Europe/Paris")
	same(t, "at", fmtAll(sc.Firings(time.Time{}, from, 3), paris), []string{"2026-11-25 09:00 CET"})
	// Bad specs.
	for _, s := range []schedule.Spec{{}, {Every: "1h", Cron: "* * * * *"}, {Every: "10ms"}, {Cron: "61 * * * *"},
		{Cron: "* * * * *", TZ: "Mars/Base"}, {At: "tomorrow"}, {Cron: "CRON_TZ=UTC * * * * *"}} {
		if _, err := schedule.Parse(s); err == nil {
			t.Errorf("Parse(%+v) accepted", s)
		}
	}
}

// clock is a test clock the scheduler reads.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// world is a scheduler over an in-memory store with a test clock and a
// runner whose runs the test releases.
type world struct {
	t       *testing.T
	clock   *clock
	jobs    *runtimetest.Jobs
	audit   *runtimetest.Audit
	s       *schedule.Scheduler
	mu      sync.Mutex
	started []string
	release chan struct{}
	alive   map[int]bool
	began   chan string
	// notified are the outcomes on_failure was called for.
	notified []schedule.Outcome
}

func newWorld(t *testing.T, start time.Time) *world {
	w := &world{t: t, clock: &clock{now: start}, jobs: &runtimetest.Jobs{}, audit: &runtimetest.Audit{},
		release: make(chan struct{}), alive: map[int]bool{1: true}, began: make(chan string, 100)}
	close(w.release)
	s, err := schedule.New(schedule.Options{
		Store: w.jobs, Now: w.clock.Now, Self: schedule.Running{PID: 1, Host: "h"},
		Alive: func(r schedule.Running) bool { w.mu.Lock(); defer w.mu.Unlock(); return w.alive[r.PID] },
		Run: func(ctx context.Context, j schedule.Job, runID string) schedule.Outcome {
			w.mu.Lock()
			w.started = append(w.started, j.ID)
			rel := w.release
			w.mu.Unlock()
			w.began <- j.ID
			select {
			case <-rel:
				return schedule.Outcome{Status: gate.RunSucceeded}
			case <-ctx.Done():
				return schedule.Outcome{Status: gate.RunCancelled}
			}
		},
		Notify: func(ctx context.Context, j schedule.Job, out schedule.Outcome) {
			w.mu.Lock()
			w.notified = append(w.notified, out)
			w.mu.Unlock()
		},
		Record: func(ctx context.Context, ev gate.AuditEvent) error {
			b, _ := jsonMarshal(ev)
			_, err := w.audit.AppendAudit(ctx, b)
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.s = s
	return w
}

func (w *world) add(j schedule.Job) {
	w.t.Helper()
	j.Kind, j.Task, j.Workspace = schedule.KindAgent, "t", "/ws"
	if j.Missed == "" {
		j.Missed = schedule.MissedSkip
	}
	if j.Created.IsZero() {
		j.Created = w.clock.Now()
	}
	j.Anchor = j.Created
	if err := j.Validate(); err != nil {
		w.t.Fatal(err)
	}
	if err := w.jobs.CreateJob(context.Background(), j); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) tick(at time.Time) {
	w.t.Helper()
	w.clock.set(at)
	if _, err := w.s.Tick(context.Background()); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) runs() int { w.mu.Lock(); defer w.mu.Unlock(); return len(w.started) }

func (w *world) job(id string) schedule.Job {
	j, err := w.jobs.GetJob(context.Background(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return j
}

// TestMissedRuns: after a downtime, a skip job records its missed firings
// and waits; a once job runs once for all of them; a firing on time runs
// whatever the policy.
func TestMissedRuns(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	w := newWorld(t, t0)
	w.add(schedule.Job{ID: "skipper", Spec: schedule.Spec{Every: "10m"}, Missed: schedule.MissedSkip})
	w.add(schedule.Job{ID: "catcher", Spec: schedule.Spec{Every: "10m"}, Missed: schedule.MissedOnce})
	// On time: both run at 10:10.
	w.tick(t0.Add(10*time.Minute + 5*time.Second))
	w.s.Wait()
	if w.runs() != 2 {
		t.Fatalf("on time: %d runs", w.runs())
	}
	// Down from 10:11 to 13:05: 17 firings missed (10:20 … 13:00).
	w.tick(t0.Add(3*time.Hour + 5*time.Minute))
	w.s.Wait()
	if w.runs() != 3 {
		t.Fatalf("after the downtime: %d runs, want 3 (catcher once)", w.runs())
	}
	if j := w.job("skipper"); j.Skipped != 17 || j.Runs != 1 || j.Last.Status != schedule.StatusSkipped {
		t.Errorf("skipper: skipped %d runs %d last %+v", j.Skipped, j.Runs, j.Last)
	}
	if j := w.job("catcher"); j.Skipped != 0 || j.Runs != 2 || !j.LastFire.Equal(t0.Add(3*time.Hour)) {
		t.Errorf("catcher: skipped %d runs %d last fire %s", j.Skipped, j.Runs, j.LastFire)
	}
	if n := len(w.audit.Events()); n != 1 {
		t.Errorf("%d audit events, want the skipper's one", n)
	}
	// Both wait for 13:10 now.
	w.tick(t0.Add(3*time.Hour + 9*time.Minute))
	w.s.Wait()
	if w.runs() != 3 {
		t.Errorf("ran before the next firing: %d", w.runs())
	}
	w.tick(t0.Add(3*time.Hour + 10*time.Minute))
	w.s.Wait()
	if w.runs() != 5 {
		t.Errorf("at 13:10: %d runs, want 5", w.runs())
	}

	// Down from 10:00 to 10:20:05: 10:10 was missed, 10:20 is on time.
	// Under either policy the missed firing is recorded as skipped and the
	// firing on time runs, once.
	w = newWorld(t, t0)
	w.add(schedule.Job{ID: "skipper", Spec: schedule.Spec{Every: "10m"}, Missed: schedule.MissedSkip})
	w.add(schedule.Job{ID: "catcher", Spec: schedule.Spec{Every: "10m"}, Missed: schedule.MissedOnce})
	w.add(schedule.Job{ID: "cron", Spec: schedule.Spec{Cron: "*/10 * * * *", TZ: "UTC"}, Missed: schedule.MissedSkip})
	w.tick(t0.Add(20*time.Minute + 5*time.Second))
	w.s.Wait()
	if w.runs() != 3 {
		t.Fatalf("a missed firing then one on time: %d runs, want 3 (one per job)", w.runs())
	}
	for _, id := range []string{"skipper", "catcher", "cron"} {
		j := w.job(id)
		if j.Skipped != 1 || j.Runs != 1 || j.Last == nil || j.Last.Status != gate.RunSucceeded ||
			!j.Last.Fire.Equal(t0.Add(20*time.Minute)) || !j.LastFire.Equal(t0.Add(20*time.Minute)) {
			t.Errorf("%s: skipped %d runs %d last fire %s last %+v", id, j.Skipped, j.Runs, j.LastFire, j.Last)
		}
	}
	ev := w.audit.Events()
	if len(ev) != 3 || !strings.Contains(ev[0].Message, "1 firing(s) up to 2026-11-24T10:10:00Z skipped") {
		t.Errorf("audit: %+v", ev)
	}
	// Ticking again within the grace runs nothing more.
	w.tick(t0.Add(20*time.Minute + 30*time.Second))
	w.s.Wait()
	if w.runs() != 3 {
		t.Errorf("the firing on time ran again: %d runs", w.runs())
	}
}

// TestTimeout: a run that reaches the job's timeout failed, TIMEOUT, and
// on_failure runs; a run cancelled because the daemon stops is cancelled,
// and on_failure does not run.
func TestTimeout(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	w := newWorld(t, t0)
	w.release = make(chan struct{}) // runs last until their context ends
	notify := &schedule.Notify{Tool: "write_memory", Args: json.RawMessage(`{}`)}
	w.add(schedule.Job{ID: "slow", Spec: schedule.Spec{Every: "1h"}, TimeoutS: 1, OnFailure: notify})
	w.tick(t0.Add(time.Hour))
	w.s.Wait()
	j := w.job("slow")
	if j.Last == nil || j.Last.Status != gate.RunFailed || j.Last.Error == nil || j.Last.Error.Code != tool.CodeTimeout ||
		!strings.Contains(j.Last.Error.Message, "timeout (1s)") {
		t.Fatalf("a run past its timeout: %+v", j.Last)
	}
	w.mu.Lock()
	n := len(w.notified)
	w.mu.Unlock()
	if n != 1 {
		t.Fatalf("on_failure ran %d times for the timeout, want 1", n)
	}

	// The daemon stops during a run: cancelled, no on_failure.
	w.add(schedule.Job{ID: "stopped", Spec: schedule.Spec{Every: "1h"}, TimeoutS: 3600, OnFailure: notify})
	w.clock.set(t0.Add(2 * time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	loop := make(chan error)
	go func() { loop <- w.s.Loop(ctx) }()
	for range 2 { // slow's and stopped's runs of 12:00
		<-w.began
	}
	cancel()
	if err := <-loop; err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"slow", "stopped"} {
		if j := w.job(id); j.Last == nil || j.Last.Status != gate.RunCancelled {
			t.Errorf("%s after the daemon stopped: %+v", id, j.Last)
		}
	}
	w.mu.Lock()
	n = len(w.notified)
	w.mu.Unlock()
	if n != 1 {
		t.Errorf("on_failure ran for a cancelled run: %d calls", n)
	}
}

// TestOverlapSkipped: a firing while the previous run of the job still
// runs is skipped and recorded; the run in flight is not disturbed.
func TestOverlapSkipped(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	w := newWorld(t, t0)
	w.release = make(chan struct{})
	w.add(schedule.Job{ID: "slow", Spec: schedule.Spec{Every: "1s"}})
	w.tick(t0.Add(time.Second))
	<-w.began
	w.tick(t0.Add(2 * time.Second))
	w.tick(t0.Add(3 * time.Second))
	if w.runs() != 1 {
		t.Fatalf("%d runs started while one was running", w.runs())
	}
	j := w.job("slow")
	if j.Skipped != 2 || j.Running == nil {
		t.Fatalf("skipped %d, running %+v", j.Skipped, j.Running)
	}
	if ev := w.audit.Events(); len(ev) != 2 || ev[0].Outcome != schedule.StatusSkipped || ev[0].Principal[0] != "schedule:slow" {
		t.Fatalf("audit %+v", ev)
	}
	close(w.release)
	w.s.Wait()
	j = w.job("slow")
	if j.Running != nil || j.Last.Status != gate.RunSucceeded || j.Runs != 1 {
		t.Fatalf("after the run: %+v", j)
	}
	// Another process's run (alive) counts as running too.
	w.mu.Lock()
	w.alive[7] = true
	w.mu.Unlock()
	if err := w.jobs.UpdateJob(context.Background(), "slow", func(j *schedule.Job) error {
		j.Running = &schedule.Running{PID: 7, RunID: "other"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w.tick(t0.Add(4 * time.Second))
	if w.runs() != 1 || w.job("slow").Skipped != 3 {
		t.Fatalf("a firing during another process's run: runs %d skipped %d", w.runs(), w.job("slow").Skipped)
	}
}

// TestInterruptedRecovered: a run whose process died is marked interrupted
// when a scheduler starts and its firing is run again, the outcome naming
// the lost run; a paused job's is only marked interrupted.
func TestInterruptedRecovered(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	w := newWorld(t, t0)
	w.add(schedule.Job{ID: "j", Spec: schedule.Spec{Every: "1m"}})
	w.add(schedule.Job{ID: "paused", Spec: schedule.Spec{Every: "1m"}, Paused: true})
	for _, id := range []string{"j", "paused"} {
		if err := w.jobs.UpdateJob(context.Background(), id, func(j *schedule.Job) error {
			j.Running = &schedule.Running{PID: 99, Host: "h", RunID: "dead-" + id, Fire: t0}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	marked := map[string]string{}
	var ran []string
	s, _ := schedule.New(schedule.Options{Store: w.jobs, Now: w.clock.Now, Self: schedule.Running{PID: 1, Host: "h"},
		Alive: func(r schedule.Running) bool { return r.PID == 1 },
		Run: func(_ context.Context, j schedule.Job, runID string) schedule.Outcome {
			mu.Lock()
			ran = append(ran, j.ID+":"+j.Running.Retry.RunID)
			mu.Unlock()
			return schedule.Outcome{Status: gate.RunSucceeded}
		},
		Interrupted: func(_ context.Context, id, reason string) error {
			mu.Lock()
			marked[id] = reason
			mu.Unlock()
			return nil
		}})
	if err := s.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Wait()
	j := w.job("j")
	if j.Running != nil || j.Last == nil || j.Last.Status != gate.RunSucceeded || j.Last.Attempt != 2 ||
		j.Last.Retry == nil || j.Last.Retry.RunID != "dead-j" || !j.Last.Fire.Equal(t0) || j.Runs != 1 {
		t.Fatalf("after recovery: %+v, last %+v", j, j.Last)
	}
	if fmt.Sprint(ran) != "[j:dead-j]" || !strings.Contains(marked["dead-j"], "pid 99") || !strings.Contains(marked["dead-j"], "run again as run") {
		t.Fatalf("ran %v, marked %v", ran, marked)
	}
	p := w.job("paused")
	if p.Running != nil || p.Last == nil || p.Last.Status != schedule.StatusInterrupted || marked["dead-paused"] == "" {
		t.Fatalf("the paused job after recovery: %+v, marked %v", p, marked)
	}
}

// TestLeases: two schedulers share the jobs and a leases clock: a firing
// is claimed by one; the other skips it while the lease is renewed; when
// the first stops renewing (it died), the other takes the firing over
// after the lease expires — attempt 2, recorded once; the first one's late
// outcome is refused.
func TestLeases(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	jobs := &runtimetest.Jobs{}
	clk := &clock{now: t0}
	leases := schedule.LocalLeases(jobs, clk.Now, func(schedule.Running) bool { return true })
	release := make(chan struct{})
	var mu sync.Mutex
	var runs []string
	newS := func(host string) *schedule.Scheduler {
		s, err := schedule.New(schedule.Options{Store: jobs, Now: clk.Now, Leases: leases, Lease: time.Hour,
			Self: schedule.Running{PID: 1, Host: host},
			Run: func(ctx context.Context, j schedule.Job, runID string) schedule.Outcome {
				mu.Lock()
				runs = append(runs, host)
				mu.Unlock()
				select {
				case <-release:
					return schedule.Outcome{Status: gate.RunSucceeded}
				case <-ctx.Done():
					return schedule.Outcome{Status: gate.RunCancelled}
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := newS("a"), newS("b")
	j := schedule.Job{ID: "j", Kind: schedule.KindAgent, Task: "t", Workspace: "/ws", Spec: schedule.Spec{Every: "1m"},
		Missed: schedule.MissedSkip, Created: t0, Anchor: t0}
	if err := jobs.CreateJob(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	clk.set(t0.Add(time.Minute))
	ctx := context.Background()
	if _, err := a.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := jobs.GetJob(ctx, "j")
	if got.Running == nil || got.Running.Host != "a" || got.Running.Token != 1 || got.Running.Attempt != 1 {
		t.Fatalf("after both ticked: running %+v", got.Running)
	}
	// a "dies": the lease runs out; b takes the firing over.
	clk.set(t0.Add(time.Minute + time.Hour + time.Second))
	if _, err := b.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ = jobs.GetJob(ctx, "j")
	if got.Running == nil || got.Running.Host != "b" || got.Running.Token != 2 || got.Running.Attempt != 2 || got.Running.Retry == nil ||
		!strings.Contains(got.Running.Retry.Reason, "lease expired") {
		t.Fatalf("after the lease expired: running %+v", got.Running)
	}
	close(release)
	a.Wait()
	b.Wait()
	got, _ = jobs.GetJob(ctx, "j")
	if got.Runs != 1 || got.Last == nil || got.Last.Attempt != 2 || got.Last.Retry.Host != "a" || got.Running != nil {
		t.Fatalf("recorded: runs %d last %+v", got.Runs, got.Last)
	}
	// Both hosts ran the firing (a's run lost its lease); in which order
	// their goroutines got going is not the test's business.
	mu.Lock()
	sort.Strings(runs)
	mu.Unlock()
	if fmt.Sprint(runs) != "[a b]" {
		t.Fatalf("runs %v", runs)
	}
}

// TestPausedAndAt: a paused job does not fire; an at job fires once.
func TestPausedAndAt(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	w := newWorld(t, t0)
	w.add(schedule.Job{ID: "p", Spec: schedule.Spec{Every: "1m"}, Paused: true})
	w.add(schedule.Job{ID: "once", Spec: schedule.Spec{At: t0.Add(time.Minute).Format(time.RFC3339)}})
	w.tick(t0.Add(time.Minute))
	w.s.Wait()
	w.tick(t0.Add(2 * time.Minute))
	w.s.Wait()
	if w.runs() != 1 || !w.job("once").Done {
		t.Fatalf("runs %d, once done %v", w.runs(), w.job("once").Done)
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// TestResumeFromNextFiring: the firings that fell while a job was paused
// are neither run (missed: once) nor counted as missed; it fires again at
// its next firing after the resume. An at job resumed after its time
// keeps its firing (its missed policy decides).
func TestResumeFromNextFiring(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	w := newWorld(t, t0)
	w.add(schedule.Job{ID: "p", Spec: schedule.Spec{Every: "10m"}, Missed: schedule.MissedOnce, Paused: true, LastFire: t0})
	w.add(schedule.Job{ID: "at", Spec: schedule.Spec{At: t0.Add(5 * time.Minute).Format(time.RFC3339)}, Missed: schedule.MissedOnce, Paused: true})
	w.tick(t0.Add(30*time.Minute + 5*time.Second)) // 10:10, 10:20, 10:30 fall while paused
	w.s.Wait()
	resumed := t0.Add(35 * time.Minute)
	for _, id := range []string{"p", "at"} {
		if err := w.jobs.UpdateJob(context.Background(), id, func(j *schedule.Job) error { j.Resume(resumed); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	w.tick(resumed.Add(5 * time.Second))
	w.s.Wait()
	if j := w.job("p"); w.runs() != 1 || j.Runs != 0 || j.Skipped != 0 {
		t.Fatalf("after resume: %d runs, job p runs %d skipped %d — want only the at job to run", w.runs(), j.Runs, j.Skipped)
	}
	if !w.job("at").Done {
		t.Fatal("the at job resumed after its time did not run (missed: once)")
	}
	w.tick(t0.Add(40*time.Minute + 5*time.Second))
	w.s.Wait()
	if j := w.job("p"); j.Runs != 1 || j.Skipped != 0 {
		t.Fatalf("at its next firing: runs %d skipped %d", j.Runs, j.Skipped)
	}
}
