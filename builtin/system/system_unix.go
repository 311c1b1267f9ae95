//go:build unix

package system

import "golang.org/x/sys/unix"

// kernelInfo is get_info's kernel and host part, from uname(2).
func kernelInfo() (Info, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return Info{}, err
	}
	return Info{
		KernelName:    unix.ByteSliceToString(u.Sysname[:]),
		KernelRelease: unix.ByteSliceToString(u.Release[:]),
		KernelVersion: unix.ByteSliceToString(u.Version[:]),
		Machine:       unix.ByteSliceToString(u.Machine[:]),
		Hostname:      unix.ByteSliceToString(u.Nodename[:]),
	}, nil
}
