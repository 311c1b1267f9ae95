//go:build !linux

package sandbox

// Outside Linux there is no watcher: programs are started directly.
func watchLocked(string, bool) {}

func watchRecord(int, string, bool) string { return "" }

// EnsureWatcher does nothing outside Linux.
func EnsureWatcher() {}
