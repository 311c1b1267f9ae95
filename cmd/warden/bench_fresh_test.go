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

// freshBench is one comparison of BenchmarkFreshProcess*: `warden call`
// of an installed module against the minimal Extism host (testdata/
// minihost) calling the same module with the same input, on the same warm
// on-disk compilation cache, each a fresh process per iteration.
type freshBench struct {
	name string
	// install stages the module (and its sidecar) in a temp dir and
	// returns the arguments of `warden tool install`.
	install func(b *testing.B) []string
	module  string // the installed module's name
	tool    string // the tool `warden call` calls
	args    string // its --args
	export  string // what minihost calls
	input   string // with this input
	want    string // what both outputs contain (minihost's compact JSON)
}

// run builds both programs, installs the module, warms the cache with one
// call each, then times both as sub-benchmarks and interleaved (A B A B …,
// medians, robust against the machine's load drifting). The aim is ≤ 1.3×.
func (fb freshBench) run(b *testing.B) {
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
	wardenCall := func() *exec.Cmd {
		cmd := exec.Command(warden, "--home", home, "--workspace", ws, "call", fb.tool, "--args", fb.args)
		cmd.Env = append(os.Environ(), "WARDEN_LOG_LEVEL=warn")
		return cmd
	}
	install := exec.Command(warden, append([]string{"--home", home, "--workspace", ws, "tool", "install"}, fb.install(b)...)...)
	install.Env = append(os.Environ(), "WARDEN_LOG_LEVEL=warn")
	mustRun(b, install)
	wasmFile := filepath.Join(home, "tools", fb.module+".wasm")
	cacheDir := filepath.Join(home, "cache")
	host := func() *exec.Cmd { return exec.Command(minihost, wasmFile, cacheDir, fb.export, fb.input) }
	// Warm the cache (and check both work) with one call each.
	if out := mustRun(b, wardenCall()); !bytes.Contains(compact(out), compact([]byte(fb.want))) {
		b.Fatalf("warden call: %s", out)
	}
	if out := mustRun(b, host()); !bytes.Contains(out, []byte(fb.want)) {
		b.Fatalf("minihost: %s", out)
	}
	var perOp [2]time.Duration
	b.Run("warden-call-"+fb.name, func(b *testing.B) {
		for b.Loop() {
			mustRun(b, wardenCall())
		}
		perOp[0] = b.Elapsed() / time.Duration(b.N)
	})
	b.Run("extism-host-"+fb.name, func(b *testing.B) {
		for b.Loop() {
			mustRun(b, host())
		}
		perOp[1] = b.Elapsed() / time.Duration(b.N)
	})
	if perOp[0] > 0 && perOp[1] > 0 {
		b.Logf("fresh process, warm cache, %s: warden call %v, minimal Extism host %v: %.2f× (aim ≤ 1.3×)", fb.name,
			perOp[0].Round(100*time.Microsecond), perOp[1].Round(100*time.Microsecond), float64(perOp[0])/float64(perOp[1]))
	}
	// The CPU time the processes used (user + system) says the same
	// with less of the machine's load in it.
	const pairs = 15
	var w, x, wc, xc []time.Duration
	for range pairs {
		cmd := wardenCall()
		start := time.Now()
		mustRun(b, cmd)
		w, wc = append(w, time.Since(start)), append(wc, cpuTime(cmd))
		cmd = host()
		start = time.Now()
		mustRun(b, cmd)
		x, xc = append(x, time.Since(start)), append(xc, cpuTime(cmd))
	}
	mw, mx, mwc, mxc := median(w), median(x), median(wc), median(xc)
	b.Logf("interleaved medians of %d pairs, %s: warden call %v (CPU %v), minimal Extism host %v (CPU %v): %.2f× (CPU %.2f×)", pairs, fb.name,
		mw.Round(100*time.Microsecond), mwc.Round(100*time.Microsecond), mx.Round(100*time.Microsecond), mxc.Round(100*time.Microsecond),
		float64(mw)/float64(mx), float64(mwc)/float64(mxc))
}

// cpuTime is the user and system CPU time of cmd's process, run.
func cpuTime(cmd *exec.Cmd) time.Duration {
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// compact drops the spaces and newlines of warden's indented output, so
// it compares with minihost's compact JSON.
func compact(b []byte) []byte {
	return bytes.NewBuffer(bytes.Map(func(r rune) rune {
		if r == ' ' || r == '\n' {
			return -1
		}
		return r
	}, b)).Bytes()
}

// BenchmarkFreshProcess (issues 4 and 18): one fresh process per
// iteration calling the pure textstats example with a warm on-disk
// compilation cache — `warden call` (store, policy, gate, audit, pin check,
// compile from cache, call) against a minimal Extism host program using
// the same cache directory.
func BenchmarkFreshProcess(b *testing.B) {
	freshBench{
		name:    "textstats",
		install: func(b *testing.B) []string { return []string{wasmfixture.Stage(b, "examples/textstats", "", false)} },
		module:  "textstats", tool: "textstats", args: `{"text":"` + benchText + `"}`,
		export: "call", input: `{"text":"` + benchText + `"}`, want: `"words":29`,
	}.run(b)
}

// BenchmarkFreshProcessPlugin (issue 18): the same for a published-size
// Extism plugin (compat/count_vowels: standard Go with go-pdk, about
// 2 MB; raw text in, installed with a two-line sidecar).
func BenchmarkFreshProcessPlugin(b *testing.B) {
	freshBench{
		name: "count_vowels",
		install: func(b *testing.B) []string {
			file := wasmfixture.Stage(b, "compat/count_vowels", "", false)
			sc := "description: Count the vowels in a text.\ninput: {from: text}\n"
			if err := os.WriteFile(strings.TrimSuffix(file, ".wasm")+".tool.yaml", []byte(sc), 0o600); err != nil {
				b.Fatal(err)
			}
			return []string{file}
		},
		module: "count_vowels", tool: "count_vowels", args: `{"text":"` + benchText + `"}`,
		export: "count_vowels", input: benchText, want: `"count":38`,
	}.run(b)
}

// BenchmarkFreshProcessServlet (issue 14): the same for a published
// servlet (compat/bsky, standard Go, ~3.3 MB) installed with a prefix —
// `warden call bsky_search` (schema as warden enforces it, the guest gets
// its own tool name) against the minimal Extism host calling the
// servlet's call export with the same input.
func BenchmarkFreshProcessServlet(b *testing.B) {
	args := `{"q":"wasm","limit":5}`
	freshBench{
		name: "servlet",
		install: func(b *testing.B) []string {
			return []string{wasmfixture.Stage(b, "compat/bsky", "", false), "--prefix", "bsky_", "--alias", "feed.timeline=bsky_timeline"}
		},
		module: "bsky", tool: "bsky_search", args: args,
		export: "call", input: `{"params":{"name":"search","arguments":` + args + `}}`, want: `first post about wasm`,
	}.run(b)
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
