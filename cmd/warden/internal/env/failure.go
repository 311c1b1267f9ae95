package env

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/wardenrt/warden/runtime/decode"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/store"
	"github.com/wardenrt/warden/store/postgres"
)

// Exit statuses (docs/cli.md).
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
	ExitLocked = 75
	ExitDenied = 77
)

// Failure is an error that knows its code, exit status and what to do.
type Failure struct {
	Code tool.Code
	Msg  string
	Hint string
	Exit int
}

func (f *Failure) Error() string { return f.Msg }

// Fail is a failure with code, exit status and hint, its message formatted.
func Fail(code tool.Code, exit int, hint, format string, args ...any) *Failure {
	return &Failure{Code: code, Exit: exit, Hint: hint, Msg: fmt.Sprintf(format, args...)}
}

// UsageErr is a usage error (USAGE, exit status 2) with hint.
func UsageErr(hint, format string, args ...any) *Failure {
	return Fail("USAGE", ExitUsage, hint, format, args...)
}

// StoreFailure maps store errors onto codes and exit statuses.
func StoreFailure(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrLocked):
		return Fail(tool.CodeStoreLocked, ExitLocked, "another warden process is using the store; retry when it is done, or raise --lock-timeout", "%v", err)
	case errors.Is(err, store.ErrUnavailable):
		return Fail(tool.CodeStoreUnavailable, ExitLocked, "check that the database server is running and reachable from this host, and the --store URL (WARDEN_STORE); `warden store status` shows the connection", "%v", err)
	case errors.Is(err, postgres.ErrSchema):
		// What to do, once: in the hint, not also in the message.
		msg, hint := err.Error(), "run `warden store migrate` as the role that owns the warden schema"
		var se *postgres.SchemaError
		if errors.As(err, &se) {
			msg, hint = strings.Replace(msg, se.Error(), "postgres: "+se.Problem(), 1), se.Remedy()
		}
		return Fail(tool.CodeStoreUnavailable, ExitFailed, hint, "%s", msg)
	case errors.Is(err, store.ErrCorrupt):
		return Fail(tool.CodeStoreCorrupt, ExitFailed, "restore warden.db from a backup, or move it aside to start a new store", "%v", err)
	case errors.Is(err, store.ErrFull), errors.Is(err, store.ErrReadOnly):
		return writeFailure(err)
	case errors.Is(err, store.ErrTampered):
		return Fail(tool.CodeAuditTampered, ExitFailed, "the audit log was altered; keep the file for investigation", "%v", err)
	case errors.Is(err, store.ErrNotFound), errors.Is(err, gate.ErrNotFound):
		return Fail(tool.CodeNotFound, ExitFailed, "check the name with the matching ls command (memory ls, runs ls, audit ls, grant ls)", "%v", err)
	case errors.Is(err, context.Canceled):
		return Fail(tool.CodeUserCancelled, ExitFailed, "", "cancelled")
	}
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	return Fail(tool.CodeInternal, ExitFailed, "run again with --log-level debug and see <home>/logs", "%v", err)
}

// writeFailure is STORE_FULL or STORE_READONLY, with a hint naming the
// path that could not be written and what to do about it.
func writeFailure(err error) *Failure {
	path := "the warden home directory"
	var we *store.WriteError
	if errors.As(err, &we) {
		path = we.Path
	}
	dir := path // the directory to free or fix: path's own, or its parent
	if fi, serr := os.Stat(path); serr != nil || !fi.IsDir() {
		dir = filepath.Dir(path)
	}
	if errors.Is(err, store.ErrFull) {
		return Fail(tool.CodeStoreFull, ExitFailed,
			fmt.Sprintf("free space on the file system holding %s (`df -h %s` shows it), then run the command again; nothing ran without its audit record", path, dir),
			"%v", err)
	}
	return Fail(tool.CodeStoreReadOnly, ExitFailed,
		fmt.Sprintf("make %s writable (remount it read-write, or fix its owner and mode), or choose a writable --home; nothing ran without its audit record", dir),
		"%v", err)
}

// ReadFailure maps a failure to read or decode a file someone other than
// warden wrote (a policy, a sidecar, a workflow): over the decoder's
// budget is TOO_LARGE, a refused construct or a problem in the file is
// INVALID_INPUT, anything else (missing, unreadable) a usage error; hint
// says what to do about the file.
func ReadFailure(err error, hint string) error {
	switch {
	case errors.Is(err, decode.ErrTooLarge):
		return Fail(tool.CodeTooLarge, ExitFailed, "shorten or split the file: warden reads a file it did not write only within a budget (a policy, sidecar or workflow: 1 MiB, 20,000 YAML tokens, 1,000 keys a mapping)", "%v", err)
	case errors.Is(err, decode.ErrInvalid):
		return Fail(tool.CodeInvalidInput, ExitFailed, hint, "%v", err)
	}
	var pe *gate.PositionError
	if errors.As(err, &pe) {
		return Fail(tool.CodeInvalidInput, ExitFailed, hint, "%v", err)
	}
	return UsageErr(hint, "%v", err)
}
