package store

import (
	"errors"
	"fmt"
	"syscall"
)

// Errors of writing the store's files, tested with errors.Is; the
// *WriteError that carries them says which path.
var (
	// ErrFull means the file system holding the store or its anchor has
	// no space left (ENOSPC) or the owner's quota is used up (EDQUOT).
	ErrFull = errors.New("no space left for the store")
	// ErrReadOnly means the store's directory or files cannot be written:
	// a read-only file system (EROFS) or no permission (EACCES, EPERM).
	ErrReadOnly = errors.New("the store cannot be written")
)

// WriteError is a failure to write one of the store's files for want of
// space or permission. Nothing it was writing was committed.
type WriteError struct {
	// Path is the file or directory that could not be written.
	Path string
	// Kind is ErrFull or ErrReadOnly.
	Kind error
	// Errno is what the system said; Err the whole error.
	Errno syscall.Errno
	Err   error
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("store: cannot write %s: %v", e.Path, e.Errno)
}

// Is reports whether target is the error's kind.
func (e *WriteError) Is(target error) bool { return target == e.Kind }

func (e *WriteError) Unwrap() error { return e.Err }

// Classify turns a failed write of path that the system refused for want
// of space or permission into a *WriteError; other errors are returned as
// they are. The store classifies its own writes; a caller that writes
// beside it (creating the home directory) may use it too.
func Classify(path string, err error) error {
	if err == nil {
		return nil
	}
	var we *WriteError
	if errors.As(err, &we) {
		return err
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return err
	}
	switch errno {
	case syscall.ENOSPC, syscall.EDQUOT:
		return &WriteError{Path: path, Kind: ErrFull, Errno: errno, Err: err}
	case syscall.EROFS, syscall.EACCES, syscall.EPERM:
		return &WriteError{Path: path, Kind: ErrReadOnly, Errno: errno, Err: err}
	}
	return err
}
