package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wardenrt/warden/store"
)

// Firings of scheduled jobs are claimed in warden.job_firings: a row per
// (job, fire) — the dedupe key that lets every daemon of the fleet offer
// the same firing with no leader — holding the claim's lease (on the
// database's clock), fencing token and attempt. Claiming locks the job's
// row with FOR UPDATE SKIP LOCKED: a daemon finding another in the middle
// of claiming (or changing) the job moves on instead of queueing behind it.

// Lease errors.
var (
	// ErrClaimed means the firing is held under a lease that has not
	// expired, or is done, or another daemon is claiming the job now.
	ErrClaimed = errors.New("the firing is claimed")
	// ErrLeaseLost means the claim's token is no longer the firing's.
	ErrLeaseLost = errors.New("the lease on the firing was lost")
)

// FiringClaim is a hold on one firing of a job.
type FiringClaim struct {
	Job     string
	Fire    time.Time
	Token   int64
	Attempt int
	Until   time.Time // the lease's end, by the database's clock
	Now     time.Time // the database's clock when claimed or renewed
}

// Now reads the database's clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	err := s.do(ctx, "reading the clock", func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now)
	})
	return now, err
}

// ClaimFiring claims firing fire of job for lease d on behalf of holder (a
// description for operators). In the same transaction fn changes the
// job's document to say so; its error aborts the claim.
func (s *Store) ClaimFiring(ctx context.Context, job string, fire time.Time, holder string, d time.Duration,
	fn func(doc json.RawMessage, c FiringClaim) (json.RawMessage, error)) (FiringClaim, error) {
	var c FiringClaim
	if err := store.ValidName("job", job); err != nil {
		return c, err
	}
	err := s.inTx(ctx, "claiming a firing", pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		c = FiringClaim{Job: job, Fire: fire}
		var doc []byte
		err := tx.QueryRow(ctx, `SELECT doc FROM warden.jobs WHERE name = $1 FOR UPDATE SKIP LOCKED`, job).Scan(&doc)
		if errors.Is(err, pgx.ErrNoRows) {
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM warden.jobs WHERE name = $1)`, job).Scan(&exists); err != nil {
				return err
			}
			if exists {
				return ErrClaimed // another daemon holds the job's row right now
			}
			return fmt.Errorf("job %s: %w", job, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&c.Now); err != nil {
			return err
		}
		var state string
		var until time.Time
		err = tx.QueryRow(ctx, `SELECT attempt, state, lease_until FROM warden.job_firings WHERE job = $1 AND fire_ns = $2`,
			job, fire.UnixNano()).Scan(&c.Attempt, &state, &until)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			c.Attempt = 0
		case err != nil:
			return err
		case state == "done" || c.Now.Before(until):
			return ErrClaimed
		}
		c.Attempt++
		c.Until = c.Now.Add(d)
		if err := tx.QueryRow(ctx, `SELECT nextval('warden.job_fence')`).Scan(&c.Token); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO warden.job_firings (job, fire_ns, attempt, holder, token, lease_until, state)
			VALUES ($1, $2, $3, $4, $5, $6, 'running')
			ON CONFLICT (job, fire_ns) DO UPDATE SET attempt = EXCLUDED.attempt, holder = EXCLUDED.holder, token = EXCLUDED.token,
				lease_until = EXCLUDED.lease_until, claimed = clock_timestamp()`,
			job, fire.UnixNano(), c.Attempt, holder, c.Token, c.Until); err != nil {
			return err
		}
		return s.updateJobDoc(ctx, tx, job, doc, func(doc json.RawMessage) (json.RawMessage, error) { return fn(doc, c) })
	})
	return c, err
}

// RenewFiring extends c's lease to d from now, if c's token is still the
// firing's (else ErrLeaseLost), and lets fn record it in the job.
func (s *Store) RenewFiring(ctx context.Context, c FiringClaim, d time.Duration, fn func(doc json.RawMessage, c FiringClaim) (json.RawMessage, error)) (FiringClaim, error) {
	err := s.inTx(ctx, "renewing a lease", pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		doc, err := s.lockJob(ctx, tx, c.Job)
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, `UPDATE warden.job_firings SET lease_until = clock_timestamp() + $4 * interval '1 microsecond'
			WHERE job = $1 AND fire_ns = $2 AND token = $3 AND state = 'running' RETURNING lease_until, clock_timestamp()`,
			c.Job, c.Fire.UnixNano(), c.Token, d.Microseconds()).Scan(&c.Until, &c.Now)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrLeaseLost
		}
		if err != nil {
			return err
		}
		return s.updateJobDoc(ctx, tx, c.Job, doc, func(doc json.RawMessage) (json.RawMessage, error) { return fn(doc, c) })
	})
	return c, err
}

// FinishFiring marks c's firing done and lets fn record its outcome in the
// job, if c's token is still the firing's (else ErrLeaseLost): a firing's
// outcome is recorded once. Done firings older than a week are dropped.
func (s *Store) FinishFiring(ctx context.Context, c FiringClaim, fn func(doc json.RawMessage) (json.RawMessage, error)) error {
	return s.inTx(ctx, "finishing a firing", pgx.TxOptions{}, func(ctx context.Context, tx pgx.Tx) error {
		doc, err := s.lockJob(ctx, tx, c.Job)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE warden.job_firings SET state = 'done', finished = clock_timestamp()
			WHERE job = $1 AND fire_ns = $2 AND token = $3 AND state = 'running'`, c.Job, c.Fire.UnixNano(), c.Token)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrLeaseLost
		}
		if _, err := tx.Exec(ctx, `DELETE FROM warden.job_firings WHERE job = $1 AND state = 'done' AND finished < clock_timestamp() - interval '7 days'`, c.Job); err != nil {
			return err
		}
		return s.updateJobDoc(ctx, tx, c.Job, doc, fn)
	})
}

// Firing is one row of warden.job_firings.
type Firing struct {
	Job        string     `json:"job"`
	Fire       time.Time  `json:"fire"`
	Attempt    int        `json:"attempt"`
	Holder     string     `json:"holder"`
	Token      int64      `json:"token"`
	LeaseUntil time.Time  `json:"lease_until"`
	State      string     `json:"state"`
	Claimed    time.Time  `json:"claimed"`
	Finished   *time.Time `json:"finished,omitempty"`
}

// Firings lists the firings of job ("" for every job) recorded in the
// last week, oldest first.
func (s *Store) Firings(ctx context.Context, job string) ([]Firing, error) {
	var out []Firing
	err := s.do(ctx, "listing firings", func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, `SELECT job, fire_ns, attempt, holder, token, lease_until, state, claimed, finished
			FROM warden.job_firings WHERE ($1 = '' OR job = $1) ORDER BY fire_ns, job`, job)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Firing, error) {
			var f Firing
			var ns int64
			err := r.Scan(&f.Job, &ns, &f.Attempt, &f.Holder, &f.Token, &f.LeaseUntil, &f.State, &f.Claimed, &f.Finished)
			f.Fire = time.Unix(0, ns).UTC()
			return f, err
		})
		return err
	})
	return out, err
}

func (s *Store) lockJob(ctx context.Context, tx pgx.Tx, job string) ([]byte, error) {
	var doc []byte
	err := tx.QueryRow(ctx, `SELECT doc FROM warden.jobs WHERE name = $1 FOR UPDATE`, job).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrLeaseLost // the job was removed
	}
	return doc, err
}

func (s *Store) updateJobDoc(ctx context.Context, tx pgx.Tx, job string, doc []byte, fn func(json.RawMessage) (json.RawMessage, error)) error {
	nd, err := fn(doc)
	if err != nil {
		return err
	}
	v, err := store.CompactDoc("job "+job, nd)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE warden.jobs SET doc = $2 WHERE name = $1`, job, v)
	return err
}
