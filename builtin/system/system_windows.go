package system

import (
	"os"
	"runtime"
)

// kernelInfo is get_info's kernel and host part: Windows has no uname;
// the release and version are left empty.
func kernelInfo() (Info, error) {
	host, err := os.Hostname()
	if err != nil {
		return Info{}, err
	}
	return Info{KernelName: "Windows_NT", Machine: runtime.GOARCH, Hostname: host}, nil
}
