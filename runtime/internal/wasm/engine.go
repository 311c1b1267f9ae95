// Package wasm runs Extism plugin exports and WASI commands with no ambient
// authority: a memory limit, a deadline and an output cap per call; WASI
// with no preopens, no environment and no arguments; guest stdout/stderr
// captured, never written to the host's terminal; a real clock and real
// randomness; Extism's http_request refused unless the call allows it and
// warden's gated transport is installed.
//
// One [Engine] per process holds the compilation cache (in memory or on
// disk) and the number of compilation workers; [Engine.Compile] turns
// module bytes into a [Module] (checked, or trusted with
// CompileOptions.Verified for a fast start); [Engine.Inspect] describes a
// module without compiling it. [Module.Call] runs one export in an instance
// taken from a bounded pool (per module and pool key; an instance is
// discarded after any error or a large payload) and maps every outcome to
// a runtime error code (TIMEOUT, WASM_TRAP, WASM_LIMIT, TOOL_ERROR,
// INVALID_INPUT, or the *tool.Error a host function or warden's HTTP
// transport returned); [Module.RunCommand] runs a WASI command's _start in
// a fresh instance. Host functions are passed through as given; the gate
// integration lives elsewhere.
package wasm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
)

// Defaults for zero [Limits] fields.
const (
	DefaultMemoryPages uint32        = 1024 // 64 MiB
	DefaultTimeout     time.Duration = 10 * time.Second
	DefaultMaxOutput   int           = 1 << 20
	// DefaultMaxLog caps the captured guest stdout and stderr, each.
	DefaultMaxLog int = 64 << 10
)

// pageSize is the size of a wasm memory page.
const pageSize = 64 << 10

// Limits bound one module's calls. A zero field takes its default.
type Limits struct {
	// MemoryPages caps every linear memory of an instance (the guest's and
	// Extism's kernel), in 64 KiB pages; default 1024 = 64 MiB.
	MemoryPages uint32
	// Timeout is the deadline of one call, instantiation included;
	// default 10s.
	Timeout time.Duration
	// MaxOutput caps the export's output (a command's stdout) in bytes;
	// default 1 MiB.
	MaxOutput int
}

func (l Limits) withDefaults() Limits {
	if l.MemoryPages == 0 {
		l.MemoryPages = DefaultMemoryPages
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = DefaultMaxOutput
	}
	return l
}

// EngineOptions configures [NewEngine]. The zero value is valid.
type EngineOptions struct {
	// CacheDir is where compiled native code is cached across processes;
	// "" keeps the cache in memory. The directory is created with mode
	// 0700 if missing; an existing one is refused if it is a symlink, not
	// a directory, group- or world-writable, or owned by another user (it
	// holds native code that will be executed).
	CacheDir string
	// CompileWorkers is the number of goroutines compiling a module's
	// functions to native code; 0 = GOMAXPROCS.
	CompileWorkers int
}

// Engine compiles modules; it owns the compilation cache shared by every
// [Module] it compiles. Safe for concurrent use.
type Engine struct {
	cache   wazero.CompilationCache
	workers int
	// lock is the shared lock on the cache directory's .lock (lockCache),
	// or nil.
	lock *os.File
}

// ErrUnsafeCacheDir is returned by [NewEngine] for a cache directory that
// others could write to.
var ErrUnsafeCacheDir = errors.New("wasm: unsafe compilation cache directory")

// NewEngine returns an engine with the options' compilation cache.
func NewEngine(ctx context.Context, opts EngineOptions) (*Engine, error) {
	workers := opts.CompileWorkers
	if workers <= 0 {
		workers = goruntime.GOMAXPROCS(0)
	}
	if opts.CacheDir == "" {
		return &Engine{cache: wazero.NewCompilationCache(), workers: workers}, nil
	}
	dir, err := filepath.Abs(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("wasm: cache dir: %w", err)
	}
	if err := checkCacheDir(dir); err != nil {
		return nil, err
	}
	lock := lockCache(dir, func(alone bool) { removeAbandonedTemps(dir, alone, time.Now()) })
	cache, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		return nil, fmt.Errorf("wasm: cache dir %s: %w", dir, err)
	}
	return &Engine{cache: cache, workers: workers, lock: lock}, nil
}

// checkCacheDir refuses a cache directory whose native code someone else
// could have written or could replace: dir must be a real directory (not
// a symlink), not group- or world-writable, owned by this user; every
// directory above it (symlinks resolved) must be owned by this user or
// root and, unless sticky (like /tmp), writable by no one else, or
// another user could rename dir away and put their own in its place; and
// what wazero keeps inside (a directory per wazero version, a file per
// compiled module) must be plain directories and files, neither symlinks
// nor writable by others.
func checkCacheDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("wasm: cache dir: %w", err)
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return fmt.Errorf("%w: %s is a symlink", ErrUnsafeCacheDir, dir)
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory", ErrUnsafeCacheDir, dir)
	}
	if err := checkPrivate(dir, fi); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("wasm: cache dir: %w", err)
	}
	for p := filepath.Dir(real); ; p = filepath.Dir(p) {
		pfi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("wasm: cache dir: %w", err)
		}
		if owner, self, ok := fileOwner(pfi); ok && owner != self && owner != 0 {
			return fmt.Errorf("%w: %s, above the cache, is owned by uid %d (neither you nor root)", ErrUnsafeCacheDir, p, owner)
		}
		if pfi.Mode().Perm()&0o022 != 0 && pfi.Mode()&os.ModeSticky == 0 {
			return fmt.Errorf("%w: %s, above the cache, has mode %04o: others could replace the cache (use a --home whose parents only you can write to)",
				ErrUnsafeCacheDir, p, pfi.Mode().Perm())
		}
		if filepath.Dir(p) == p {
			break
		}
	}
	// wazero's own directories and files, two levels.
	return walkCache(dir, 2)
}

// checkPrivate refuses fi (at path) when it is group- or world-writable or
// owned by another user.
func checkPrivate(path string, fi os.FileInfo) error {
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%w: %s has mode %04o (group- or world-writable; want 0700)", ErrUnsafeCacheDir, path, fi.Mode().Perm())
	}
	if owner, self, ok := fileOwner(fi); ok && owner != self {
		return fmt.Errorf("%w: %s is owned by uid %d, not %d", ErrUnsafeCacheDir, path, owner, self)
	}
	return nil
}

// walkCache checks dir's entries, and theirs down to depth levels: each a
// directory or regular file, not a symlink, private (checkPrivate).
func walkCache(dir string, depth int) error {
	if depth == 0 {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("wasm: cache dir: %w", err)
	}
	for _, ent := range entries {
		p := filepath.Join(dir, ent.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("wasm: cache dir: %w", err)
		}
		if !fi.IsDir() && !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: %s is a %s, not a directory or file", ErrUnsafeCacheDir, p, fi.Mode().Type())
		}
		if err := checkPrivate(p, fi); err != nil {
			return err
		}
		if fi.IsDir() {
			if err := walkCache(p, depth-1); err != nil {
				return err
			}
		}
	}
	return nil
}

// abandonedAfter is how long a temporary file of the cache must have been
// left unwritten to be taken for one a killed compile left behind, while
// other processes may use the cache.
const abandonedAfter = time.Hour

// removeAbandonedTemps removes from the cache's version directories the
// temporary files wazero writes a compiled module into before renaming it
// into place (<64 hex digits>.<random digits>.tmp): a compile killed on
// the way leaves one, and nothing else removes it. Alone on the cache (no
// other process holds its lock), every one is abandoned. Otherwise their
// names say nothing of their writer, and age tells: one no one has written
// for abandonedAfter — a compile writes its file in seconds — since
// removing a file another process is writing would fail its compile (its
// rename into place). Best effort: errors are ignored. checkCacheDir has
// made sure every entry is a plain, private file or directory of this
// user's.
func removeAbandonedTemps(dir string, alone bool, now time.Time) {
	versions, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, v := range versions {
		if !v.IsDir() {
			continue
		}
		vdir := filepath.Join(dir, v.Name())
		entries, err := os.ReadDir(vdir)
		if err != nil {
			continue
		}
		for _, ent := range entries {
			if !ent.Type().IsRegular() || !isCacheTemp(ent.Name()) {
				continue
			}
			if fi, err := ent.Info(); err == nil && (alone || now.Sub(fi.ModTime()) > abandonedAfter) {
				_ = os.Remove(filepath.Join(vdir, ent.Name()))
			}
		}
	}
}

// isCacheTemp reports whether name is one wazero gives the temporary file
// of a cache entry: the entry's key (64 hex digits), a dot, os.CreateTemp's
// random digits, ".tmp".
func isCacheTemp(name string) bool {
	rest, ok := strings.CutSuffix(name, ".tmp")
	if !ok || len(rest) < 66 || rest[64] != '.' {
		return false
	}
	for i, c := range []byte(rest) {
		switch {
		case i < 64 && (c >= '0' && c <= '9' || c >= 'a' && c <= 'f'):
		case i > 64 && c >= '0' && c <= '9':
		case i == 64:
		default:
			return false
		}
	}
	return true
}

// Close releases the compilation cache. Close every [Module] first.
func (e *Engine) Close(ctx context.Context) error {
	err := e.cache.Close(ctx)
	if e.lock != nil {
		e.lock.Close()
	}
	return err
}
