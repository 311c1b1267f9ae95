package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wardenrt/warden/store"
)

// Defaults for Options.
const (
	// DefaultTimeout bounds one operation: connecting, waiting for a
	// lock, running its statements (a scan is bounded per chunk).
	DefaultTimeout = 15 * time.Second
	// DefaultConnectTimeout bounds one connection attempt when the URL
	// names no connect_timeout.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultMaxConns is the pool size when the URL names no
	// pool_max_conns.
	DefaultMaxConns = 8
)

// Options configures a Store. A nil *Options means all defaults, except
// that AnchorDir is required.
type Options struct {
	// AnchorDir is the directory of this host's audit anchor files, one
	// per store (audit-<store id>.head). It must be on this host's disk,
	// outside the database: it is what reveals a log cut short or rolled
	// back.
	AnchorDir string
	// Host names this host among the store's writers (its row of anchors
	// in the database); "" means the host name.
	Host string
	// Timeout bounds each operation; 0 means DefaultTimeout.
	Timeout time.Duration
	// Now, if set, is the clock for record and entry times; nil means
	// the database's clock for audit records (one clock for every host)
	// and this host's for memory entries.
	Now func() time.Time
}

// Store is a warden store in a PostgreSQL database, shared by any number
// of warden processes on any number of hosts. Its methods are safe for
// concurrent use.
type Store struct {
	pool       *pgxpool.Pool
	url        string // without the password
	id         string // the store's id (warden.meta)
	host       string
	anchorPath string
	timeout    time.Duration
	now        func() time.Time

	audit         auditQueue
	anchors       anchorWriter
	lastCommitted atomic.Uint64 // the head this process last committed

	blockMu sync.Mutex
	blocked error // why appends are refused (the anchor disagrees), or nil

	closeOnce sync.Once
	closeErr  error
}

var _ store.Backend = (*Store)(nil)

// ErrSchema means the database has no warden schema, or one of another
// version than this warden's: `warden store migrate` creates or upgrades
// it. The error is a *SchemaError.
var ErrSchema = errors.New("warden schema missing or of another version")

// SchemaError is ErrSchema for one database: what was found there, and
// (Remedy) what to do about it.
type SchemaError struct {
	URL  string // without the password
	Have int    // the database's schema version, 0 for none
	Want int    // this warden's
}

func (e *SchemaError) Unwrap() error { return ErrSchema }

func (e *SchemaError) Error() string { return "postgres: " + e.Problem() + "; " + e.Remedy() }

// Problem says what is wrong with the schema.
func (e *SchemaError) Problem() string {
	switch {
	case e.Have == 0:
		return fmt.Sprintf("%s has no warden schema", e.URL)
	case e.Have < e.Want:
		return fmt.Sprintf("%s has schema version %d, this warden needs %d", e.URL, e.Have, e.Want)
	}
	return fmt.Sprintf("%s has schema version %d, newer than this warden's %d", e.URL, e.Have, e.Want)
}

// Remedy says what to do about it.
func (e *SchemaError) Remedy() string {
	switch {
	case e.Have == 0:
		return "create it with `warden store migrate --store URL`, as a role that may create a schema in that database"
	case e.Have < e.Want:
		return "upgrade it with `warden store migrate --store URL`, as the role that owns the warden schema"
	}
	return "upgrade warden: a newer one migrated this store"
}

// Open connects to the store at url (postgres://…). It checks the schema
// version (Migrate creates it) and this host's anchor against the log. A
// server that cannot be reached within the timeouts is an error wrapping
// store.ErrUnavailable.
func Open(ctx context.Context, url string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("postgres: %w: negative Timeout", store.ErrInvalid)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.AnchorDir == "" {
		return nil, fmt.Errorf("postgres: %w: no AnchorDir for this host's audit anchor", store.ErrInvalid)
	}
	if o.Host == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "localhost"
		}
		o.Host = h
	}
	if err := store.ValidName("host", o.Host); err != nil {
		return nil, err
	}
	pool, safe, err := newPool(ctx, url, o.Timeout)
	if err != nil {
		return nil, err
	}
	s := &Store{pool: pool, url: safe, host: o.Host, timeout: o.Timeout, now: o.Now}
	s.anchors.idle.L = &s.anchors.mu
	fail := func(err error) (*Store, error) {
		pool.Close()
		return nil, err
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	var version int
	err = s.retry(octx, func(ctx context.Context) error {
		var err error
		version, s.id, err = readSchema(ctx, pool)
		return err
	})
	if err != nil {
		return fail(s.wrap(ctx, "opening the store", err))
	}
	if version != SchemaVersion {
		return fail(&SchemaError{URL: safe, Have: version, Want: SchemaVersion})
	}
	if err := os.MkdirAll(o.AnchorDir, 0o700); err != nil {
		return fail(fmt.Errorf("postgres: creating the anchor directory: %w", err))
	}
	s.anchorPath = filepath.Join(o.AnchorDir, "audit-"+s.id+".head")
	if err := s.checkAnchorOnOpen(octx); err != nil {
		return fail(s.wrap(ctx, "checking the audit anchor", err))
	}
	return s, nil
}

// newPool makes a connection pool for url (connecting lazily) and returns
// it with url's password removed, for messages.
func newPool(ctx context.Context, url string, timeout time.Duration) (*pgxpool.Pool, string, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message can quote the URL: say only what is wrong.
		return nil, "", fmt.Errorf("postgres: %w: the store URL does not parse as a PostgreSQL connection string (postgres://USER@HOST:PORT/DB)", store.ErrInvalid)
	}
	cc := cfg.ConnConfig
	safe := (&pgURL{user: cc.User, host: cc.Host, port: cc.Port, db: cc.Database}).String()
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = DefaultConnectTimeout
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	if _, ok := cc.RuntimeParams["application_name"]; !ok {
		cc.RuntimeParams["application_name"] = "warden"
	}
	// Waiting for a row lock is bounded like everything else.
	cc.RuntimeParams["lock_timeout"] = fmt.Sprint(timeout.Milliseconds())
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, "", fmt.Errorf("postgres: %w: %s: %v", store.ErrUnavailable, safe, err)
	}
	return pool, safe, nil
}

type pgURL struct {
	user, host, db string
	port           uint16
}

func (u *pgURL) String() string {
	return fmt.Sprintf("postgres://%s@%s/%s", u.user, net.JoinHostPort(u.host, fmt.Sprint(u.port)), u.db)
}

// ID returns the store's id, made when its schema was created.
func (s *Store) ID() string { return s.id }

// URL returns the store's URL without its password.
func (s *Store) URL() string { return s.url }

// Host returns the name this host writes its anchors under.
func (s *Store) Host() string { return s.host }

// AnchorPath returns this host's anchor file of this store.
func (s *Store) AnchorPath() string { return s.anchorPath }

// Close waits for the audit appends in flight and the anchor write they
// started, then closes the connections. Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.audit.mu.Lock()
		s.audit.closed = true
		s.audit.mu.Unlock()
		s.audit.committer.Wait()
		if err := s.anchors.wait(); err != nil {
			s.closeErr = fmt.Errorf("postgres: the audit anchor %s could not be updated: %w", s.anchorPath, err)
		}
		s.pool.Close()
	})
	return s.closeErr
}

func (s *Store) isClosed() bool {
	s.audit.mu.Lock()
	defer s.audit.mu.Unlock()
	return s.audit.closed
}

// opCtx bounds one operation by the store's timeout.
func (s *Store) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// retry runs fn, again after a backoff while it fails with an error that
// is certainly transient (the statement was never sent, or the server
// rolled the transaction back: a serialization failure, a deadlock, too
// many connections, a server starting up), until ctx ends — or, for a
// server that cannot be connected to, after four attempts.
func (s *Store) retry(ctx context.Context, fn func(ctx context.Context) error) error {
	backoff := 20 * time.Millisecond
	refused := 0
	for {
		err := fn(ctx)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		// A server that refuses connections is given a few tries (a
		// restart), not the whole timeout (a wrong address).
		var ce *pgconn.ConnectError
		if errors.As(err, &ce) {
			if refused++; refused >= 4 {
				return err
			}
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, time.Second)
	}
}

// transient reports whether err certainly changed nothing and may be
// retried.
func transient(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01", "53300", "57P03", "55P03":
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || pgconn.SafeToRetry(err)
}

// unavailable reports whether err is the server (or the way to it) failing
// rather than the request.
func unavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P") || pe.Code == "53300" || pe.Code == "55P03"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) || strings.Contains(err.Error(), "conn closed")
}

// wrap turns an error of an operation on the server into the store's: the
// caller's own cancellation as it is, a server that failed or did not
// answer in time as store.ErrUnavailable, the store's errors unchanged.
func (s *Store) wrap(ctx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return cerr
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return ctx.Err()
	}
	for _, known := range []error{store.ErrNotFound, store.ErrInvalid, store.ErrTampered, store.ErrCorrupt, store.ErrUnavailable, store.ErrClosed, ErrSchema} {
		if errors.Is(err, known) {
			return err
		}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" {
		return fmt.Errorf("postgres: %s: %s: %s (the role warden connects as lacks a privilege: grant it with `warden store migrate --grant-to ROLE`)", what, s.url, pe.Message)
	}
	if unavailable(err) {
		if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
			return fmt.Errorf("postgres: %w: %s: %s did not answer within %s", store.ErrUnavailable, what, s.url, s.timeout)
		}
		return fmt.Errorf("postgres: %w: %s: %s: %v", store.ErrUnavailable, what, s.url, err)
	}
	return fmt.Errorf("postgres: %s: %w", what, err)
}

// do runs one unit of work with the store's timeout, retries and error
// mapping.
func (s *Store) do(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.isClosed() {
		return store.ErrClosed
	}
	octx, cancel := s.opCtx(ctx)
	defer cancel()
	return s.wrap(ctx, what, s.retry(octx, fn))
}

// inTx runs fn in a transaction, committed if fn succeeds.
func (s *Store) inTx(ctx context.Context, what string, opts pgx.TxOptions, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return s.do(ctx, what, func(ctx context.Context) error {
		return pgx.BeginTxFunc(ctx, s.pool, opts, func(tx pgx.Tx) error { return fn(ctx, tx) })
	})
}

var readOnly = pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}

// corruptf returns an error wrapping store.ErrCorrupt.
func (s *Store) corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s; run `warden audit verify`, and restore the database from a backup if it is damaged", store.ErrCorrupt, s.url, fmt.Sprintf(format, args...))
}
