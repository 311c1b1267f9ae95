// Package jobs holds scheduled jobs: `warden schedule`, `warden daemon`,
// the runner the scheduler calls for a firing, and the claims on firings
// of a PostgreSQL store shared by a fleet.
package jobs
