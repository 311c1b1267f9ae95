package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// Defaults of a Scheduler.
const (
	// DefaultPoll is how often the store is read for jobs added, paused
	// or removed by other processes while nothing is due sooner.
	DefaultPoll = 5 * time.Second
	// DefaultGrace is how late a firing may start and still be on time:
	// older ones were missed (the daemon was not running).
	DefaultGrace = time.Minute
	// DefaultLease is how long a run holds its firing without renewing
	// the lease (it renews every third of it): how long another daemon
	// waits before it runs the firing of a runner that died.
	DefaultLease = 30 * time.Second
	// DefaultMaxAttempts bounds the runs of one firing whose runners
	// are lost.
	DefaultMaxAttempts = 3
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
	Record func(ctx context.Context, ev gate.AuditEvent) error
	// Interrupted marks a run a dead process left "running", saying why.
	Interrupted func(ctx context.Context, runID, reason string) error
	// Self is this process, for the running marks; Alive says whether the
	// process of a mark still runs (a mark of another host: true).
	Self  Running
	Alive func(Running) bool
	// Leases hands out the claims on firings; nil means LocalLeases over
	// Store on Now. Lease is how long a claim lasts unrenewed (default
	// DefaultLease); MaxAttempts bounds the runs of a firing whose
	// runners are lost (default DefaultMaxAttempts).
	Leases      Leases
	Lease       time.Duration
	MaxAttempts int

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
		o.NewID = tool.NewID
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
	if o.Leases == nil {
		o.Leases = LocalLeases(o.Store, o.Now, o.Alive)
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
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

// Recover handles the firings whose runner was lost (its process died, or
// its lease expired): each is run again, up to MaxAttempts runs, unless the
// job was paused; otherwise it is recorded as interrupted.
func (s *Scheduler) Recover(ctx context.Context) error {
	jobs, err := s.o.Store.ListJobs(ctx)
	if err != nil {
		return err
	}
	now, err := s.o.Leases.Now(ctx)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if s.lost(j, now) {
			if err := s.recoverRun(ctx, j, now); err != nil {
				s.o.Log.Warn("schedule: a lost run could not be recovered", "job", j.ID, "err", err)
			}
		}
	}
	return nil
}

// alive reports whether the runner of mark r still holds its firing at
// now: its lease has not expired and, on this host, its process runs. A
// mark without a lease (made before leases) is judged by its process.
func (s *Scheduler) alive(r *Running, now time.Time) bool {
	if r.LeaseUntil.IsZero() {
		return s.o.Alive(*r)
	}
	return now.Before(r.LeaseUntil) && s.o.Alive(*r)
}

// lost reports whether j's running mark is a run nobody carries on.
func (s *Scheduler) lost(j Job, now time.Time) bool {
	if j.Running == nil {
		return false
	}
	s.mu.Lock()
	mine := s.running[j.ID]
	s.mu.Unlock()
	return !mine && !s.alive(j.Running, now)
}

// lostReason says why the run of mark r is lost.
func lostReason(r *Running, now time.Time) string {
	if !r.LeaseUntil.IsZero() && !now.Before(r.LeaseUntil) {
		return fmt.Sprintf("its lease expired at %s: host %s (pid %d) stopped renewing it", r.LeaseUntil.UTC().Format(time.RFC3339), r.Host, r.PID)
	}
	return fmt.Sprintf("the process that ran it (pid %d on %s) ended before the run did", r.PID, r.Host)
}

// recoverRun runs the firing of j's lost run again (the next attempt), or,
// when the job is paused or the firing has had its attempts, records it as
// interrupted.
func (s *Scheduler) recoverRun(ctx context.Context, j Job, now time.Time) error {
	mark := *j.Running
	reason := lostReason(&mark, now)
	if !j.Paused && max(mark.Attempt, 1) < s.o.MaxAttempts {
		once := false
		if sc, err := j.Schedule(); err == nil {
			once = sc.Once()
		}
		runID, err := s.startRun(ctx, j.ID, mark.Fire, once, &mark, reason)
		switch {
		case err == nil:
			s.interrupted(ctx, mark.RunID, fmt.Sprintf("%s; the firing was run again as run %s", reason, runID))
			s.record(ctx, j, StatusInterrupted, fmt.Sprintf("run %s was lost (%s); running the firing again as run %s (attempt %d)",
				mark.RunID, reason, runID, max(mark.Attempt, 1)+1))
			return nil
		case errors.Is(err, ErrClaimed), errors.Is(err, ErrBusy), errors.Is(err, errUnchanged):
			return nil // another runner got there first, or the lease still holds
		default:
			return err
		}
	}
	why := reason
	if !j.Paused {
		why = fmt.Sprintf("%s; the firing has had its %d attempts", reason, s.o.MaxAttempts)
	}
	err := s.o.Store.UpdateJob(ctx, j.ID, func(cur *Job) error {
		if cur.Running == nil || cur.Running.RunID != mark.RunID || cur.Running.Token != mark.Token {
			return errUnchanged
		}
		cur.Last = &Outcome{Fire: mark.Fire, RunID: mark.RunID, Status: StatusInterrupted, Started: mark.Started, Ended: s.o.Now().UTC(),
			Reason: why, Attempt: mark.Attempt, Retry: mark.Retry}
		cur.Running = nil
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	if err != nil {
		return err
	}
	s.interrupted(ctx, mark.RunID, why)
	s.record(ctx, j, StatusInterrupted, fmt.Sprintf("run %s was interrupted: %s", mark.RunID, why))
	return nil
}

func (s *Scheduler) interrupted(ctx context.Context, runID, reason string) {
	if s.o.Interrupted == nil {
		return
	}
	if err := s.o.Interrupted(ctx, runID, reason); err != nil {
		s.o.Log.Warn("schedule: the interrupted run could not be marked", "run", runID, "err", err)
	}
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
	now, err := s.o.Leases.Now(ctx)
	if err != nil {
		return time.Time{}, err
	}
	var soonest time.Time
	for _, j := range jobs {
		next, err := s.tickJob(ctx, j, now)
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
	prev   time.Time // the firing before last, when count > 1
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
		d.prev, d.last, d.count = d.last, next, d.count+1
		if sc.every > 0 && d.count == 1 {
			// Arithmetic, not a walk, for short intervals after a long
			// downtime.
			k := now.Sub(j.Anchor) / sc.every
			d.last = j.Anchor.Add(k * sc.every)
			d.count = int(d.last.Sub(next)/sc.every) + 1
			if d.count > 1 {
				d.prev = d.last.Add(-sc.every)
			}
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

func (s *Scheduler) tickJob(ctx context.Context, j Job, now time.Time) (time.Time, error) {
	if j.Done && j.Running == nil {
		return time.Time{}, nil
	}
	if s.lost(j, now) {
		// Its runner died (or was cut off): run the firing again.
		return time.Time{}, s.recoverRun(ctx, j, now)
	}
	if j.Paused || j.Done {
		return time.Time{}, nil
	}
	sc, err := j.Schedule()
	if err != nil {
		return time.Time{}, err
	}
	d, next := s.dueAt(&j, sc, now)
	if d.count == 0 {
		return next, nil
	}
	s.mu.Lock()
	busy := s.running[j.ID]
	s.mu.Unlock()
	if busy || (j.Running != nil && s.alive(j.Running, now)) {
		return next, s.skip(ctx, j, d.last, d.count, "the previous run was still going")
	}
	missed := d.count
	if d.onTime {
		missed--
	}
	switch {
	case d.onTime:
		if missed > 0 {
			// The missed firings are the ones before the firing on
			// time: recording them moves the job's last firing up to
			// d.prev only, so that the firing on time can still be
			// claimed (a claim takes only a firing after the last).
			if err := s.skip(ctx, j, d.prev, missed, "missed while no daemon ran (missed: "+j.Missed+"; the firing on time runs)"); err != nil {
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

// start claims firing fire of j and runs it in the background. A firing
// another daemon claimed first, or has run, is not an error.
func (s *Scheduler) start(ctx context.Context, j Job, fire time.Time, once bool) error {
	_, err := s.startRun(ctx, j.ID, fire, once, nil, "")
	if errors.Is(err, ErrClaimed) || errors.Is(err, ErrBusy) || errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

// ErrBusy is returned by StartRun for a job whose previous run is still
// going.
var ErrBusy = errors.New("the job's previous run is still going")

// StartRun starts a run of job id for fire (run-now: the current time) in
// the background and returns its run id; the run is recorded in the job
// when it ends. A job already running is ErrBusy; a firing claimed or run
// already (by this or another daemon) is ErrClaimed.
func (s *Scheduler) StartRun(ctx context.Context, id string, fire time.Time, once bool) (string, error) {
	return s.startRun(ctx, id, fire, once, nil, "")
}

// startRun claims firing fire of job id and runs it. lost, when set, is
// the mark of the lost run whose firing this run takes over.
func (s *Scheduler) startRun(ctx context.Context, id string, fire time.Time, once bool, lost *Running, reason string) (string, error) {
	s.mu.Lock()
	if s.running[id] {
		s.mu.Unlock()
		return "", ErrBusy
	}
	s.running[id] = true
	s.mu.Unlock()
	unmark := func() {
		s.mu.Lock()
		delete(s.running, id)
		s.mu.Unlock()
	}
	runID := s.o.NewID()
	started := s.o.Now().UTC()
	var job Job
	c, err := s.o.Leases.Claim(ctx, id, fire, s.o.Lease, func(cur *Job, c Claim) error {
		if lost == nil {
			if cur.Running != nil && s.alive(cur.Running, c.Now) {
				return ErrBusy
			}
			if cur.Running != nil {
				return errUnchanged // a lost run: Recover's to run again
			}
		} else if cur.Running == nil || cur.Running.RunID != lost.RunID || cur.Running.Token != lost.Token {
			return errUnchanged // handled meanwhile
		}
		mark := s.o.Self
		mark.RunID, mark.Fire, mark.Started = runID, fire.UTC(), started
		mark.Token, mark.LeaseUntil, mark.Attempt = c.Token, c.Until, c.Attempt
		if lost != nil {
			mark.Retry = &Retry{RunID: lost.RunID, Host: lost.Host, PID: lost.PID, Reason: reason}
		}
		cur.Running = &mark
		if fire.After(cur.LastFire) {
			cur.LastFire = fire
		}
		job = *cur
		return nil
	})
	if err != nil {
		unmark()
		return "", err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer unmark()
		rctx, cancel := context.WithTimeoutCause(ctx, job.Timeout(), ErrTimeout)
		done := make(chan struct{})
		lostLease := make(chan struct{})
		go s.heartbeat(ctx, c, done, lostLease, cancel)
		out := s.run(rctx, job, runID)
		close(done)
		timedOut(&out, rctx, job.Timeout())
		cancel()
		out.Fire, out.RunID, out.Started, out.Ended = fire.UTC(), runID, started, s.o.Now().UTC()
		out.Attempt, out.Retry = job.Running.Attempt, job.Running.Retry
		if out.Attempt == 1 {
			out.Attempt = 0 // the usual case is not worth a field
		}
		// Recorded even when the daemon is stopping; only while this
		// claim is still the firing's.
		wctx := context.WithoutCancel(ctx)
		err := s.o.Leases.Finish(wctx, c, func(cur *Job) error {
			cur.Running = nil
			cur.Last = &out
			cur.Runs++
			if once {
				cur.Done = true
			}
			return nil
		})
		select {
		case <-lostLease:
		default:
		}
		if errors.Is(err, ErrLeaseLost) {
			s.o.Log.Warn("schedule: the run lost its lease (another daemon ran the firing again); its outcome is not recorded in the job",
				"job", id, "run", runID, "status", out.Status)
			return
		}
		if err != nil {
			s.o.Log.Warn("schedule: the outcome could not be recorded", "job", id, "run", runID, "err", err)
		}
		if out.Status != gate.RunSucceeded && out.Status != gate.RunCancelled && job.OnFailure != nil && s.o.Notify != nil {
			s.o.Notify(wctx, job, out)
		}
	}()
	return runID, nil
}

// ErrTimeout is the cause of a run's context that reached the job's
// timeout.
var ErrTimeout = errors.New("the run reached the job's timeout")

// timedOut makes the outcome of a run that did not succeed and whose
// context reached the job's timeout (not one cancelled because the daemon
// stops, or lost its lease) a failure, TIMEOUT: the run stopped because it
// took too long, which is what on_failure is for.
func timedOut(out *Outcome, rctx context.Context, d time.Duration) {
	if out.Status == gate.RunSucceeded || !errors.Is(context.Cause(rctx), ErrTimeout) {
		return
	}
	out.Status = gate.RunFailed
	out.Error = tool.Errorf(tool.CodeTimeout, "schedule the job again with a longer --timeout, or make its work shorter",
		"the run reached the job's timeout (%s)", d)
}

// heartbeat renews claim c every third of the lease until done; if the
// lease is lost to another runner, it cancels the run.
func (s *Scheduler) heartbeat(ctx context.Context, c Claim, done <-chan struct{}, lost chan<- struct{}, cancel context.CancelFunc) {
	every := s.o.Lease / 3
	for {
		select {
		case <-done:
			return
		case <-time.After(every):
		}
		nc, err := s.o.Leases.Renew(context.WithoutCancel(ctx), c, s.o.Lease, func(cur *Job, nc Claim) error {
			cur.Running.LeaseUntil = nc.Until
			return nil
		})
		switch {
		case errors.Is(err, ErrLeaseLost):
			s.o.Log.Warn("schedule: lost the lease on a running firing; cancelling the run", "job", c.Job, "fire", c.Fire)
			close(lost)
			cancel()
			return
		case err != nil:
			// The store did not answer: the lease runs on until it
			// expires; the next heartbeat tries again.
			s.o.Log.Warn("schedule: renewing the lease failed", "job", c.Job, "err", err)
		default:
			c = nc
		}
	}
}

// run runs one firing, turning a panic into a failed outcome.
func (s *Scheduler) run(ctx context.Context, j Job, runID string) (out Outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = Outcome{Status: gate.RunFailed, Error: tool.Errorf(tool.CodeInternal, "", "the job failed unexpectedly: %v", r)}
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
	ev := gate.AuditEvent{Phase: gate.PhaseAdmin, CallID: s.o.NewID(), Principal: j.Principal(), Tool: "schedule",
		Args: args, Outcome: outcome, Message: msg}
	if err := s.o.Record(ctx, ev); err != nil {
		s.o.Log.Warn("schedule: an event could not be recorded", "job", j.ID, "err", err)
	}
}
