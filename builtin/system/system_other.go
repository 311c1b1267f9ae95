//go:build !linux

package system

import "runtime"

// hostFigures are the machine's figures get_status reports.
type hostFigures struct {
	Load          [3]float64
	MemTotalBytes uint64
	MemFreeBytes  uint64
	UptimeSeconds int64
	Procs         uint16
	Unmeasured    string
}

// hostStatus: the figures come from Linux's sysinfo(2); elsewhere they are
// not measured, and get_status says so.
func hostStatus() (hostFigures, error) {
	return hostFigures{Unmeasured: "load, memory, uptime and process count are not measured on " + runtime.GOOS}, nil
}
