package jobs

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/runtime/schedule"
	"github.com/wardenrt/warden/store"
	"github.com/wardenrt/warden/store/postgres"
	"github.com/wardenrt/warden/store/postgres/pgtest"
)

// BenchmarkJobClaim measures claiming a firing and recording its outcome,
// the two transactions the scheduler makes per run besides the run
// itself, on both backends side by side: bbolt (LocalLeases: the lease in
// the job, fsync on) and PostgreSQL (job_firings: SKIP LOCKED on the job,
// the database's clock; fsync and synchronous_commit on). It reports the
// claim's median and 99th percentile; ns/op is claim + finish.
func BenchmarkJobClaim(b *testing.B) {
	ctx := context.Background()
	for _, backend := range []string{"bbolt", "postgres"} {
		b.Run("backend="+backend, func(b *testing.B) {
			var st store.Backend
			var leases schedule.Leases
			if backend == "bbolt" {
				s, err := store.Open(filepath.Join(b.TempDir(), "warden.db"), nil)
				if err != nil {
					b.Fatal(err)
				}
				st = s
				leases = schedule.LocalLeases(env.NewLazyStore(func() (store.Backend, error) { return s, nil }), time.Now, func(schedule.Running) bool { return true })
			} else {
				srv := pgtest.Shared(b, pgtest.Config{Durable: true})
				url := srv.URL(srv.Database(b))
				if _, err := postgres.Migrate(ctx, url, nil); err != nil {
					b.Fatal(err)
				}
				s, err := postgres.Open(ctx, url, &postgres.Options{AnchorDir: b.TempDir(), Host: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				st = s
				leases = pgLeases{st: s, holder: "bench"}
			}
			defer st.Close()
			js := env.NewLazyStore(func() (store.Backend, error) { return st, nil })
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			if err := js.CreateJob(ctx, schedule.Job{ID: "j", Kind: schedule.KindAgent, Task: "t", Spec: schedule.Spec{Every: "1s"}, Created: t0, Anchor: t0}); err != nil {
				b.Fatal(err)
			}
			var claims []time.Duration
			fire := t0
			for b.Loop() {
				fire = fire.Add(time.Second)
				start := time.Now()
				c, err := leases.Claim(ctx, "j", fire, 30*time.Second, func(j *schedule.Job, c schedule.Claim) error {
					j.Running = &schedule.Running{RunID: "r", Fire: fire, Token: c.Token, LeaseUntil: c.Until, Attempt: c.Attempt}
					j.LastFire = fire
					return nil
				})
				claims = append(claims, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				if err := leases.Finish(ctx, c, func(j *schedule.Job) error { j.Running = nil; j.Runs++; return nil }); err != nil {
					b.Fatal(err)
				}
			}
			slices.Sort(claims)
			b.ReportMetric(float64(claims[len(claims)/2].Nanoseconds()), "claim-median-ns")
			b.ReportMetric(float64(claims[len(claims)*99/100].Nanoseconds()), "claim-p99-ns")
		})
	}
}
