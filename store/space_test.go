package store

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestAnchorWriteFull: a full disk (ENOSPC injected into the anchor's
// write, where a size-limited file system cannot be mounted) is ErrFull
// with the path that could not be written, and nothing more is appended;
// with space again, appends carry on and the log verifies.
func TestAnchorWriteFull(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(filepath.Join(dir, "warden.db"), &Options{Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	appendOne := func() (uint64, error) { return s.AppendAudit(bg, json.RawMessage(`{"a":1}`)) }
	if _, err := appendOne(); err != nil {
		t.Fatal(err)
	}
	s.anchors.wait()
	writeFile = func(f *os.File, b []byte) (int, error) {
		return 0, &fs.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	defer func() { writeFile = (*os.File).Write }()
	if seq, err := appendOne(); err != nil || seq != 2 {
		t.Fatalf("the record is committed before its anchor: %d, %v", seq, err)
	}
	if err := s.anchors.wait(); !errors.Is(err, ErrFull) {
		t.Fatalf("the anchor write: %v", err)
	}
	_, err = appendOne()
	var we *WriteError
	if !errors.Is(err, ErrFull) || !errors.As(err, &we) || we.Path != filepath.Join(dir, "audit.head") {
		t.Fatalf("append on a full disk: %v", err)
	}
	if want := "store: cannot write " + filepath.Join(dir, "audit.head") + ": no space left on device"; we.Error() != want {
		t.Fatalf("%q, want %q", we.Error(), want)
	}
	writeFile = (*os.File).Write
	if seq, err := appendOne(); err != nil || seq != 3 {
		t.Fatalf("with space again: %d, %v", seq, err)
	}
	if rep, err := s.VerifyAudit(bg); err != nil || rep.Records != 3 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// TestClassify: which system errors are a full disk, which a read-only
// store, and which neither.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		kind error
	}{
		{&fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, ErrFull},
		{syscall.EDQUOT, ErrFull},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.EROFS}, ErrReadOnly},
		{syscall.EACCES, ErrReadOnly},
		{syscall.EPERM, ErrReadOnly},
		{syscall.EIO, nil},
		{errors.New("other"), nil},
	} {
		got := Classify("/h/warden.db", tc.err)
		if tc.kind == nil {
			if got != tc.err {
				t.Errorf("%v became %v", tc.err, got)
			}
			continue
		}
		if !errors.Is(got, tc.kind) || !errors.Is(got, tc.err) {
			t.Errorf("%v: %v", tc.err, got)
		}
	}
}
