package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/runtime/schedule"
	"github.com/wardenrt/warden/store"
	"github.com/wardenrt/warden/store/postgres"
)

// The scheduler on a fleet: a run taking over a lost one says so in its
// run record, and a PostgreSQL store's firings are claimed there.

// annotateRetry records in a run that it is a later attempt at its
// firing, and which lost run it took over.
func annotateRetry(ctx context.Context, st store.Backend, runID string, r *schedule.Running) {
	if r == nil || r.Retry == nil {
		return
	}
	doc, err := st.Run(context.WithoutCancel(ctx), runID)
	if err != nil {
		return
	}
	var m map[string]any
	if json.Unmarshal(doc, &m) != nil {
		return
	}
	m["attempt"], m["retry_of"] = r.Attempt, r.Retry
	if out, err := json.Marshal(m); err == nil {
		_ = st.PutRun(context.WithoutCancel(ctx), runID, out)
	}
}

// pgLeases are the claims on firings of a PostgreSQL store: on the
// database's clock, claimed with SKIP LOCKED, one row per firing.
type pgLeases struct {
	st     *postgres.Store
	holder string
}

var _ schedule.Leases = pgLeases{}

func claimOf(fc postgres.FiringClaim) schedule.Claim {
	return schedule.Claim{Job: fc.Job, Fire: fc.Fire, Token: fc.Token, Attempt: fc.Attempt, Until: fc.Until, Now: fc.Now}
}

func firingOf(c schedule.Claim) postgres.FiringClaim {
	return postgres.FiringClaim{Job: c.Job, Fire: c.Fire, Token: c.Token, Attempt: c.Attempt, Until: c.Until, Now: c.Now}
}

// leaseErr maps the store's lease errors onto the scheduler's.
func leaseErr(err error) error {
	switch {
	case errors.Is(err, postgres.ErrClaimed):
		return fmt.Errorf("%w: %v", schedule.ErrClaimed, err)
	case errors.Is(err, postgres.ErrLeaseLost):
		return fmt.Errorf("%w: %v", schedule.ErrLeaseLost, err)
	}
	return env.NotFound(err)
}

// withJob applies fn to a job document.
func withJob(id string, doc json.RawMessage, fn func(*schedule.Job) error) (json.RawMessage, error) {
	var j schedule.Job
	if err := json.Unmarshal(doc, &j); err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	if err := fn(&j); err != nil {
		return nil, err
	}
	return json.Marshal(j)
}

func (l pgLeases) Now(ctx context.Context) (time.Time, error) { return l.st.Now(ctx) }

func (l pgLeases) Claim(ctx context.Context, id string, fire time.Time, d time.Duration, fn func(*schedule.Job, schedule.Claim) error) (schedule.Claim, error) {
	fc, err := l.st.ClaimFiring(ctx, id, fire, l.holder, d, func(doc json.RawMessage, fc postgres.FiringClaim) (json.RawMessage, error) {
		return withJob(id, doc, func(j *schedule.Job) error { return fn(j, claimOf(fc)) })
	})
	return claimOf(fc), leaseErr(err)
}

func (l pgLeases) Renew(ctx context.Context, c schedule.Claim, d time.Duration, fn func(*schedule.Job, schedule.Claim) error) (schedule.Claim, error) {
	fc, err := l.st.RenewFiring(ctx, firingOf(c), d, func(doc json.RawMessage, fc postgres.FiringClaim) (json.RawMessage, error) {
		return withJob(c.Job, doc, func(j *schedule.Job) error {
			if j.Running == nil || j.Running.Token != c.Token {
				return postgres.ErrLeaseLost
			}
			return fn(j, claimOf(fc))
		})
	})
	return claimOf(fc), leaseErr(err)
}

func (l pgLeases) Finish(ctx context.Context, c schedule.Claim, fn func(*schedule.Job) error) error {
	return leaseErr(l.st.FinishFiring(ctx, firingOf(c), func(doc json.RawMessage) (json.RawMessage, error) {
		return withJob(c.Job, doc, fn)
	}))
}
