package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Leases: a run holds its firing under a lease, so that a firing is run by
// one runner at a time even when several daemons (on several hosts) share
// the jobs, and a firing whose runner died is run again by another.
//
// A claim carries a fencing token, larger for every claim of the job: a
// runner renews its lease (a heartbeat every third of the lease) and
// records its outcome only while its token is still the firing's, so a
// runner that lost its lease — it stalled, or was cut off, while another
// took the firing over — cannot overwrite what the other recorded. Side
// effects are at least once (a lost run is run again); the recorded outcome
// of a firing is exactly once.

// Lease errors.
var (
	// ErrClaimed means the firing is held under a lease that has not
	// expired, or was handled already.
	ErrClaimed = errors.New("the firing is claimed by another runner, or was handled")
	// ErrLeaseLost means the claim is no longer the firing's: its lease
	// expired and another runner took the firing over.
	ErrLeaseLost = errors.New("the lease on the firing was lost to another runner")
)

// Claim is a runner's hold on one firing of a job.
type Claim struct {
	Job  string
	Fire time.Time
	// Token is the claim's fencing token.
	Token int64
	// Attempt is 1, then 2, 3… when a lost run is taken over.
	Attempt int
	// Until is when the lease expires, by the leases' clock.
	Until time.Time
	// Now is the leases' clock when the claim was made or renewed.
	Now time.Time
}

// Leases hands out claims on firings. A store shared by several hosts
// provides its own (Options.Leases), on one clock for all of them (the
// database's); LocalLeases does it over Store.UpdateJob for a store used
// by one host.
//
// Every function passed in runs inside the transaction that changes the
// claim, and must record the claim in the job's Running mark (Token,
// LeaseUntil, Attempt); its error aborts the change.
type Leases interface {
	// Now reads the leases' clock.
	Now(ctx context.Context) (time.Time, error)
	// Claim takes firing fire of job id for d. A firing held under a
	// lease not yet expired, or handled already, is ErrClaimed; one whose
	// lease expired is taken over (the next attempt).
	Claim(ctx context.Context, id string, fire time.Time, d time.Duration, fn func(*Job, Claim) error) (Claim, error)
	// Renew extends c's lease to d from now if c is still the firing's
	// claim, else returns ErrLeaseLost.
	Renew(ctx context.Context, c Claim, d time.Duration, fn func(*Job, Claim) error) (Claim, error)
	// Finish ends c and records the firing's outcome with fn, if c is
	// still the firing's claim, else returns ErrLeaseLost.
	Finish(ctx context.Context, c Claim, fn func(*Job) error) error
}

// LocalLeases keeps leases in the jobs themselves (the Running mark, and
// Job.Fence for the tokens), changed with Store.UpdateJob, on clock now; a
// lease also ends when alive says its process is gone. It serves a store
// that one host uses; a store several hosts share needs leases on one
// clock, claimed where a second claimer does not wait for the first (the
// PostgreSQL store's).
func LocalLeases(st Store, now func() time.Time, alive func(Running) bool) Leases {
	return &localLeases{st: st, now: now, alive: alive}
}

type localLeases struct {
	st    Store
	now   func() time.Time
	alive func(Running) bool
}

func (l *localLeases) Now(context.Context) (time.Time, error) { return l.now(), nil }

func (l *localLeases) Claim(ctx context.Context, id string, fire time.Time, d time.Duration, fn func(*Job, Claim) error) (Claim, error) {
	var c Claim
	err := l.st.UpdateJob(ctx, id, func(cur *Job) error {
		now := l.now()
		c = Claim{Job: id, Fire: fire, Attempt: 1, Until: now.Add(d), Now: now}
		if r := cur.Running; r != nil && r.Fire.Equal(fire) {
			if r.Token != 0 && now.Before(r.LeaseUntil) && l.alive(*r) {
				return ErrClaimed
			}
			c.Attempt = max(r.Attempt, 1) + 1
		} else if !fire.After(cur.LastFire) {
			return ErrClaimed
		}
		cur.Fence++
		c.Token = cur.Fence
		if err := fn(cur, c); err != nil {
			return err
		}
		return checkRecorded(cur, c)
	})
	return c, err
}

func (l *localLeases) Renew(ctx context.Context, c Claim, d time.Duration, fn func(*Job, Claim) error) (Claim, error) {
	err := l.st.UpdateJob(ctx, c.Job, func(cur *Job) error {
		if cur.Running == nil || cur.Running.Token != c.Token {
			return ErrLeaseLost
		}
		c.Now = l.now()
		c.Until = c.Now.Add(d)
		if err := fn(cur, c); err != nil {
			return err
		}
		return checkRecorded(cur, c)
	})
	return c, err
}

func (l *localLeases) Finish(ctx context.Context, c Claim, fn func(*Job) error) error {
	return l.st.UpdateJob(ctx, c.Job, func(cur *Job) error {
		if cur.Running == nil || cur.Running.Token != c.Token {
			return ErrLeaseLost
		}
		return fn(cur)
	})
}

// checkRecorded checks that fn recorded claim c in the job.
func checkRecorded(j *Job, c Claim) error {
	if r := j.Running; r == nil || r.Token != c.Token || !r.LeaseUntil.Equal(c.Until) {
		return fmt.Errorf("schedule: the claim of job %s was not recorded in its running mark", j.ID)
	}
	return nil
}
