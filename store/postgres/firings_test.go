package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wardenrt/warden/store/postgres"
)

// firingsStore opens a store on a new database holding job "nightly".
func firingsStore(t *testing.T) *postgres.Store {
	t.Helper()
	_, _, url := newDB(t)
	s := openStore(t, url, t.TempDir(), &postgres.Options{Host: "h"})
	if err := s.CreateJob(ctx, "nightly", json.RawMessage(`{"id":"nightly"}`)); err != nil {
		t.Fatal(err)
	}
	return s
}

// mark returns a job-document change recording key = value.
func mark(key, value string) func(json.RawMessage) (json.RawMessage, error) {
	return func(doc json.RawMessage) (json.RawMessage, error) {
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		m[key] = value
		return json.Marshal(m)
	}
}

// claimAs claims the firing as holder for d, recording holder as the
// job's "claimed_by".
func claimAs(s *postgres.Store, fire time.Time, holder string, d time.Duration) (postgres.FiringClaim, error) {
	return claimCtx(ctx, s, fire, holder, d)
}

func claimCtx(c context.Context, s *postgres.Store, fire time.Time, holder string, d time.Duration) (postgres.FiringClaim, error) {
	return s.ClaimFiring(c, "nightly", fire, holder, d, func(doc json.RawMessage, _ postgres.FiringClaim) (json.RawMessage, error) {
		return mark("claimed_by", holder)(doc)
	})
}

// jobField reads key of job nightly's document.
func jobField(t *testing.T, s *postgres.Store, key string) any {
	t.Helper()
	doc, err := s.Job(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	return m[key]
}

// waitPast waits until the database's clock is past until.
func waitPast(t *testing.T, s *postgres.Store, until time.Time) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		now, err := s.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if now.After(until) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database's clock did not pass %s", until)
		}
		time.Sleep(min(until.Sub(now)+5*time.Millisecond, 200*time.Millisecond))
	}
}

// firing returns the row of (nightly, fire).
func firing(t *testing.T, s *postgres.Store, fire time.Time) postgres.Firing {
	t.Helper()
	fs, err := s.Firings(ctx, "nightly")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.Fire.Equal(fire) {
			return f
		}
	}
	t.Fatalf("no firing %s in %+v", fire, fs)
	return postgres.Firing{}
}

var fire0 = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)

// TestFiringFencing: a holder whose lease expired and whose firing was
// claimed again by another can neither renew nor finish it (the fencing
// token); the new holder's finish is the one recorded.
func TestFiringFencing(t *testing.T) {
	s := firingsStore(t)
	a, err := claimAs(s, fire0, "A", 300*time.Millisecond)
	if err != nil || a.Attempt != 1 {
		t.Fatalf("A's claim: %+v, %v", a, err)
	}
	waitPast(t, s, a.Until)
	b, err := claimAs(s, fire0, "B", time.Minute)
	if err != nil || b.Attempt != 2 || b.Token == a.Token {
		t.Fatalf("B's claim after A's lease expired: %+v, %v (A's token %d)", b, err, a.Token)
	}
	renewed := false
	if _, err := s.RenewFiring(ctx, a, time.Minute, func(doc json.RawMessage, _ postgres.FiringClaim) (json.RawMessage, error) {
		renewed = true
		return mark("renewed_by", "A")(doc)
	}); !errors.Is(err, postgres.ErrLeaseLost) || renewed {
		t.Errorf("RenewFiring by A after B claimed: %v (fn called: %v), want ErrLeaseLost", err, renewed)
	}
	if err := s.FinishFiring(ctx, a, mark("finished_by", "A")); !errors.Is(err, postgres.ErrLeaseLost) {
		t.Errorf("FinishFiring by A after B claimed: %v, want ErrLeaseLost", err)
	}
	if f := firing(t, s, fire0); f.State != "running" || f.Token != b.Token || f.Holder != "B" || !f.LeaseUntil.Equal(b.Until) {
		t.Errorf("after A's attempts the firing is %+v; want B's, running, its lease untouched (until %s)", f, b.Until)
	}
	if b, err = s.RenewFiring(ctx, b, time.Minute, func(doc json.RawMessage, _ postgres.FiringClaim) (json.RawMessage, error) {
		return mark("renewed_by", "B")(doc)
	}); err != nil {
		t.Errorf("RenewFiring by B: %v", err)
	}
	if err := s.FinishFiring(ctx, b, mark("finished_by", "B")); err != nil {
		t.Fatalf("FinishFiring by B: %v", err)
	}
	f := firing(t, s, fire0)
	if f.State != "done" || f.Token != b.Token || f.Holder != "B" || f.Attempt != 2 || f.Finished == nil {
		t.Errorf("the firing after B finished: %+v", f)
	}
	if got := jobField(t, s, "finished_by"); got != "B" {
		t.Errorf("the job records the finish of %v, want B", got)
	}
	if got := jobField(t, s, "renewed_by"); got != "B" {
		t.Errorf("the job records the renewal of %v, want B", got)
	}
	// Finishing twice is refused too: an outcome is recorded once.
	if err := s.FinishFiring(ctx, b, mark("finished_by", "B again")); !errors.Is(err, postgres.ErrLeaseLost) {
		t.Errorf("a second FinishFiring by B: %v, want ErrLeaseLost", err)
	}
}

// TestFiringClaimedOnce: the same firing claimed again — while its lease
// holds (refused), after it expired (a second attempt), once it is done
// (refused, even with its lease long expired); and claimed by two at
// once, of whom one gets it and the other, finding the job's row locked
// (SKIP LOCKED), is refused at once.
func TestFiringClaimedOnce(t *testing.T) {
	s := firingsStore(t)
	a, err := claimAs(s, fire0, "A", 400*time.Millisecond)
	if err != nil || a.Attempt != 1 {
		t.Fatalf("first claim: %+v, %v", a, err)
	}
	if c, err := claimAs(s, fire0, "B", time.Minute); !errors.Is(err, postgres.ErrClaimed) {
		t.Errorf("a claim while the lease holds: %+v, %v; want ErrClaimed", c, err)
	}
	if got := jobField(t, s, "claimed_by"); got != "A" {
		t.Errorf("the job says it was claimed by %v, want A", got)
	}
	waitPast(t, s, a.Until)
	b, err := claimAs(s, fire0, "B", 300*time.Millisecond)
	if err != nil || b.Attempt != 2 || b.Token == a.Token {
		t.Fatalf("a claim after the lease expired: %+v, %v", b, err)
	}
	if err := s.FinishFiring(ctx, b, mark("finished_by", "B")); err != nil {
		t.Fatal(err)
	}
	waitPast(t, s, b.Until) // only "done" can refuse the next claim
	if c, err := claimAs(s, fire0, "C", time.Minute); !errors.Is(err, postgres.ErrClaimed) {
		t.Errorf("a claim of a done firing: %+v, %v; want ErrClaimed", c, err)
	}
	if f := firing(t, s, fire0); f.State != "done" || f.Attempt != 2 || f.Holder != "B" || f.Token != b.Token {
		t.Errorf("the done firing after another claim: %+v", f)
	}
	if got := jobField(t, s, "claimed_by"); got != "B" {
		t.Errorf("the job says it was claimed by %v, want B", got)
	}

	// Two at once: the first holds the job's row (its fn waits) while the
	// second claims, which must not wait for it.
	fire1 := fire0.Add(time.Hour)
	holding, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := s.ClaimFiring(ctx, "nightly", fire1, "first", time.Minute, func(doc json.RawMessage, _ postgres.FiringClaim) (json.RawMessage, error) {
			close(holding)
			<-release
			return mark("claimed_by", "first")(doc)
		})
		first <- err
	}()
	select {
	case <-holding:
	case err := <-first:
		t.Fatalf("the first claimer: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the first claimer did not get the job's row")
	}
	c2, cancel := context.WithTimeout(ctx, 3*time.Second)
	t0 := time.Now()
	_, err = claimCtx(c2, s, fire1, "second", time.Minute)
	cancel()
	close(release)
	if !errors.Is(err, postgres.ErrClaimed) {
		t.Errorf("the second claimer, while the first held the job: %v after %v; want ErrClaimed at once", err, time.Since(t0).Round(time.Millisecond))
	}
	if err := <-first; err != nil {
		t.Errorf("the first claimer: %v", err)
	}
	if f := firing(t, s, fire1); f.Holder != "first" || f.Attempt != 1 {
		t.Errorf("the firing claimed by two: %+v", f)
	}

	// Eight racing: one claim.
	fire2 := fire0.Add(2 * time.Hour)
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, refused := 0, 0
	for i := range 8 {
		wg.Go(func() {
			_, err := claimAs(s, fire2, fmt.Sprint("racer-", i), time.Minute)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, postgres.ErrClaimed):
				refused++
			default:
				t.Errorf("racer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if won != 1 || refused != 7 {
		t.Errorf("8 racing claims: %d won, %d refused; want 1 and 7", won, refused)
	}
	if f := firing(t, s, fire2); f.Attempt != 1 {
		t.Errorf("the raced firing: %+v", f)
	}
}
