package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/wardenrt/warden/runtime"
)

// Defaults of a Scheduler.
const (
	// DefaultPoll is how often the store is read for jobs added, paused
	// or removed by other processes while nothing is due sooner.
	DefaultPoll = 5 * time.Second
	// DefaultGrace is how late a firing may start and still be on time:
	// older ones were missed (the daemon was not running).
	DefaultGrace = time.Minute
	// maxCatchUp bounds the firings counted after a long downtime.
	maxCatchUp = 100_000
)

// Options configures a Scheduler.
type Options struct {
	Store Store
	// Run runs one firing of j as run runID, within ctx (the job's
	// timeout; cancelled when the daemon stops), and says how it went.
	Run func(ctx context.Context, j Job, runID string) Outcome
	// Notify runs j's on_failure after the failed firing out.
	Notify func(ctx context.Context, j Job, out Outcome)
	// Record puts an event that is not a call on the audit log (a skipped
	// or interrupted firing).
	Record func(ctx context.Context, ev runtime.AuditEvent) error
	// Interrupted marks a run a dead process left "running".
	Interrupted func(ctx context.Context, runID string) error
	// Self is this process, for the running marks; Alive says whether the
	// process of a mark still runs.
	Self  Running
	Alive func(Running) bool

	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	NewID func() string
	Poll  time.Duration
	Grace time.Duration
	Log   *slog.Logger
}

// Scheduler runs due jobs. Start it with Loop (a daemon) or Once.
type Scheduler struct {
	o       Options
	mu      sync.Mutex
	running map[string]bool
	wg      sync.WaitGroup
}

// New returns a scheduler.
func New(o Options) (*Scheduler, error) {
	if o.Store == nil || o.Run == nil {
		return nil, errors.New("schedule: Store and Run are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.NewID == nil {
		o.NewID = runtime.NewID
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Alive == nil {
		o.Alive = func(Running) bool { return true }
	}
	return &Scheduler{o: o, running: map[string]bool{}}, nil
}

// Loop recovers what a dead daemon left running, then runs due jobs until
// ctx ends; it then cancels the runs in flight and waits for them to be
// recorded.
func (s *Scheduler) Loop(ctx context.Context) error {
	if err := s.Recover(ctx); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		s.wg.Wait()
	}()
	for {
		next, err := s.Tick(runCtx)
		if err != nil {
			s.o.Log.Warn("schedule: reading the jobs failed; trying again", "err", err)
		}
		wait := s.o.Poll
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(s.o.Now()), 0))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.o.After(wait):
		}
	}
}

// Once recovers, runs what is due now, and waits for it.
func (s *Scheduler) Once(ctx context.Context) error {
	if err := s.Recover(ctx); err != nil {
		return err
	}
	_, err := s.Tick(ctx)
	s.wg.Wait()
	return err
}

// SetPoll changes how often the store is read for changed jobs.
func (s *Scheduler) SetPoll(d time.Duration) {
	if d > 0 {
		s.o.Poll = d
	}
}

// Wait waits for the runs started so far.
func (s *Scheduler) Wait() { s.wg.Wait() }

// Recover marks the firings whose process died mid-run as interrupted.
func (s *Scheduler) Recover(ctx context.Context) error {
	jobs, err := s.o.Store.ListJobs(ctx)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if j.Running == nil || s.o.Alive(*j.Running) {
			continue
		}
		var mark *Running
		err := s.o.Store.UpdateJob(ctx, j.ID, func(cur *Job) error {
			if cur.Running == nil || s.o.Alive(*cur.Running) {
				return errUnchanged
			}
			mark = cur.Running
			cur.Last = &Outcome{Fire: mark.Fire, RunID: mark.RunID, Status: StatusInterrupted, Started: mark.Started, Ended: s.o.Now().UTC(),
				Reason: fmt.Sprintf("the process that ran it (pid %d) ended before the run did", mark.PID)}
			cur.Running = nil
			return nil
		})
		if errors.Is(err, errUnchanged) || mark == nil {
			continue
		}
		if err != nil {
			return err
		}
		if s.o.Interrupted != nil {
			if err := s.o.Interrupted(ctx, mark.RunID); err != nil {
				s.o.Log.Warn("schedule: the interrupted run could not be marked", "run", mark.RunID, "err", err)
			}
		}
		s.record(ctx, j, StatusInterrupted, fmt.Sprintf("run %s was interrupted (pid %d ended)", mark.RunID, mark.PID))
	}
	return nil
}

var errUnchanged = errors.New("unchanged")

// Tick handles every job due at the clock's now: runs the firing that is
// on time, applies the missed-run policy to older ones, skips a firing
// whose previous run is still going. It returns the earliest firing still
// to come (zero when none).
func (s *Scheduler) Tick(ctx context.Context) (time.Time, error) {
	jobs, err := s.o.Store.ListJobs(ctx)
	if err != nil {
		return time.Time{}, err
	}
	var soonest time.Time
	for _, j := range jobs {
		next, err := s.tickJob(ctx, j)
		if err != nil {
			s.o.Log.Warn("schedule: a job could not be handled", "job", j.ID, "err", err)
		}
		if !next.IsZero() && (soonest.IsZero() || next.Before(soonest)) {
			soonest = next
		}
	}
	return soonest, nil
}

// due is what a job's schedule says at now.
type due struct {
	last   time.Time // the latest firing at or before now
	count  int       // firings in (from, now]
	onTime bool
}

func (s *Scheduler) dueAt(j *Job, sc *Schedule, now time.Time) (due, time.Time) {
	from := j.LastFire
	if from.IsZero() {
		from = j.Created
	}
	var d due
	next, ok := sc.Next(j.Anchor, from)
	for ok && !next.After(now) && d.count < maxCatchUp {
		d.last, d.count = next, d.count+1
		if sc.every > 0 && d.count == 1 {
			// Arithmetic, not a walk, for short intervals after a long
			// downtime.
			k := now.Sub(j.Anchor) / sc.every
			d.last = j.Anchor.Add(k * sc.every)
			d.count = int(d.last.Sub(next)/sc.every) + 1
			next, ok = sc.Next(j.Anchor, d.last)
			break
		}
		next, ok = sc.Next(j.Anchor, next)
	}
	if d.count > 0 {
		d.onTime = now.Sub(d.last) <= s.o.Grace
	}
	if !ok {
		next = time.Time{}
	}
	return d, next
}

func (s *Scheduler) tickJob(ctx context.Context, j Job) (time.Time, error) {
	if j.Paused || j.Done {
		return time.Time{}, nil
	}
	sc, err := j.Schedule()
	if err != nil {
		return time.Time{}, err
	}
	now := s.o.Now()
	d, next := s.dueAt(&j, sc, now)
	if d.count == 0 {
		return next, nil
	}
	s.mu.Lock()
	busy := s.running[j.ID]
	s.mu.Unlock()
	if busy || (j.Running != nil && s.o.Alive(*j.Running)) {
		return next, s.skip(ctx, j, d.last, d.count, "the previous run was still going")
	}
	missed := d.count
	if d.onTime {
		missed--
	}
	switch {
	case d.onTime:
		if missed > 0 {
			if err := s.skip(ctx, j, d.last, missed, "missed while no daemon ran (missed: "+j.Missed+"; the firing on time runs)"); err != nil {
				return next, err
			}
		}
		return next, s.start(ctx, j, d.last, sc.Once())
	case j.Missed == MissedOnce:
		return next, s.start(ctx, j, d.last, sc.Once())
	default:
		return next, s.skip(ctx, j, d.last, missed, "missed while no daemon ran (missed: skip)")
	}
}

// skip records n firings up to fire as skipped.
func (s *Scheduler) skip(ctx context.Context, j Job, fire time.Time, n int, why string) error {
	err := s.o.Store.UpdateJob(ctx, j.ID, func(cur *Job) error {
		if cur.LastFire.After(fire) || cur.LastFire.Equal(fire) {
			return errUnchanged
		}
		cur.LastFire = fire
		cur.Skipped += n
		cur.Last = &Outcome{Fire: fire, Status: StatusSkipped, Reason: fmt.Sprintf("%d firing(s) skipped: %s", n, why)}
		if sched, err := cur.Schedule(); err == nil && sched.Once() {
			cur.Done = true
		}
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	if err != nil {
		return err
	}
	s.record(ctx, j, StatusSkipped, fmt.Sprintf("%d firing(s) up to %s skipped: %s", n, fire.UTC().Format(time.RFC3339), why))
	return nil
}

// start marks j running for fire and runs it in the background.
func (s *Scheduler) start(ctx context.Context, j Job, fire time.Time, once bool) error {
	_, err := s.StartRun(ctx, j.ID, fire, once)
	return err
}

// ErrBusy is returned by StartRun for a job whose previous run is still
// going.
var ErrBusy = errors.New("the job's previous run is still going")

// StartRun starts a run of job id for fire (run-now: the current time) in
// the background and returns its run id; the run is recorded in the job
// when it ends. A job already running is ErrBusy.
func (s *Scheduler) StartRun(ctx context.Context, id string, fire time.Time, once bool) (string, error) {
	s.mu.Lock()
	if s.running[id] {
		s.mu.Unlock()
		return "", ErrBusy
	}
	s.running[id] = true
	s.mu.Unlock()
	runID := s.o.NewID()
	started := s.o.Now().UTC()
	var job Job
	err := s.o.Store.UpdateJob(ctx, id, func(cur *Job) error {
		if cur.Running != nil && s.o.Alive(*cur.Running) {
			return ErrBusy
		}
		mark := s.o.Self
		mark.RunID, mark.Fire, mark.Started = runID, fire.UTC(), started
		cur.Running = &mark
		if fire.After(cur.LastFire) {
			cur.LastFire = fire
		}
		job = *cur
		return nil
	})
	if err != nil {
		s.mu.Lock()
		delete(s.running, id)
		s.mu.Unlock()
		return "", err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.running, id)
			s.mu.Unlock()
		}()
		rctx, cancel := context.WithTimeout(ctx, job.Timeout())
		out := s.run(rctx, job, runID)
		cancel()
		out.Fire, out.RunID, out.Started, out.Ended = fire.UTC(), runID, started, s.o.Now().UTC()
		// Recorded even when the daemon is stopping.
		wctx := context.WithoutCancel(ctx)
		err := s.o.Store.UpdateJob(wctx, id, func(cur *Job) error {
			if cur.Running != nil && cur.Running.RunID == runID {
				cur.Running = nil
			}
			cur.Last = &out
			cur.Runs++
			if once {
				cur.Done = true
			}
			return nil
		})
		if err != nil {
			s.o.Log.Warn("schedule: the outcome could not be recorded", "job", id, "run", runID, "err", err)
		}
		if out.Status != runtime.RunSucceeded && out.Status != runtime.RunCancelled && job.OnFailure != nil && s.o.Notify != nil {
			s.o.Notify(wctx, job, out)
		}
	}()
	return runID, nil
}

// run runs one firing, turning a panic into a failed outcome.
func (s *Scheduler) run(ctx context.Context, j Job, runID string) (out Outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = Outcome{Status: runtime.RunFailed, Error: runtime.Errorf(runtime.CodeInternal, "", "the job failed unexpectedly: %v", r)}
		}
	}()
	return s.o.Run(ctx, j, runID)
}

// record puts a job event on the audit log.
func (s *Scheduler) record(ctx context.Context, j Job, outcome, msg string) {
	if s.o.Record == nil {
		return
	}
	args, _ := json.Marshal(map[string]string{"job": j.ID})
	ev := runtime.AuditEvent{Phase: runtime.PhaseAdmin, CallID: s.o.NewID(), Principal: j.Principal(), Tool: "schedule",
		Args: args, Outcome: outcome, Message: msg}
	if err := s.o.Record(ctx, ev); err != nil {
		s.o.Log.Warn("schedule: an event could not be recorded", "job", j.ID, "err", err)
	}
}
