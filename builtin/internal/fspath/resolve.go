// Package fspath holds what the tools that open files by path share: the
// checks and resolution of a path argument with the error each failure
// maps to, the flags of their opens, and the kernel's name for an open
// file.
package fspath

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/redact"
	"github.com/wardenrt/warden/runtime/tool"
)

// maxPathBytes is the longest path a tool accepts.
const maxPathBytes = 4096

// Quote quotes a user path for a message, cut to a readable length —
// never inside a secret (redact.Cut): the gate masks the message, and a
// secret cut short is no longer one it knows.
func Quote(p string) string {
	if len(p) > 200 {
		return strconv.Quote(redact.Cut(p, 200)) + "…"
	}
	return strconv.Quote(p)
}

// CheckPath refuses paths no tool should try: empty, over 4096 bytes, or
// holding a NUL byte.
func CheckPath(p string) *tool.Error {
	switch {
	case p == "":
		return tool.Errorf(tool.CodeInvalidInput, "give a path relative to the workspace, or an absolute path", "the path is empty")
	case len(p) > maxPathBytes:
		return tool.Errorf(tool.CodeInvalidInput, "use a shorter path (at most 4096 bytes)", "the path is %d bytes; the limit is %d", len(p), maxPathBytes)
	case strings.IndexByte(p, 0) >= 0:
		return tool.Errorf(tool.CodeInvalidInput, "remove the NUL byte: no file name can hold one", "the path %s holds a NUL byte", Quote(p))
	}
	return nil
}

// errRacing reports a path that kept changing while it was resolved.
var errRacing = errors.New("the path kept changing while it was resolved")

// ResolvePath is capability.ResolvePath, retried when a symlink on the
// path was swapped between its Lstat and its Readlink (EINVAL). A path
// the kernel finds whole with no symlink on it is answered in one system
// call (resolveQuick, Linux), with the same answer.
func ResolvePath(ws, p string) (string, error) {
	if p != "" && (filepath.IsAbs(p) || filepath.IsAbs(ws)) {
		abs := p
		if !filepath.IsAbs(p) {
			abs = ws + string(filepath.Separator) + p
		}
		if r, ok := resolveQuick(abs); ok {
			return r, nil
		}
	}
	for range 5 {
		abs, err := capability.ResolvePath(ws, p)
		if !errors.Is(err, syscall.EINVAL) {
			return abs, err
		}
	}
	return "", errRacing
}

// Resolve checks p and resolves it (symlinks followed) to the absolute
// path its need carries.
func Resolve(ws, p string) (string, *tool.Error) {
	if e := CheckPath(p); e != nil {
		return "", e
	}
	abs, err := ResolvePath(ws, p)
	if err != nil {
		return "", Err(p, err)
	}
	return abs, nil
}

// isEscape reports that os.Root refused to leave its tree.
func isEscape(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == "path escapes from parent" {
			return true
		}
		if le, ok := e.(*os.LinkError); ok {
			return isEscape(le.Err)
		}
	}
	return false
}

func escape(p string) *tool.Error {
	return tool.Errorf(tool.CodePathEscape,
		"nothing was done; a symlink or a directory on the path was changed to point out of the granted tree — check it with fs_list, or use the real path with a grant for it",
		"%s resolves outside the granted tree at access time", Quote(p))
}

// Err maps a file system error to a canonical code.
func Err(p string, err error) *tool.Error {
	show := Quote(p)
	switch {
	case isEscape(err):
		return escape(p)
	case errors.Is(err, errRacing):
		return tool.Errorf(tool.CodePathEscape, "nothing was done; a symlink on the path is being swapped — retry when it is stable",
			"%s kept changing while it was resolved", Quote(p))
	case errors.Is(err, capability.ErrSymlinkLoop), errors.Is(err, syscall.ELOOP):
		return tool.Errorf(tool.CodeInvalidInput, "a symlink on the path points back to itself (directly or through others): fix or remove it",
			"%s: too many levels of symbolic links (a symlink loop)", show)
	case errors.Is(err, fs.ErrNotExist):
		return tool.Errorf(tool.CodeNotFound, "check the path with fs_list or fs_glob", "%s does not exist", show)
	case errors.Is(err, fs.ErrExist):
		return tool.Errorf(tool.CodeAlreadyExists, "choose another name, or remove it first", "%s already exists", show)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return tool.Errorf(tool.CodeInvalidInput, "use shorter names (at most 255 bytes per element)", "%s: file name too long", show)
	case errors.Is(err, syscall.ENOTDIR):
		return tool.Errorf(tool.CodeInvalidInput, "an element of the path is a file, not a directory: check the path with fs_list", "%s: not a directory", show)
	case errors.Is(err, syscall.EISDIR):
		return tool.Errorf(tool.CodeInvalidInput, "use fs_list for directories", "%s is a directory", show)
	case errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
		return tool.Errorf(tool.CodeInvalidInput, "pass recursive: true to delete it and everything under it", "directory %s is not empty", show)
	case errors.Is(err, fs.ErrPermission):
		return tool.Errorf(tool.CodeToolError, "the operating system refuses it: check the file's owner and permissions", "%s: permission denied", show)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return tool.Errorf(tool.CodeToolError, "", "%s: %v", show, err)
}
