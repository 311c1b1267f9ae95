// Package runs holds the commands that make and read runs: `warden run`
// (an agent task with a model), `warden workflow` and `warden runs`.
package runs
