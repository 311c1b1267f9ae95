package decode

import (
	"io"
	"io/fs"
	"os"
	"syscall"
)

// openFlags open a file for reading without blocking on a FIFO (whose
// open would wait for a writer); reads of regular files are unaffected.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK

// ReadFile reads the regular file name, at most max bytes
// (DefaultMaxBytes when max <= 0). See [Read].
func ReadFile(name string, max int64) ([]byte, error) {
	f, err := os.OpenFile(name, openFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, name, max)
}

// ReadRootFile is [ReadFile] of name inside root (source names it in
// errors).
func ReadRootFile(root *os.Root, name, source string, max int64) ([]byte, error) {
	f, err := root.OpenFile(name, openFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f, source, max)
}

// Read reads r, at most max bytes (DefaultMaxBytes when max <= 0); source
// names it in errors. When r can say what it is (an *os.File), anything
// but a regular file is refused, and so is a file whose size is over the
// cap, before a byte is read. The read stops one byte past the cap either
// way (a file may grow, a pipe has no size).
func Read(r io.Reader, source string, max int64) ([]byte, error) {
	if max <= 0 {
		max = DefaultMaxBytes
	}
	size := int64(-1)
	if st, ok := r.(interface{ Stat() (fs.FileInfo, error) }); ok {
		fi, err := st.Stat()
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, invalid(source, 0, 0, "is not a regular file (%s)", kindOf(fi.Mode()))
		}
		if size = fi.Size(); size > max {
			return nil, overCap(source, size, max)
		}
	}
	// A file of known size is read into a buffer of its size (one byte
	// more: a file that grew is noticed); anything else grows from 64 KiB.
	n := min(max+1, 64<<10)
	if size >= 0 {
		n = size + 1
	}
	b, err := readUpTo(r, make([]byte, 0, n), max+1)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, overCap(source, -1, max)
	}
	return b, nil
}

// readUpTo appends at most limit bytes of r to b.
func readUpTo(r io.Reader, b []byte, limit int64) ([]byte, error) {
	lr := io.LimitReader(r, limit)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func overCap(source string, size, max int64) *Error {
	if size >= 0 {
		return tooLarge(source, 0, 0, "the file is %d bytes, over the limit of %s", size, sizeText(max))
	}
	return tooLarge(source, 0, 0, "more than %s (the limit)", sizeText(max))
}

func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a plain file"
}

// LimitBody returns rc, reading at most max bytes of it: a read past them
// fails with an *Error (ErrTooLarge) naming source, for a response body
// that a library reads to its end by itself.
func LimitBody(rc io.ReadCloser, source string, max int64) io.ReadCloser {
	return &limitedBody{rc: rc, source: source, left: max, max: max}
}

type limitedBody struct {
	rc        io.ReadCloser
	source    string
	left, max int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One byte more tells a body of exactly max from a longer one.
		var one [1]byte
		if n, err := l.rc.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, overCap(l.source, -1, l.max)
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.rc.Read(p)
	l.left -= int64(n)
	return n, err
}

func (l *limitedBody) Close() error { return l.rc.Close() }
