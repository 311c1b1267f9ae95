package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// The launcher's part in the program's namespaces (where Spec.Namespaces):
// warden started it in a network and a mount namespace of its own (and,
// for a user other than root, a user namespace in which it is root), so
// before it restricts itself it
//
//   - brings the namespace's loopback up, adds the loopback addresses the
//     bridges need, listens on Spec.Listen and hands the listeners to
//     warden (descriptor 3): the program's only ways out;
//   - makes its mount table private, mounts the program directories and
//     the writable grants noexec (but for the programs it may execute,
//     mounted back), pins the directories above protected and hidden paths
//     (mount points cannot be renamed), mounts the protected paths
//     read-only and the hidden paths over with nothing readable.
//
// Nothing of it reaches the rest of the machine: the namespaces end with
// the program.

// setupNetwork brings loopback up and makes the listeners.
func setupNetwork(spec Spec) error {
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("network namespace: %w", err)
	}
	if len(spec.Listen) == 0 {
		return nil
	}
	fds := make([]int, 0, len(spec.Listen))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, ap := range spec.Listen {
		a := ap.Addr().Unmap()
		if !a.IsLoopback() {
			if err := addLoopbackAddr(a); err != nil {
				return fmt.Errorf("network namespace: adding %s to loopback: %w", a, err)
			}
		}
		fd, err := listenTCP(netip.AddrPortFrom(a, ap.Port()))
		if err != nil {
			return fmt.Errorf("network namespace: listening on %s: %w", ap, err)
		}
		fds = append(fds, fd)
	}
	if err := unix.Sendmsg(listenFD, []byte{byte(len(fds))}, unix.UnixRights(fds...), nil, 0); err != nil {
		return fmt.Errorf("network namespace: handing the listeners to warden: %w", err)
	}
	return unix.Close(listenFD)
}

// loopbackUp sets the namespace's lo up (127.0.0.1 and ::1 come with it).
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	return nil
}

// addLoopbackAddr adds a (a private address a bridge stands in for) to
// lo, through rtnetlink.
func addLoopbackAddr(a netip.Addr) error {
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		unix.Close(sock)
		return err
	}
	err = unix.IoctlIfreq(sock, unix.SIOCGIFINDEX, ifr)
	unix.Close(sock)
	if err != nil {
		return err
	}
	index := ifr.Uint32()

	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	raw := a.AsSlice()
	family, bits, flags := byte(unix.AF_INET), byte(32), byte(0)
	if a.Is6() {
		family, bits, flags = unix.AF_INET6, 128, unix.IFA_F_NODAD
	}
	attr := func(typ uint16, data []byte) []byte {
		b := make([]byte, 4, 4+len(data)+3)
		binary.NativeEndian.PutUint16(b[0:], uint16(4+len(data)))
		binary.NativeEndian.PutUint16(b[2:], typ)
		b = append(b, data...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	body := []byte{family, bits, flags, unix.RT_SCOPE_HOST, 0, 0, 0, 0}
	binary.NativeEndian.PutUint32(body[4:], index)
	body = append(body, attr(unix.IFA_LOCAL, raw)...)
	body = append(body, attr(unix.IFA_ADDRESS, raw)...)
	msg := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(unix.NLMSG_HDRLEN+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], unix.RTM_NEWADDR)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
	binary.NativeEndian.PutUint32(msg[8:], 1) // sequence
	msg = append(msg, body...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	if n < unix.NLMSG_HDRLEN+4 || binary.NativeEndian.Uint16(buf[4:]) != unix.NLMSG_ERROR {
		return errors.New("unexpected netlink answer")
	}
	if code := int32(binary.NativeEndian.Uint32(buf[unix.NLMSG_HDRLEN:])); code != 0 && unix.Errno(-code) != unix.EEXIST {
		return unix.Errno(-code)
	}
	return nil
}

// listenTCP listens on ap and returns the socket.
func listenTCP(ap netip.AddrPort) (int, error) {
	a := ap.Addr()
	family := unix.AF_INET
	var sa unix.Sockaddr = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: a.As4()}
	if a.Is6() {
		family = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: a.As16()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if a.Is6() {
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1)
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// setupMounts makes the mount table private and applies NoExec, Pin,
// Protect and Hide, in that order (a protected path inside a noexec
// directory is cloned from the noexec mount).
func setupMounts(spec Spec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("mount namespace: making it private: %w", err)
	}
	if err := applyNoExec(spec); err != nil {
		return err
	}
	for _, d := range spec.Pin {
		if err := cloneWith(d, 0); err != nil {
			return fmt.Errorf("pinning %s: %w", d, err)
		}
	}
	for _, p := range spec.Protect {
		if err := protect(p); err != nil {
			return fmt.Errorf("protecting %s: %w", p, err)
		}
	}
	for _, p := range spec.Hide {
		if err := hide(p); err != nil {
			return fmt.Errorf("hiding %s: %w", p, err)
		}
	}
	// The working directory was entered before the mounts were made: it
	// still points into the mounts underneath, where relative paths
	// would find .git writable and hidden files readable. Enter it again
	// by its name, through the new mounts (a hidden one cannot be).
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("mount namespace: the working directory: %w", err)
	}
	if err := unix.Chdir(wd); err != nil {
		return fmt.Errorf("mount namespace: entering %s again: %w", wd, err)
	}
	return nil
}

// openNoFollow opens p (O_PATH) without following any symlink on the way.
// ok is false when p does not exist.
func openNoFollow(p string) (fd int, ok bool, err error) {
	fd, err = unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case err == nil:
		return fd, true, nil
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return -1, false, nil
	}
	return -1, false, err
}

// cloneWith clones the mount tree at p (recursively), sets attrs on the
// clone and mounts it back over p: the same files, under new flags.
func cloneWith(p string, attrs uint64) error {
	src, ok, err := openNoFollow(p)
	if err != nil || !ok {
		return err
	}
	defer unix.Close(src)
	tree, err := unix.OpenTree(src, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(tree)
	if attrs != 0 {
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: attrs}); err != nil {
			return fmt.Errorf("mount_setattr: %w", err)
		}
	}
	return unix.MoveMount(tree, "", src, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}

// applyNoExec mounts the NoExec directories noexec, then mounts the
// executable files and directories that lie under them back over
// themselves from clones taken before (which keep exec).
func applyNoExec(spec Spec) error {
	if len(spec.NoExec) == 0 {
		return nil
	}
	type kept struct {
		path string
		tree int
	}
	var keep []kept
	defer func() {
		for _, k := range keep {
			unix.Close(k.tree)
		}
	}()
	for _, p := range spec.Exec {
		if !slices.ContainsFunc(spec.NoExec, func(d string) bool { return within(d, p) }) {
			continue
		}
		src, ok, err := openNoFollow(p)
		if err != nil {
			return fmt.Errorf("keeping %s executable: %w", p, err)
		}
		if !ok {
			continue
		}
		tree, err := unix.OpenTree(src, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
		unix.Close(src)
		if err != nil {
			return fmt.Errorf("keeping %s executable: open_tree: %w", p, err)
		}
		keep = append(keep, kept{p, tree})
	}
	for _, d := range spec.NoExec {
		if err := cloneWith(d, unix.MOUNT_ATTR_NOEXEC); err != nil {
			return fmt.Errorf("mounting %s noexec: %w", d, err)
		}
	}
	for _, k := range keep {
		dst, ok, err := openNoFollow(k.path)
		if err != nil || !ok {
			return fmt.Errorf("keeping %s executable: %v", k.path, err)
		}
		err = unix.MoveMount(k.tree, "", dst, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
		unix.Close(dst)
		if err != nil {
			return fmt.Errorf("keeping %s executable: move_mount: %w", k.path, err)
		}
	}
	return nil
}

// protect makes p read-only: a read-only clone of its mount tree mounted
// over it. Renaming or removing p itself then fails too (it is a mount
// point). A path that changed into a symlink since warden resolved it
// stops the launch; one that is gone is skipped.
func protect(p string) error {
	return cloneWith(p, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
}

// hide mounts over p something nothing can read: for a directory an empty
// read-only tmpfs with mode 000, for anything else /dev/null on a nodev
// mount (opening it fails).
func hide(p string) error {
	dst, ok, err := openNoFollow(p)
	if err != nil {
		return err
	}
	if !ok {
		// Moved or removed since warden found it (its parent is pinned
		// from now on): not started, rather than left readable wherever
		// it went.
		return fmt.Errorf("it is gone since the call started")
	}
	defer unix.Close(dst)
	var st unix.Stat_t
	if err := unix.Fstat(dst, &st); err != nil {
		return err
	}
	attrs := unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC | unix.MOUNT_ATTR_NOSUID
	var mnt int
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
		if err != nil {
			return fmt.Errorf("fsopen: %w", err)
		}
		defer unix.Close(fs)
		for _, kv := range [][2]string{{"mode", "000"}, {"size", "4k"}, {"nr_inodes", "1"}} {
			if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
				return fmt.Errorf("tmpfs %s: %w", kv[0], err)
			}
		}
		if err := unix.FsconfigCreate(fs); err != nil {
			return fmt.Errorf("tmpfs: %w", err)
		}
		if mnt, err = unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, attrs); err != nil {
			return fmt.Errorf("fsmount: %w", err)
		}
	} else {
		if mnt, err = unix.OpenTree(unix.AT_FDCWD, "/dev/null", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC); err != nil {
			return fmt.Errorf("open_tree /dev/null: %w", err)
		}
		if err := unix.MountSetattr(mnt, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: uint64(attrs)}); err != nil {
			unix.Close(mnt)
			return fmt.Errorf("mount_setattr: %w", err)
		}
	}
	defer unix.Close(mnt)
	return unix.MoveMount(mnt, "", dst, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}

// probe is the launcher started by probeNamespaces: it sets up what a
// program's namespaces need and exits 0, or prints why it cannot.
func probe() {
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		os.Exit(1)
	}
	if err := loopbackUp(); err != nil {
		fail("bringing up loopback in a new network namespace", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fail("making a new mount namespace private", err)
	}
	tree, err := unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		fail("cloning a mount (open_tree)", err)
	}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		fail("making a mount read-only (mount_setattr)", err)
	}
	if _, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC); err != nil {
		fail("making a tmpfs (fsopen)", err)
	}
	os.Exit(0)
}
