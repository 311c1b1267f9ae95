//go:build !linux

package sandbox

import (
	"errors"
	"runtime"
)

// Outside Linux there is no launcher to set the limits and no pids
// cgroup to hold the process limit.

// NeedsGroup reports whether programs need a pids cgroup for their
// process limit: never outside Linux, where there is none.
func NeedsGroup() bool { return false }

// NewGroup fails outside Linux: there are no pids cgroups.
func NewGroup(uint64) (string, error) {
	return "", errors.New("no pids cgroups on " + runtime.GOOS)
}

// Cleanup has nothing to clean up outside Linux.
func Cleanup(string) (limitHit bool) { return false }

// ProcessLimit says how the process limit is held here: not at all.
func ProcessLimit() (how string, ok bool) {
	return "not held: programs start directly on " + runtime.GOOS + ", without the launcher that sets the limits", false
}
