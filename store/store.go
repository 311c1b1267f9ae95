package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Errors returned by the store. They are wrapped with %w together with a
// message saying what happened and what to do; test them with errors.Is.
var (
	// ErrLocked means another process held the store for longer than
	// Options.Timeout.
	ErrLocked = errors.New("store is locked by another process")
	// ErrCorrupt means the file is damaged or is not a warden store.
	ErrCorrupt = errors.New("store is corrupt")
	// ErrNotFound means the requested entry, run, artifact, pin or record
	// does not exist.
	ErrNotFound = errors.New("not found")
	// ErrTampered means the audit log failed verification (or, from
	// AppendAudit, that the log disagrees with its anchor so nothing more
	// is written to it).
	ErrTampered = errors.New("audit log tampered")
	// ErrInvalid means an argument was rejected: a malformed namespace,
	// key, id or digest, or an event or document that is not the JSON it
	// must be.
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed means the Store has been closed.
	ErrClosed = errors.New("store is closed")
)

// Defaults for Options.
const (
	// DefaultTimeout bounds the wait for another process's lock.
	DefaultTimeout = time.Second
	// DefaultLinger is how long the file stays open (and locked) after the
	// last operation ends. Measured here (2-core VM, ext4; see
	// BenchmarkGetMemory and BenchmarkSearchMemory100k/uniform-reopen), a
	// reopen costs about 45µs on a small store (GetMemory: 1.3µs with the
	// file open, 45µs reopening it each time) and about 1ms on a store of
	// 100k memory entries (median search 0.17ms warm, 1.1ms reopening: the
	// fresh mapping faults its pages in again). Units of work come in
	// bursts (a tool call's intent record, the call's memory reads, its
	// result record) a few milliseconds apart; 50ms keeps a burst on one
	// open file, so the reopen cost is paid once per burst, while a second
	// process waiting for the lock is delayed by at most 50ms after the
	// burst ends.
	DefaultLinger = 50 * time.Millisecond
)

// Options configures a Store. A nil *Options means all defaults.
type Options struct {
	// Timeout is the longest an operation waits for another process to
	// release the file; 0 means DefaultTimeout. An operation that does not
	// get the file in time fails with an error wrapping ErrLocked.
	Timeout time.Duration
	// Linger is how long the file stays open and locked after the last
	// operation ends; 0 means DefaultLinger, a negative value closes it as
	// soon as no operation is in flight.
	Linger time.Duration
	// AnchorPath is the audit head anchor file; "" means "audit.head" in
	// the directory of the database file.
	AnchorPath string
	// Now is the clock used for record and entry times; nil means time.Now.
	Now func() time.Time
}

// Store is a warden store. Its methods are safe for concurrent use.
type Store struct {
	path       string
	anchorPath string
	timeout    time.Duration
	linger     time.Duration
	now        func() time.Time

	mu       sync.Mutex
	idle     sync.Cond // signalled when refs drops to 0 or an open attempt ends
	h        *handle   // the open database, nil while closed
	refs     int       // operations using h
	opening  *openAttempt
	timer    *time.Timer
	timerGen uint64
	closed   bool

	audit   auditQueue
	anchors anchorWriter
}

// handle is one lazily opened bbolt database and the flock that comes with it.
type handle struct {
	db   *bolt.DB
	file *os.File // the file bbolt opened; closed directly if bbolt state is suspect
	path string

	// broken is set when a bbolt call panicked: the handle is closed as
	// soon as no operation uses it and is never handed out again.
	broken atomic.Bool

	// anchorErr, when not nil, is why appends are refused: the anchor
	// disagrees with the log. It is computed when the handle is opened
	// (under the flock) and cleared by Reanchor.
	anchorMu  sync.Mutex
	anchorErr error
}

type openAttempt struct {
	done chan struct{}
	err  error
}

// Open opens the store at path, creating the file (mode 0600) and its parent
// directory (0700) if they are missing. It validates that the file is a
// warden store and returns an error wrapping ErrLocked if another process
// holds it past the timeout, or ErrCorrupt if it is damaged or not a store.
// The file is then closed again after Options.Linger: each operation reopens
// it as needed (see the package documentation).
func Open(path string, opts *Options) (*Store, error) {
	return OpenContext(context.Background(), path, opts)
}

// OpenContext is [Open] whose wait for another process's lock ends when ctx
// does (with ctx's error).
func OpenContext(ctx context.Context, path string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("store: %w: negative Timeout %s", ErrInvalid, o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if path == "" {
		return nil, fmt.Errorf("store: %w: empty path", ErrInvalid)
	}
	path = filepath.Clean(path)
	if o.AnchorPath == "" {
		o.AnchorPath = filepath.Join(filepath.Dir(path), "audit.head")
	}
	s := &Store{
		path:       path,
		anchorPath: filepath.Clean(o.AnchorPath),
		timeout:    o.Timeout,
		linger:     o.Linger,
		now:        o.Now,
	}
	s.idle.L = &s.mu
	s.anchors.idle.L = &s.anchors.mu
	if err := s.create(); err != nil {
		return nil, err
	}
	h, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	// Anchor temp files are only written while the flock is held, so any
	// left now were left by a process that died.
	s.removeStaleAnchorTemps()
	s.release(h)
	return s, nil
}

// Path returns the path of the database file.
func (s *Store) Path() string { return s.path }

// Close waits for operations in flight (including queued audit appends),
// then closes the file. Operations started after Close fail with ErrClosed.
// Close is idempotent.
func (s *Store) Close() error {
	s.audit.mu.Lock()
	s.audit.closed = true
	s.audit.mu.Unlock()
	s.audit.committer.Wait()
	anchorErr := s.anchors.wait()

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for s.refs > 0 || s.opening != nil {
		s.idle.Wait()
	}
	s.stopTimerLocked()
	err := s.closeHandleLocked()
	if anchorErr != nil {
		return fmt.Errorf("store: the audit anchor %s could not be updated: %w", s.anchorPath, anchorErr)
	}
	return err
}

// Bucket names. The meta bucket holds the format marker.
var (
	bucketMeta      = []byte("meta")
	bucketAudit     = []byte("audit")
	bucketMemory    = []byte("memory")
	bucketMemIndex  = []byte("memory_index")
	bucketMemStats  = []byte("memory_stats")
	bucketRuns      = []byte("runs")
	bucketArtifacts = []byte("artifacts")
	bucketPins      = []byte("pins")
	bucketGrants    = []byte("grants")
	bucketTrust     = []byte("trust")
	bucketJobs      = []byte("jobs")

	allBuckets = [][]byte{bucketMeta, bucketAudit, bucketMemory, bucketMemIndex, bucketMemStats, bucketRuns, bucketArtifacts, bucketPins, bucketGrants, bucketTrust, bucketJobs,
		bucketAuditIndex, bucketRunParts, bucketMemPostings, bucketMemTerms}
	// laterBuckets were added after the format's first release: a store
	// made before them gets them when it is next opened.
	laterBuckets = [][]byte{bucketGrants, bucketTrust, bucketJobs, bucketAuditIndex, bucketRunParts, bucketMemPostings, bucketMemTerms}

	formatKey   = []byte("format")
	formatValue = []byte("warden.store/v1")
)

// create makes the database file if it does not exist. It is built under a
// temporary name and linked into place, so a crash half way through never
// leaves a half-initialised store at path, and two processes creating the
// same store at once end up sharing one.
func (s *Store) create() error {
	if _, err := os.Stat(s.path); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store: %w", err)
	}
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Classify(dir, fmt.Errorf("store: creating directory: %w", err))
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(s.path)+".new-*")
	if err != nil {
		return Classify(dir, fmt.Errorf("store: %w", err))
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName)
	if err := tmp.Close(); err != nil {
		return Classify(dir, fmt.Errorf("store: %w", err))
	}
	db, err := bolt.Open(tmpName, 0o600, &bolt.Options{Timeout: s.timeout})
	if err != nil {
		return Classify(dir, fmt.Errorf("store: initialising %s: %w", tmpName, err))
	}
	err = db.Update(initBuckets)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Classify(dir, fmt.Errorf("store: initialising %s: %w", tmpName, err))
	}
	if err := os.Link(tmpName, s.path); err != nil && !errors.Is(err, fs.ErrExist) {
		// Some file systems have no hard links; rename is atomic too,
		// it only loses the race against a concurrent creator.
		if err := os.Rename(tmpName, s.path); err != nil {
			return Classify(dir, fmt.Errorf("store: %w", err))
		}
	}
	syncDir(dir)
	return nil
}

// initBuckets writes the format marker and creates every bucket (the
// missing ones, for a store made before them). A store without memory
// entries has its (empty) memory index complete; a store whose memory
// index, or what a rebuild of it cut short had built, is gone has it
// rebuilt.
func initBuckets(tx *bolt.Tx) error {
	for _, name := range allBuckets {
		if tx.Bucket(name) != nil {
			continue
		}
		if _, err := tx.CreateBucket(name); err != nil {
			return err
		}
		if bytes.Equal(name, bucketMemPostings) || bytes.Equal(name, bucketMemTerms) {
			meta := tx.Bucket(bucketMeta)
			if err := errors.Join(meta.Delete(memIndexKey), meta.Delete(memRebuildKey)); err != nil {
				return err
			}
		}
	}
	meta := tx.Bucket(bucketMeta)
	if k, _ := tx.Bucket(bucketMemory).Cursor().First(); k == nil && meta.Get(memIndexKey) == nil {
		if err := meta.Put(memIndexKey, binary.AppendUvarint(nil, 0)); err != nil {
			return err
		}
	}
	return meta.Put(formatKey, formatValue)
}

// validate checks that tx is a warden store. A bbolt file with no buckets at
// all (an empty file bbolt initialised in place) reports needsInit.
func validate(tx *bolt.Tx) (needsInit bool, err error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		empty := true
		err := tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
		if err != nil {
			return false, err
		}
		if empty {
			return true, nil
		}
		return false, errors.New("it is a bbolt database but not a warden store (no format marker)")
	}
	if v := meta.Get(formatKey); string(v) != string(formatValue) {
		return false, fmt.Errorf("unknown store format %q (this warden reads %q)", v, formatValue)
	}
	for _, name := range allBuckets {
		if tx.Bucket(name) == nil && !slices.ContainsFunc(laterBuckets, func(b []byte) bool { return bytes.Equal(b, name) }) {
			return false, fmt.Errorf("bucket %q is missing", name)
		}
	}
	return false, nil
}

// missingLater reports whether tx lacks a bucket added after the format's
// first release.
func missingLater(tx *bolt.Tx) bool {
	for _, name := range laterBuckets {
		if tx.Bucket(name) == nil {
			return true
		}
	}
	return false
}

// withHandle runs fn with the database open, opening it if needed.
func (s *Store) withHandle(ctx context.Context, fn func(h *handle) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer s.release(h)
	return fn(h)
}

// view runs fn in a read transaction.
func (s *Store) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	return s.withHandle(ctx, func(h *handle) error { return h.run(false, fn) })
}

// update runs fn in a write transaction, committed (and fsynced) on success.
func (s *Store) update(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	return s.withHandle(ctx, func(h *handle) error { return h.run(true, fn) })
}

// run runs fn in a transaction, turning a bbolt panic or a fault on the
// mapped file into ErrCorrupt.
func (h *handle) run(write bool, fn func(tx *bolt.Tx) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			h.broken.Store(true)
			err = corruptf(h.path, "reading the database failed (%v)", r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	if write {
		err = h.db.Update(fn)
	} else {
		err = h.db.View(fn)
	}
	if err != nil && isBoltCorruption(err) {
		h.broken.Store(true)
		return corruptf(h.path, "%v", err)
	}
	return Classify(h.path, err)
}

// corruptf returns an error wrapping ErrCorrupt with advice.
func corruptf(path, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s; restore it from a backup, or move it aside to start a new store", ErrCorrupt, path, fmt.Sprintf(format, args...))
}

// isBoltCorruption reports whether err is bbolt saying the file is damaged.
func isBoltCorruption(err error) bool {
	return errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) ||
		errors.Is(err, berrors.ErrVersionMismatch) || errors.Is(err, berrors.ErrInvalidMapping) ||
		errors.Is(err, berrors.ErrIncompatibleValue)
}

// acquire returns the open handle, opening the database if needed, and
// counts the caller as in flight until release.
func (s *Store) acquire(ctx context.Context) (*handle, error) {
	s.mu.Lock()
	for {
		if s.closed {
			s.mu.Unlock()
			return nil, ErrClosed
		}
		if h := s.h; h != nil {
			if h.broken.Load() {
				s.mu.Unlock()
				return nil, corruptf(s.path, "an earlier operation found the file damaged")
			}
			s.refs++
			s.stopTimerLocked()
			s.mu.Unlock()
			return h, nil
		}
		a := s.opening
		if a == nil {
			break
		}
		// Someone else is opening it: wait for their result rather than
		// queueing on the flock behind our own process.
		s.mu.Unlock()
		select {
		case <-a.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if a.err != nil && !errors.Is(a.err, context.Canceled) && !errors.Is(a.err, context.DeadlineExceeded) {
			return nil, a.err
		}
		s.mu.Lock()
	}
	a := &openAttempt{done: make(chan struct{})}
	s.opening = a
	s.mu.Unlock()

	h, err := s.openHandle(ctx)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.opening = nil
	if err == nil && s.closed {
		h.close()
		h, err = nil, ErrClosed
	}
	a.err = err
	close(a.done)
	s.idle.Broadcast()
	if err != nil {
		return nil, err
	}
	s.h = h
	s.refs++
	return h, nil
}

// release ends an operation; the last one out starts the linger timer.
func (s *Store) release(h *handle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs--
	if s.refs > 0 {
		return
	}
	s.idle.Broadcast()
	if h.broken.Load() || s.linger < 0 || s.closed {
		s.closeHandleLocked()
		return
	}
	s.stopTimerLocked()
	gen := s.timerGen
	s.timer = time.AfterFunc(s.linger, func() { s.lingerExpired(gen) })
}

func (s *Store) lingerExpired(gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen == s.timerGen && s.refs == 0 && s.h != nil {
		s.closeHandleLocked()
	}
}

func (s *Store) stopTimerLocked() {
	s.timerGen++
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

func (s *Store) closeHandleLocked() error {
	h := s.h
	if h == nil {
		return nil
	}
	s.h = nil
	return h.close()
}

// close closes the database. After a panic bbolt's own locks may be in any
// state and DB.Close could block, so a broken handle instead has its flock
// released and its file closed; its mapping is left to the process (the
// mapping alone would keep the flock: it holds the open file).
func (h *handle) close() error {
	if h.broken.Load() {
		unlockFile(h.file)
		return h.file.Close()
	}
	return h.db.Close()
}

// openHandle opens the database, waiting at most s.timeout for the flock.
//
// The wait is done here rather than by bbolt (Options.Timeout): bbolt polls
// every 50ms and stops one poll before the timeout (so a 100ms timeout waits
// about 50ms), and it cannot be cancelled. Here each attempt is a
// non-blocking bbolt open, retried with a short backoff until the deadline
// or the context ends.
func (s *Store) openHandle(ctx context.Context) (*handle, error) {
	deadline := time.Now().Add(s.timeout)
	backoff := time.Millisecond
	for {
		h, err := s.tryOpen()
		if !errors.Is(err, berrors.ErrTimeout) {
			return h, err
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return nil, fmt.Errorf("%w: %s is in use by another warden process (waited %s); retry when it is done, or raise the lock timeout",
				ErrLocked, s.path, s.timeout)
		}
		wait = min(wait, backoff)
		backoff = min(2*backoff, 20*time.Millisecond)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// tryOpen makes one attempt at opening the database. It returns bbolt's
// ErrTimeout if another process holds the flock.
func (s *Store) tryOpen() (h *handle, err error) {
	h = &handle{path: s.path}
	defer func() {
		if r := recover(); r != nil {
			if h.file != nil {
				unlockFile(h.file)
				h.file.Close()
			}
			h, err = nil, corruptf(s.path, "opening the database failed (%v)", r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	db, err := bolt.Open(s.path, 0o600, &bolt.Options{
		// Positive (never 0, which would wait forever) and below bbolt's
		// 50ms poll interval: bbolt tries the flock once and returns
		// ErrTimeout at once if it is held; openHandle does the waiting.
		Timeout: time.Nanosecond,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			// Never create here: the file is created only by create, so a
			// store removed while in use is reported, not silently
			// replaced by an empty one.
			f, err := os.OpenFile(name, flag&^os.O_CREATE, perm)
			if err == nil {
				h.file = f
			}
			return f, err
		},
	})
	if err != nil {
		switch {
		case errors.Is(err, berrors.ErrTimeout):
			return nil, err
		case errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("store: %s has disappeared: %w", s.path, err)
		case isIOError(err):
			return nil, Classify(s.path, fmt.Errorf("store: opening %s: %w", s.path, err))
		default:
			return nil, corruptf(s.path, "%v", err)
		}
	}
	h.db = db
	if err := s.prepare(h); err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

// isIOError tells operating-system errors (permissions, I/O) apart from
// bbolt's complaints about the file's content.
func isIOError(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &errno)
}

// prepare validates a freshly opened handle, initialises an empty bbolt
// file, and checks the audit anchor against the log (writing the genesis
// anchor for an empty log that has none).
func (s *Store) prepare(h *handle) error {
	var needsInit, upgrade bool
	err := h.run(false, func(tx *bolt.Tx) error {
		var err error
		needsInit, err = validate(tx)
		upgrade = !needsInit && missingLater(tx)
		return err
	})
	if err == nil && (needsInit || upgrade) {
		if err = h.run(true, initBuckets); err == nil && upgrade {
			upgraded()
		}
	}
	var stale bool
	if err == nil {
		err = h.run(false, func(tx *bolt.Tx) error {
			var err error
			stale, err = memoryIndexStale(tx)
			return err
		})
	}
	if err == nil && stale {
		err = rebuildMemoryIndex(h)
	}
	if err != nil {
		if errors.Is(err, ErrCorrupt) {
			return err
		}
		return corruptf(s.path, "%v", err)
	}
	return s.checkAnchorOnOpen(h)
}

// upgraded is called after each transaction that brings an older file up
// to date commits (the new buckets, a chunk of the memory index's rebuild
// or of the audit index's catch-up); tests replace it to kill the process
// there.
var upgraded = func() {}

// syncDir fsyncs a directory so a new entry in it survives a crash. Errors
// are ignored: some file systems cannot sync directories, and losing the
// entry only loses what a crash would have lost anyway.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// removeStaleAnchorTemps removes anchor temporary files left by a process
// that died while writing one. Only called with the flock held.
func (s *Store) removeStaleAnchorTemps() {
	dir, base := filepath.Split(s.anchorPath)
	entries, err := os.ReadDir(filepath.Clean(dir))
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), base+anchorTempInfix) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
