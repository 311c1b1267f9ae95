package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wardenrt/warden/internal/wasmfixture"
)

// benchText is the textstats input of BenchmarkFreshProcess.
const benchText = "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs on. " +
	"A second paragraph follows, with a few more words to count and rank."

// BenchmarkFreshProcess (issue 4, benchmark a): one fresh process per
// iteration calling the pure textstats example with a warm on-disk
// compilation cache — `warden call` (store, policy, gate, audit, pin check,
// compile from cache, call) against a minimal Extism host program
// (testdata/minihost) using the same cache directory. The parent logs the
// ratio; the issue aims at ≤ 1.3×.
func BenchmarkFreshProcess(b *testing.B) {
	if testing.Short() {
		b.Skip("builds binaries and wasm guests; skipped with -short")
	}
	dir := b.TempDir()
	warden := filepath.Join(dir, "warden")
	minihost := filepath.Join(dir, "minihost")
	goBuild(b, warden, ".")
	goBuild(b, minihost, "./testdata/minihost")

	home := filepath.Join(dir, "home")
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		b.Fatal(err)
	}
	wardenCmd := func(args ...string) *exec.Cmd {
		cmd := exec.Command(warden, append([]string{"--home", home, "--workspace", ws}, args...)...)
		cmd.Env = append(os.Environ(), "WARDEN_LOG_LEVEL=warn")
		return cmd
	}
	mustRun(b, wardenCmd("tool", "install", wasmfixture.Stage(b, "examples/textstats", "", false)))
	args := `{"text":"` + benchText + `"}`
	wasmFile := filepath.Join(home, "tools", "textstats.wasm")
	cacheDir := filepath.Join(home, "cache")
	// Warm the cache (and check both work) with one call each.
	if out := mustRun(b, wardenCmd("call", "textstats", "--args", args)); !bytes.Contains(out, []byte(`"words": 29`)) {
		b.Fatalf("warden call: %s", out)
	}
	if out := mustRun(b, exec.Command(minihost, wasmFile, cacheDir, "call", args)); !bytes.Contains(out, []byte(`"words":29`)) {
		b.Fatalf("minihost: %s", out)
	}

	var perOp [2]time.Duration
	b.Run("warden-call-textstats", func(b *testing.B) {
		for b.Loop() {
			mustRun(b, wardenCmd("call", "textstats", "--args", args))
		}
		perOp[0] = b.Elapsed() / time.Duration(b.N)
	})
	b.Run("extism-host-textstats", func(b *testing.B) {
		for b.Loop() {
			mustRun(b, exec.Command(minihost, wasmFile, cacheDir, "call", args))
		}
		perOp[1] = b.Elapsed() / time.Duration(b.N)
	})
	if perOp[0] > 0 && perOp[1] > 0 {
		b.Logf("fresh process, warm cache: warden call %v, minimal Extism host %v: %.2f× (aim ≤ 1.3×)",
			perOp[0].Round(100*time.Microsecond), perOp[1].Round(100*time.Microsecond), float64(perOp[0])/float64(perOp[1]))
	}
	// The same, interleaved (A B A B …), medians: robust against the load
	// of the machine drifting between the two sub-benchmarks.
	const pairs = 15
	var w, x []time.Duration
	for range pairs {
		start := time.Now()
		mustRun(b, wardenCmd("call", "textstats", "--args", args))
		w = append(w, time.Since(start))
		start = time.Now()
		mustRun(b, exec.Command(minihost, wasmFile, cacheDir, "call", args))
		x = append(x, time.Since(start))
	}
	mw, mx := median(w), median(x)
	b.Logf("interleaved medians of %d pairs: warden call %v, minimal Extism host %v: %.2f×",
		pairs, mw.Round(100*time.Microsecond), mx.Round(100*time.Microsecond), float64(mw)/float64(mx))
}

// BenchmarkProcessStart (issue 18, aim 1): one fresh process per
// iteration, with its baseline built in the same run —
//
//   - hello-world: a Go program that prints a line (testdata/hello), the
//     floor of any Go process here;
//   - version: `warden version`;
//   - call-get_info: `warden call system` get_info in a home of its own
//     (default policy, no modules), with its durable audit writes.
//
// Each sub-benchmark also reports cpu-ns/op, the processes' user and
// system time, which the load of the machine moves less than the wall
// clock. The aims are version ≤ 3 ms and call-get_info ≤ 8 ms.
func BenchmarkProcessStart(b *testing.B) {
	if testing.Short() {
		b.Skip("builds binaries; skipped with -short")
	}
	dir := b.TempDir()
	warden := filepath.Join(dir, "warden")
	hello := filepath.Join(dir, "hello")
	goBuild(b, warden, ".")
	goBuild(b, hello, "./testdata/hello")
	home := filepath.Join(dir, "home")
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		b.Fatal(err)
	}
	commands := []struct {
		name string
		cmd  func() *exec.Cmd
		want string
	}{
		{"hello-world", func() *exec.Cmd { return exec.Command(hello) }, "hello ("},
		{"version", func() *exec.Cmd { return exec.Command(warden, "version") }, "warden "},
		{"call-get_info", func() *exec.Cmd {
			cmd := exec.Command(warden, "--home", home, "--workspace", ws, "call", "system", "--args", `{"operation":"get_info"}`)
			cmd.Env = append(os.Environ(), "WARDEN_LOG_LEVEL=warn")
			return cmd
		}, `"success": true`},
	}
	for _, c := range commands {
		if out := mustRun(b, c.cmd()); !bytes.Contains(out, []byte(c.want)) {
			b.Fatalf("%s: %s", c.name, out)
		}
	}
	for _, c := range commands {
		b.Run(c.name, func(b *testing.B) {
			var cpu time.Duration
			for b.Loop() {
				cmd := c.cmd()
				mustRun(b, cmd)
				cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
	// The same, interleaved (one of each in turn), medians: robust
	// against the load of the machine drifting between sub-benchmarks.
	const rounds = 21
	took := make([][]time.Duration, len(commands))
	for range rounds {
		for i, c := range commands {
			start := time.Now()
			mustRun(b, c.cmd())
			took[i] = append(took[i], time.Since(start))
		}
	}
	line := fmt.Sprintf("interleaved medians of %d rounds:", rounds)
	for i, c := range commands {
		line += fmt.Sprintf(" %s %v", c.name, median(took[i]).Round(10*time.Microsecond))
	}
	b.Log(line)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// goBuild builds the package pkg (relative to this directory) into out.
func goBuild(tb testing.TB, out, pkg string) {
	tb.Helper()
	cmd := exec.Command("go", "build", "-tags", "urfave_cli_no_docs", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

func mustRun(tb testing.TB, cmd *exec.Cmd) []byte {
	tb.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("%s: %v\n%s%s", strings.Join(cmd.Args, " "), err, out, stderr.Bytes())
	}
	return out
}

// BenchmarkFreshProcessServlet (issue 14): the same comparison for a
// published servlet (compat/bsky, standard Go, ~3.3 MB) installed with a
// prefix — `warden call bsky_search` (schema as warden enforces it, the
// guest gets its own tool name) against the minimal Extism host calling
// the servlet's call export with the same input, on the same warm cache.
func BenchmarkFreshProcessServlet(b *testing.B) {
	if testing.Short() {
		b.Skip("builds binaries and wasm guests; skipped with -short")
	}
	dir := b.TempDir()
	warden := filepath.Join(dir, "warden")
	minihost := filepath.Join(dir, "minihost")
	goBuild(b, warden, ".")
	goBuild(b, minihost, "./testdata/minihost")
	home := filepath.Join(dir, "home")
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		b.Fatal(err)
	}
	wardenCmd := func(args ...string) *exec.Cmd {
		cmd := exec.Command(warden, append([]string{"--home", home, "--workspace", ws}, args...)...)
		cmd.Env = append(os.Environ(), "WARDEN_LOG_LEVEL=warn")
		return cmd
	}
	mustRun(b, wardenCmd("tool", "install", wasmfixture.Stage(b, "compat/bsky", "", false), "--prefix", "bsky_", "--alias", "feed.timeline=bsky_timeline"))
	args := `{"q":"wasm","limit":5}`
	input := `{"params":{"name":"search","arguments":` + args + `}}`
	wasmFile := filepath.Join(home, "tools", "bsky.wasm")
	cacheDir := filepath.Join(home, "cache")
	if out := mustRun(b, wardenCmd("call", "bsky_search", "--args", args)); !bytes.Contains(out, []byte(`first post about wasm`)) {
		b.Fatalf("warden call: %s", out)
	}
	if out := mustRun(b, exec.Command(minihost, wasmFile, cacheDir, "call", input)); !bytes.Contains(out, []byte(`first post about wasm`)) {
		b.Fatalf("minihost: %s", out)
	}
	var perOp [2]time.Duration
	b.Run("warden-call-servlet", func(b *testing.B) {
		for b.Loop() {
			mustRun(b, wardenCmd("call", "bsky_search", "--args", args))
		}
		perOp[0] = b.Elapsed() / time.Duration(b.N)
	})
	b.Run("extism-host-servlet", func(b *testing.B) {
		for b.Loop() {
			mustRun(b, exec.Command(minihost, wasmFile, cacheDir, "call", input))
		}
		perOp[1] = b.Elapsed() / time.Duration(b.N)
	})
	if perOp[0] > 0 && perOp[1] > 0 {
		b.Logf("fresh process, warm cache, servlet: warden call %v, minimal Extism host %v: %.2f× (aim ≤ 1.3×)",
			perOp[0].Round(100*time.Microsecond), perOp[1].Round(100*time.Microsecond), float64(perOp[0])/float64(perOp[1]))
	}
	const pairs = 15
	var w, x []time.Duration
	for range pairs {
		start := time.Now()
		mustRun(b, wardenCmd("call", "bsky_search", "--args", args))
		w = append(w, time.Since(start))
		start = time.Now()
		mustRun(b, exec.Command(minihost, wasmFile, cacheDir, "call", input))
		x = append(x, time.Since(start))
	}
	mw, mx := median(w), median(x)
	b.Logf("interleaved medians of %d pairs: warden call %v, minimal Extism host %v: %.2f×",
		pairs, mw.Round(100*time.Microsecond), mx.Round(100*time.Microsecond), float64(mw)/float64(mx))
}
