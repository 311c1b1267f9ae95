package wasm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenrt/warden/internal/wasmfixture"
	"github.com/wardenrt/warden/runtime/tool"
)

// fixture returns the bytes of the guest in wasm-tools/dir, built (once,
// cached across test binaries) as an Extism plugin.
func fixture(t testing.TB, dir string) []byte {
	t.Helper()
	return wasmfixture.Bytes(t, dir, false)
}

var (
	engineOnce sync.Once
	shared     *Engine
	// sharedCacheDir is the shared engine's on-disk cache: a module
	// compiled again after its last Module was closed (which drops it from
	// the in-memory cache), in this test binary or a later one (the -race
	// build, the WASI probe's child process, the next run), is read back
	// instead of compiled again. It lives beside wasmfixture's builds.
	sharedCacheDir string
)

func TestMain(m *testing.M) {
	base, err := os.UserCacheDir()
	dir := filepath.Join(base, "warden-test-wasm", "native")
	if err == nil {
		err = os.MkdirAll(dir, 0o700)
	}
	temp := err != nil
	if temp {
		if dir, err = os.MkdirTemp("", "warden-wasm-cache-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	sharedCacheDir = dir
	code := m.Run()
	if temp {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// engine is one engine shared by the tests (as warden shares one per
// process), with an on-disk cache.
func engine(t testing.TB) *Engine {
	engineOnce.Do(func() {
		var err error
		if shared, err = NewEngine(context.Background(), EngineOptions{CacheDir: sharedCacheDir}); err != nil {
			panic(err)
		}
	})
	return shared
}

func compile(t testing.TB, dir string, cfg map[string]string, l Limits) *Module {
	t.Helper()
	return compileWith(t, dir, CompileOptions{Config: cfg, Limits: l})
}

func compileWith(t testing.TB, dir string, o CompileOptions) *Module {
	t.Helper()
	m, err := engine(t).Compile(context.Background(), fixture(t, dir), o)
	if err != nil {
		t.Fatalf("compile %s: %v", dir, err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// deadlineSlack is how long after its deadline a hostile call may end:
// 250 ms (the bound), 5 s under the race detector.
func deadlineSlack() time.Duration {
	if raceEnabled {
		return 5 * time.Second
	}
	return 250 * time.Millisecond
}

// slowUnderRace is d, or 4 d under the race detector: the deadline of a
// call that tests something other than its deadline (a memory bomb must
// reach its memory limit, not a deadline the race detector's slower host
// side made it miss).
func slowUnderRace(d time.Duration) time.Duration {
	if raceEnabled {
		return 4 * d
	}
	return d
}

// wantCode checks err is a *tool.Error with one of codes and returns it.
func wantCode(t *testing.T, err error, codes ...tool.Code) *tool.Error {
	t.Helper()
	var e *tool.Error
	if !errors.As(err, &e) {
		t.Fatalf("want a *tool.Error with %v, got %T %v", codes, err, err)
	}
	for _, c := range codes {
		if e.Code == c {
			return e
		}
	}
	t.Fatalf("want %v, got %v", codes, e)
	return nil
}

func TestTextstats(t *testing.T) {
	m := compile(t, "examples/textstats", nil, Limits{})
	out, info, err := m.Call(context.Background(), "call", []byte(`{"text":"Hello world. Hello again!"}`), CallOptions{})
	if err != nil {
		t.Fatalf("call: %v (stderr %q)", err, info.Stderr)
	}
	var r struct {
		Words     int `json:"words"`
		Sentences int `json:"sentences"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.Words != 4 || r.Sentences != 2 {
		t.Fatalf("output %s (%v): want 4 words, 2 sentences", out, err)
	}
	if info.RC != 0 || info.Exited || info.Duration <= 0 {
		t.Errorf("info %+v", info)
	}

	// A tool failure (SetError, rc 1) is TOOL_ERROR with the guest's message.
	_, info, err = m.Call(context.Background(), "call", []byte(`{"txt":1}`), CallOptions{})
	if e := wantCode(t, err, tool.CodeToolError); e.Message == "" || info.RC != 1 {
		t.Errorf("tool error %v, rc %d", e, info.RC)
	}
	_, _, err = m.Call(context.Background(), "nope", nil, CallOptions{})
	wantCode(t, err, tool.CodeInvalidInput)
}

func TestLoopTimesOut(t *testing.T) {
	const timeout = 500 * time.Millisecond
	m := compile(t, "hostile/loop", nil, Limits{Timeout: timeout})
	start := time.Now()
	_, _, err := m.Call(context.Background(), "call", []byte(`{}`), CallOptions{})
	took := time.Since(start)
	wantCode(t, err, tool.CodeTimeout)
	slack := deadlineSlack()
	if took < timeout || took > timeout+slack {
		t.Errorf("loop stopped after %v, want %v + at most %v", took, timeout, slack)
	}
	t.Logf("loop stopped after %v (deadline %v)", took, timeout)

	// Cancelling the caller's context is a Go error, not a result.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err = m.Call(ctx, "call", nil, CallOptions{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled call: %v", err)
	}
}

func TestMembomb(t *testing.T) {
	m := compile(t, "hostile/membomb", nil, Limits{MemoryPages: 1024, Timeout: slowUnderRace(30 * time.Second)})
	start := time.Now()
	_, info, err := m.Call(context.Background(), "call", []byte(`{}`), CallOptions{})
	e := wantCode(t, err, tool.CodeWasmLimit, tool.CodeWasmTrap)
	if !strings.Contains(e.Message, "memory") {
		t.Errorf("message %q does not say memory", e.Message)
	}
	t.Logf("membomb: %v after %v (stderr %d bytes)", e, time.Since(start), len(info.Stderr))
}

func TestRecursion(t *testing.T) {
	m := compile(t, "hostile/recursion", nil, Limits{Timeout: slowUnderRace(30 * time.Second)})
	_, _, err := m.Call(context.Background(), "call", []byte(`{}`), CallOptions{})
	e := wantCode(t, err, tool.CodeWasmTrap, tool.CodeWasmLimit)
	t.Logf("recursion: %v", e)
}

func TestTraps(t *testing.T) {
	m := compile(t, "hostile/trap", nil, Limits{Timeout: time.Second})
	for _, tt := range []struct{ export, msg string }{
		{"call", "deliberate panic"},
		{"unreachable", "unreachable"},
		{"nilderef", "nil"},
		{"exit", "code 3"},
	} {
		t.Run(tt.export, func(t *testing.T) {
			_, _, err := m.Call(context.Background(), tt.export, []byte(`{}`), CallOptions{})
			e := wantCode(t, err, tool.CodeWasmTrap)
			if !strings.Contains(e.Message, tt.msg) {
				t.Errorf("message %q does not contain %q", e.Message, tt.msg)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	ctx := context.Background()
	for name, wasm := range map[string][]byte{
		"badimport":   fixture(t, "hostile/badimport"),
		"garbage":     []byte("this is not a wasm module at all"),
		"bad body":    []byte("\x00asm\x01\x00\x00\x00garbage"),
		"empty":       nil,
		"bad version": []byte("\x00asm\x02\x00\x00\x00"),
	} {
		t.Run(name, func(t *testing.T) {
			m, err := engine(t).Compile(ctx, wasm, CompileOptions{})
			if err == nil {
				m.Close(ctx)
				t.Fatal("compiled")
			}
			if !errors.Is(err, ErrLoad) {
				t.Fatalf("want ErrLoad, got %v", err)
			}
			if name == "badimport" && !strings.Contains(err.Error(), "warden.nonexistent") {
				t.Errorf("load error does not name the import: %v", err)
			}
			t.Log(err)
		})
	}
	// A module needing more initial memory than its limit does not load.
	_, err := engine(t).Compile(ctx, fixture(t, "examples/textstats"), CompileOptions{Limits: Limits{MemoryPages: 2}})
	if !errors.Is(err, ErrLoad) {
		t.Errorf("tiny memory limit: %v", err)
	}
}

func TestHugeOutput(t *testing.T) {
	ctx := context.Background()
	// 64 MiB of output (4 MiB under -race, where go-pdk's copy into
	// Extism memory, one host call per 8 bytes, costs ~0.3 s per MiB and
	// would eat the default deadline): 4 times the cap or more either way.
	huge := map[string]string(nil)
	if raceEnabled {
		huge = map[string]string{"bytes": fmt.Sprint(4 << 20)}
	}
	m := compile(t, "hostile/hugeoutput", huge, Limits{MemoryPages: 4096, MaxOutput: 1 << 20})
	_, _, err := m.Call(ctx, "call", nil, CallOptions{})
	t.Logf("huge output: %v", wantCode(t, err, tool.CodeWasmLimit))

	m = compile(t, "hostile/hugeoutput", map[string]string{"bytes": "1048577"}, Limits{MaxOutput: 1 << 20})
	_, _, err = m.Call(ctx, "call", nil, CallOptions{})
	wantCode(t, err, tool.CodeWasmLimit)

	m = compile(t, "hostile/hugeoutput", map[string]string{"bytes": "1048576"}, Limits{MaxOutput: 1 << 20})
	out, _, err := m.Call(ctx, "call", nil, CallOptions{})
	if err != nil || len(out) != 1<<20 {
		t.Fatalf("exactly the cap: %d bytes, %v", len(out), err)
	}

	// 64 MiB (16 under -race) to stdout: the capture keeps DefaultMaxLog
	// and counts the rest.
	written := int64(64 << 20)
	if raceEnabled {
		written = 16 << 20
	}
	m = compile(t, "hostile/hugeoutput", map[string]string{"bytes": fmt.Sprint(written)}, Limits{})
	start := time.Now()
	out, info, err := m.Call(ctx, "stdout", nil, CallOptions{})
	if err != nil || string(out) != "wrote to stdout" {
		t.Fatalf("stdout: %q, %v", out, err)
	}
	t.Logf("%d MiB to stdout in %v", written>>20, time.Since(start))
	if len(info.Stdout) != DefaultMaxLog || info.StdoutDropped != written-int64(DefaultMaxLog) {
		t.Errorf("captured %d, dropped %d", len(info.Stdout), info.StdoutDropped)
	}
}

func TestInputTooLarge(t *testing.T) {
	m := compile(t, "examples/textstats", nil, Limits{MemoryPages: 64}) // 4 MiB
	_, _, err := m.Call(context.Background(), "call", bytes.Repeat([]byte("a"), 5<<20), CallOptions{})
	wantCode(t, err, tool.CodeWasmLimit)
	// Fits the limit, not the kernel's memory once its own pages are
	// counted: still WASM_LIMIT, never a silent empty input.
	_, _, err = m.Call(context.Background(), "call", bytes.Repeat([]byte("a"), 4<<20-100), CallOptions{})
	t.Log(wantCode(t, err, tool.CodeWasmLimit))
	// A 1 MiB input with a 4 MiB limit: the kernel takes it, the Go guest
	// (which copies it into its own heap) runs out of memory.
	_, _, err = m.Call(context.Background(), "call", bytes.Repeat([]byte("a"), 1<<20), CallOptions{})
	t.Log(wantCode(t, err, tool.CodeWasmLimit, tool.CodeWasmTrap))
}

type probeReport struct {
	Could          []string  `json:"could"`
	Random         [2]string `json:"random"`
	RandomDiffers  bool      `json:"random_differs"`
	ClockUnixNano  [2]int64  `json:"clock_unix_nano"`
	ClockAdvances  bool      `json:"clock_advances"`
	ClockPlausible bool      `json:"clock_plausible"`
}

const (
	probeChildEnv = "WARDEN_WASM_PROBE_CHILD"
	stdoutMarker  = "WASIPROBE-STDOUT-MARKER"
	stderrMarker  = "WASIPROBE-STDERR-MARKER"
)

// TestWASIProbe runs the probe in a child process of the test binary (so
// the check covers the real file descriptors 1 and 2), twice, and checks
// that nothing was reachable, that the markers were captured but never
// reached the child's stdout or stderr, and that clock and randomness are
// real.
func TestWASIProbe(t *testing.T) {
	if os.Getenv(probeChildEnv) != "" {
		probeChild(t)
		return
	}
	report := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestWASIProbe$", "-test.v")
	cmd.Env = append(os.Environ(), probeChildEnv+"="+report, "WARDEN_WASM_PROBE_MODULE="+wasmfixture.Path(t, "hostile/wasiprobe", false), "HOME=/root-secret", "PROBE_SECRET=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s\n%s", err, stdout.Bytes(), stderr.Bytes())
	}
	for _, marker := range []string{stdoutMarker, stderrMarker} {
		if bytes.Contains(stdout.Bytes(), []byte(marker)) || bytes.Contains(stderr.Bytes(), []byte(marker)) {
			t.Errorf("%s reached the host's terminal:\n%s\n%s", marker, stdout.Bytes(), stderr.Bytes())
		}
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("child wrote no report: %v\n%s", err, stdout.Bytes())
	}
	var reports [2]probeReport
	if err := json.Unmarshal(b, &reports); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, r := range reports {
		if len(r.Could) != 0 {
			t.Errorf("call %d: the guest could %v", i, r.Could)
		}
		if !r.RandomDiffers || !r.ClockAdvances || !r.ClockPlausible {
			t.Errorf("call %d: fake clock or randomness: %+v", i, r)
		}
		if d := now.Sub(time.Unix(0, r.ClockUnixNano[0])); d < 0 || d > time.Minute {
			t.Errorf("call %d: guest clock %v off from now by %v", i, time.Unix(0, r.ClockUnixNano[0]), d)
		}
	}
	if reports[0].Random == reports[1].Random {
		t.Errorf("two instances read the same random bytes %v", reports[0].Random)
	}
}

func probeChild(t *testing.T) {
	wasm, err := os.ReadFile(os.Getenv("WARDEN_WASM_PROBE_MODULE"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, err := engine(t).Compile(ctx, wasm, CompileOptions{Limits: Limits{Timeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	var reports []json.RawMessage
	for range 2 {
		out, info, err := m.Call(ctx, "call", nil, CallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(info.Stdout, []byte(stdoutMarker)) || !bytes.Contains(info.Stderr, []byte(stderrMarker)) {
			t.Errorf("markers not captured: stdout %q stderr %q", info.Stdout, info.Stderr)
		}
		reports = append(reports, out)
	}
	b, _ := json.Marshal(reports)
	if err := os.WriteFile(os.Getenv(probeChildEnv), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestRefusesWASIOutputEnv(t *testing.T) {
	m := compile(t, "examples/textstats", nil, Limits{})
	t.Setenv(envWASIOutput, "1")
	_, _, err := m.Call(context.Background(), "call", []byte(`{"text":"x"}`), CallOptions{})
	if e := wantCode(t, err, tool.CodeInternal); !strings.Contains(e.Message, envWASIOutput) {
		t.Errorf("message %q", e.Message)
	}
}

func TestCacheDir(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "cache")
	e, err := NewEngine(ctx, EngineOptions{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	e.Close(ctx)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("created cache dir: %v %v", fi.Mode(), err)
	}

	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	if _, err := NewEngine(ctx, EngineOptions{CacheDir: open}); !errors.Is(err, ErrUnsafeCacheDir) {
		t.Errorf("world-writable dir: %v", err)
	}
	os.Chmod(open, 0o770)
	if _, err := NewEngine(ctx, EngineOptions{CacheDir: open}); !errors.Is(err, ErrUnsafeCacheDir) {
		t.Errorf("group-writable dir: %v", err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if _, err := NewEngine(ctx, EngineOptions{CacheDir: link}); !errors.Is(err, ErrUnsafeCacheDir) {
		t.Errorf("symlink: %v", err)
	}

	// wazero's per-version directory inside a private cache, symlinked to
	// a directory anyone can write: wazero would follow it.
	base := t.TempDir()
	evil := filepath.Join(base, "evil")
	if err := os.Mkdir(evil, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(evil, 0o777)
	cache := filepath.Join(base, "cache")
	if err := os.Mkdir(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(evil, filepath.Join(cache, "wazero-v1-"+goruntime.GOARCH+"-"+goruntime.GOOS)); err != nil {
		t.Fatal(err)
	}
	if _, err := NewEngine(ctx, EngineOptions{CacheDir: cache}); !errors.Is(err, ErrUnsafeCacheDir) {
		t.Errorf("symlinked version directory: %v", err)
	}
	// A compiled module file others can write.
	cache2 := filepath.Join(base, "cache2")
	if e, err := NewEngine(ctx, EngineOptions{CacheDir: cache2}); err != nil {
		t.Fatal(err)
	} else {
		m, err := e.Compile(ctx, command(cmdHello...), CompileOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m.Close(ctx)
		e.Close(ctx)
	}
	var files []string
	filepath.WalkDir(cache2, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) == 0 {
		t.Fatal("nothing cached")
	}
	if _, err := NewEngine(ctx, EngineOptions{CacheDir: cache2}); err != nil {
		t.Fatalf("a cache as wazero left it: %v", err)
	}
	os.Chmod(files[0], 0o666)
	if _, err := NewEngine(ctx, EngineOptions{CacheDir: cache2}); !errors.Is(err, ErrUnsafeCacheDir) {
		t.Errorf("world-writable cached module: %v", err)
	}
	// A private cache under a directory anyone can write (no sticky bit):
	// another user could rename it away and put theirs in its place.
	pub := filepath.Join(base, "pub")
	if err := os.Mkdir(pub, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(pub, 0o777)
	if _, err := NewEngine(ctx, EngineOptions{CacheDir: filepath.Join(pub, "cache")}); !errors.Is(err, ErrUnsafeCacheDir) {
		t.Errorf("under a world-writable parent: %v", err)
	}
	// With the sticky bit (as /tmp has), others cannot rename it.
	os.Chmod(pub, 0o777|os.ModeSticky)
	if _, err := NewEngine(ctx, EngineOptions{CacheDir: filepath.Join(pub, "cache")}); err != nil {
		t.Errorf("under a sticky world-writable parent: %v", err)
	}
}

// TestCacheDirRemovesAbandonedTemps: a compile killed while wazero wrote
// its result leaves <key>.<random>.tmp in the cache's version directory,
// which nothing else removes. Opening the cache while another process
// uses it (an engine holds its lock) removes those untouched for an hour,
// and leaves a fresh one (that process may be writing it now), the
// cache's entries and files not of wazero's naming alone; opening it
// alone removes every temporary file.
func TestCacheDirRemovesAbandonedTemps(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "cache")
	open := func() *Engine {
		t.Helper()
		e, err := NewEngine(ctx, EngineOptions{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	first := open() // another process, using the cache
	ver := filepath.Join(dir, "wazero-v1-"+goruntime.GOARCH+"-"+goruntime.GOOS)
	if err := os.MkdirAll(ver, 0o700); err != nil {
		t.Fatal(err)
	}
	key := strings.Repeat("ab12", 16)
	abandoned := filepath.Join(ver, key+".123456789.tmp")
	fresh := filepath.Join(ver, strings.Repeat("cd34", 16)+".987654321.tmp")
	entry := filepath.Join(ver, key)
	other := filepath.Join(ver, "notes.tmp")
	for _, p := range []string{abandoned, fresh, entry, other} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	for _, p := range []string{abandoned, entry, other} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// Written now, whatever the clock does while the test runs.
	if err := os.Chtimes(fresh, time.Now().Add(time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	there := func(p string) bool {
		_, err := os.Lstat(p)
		return err == nil
	}
	open().Close(ctx) // not alone
	if there(abandoned) {
		t.Errorf("the abandoned temporary file is still there")
	}
	for _, p := range []string{fresh, entry, other} {
		if !there(p) {
			t.Errorf("%s was removed while another engine used the cache", filepath.Base(p))
		}
	}
	first.Close(ctx)
	if !cacheLocks {
		return
	}
	open().Close(ctx) // alone: no one is writing
	if there(fresh) {
		t.Errorf("a temporary file is left by an engine alone on the cache")
	}
	for _, p := range []string{entry, other} {
		if !there(p) {
			t.Errorf("%s was removed", filepath.Base(p))
		}
	}
}
