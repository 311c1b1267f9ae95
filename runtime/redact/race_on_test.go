//go:build race

package redact

// raceEnabled: under the race detector sync.Pool drops what it is given
// at random, so allocations are counted only without it.
const raceEnabled = true
