// Package pgtest starts throwaway PostgreSQL servers for tests: initdb into
// a temporary directory (as the postgres user when running as root, which
// initdb refuses to be), a server listening on a free port of 127.0.0.1,
// and a fresh database per test.
//
// Tests that need PostgreSQL call Shared: without a PostgreSQL
// installation they are skipped, unless WARDEN_REQUIRE_PG=1 (CI sets it),
// which makes a missing installation a failure. The server binaries are
// found in WARDEN_PG_BIN, else on PATH, else under /usr/lib/postgresql.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Config configures a server.
type Config struct {
	// Durable keeps fsync, full_page_writes and synchronous_commit on,
	// as a production server has them (benchmarks). Otherwise they are
	// off, for speed.
	Durable bool
}

// Server is a running throwaway server. Its superuser is "postgres",
// authenticated by trust on 127.0.0.1 only.
type Server struct {
	Port int
	dir  string
	cmd  *exec.Cmd
	log  *bytes.Buffer
	done chan struct{}
	seq  atomic.Int64

	mu      sync.Mutex
	stopped bool
}

// Available reports whether PostgreSQL's server binaries can be found.
func Available() bool {
	_, err := binDir()
	return err == nil
}

// Required reports whether WARDEN_REQUIRE_PG=1 asks for tests never to
// skip for want of PostgreSQL.
func Required() bool { return os.Getenv("WARDEN_REQUIRE_PG") == "1" }

// binDir finds the directory holding initdb and postgres.
func binDir() (string, error) {
	if d := os.Getenv("WARDEN_PG_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("WARDEN_PG_BIN=%s: %w", d, err)
		}
		return d, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(found, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(a))))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(b))))
		return vb - va
	})
	if len(found) > 0 {
		return filepath.Dir(found[0]), nil
	}
	return "", errors.New("PostgreSQL is not installed (no initdb on PATH or under /usr/lib/postgresql; apt-get install postgresql)")
}

// credential is who the server runs as: the postgres user when we are
// root, ourselves otherwise.
func credential() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and initdb refuses root: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &runAs{uid: uid, gid: gid}, nil
}

// runAs is a user to run the server as.
type runAs struct{ uid, gid int }

// freePort returns a port of 127.0.0.1 nobody listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start initialises a cluster in a new temporary directory and starts a
// server on it.
func Start(cfg Config) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "warden-pg-*")
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, cred.uid, cred.gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir
	initdb.SysProcAttr = procAttr(cred, false)
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	for attempt := 0; ; attempt++ {
		s, err := startServer(bin, dir, data, cred, cfg)
		if err == nil || attempt == 4 {
			if err != nil {
				os.RemoveAll(dir)
			}
			return s, err
		}
		// Most likely the port was taken between freePort and the
		// server's bind: try another.
	}
}

func startServer(bin, dir, data string, cred *runAs, cfg Config) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	onOff := map[bool]string{true: "on", false: "off"}[cfg.Durable]
	args := []string{"-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
		"-c", "fsync=" + onOff, "-c", "full_page_writes=" + onOff, "-c", "synchronous_commit=" + onOff,
		"-c", "max_connections=300", "-c", "shared_buffers=64MB",
		"-c", "log_min_messages=warning", "-c", "log_min_error_statement=panic",
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Dir = dir
	log := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = &lockedWriter{w: log}, &lockedWriter{w: log}
	// If the test binary dies, the server goes too (immediate shutdown).
	cmd.SysProcAttr = procAttr(cred, true)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{Port: port, dir: dir, cmd: cmd, log: log, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL("postgres"))
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("postgres exited while starting: %s", s.Log())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return nil, fmt.Errorf("postgres did not accept connections within 30s: %v\n%s", err, s.Log())
		}
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Log returns what the server has logged so far.
func (s *Server) Log() string {
	if lw, ok := s.cmd.Stderr.(*lockedWriter); ok {
		lw.mu.Lock()
		defer lw.mu.Unlock()
	}
	return s.log.String()
}

// URL is the superuser's URL of database db.
func (s *Server) URL(db string) string {
	return s.URLAs("postgres", "", db)
}

// URLAs is role's URL of database db.
func (s *Server) URLAs(role, password, db string) string {
	u := url.URL{Scheme: "postgres", Host: "127.0.0.1:" + strconv.Itoa(s.Port), Path: "/" + db, RawQuery: "sslmode=disable"}
	if password != "" {
		u.User = url.UserPassword(role, password)
	} else {
		u.User = url.User(role)
	}
	return u.String()
}

// Exec runs SQL as the superuser in database db.
func (s *Server) Exec(ctx context.Context, db, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, s.URL(db))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// CreateDatabase creates a new, empty database and returns its name.
func (s *Server) CreateDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.seq.Add(1))
	return name, s.Exec(ctx, "postgres", "CREATE DATABASE "+name)
}

// Database creates a new database for a test and drops it when the test
// ends; it returns the database's name.
func (s *Server) Database(tb testing.TB) string {
	tb.Helper()
	ctx := context.Background()
	name, err := s.CreateDatabase(ctx)
	if err != nil {
		tb.Fatalf("creating a database: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Logf("dropping database %s: %v", name, err)
		}
	})
	return name
}

// Stop stops the server (fast shutdown) and removes its directory.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopped = true
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.kill()
	}
	os.RemoveAll(s.dir)
}

// Kill stops the server at once, as a crash would (SIGKILL to its process
// group), leaving its directory.
func (s *Server) kill() {
	killGroup(s.cmd.Process)
	<-s.done
}

var (
	sharedMu   sync.Mutex
	shared     = map[Config]*Server{}
	sharedErrs = map[Config]error{}
)

// Shared returns this test binary's server of configuration cfg, starting
// it on first use; Run stops it when the tests are done. Without
// PostgreSQL it skips tb, or fails it when Required.
func Shared(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	if !Available() {
		_, err := binDir()
		if Required() {
			tb.Fatalf("WARDEN_REQUIRE_PG=1 but %v", err)
		}
		tb.Skipf("skipped: %v (WARDEN_REQUIRE_PG=1 makes this a failure)", err)
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if s := shared[cfg]; s != nil {
		return s
	}
	if err := sharedErrs[cfg]; err != nil {
		tb.Fatalf("starting PostgreSQL: %v", err)
	}
	s, err := Start(cfg)
	if err != nil {
		sharedErrs[cfg] = err
		tb.Fatalf("starting PostgreSQL: %v", err)
	}
	shared[cfg] = s
	return s
}

// Run runs the tests of m and then stops the shared servers; a TestMain
// that uses Shared calls os.Exit(pgtest.Run(m)).
func Run(m *testing.M) int {
	code := m.Run()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	for _, s := range shared {
		s.Stop()
	}
	return code
}
