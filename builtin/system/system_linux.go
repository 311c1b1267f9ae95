package system

import "golang.org/x/sys/unix"

// hostFigures are the machine's figures get_status reports.
type hostFigures struct {
	Load          [3]float64
	MemTotalBytes uint64
	MemFreeBytes  uint64
	UptimeSeconds int64
	Procs         uint16
	Unmeasured    string
}

func hostStatus() (hostFigures, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return hostFigures{}, err
	}
	const loadScale = 1 << 16 // SI_LOAD_SHIFT
	unit := uint64(si.Unit)
	if unit == 0 {
		unit = 1
	}
	return hostFigures{
		Load:          [3]float64{float64(si.Loads[0]) / loadScale, float64(si.Loads[1]) / loadScale, float64(si.Loads[2]) / loadScale},
		MemTotalBytes: uint64(si.Totalram) * unit,
		MemFreeBytes:  uint64(si.Freeram) * unit,
		UptimeSeconds: int64(si.Uptime),
		Procs:         si.Procs,
	}, nil
}
