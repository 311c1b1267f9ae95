package capability

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrSymlinkLoop is returned (wrapped) by ResolvePath when following
// symlinks takes more than 40 steps, as with a loop.
var ErrSymlinkLoop = errors.New("too many levels of symbolic links")

const maxSymlinks = 40

// ResolvePath turns a user path — relative to workspace, or absolute — into
// the absolute, cleaned path an fs need carries: every symlink in the
// existing part of the path is resolved, element by element as the kernel
// would (so "link/.." is the parent of link's target, not the directory
// holding link), and the part that does not exist yet is appended cleaned.
// A symlink loop gives an error wrapping ErrSymlinkLoop; so do chains
// longer than 40. Errors other than "does not exist" (permission denied)
// are returned, since what lies behind them cannot be known.
//
// ResolvePath only computes a name; it opens nothing. What it returns can
// change before the file is used (a race), so callers do the access itself
// through os.Root anchored at the granted tree, which refuses to leave it.
func ResolvePath(workspace, p string) (string, error) {
	if p == "" {
		return "", errors.New("capability: empty path")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("capability: NUL byte in path %q", p)
	}
	rest := p
	if !filepath.IsAbs(p) {
		if !filepath.IsAbs(workspace) {
			return "", fmt.Errorf("capability: workspace %q is not an absolute path", workspace)
		}
		rest = workspace + string(filepath.Separator) + p
	}
	rest = filepath.ToSlash(rest)
	resolved := "/"
	var missing []string // elements below resolved that do not exist
	hops := 0
	for rest != "" {
		var elem string
		elem, rest, _ = strings.Cut(rest, "/")
		switch {
		case elem == "" || elem == ".":
			continue
		case elem == "..":
			if len(missing) > 0 {
				missing = missing[:len(missing)-1]
			} else {
				resolved = filepath.Dir(resolved)
			}
			continue
		case len(missing) > 0:
			missing = append(missing, elem)
			continue
		}
		next := filepath.Join(resolved, elem)
		fi, err := os.Lstat(next)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				missing = append(missing, elem)
				continue
			}
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		if hops++; hops > maxSymlinks {
			return "", &fs.PathError{Op: "resolve", Path: p, Err: ErrSymlinkLoop}
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		target = filepath.ToSlash(target)
		if strings.HasPrefix(target, "/") {
			resolved = "/"
		}
		rest = target + "/" + rest
	}
	return filepath.Join(append([]string{resolved}, missing...)...), nil
}
