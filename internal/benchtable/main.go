// Command benchtable runs the benchmarks of issue 18 — what users feel of
// warden, each beside a baseline measured in the same run — and prints one
// table: what, warden, baseline, ratio, aim.
//
//	go run ./internal/benchtable [-count 1] [-benchtime 1s] [-only REGEXP]
//
// (`task bench`). The convention: a row pairs two sub-benchmarks of one
// Benchmark function, the warden side and its baseline, named in full
// (BenchmarkShellTrue/runProc-sandboxed beside BenchmarkShellTrue/exec.Command,
// without the -GOMAXPROCS suffix go test adds). Being siblings, they run in
// one `go test` process, one after the other, on one state of the machine;
// benchtable refuses a row whose two sides are not. A new benchmark for the
// table puts its baseline in the same Benchmark function, as a
// sub-benchmark named for what it is (exec.Command, os.ReadFile,
// hello-world), and gets a row in rows below. Each package's benchmarks run
// in one `go test -v -run '^$' -bench … -benchmem -count N` (-v: what the
// benchmarks log, such as interleaved medians, is shown); with -count
// above 1 a side's figure is the median of its runs.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// row is one line of the table.
type row struct {
	what     string
	pkg      string // as go test names it: ./cmd/warden
	warden   string // Benchmark/sub…
	baseline string // a sibling of warden
	aim      string
}

// rows are the table, in its order.
var rows = []row{
	{"`warden version` as a process", "./cmd/warden", "BenchmarkProcessStart/version", "BenchmarkProcessStart/hello-world", "≤ 3 ms"},
	{"`warden call system get_info` as a process (durable audit)", "./cmd/warden", "BenchmarkProcessStart/call-get_info", "BenchmarkProcessStart/version", "≤ 8 ms"},
	{"fresh `warden call` of textstats, warm cache", "./cmd/warden", "BenchmarkFreshProcess/warden-call-textstats", "BenchmarkFreshProcess/extism-host-textstats", "≤ 1.3×"},
	{"fresh `warden call` of a published-size plugin (count_vowels, 2.4 MB), warm cache", "./cmd/warden", "BenchmarkFreshProcessPlugin/warden-call-count_vowels", "BenchmarkFreshProcessPlugin/extism-host-count_vowels", "≤ 1.3×"},
	{"fresh `warden call` of a published servlet, warm cache", "./cmd/warden", "BenchmarkFreshProcessServlet/warden-call-servlet", "BenchmarkFreshProcessServlet/extism-host-servlet", "≤ 1.3×"},
	{"a program started under the sandbox (`true`), small launcher installed", "./builtin/shell", "BenchmarkShellTrue/runProc-small-launcher", "BenchmarkShellTrue/exec.Command", "≤ 2 ms or ≤ 2×"},
	{"the same, 5 ms of a script's own work between programs (untimed; the pool refills)", "./builtin/shell", "BenchmarkShellTrue/runProc-small-launcher-paced", "BenchmarkShellTrue/exec.Command", "—"},
	{"the same, no pool: a launcher started for each program", "./builtin/shell", "BenchmarkShellTrue/runProc-small-launcher-nopool", "BenchmarkShellTrue/exec.Command", "—"},
	{"the same, warden's binary re-executed (no launcher installed)", "./builtin/shell", "BenchmarkShellTrue/runProc-sandboxed", "BenchmarkShellTrue/exec.Command", "—"},
	{"`warden_call` round trip from a guest (`system get_info`)", "./hostfuncs", "BenchmarkWardenCall/guest", "BenchmarkWardenCall/gate", "≤ 60 µs or ≤ 3×"},
	{"`fs_read` of 4 KiB of code through the gate", "./builtin/fs", "BenchmarkFSRead/code-4KiB/fs_read", "BenchmarkFSRead/code-4KiB/os.ReadFile", "≤ 3×"},
	{"`fs_read` of 1 MiB of code through the gate", "./builtin/fs", "BenchmarkFSRead/code-1MiB/fs_read", "BenchmarkFSRead/code-1MiB/os.ReadFile", "≤ 2×"},
	{"`fs_read` of 4 KiB of env files through the gate", "./builtin/fs", "BenchmarkFSRead/env-4KiB/fs_read", "BenchmarkFSRead/env-4KiB/os.ReadFile", "≤ 3×"},
	{"gate overhead on `system get_info`, no durable write", "./builtin/system", "BenchmarkSystemGetInfo/gate", "BenchmarkSystemGetInfo/direct", "difference ≤ 15 µs"},
	{"memory search, 100k entries, frequent words (zipf)", "./store", "BenchmarkSearchMemory100k/zipf", "BenchmarkSearchMemory100k/uniform", "≤ 20 ms at 1M entries"},
	// Aim 7 at 100,000 records (WARDEN_SCALE=1000000 for the issue's
	// million; memory search at a million: BenchmarkSearchMemoryScale).
	{"`audit ls --tool T --last 20`, a rare tool: the index beside the scan it replaced", "./store", "BenchmarkAuditList/tool-rare-last20/index", "BenchmarkAuditList/tool-rare-last20/scan", "≤ 50 ms at 1M records"},
	{"`audit ls --tool T --last 20`, the commonest tool", "./store", "BenchmarkAuditList/tool-common-last20/index", "BenchmarkAuditList/tool-common-last20/scan", "≤ 50 ms at 1M records"},
	{"`audit ls --run ID` (50 records)", "./store", "BenchmarkAuditList/run/index", "BenchmarkAuditList/run/scan", "≤ 50 ms at 1M records"},
	{"a 500-step agent run, its record written after every step: in parts beside rewriting it whole", "./runtime/agent", "BenchmarkRunRecord500/parts", "BenchmarkRunRecord500/whole", "step 500 ≤ 1.5× step 1 (its log: ratio)"},
}

func main() {
	count := flag.Int("count", 1, "runs of each benchmark (go test -count); a figure is the median")
	benchtime := flag.String("benchtime", "1s", "go test -benchtime")
	only := flag.String("only", "", "run only the rows whose benchmarks match this regexp")
	flag.Parse()
	selected, err := selectRows(rows, *only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(2)
	}
	results := map[string][]result{}
	failed := false
	for _, pkg := range packages(selected) {
		args := []string{"test", "-v", "-run", "^$", "-bench", benchPattern(selected, pkg), "-benchmem",
			"-count", strconv.Itoa(*count), "-benchtime", *benchtime, "-timeout", "30m", pkg}
		fmt.Fprintf(os.Stderr, "== go %s\n", strings.Join(args, " "))
		start := time.Now()
		got, err := runBench(exec.Command("go", args...), os.Stderr)
		fmt.Fprintf(os.Stderr, "== %s: %v\n", pkg, time.Since(start).Round(time.Second))
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchtable: %s: %v\n", pkg, err)
			failed = true
		}
		for name, rs := range got {
			results[pkg+" "+name] = append(results[pkg+" "+name], rs...)
		}
	}
	printTable(os.Stdout, selected, results, *count)
	if failed {
		os.Exit(1)
	}
}

// selectRows checks every row's pairing and keeps those matching only.
func selectRows(all []row, only string) ([]row, error) {
	re, err := regexp.Compile(only)
	if err != nil {
		return nil, fmt.Errorf("-only: %v", err)
	}
	var out []row
	for _, r := range all {
		wb, _, _ := strings.Cut(r.warden, "/")
		bb, _, _ := strings.Cut(r.baseline, "/")
		if wb != bb || !strings.Contains(r.warden, "/") || !strings.Contains(r.baseline, "/") {
			return nil, fmt.Errorf("row %q: %s and its baseline %s are not sub-benchmarks of one Benchmark function", r.what, r.warden, r.baseline)
		}
		if re.MatchString(r.warden) || re.MatchString(r.baseline) || re.MatchString(r.what) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-only %q matches no row", only)
	}
	return out, nil
}

// packages lists the rows' packages in the order of first appearance.
func packages(rs []row) []string {
	var out []string
	for _, r := range rs {
		if !slices.Contains(out, r.pkg) {
			out = append(out, r.pkg)
		}
	}
	return out
}

// benchPattern is the -bench pattern that runs exactly the rows' two
// sides in pkg: each level of the names anchored, alternatives per level.
func benchPattern(rs []row, pkg string) string {
	var levels [][]string
	for _, r := range rs {
		if r.pkg != pkg {
			continue
		}
		for _, name := range []string{r.warden, r.baseline} {
			for i, part := range strings.Split(name, "/") {
				if i == len(levels) {
					levels = append(levels, nil)
				}
				if q := regexp.QuoteMeta(part); !slices.Contains(levels[i], q) {
					levels[i] = append(levels[i], q)
				}
			}
		}
	}
	parts := make([]string, len(levels))
	for i, alts := range levels {
		parts[i] = "^(" + strings.Join(alts, "|") + ")$"
	}
	return strings.Join(parts, "/")
}

// result is one benchmark line's figures.
type result struct {
	nsPerOp float64
	metrics map[string]float64 // every "VALUE UNIT" pair, ns/op included
}

// benchLine is a result line of go test -bench: name (with its
// -GOMAXPROCS suffix), iterations, then value-unit pairs.
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)

// parseLine reads one result line of go test -bench.
func parseLine(line string) (string, result, bool) {
	m := benchLine.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return "", result{}, false
	}
	fields := strings.Fields(m[3])
	r := result{metrics: map[string]float64{}}
	for i := 0; i+1 < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return "", result{}, false
		}
		r.metrics[fields[i+1]] = v
	}
	ns, ok := r.metrics["ns/op"]
	if !ok {
		return "", result{}, false
	}
	r.nsPerOp = ns
	return m[1], r, true
}

// runBench runs cmd, copies its output to log and returns its results by
// benchmark name.
func runBench(cmd *exec.Cmd, log io.Writer) (map[string][]result, error) {
	cmd.Stderr = log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	got := map[string][]result{}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		fmt.Fprintln(log, sc.Text())
		if name, r, ok := parseLine(sc.Text()); ok {
			got[name] = append(got[name], r)
		}
	}
	_, _ = io.Copy(io.Discard, out)
	return got, cmd.Wait()
}

// median is the median ns/op of rs (0 when there is none).
func median(rs []result) float64 {
	if len(rs) == 0 {
		return 0
	}
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = r.nsPerOp
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// printTable writes the table in Markdown.
func printTable(w io.Writer, rs []row, results map[string][]result, count int) {
	fmt.Fprintf(w, "| what | warden | baseline | ratio | difference | aim |\n|---|---|---|---|---|---|\n")
	for _, r := range rs {
		wv, bv := median(results[r.pkg+" "+r.warden]), median(results[r.pkg+" "+r.baseline])
		ratio, diff := "—", "—"
		if wv > 0 && bv > 0 {
			ratio = fmt.Sprintf("%.2f×", wv/bv)
			diff = duration(wv - bv)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.what, side(r.warden, wv), side(r.baseline, bv), ratio, diff, r.aim)
	}
	fmt.Fprintf(w, "\nns/op, the median of %d run(s) of each; each baseline ran in the same go test process as its row.\n", count)
}

// side is a figure with the sub-benchmark it comes from.
func side(name string, ns float64) string {
	_, sub, _ := strings.Cut(name, "/")
	if ns == 0 {
		return "no result (" + sub + ")"
	}
	return duration(ns) + " (" + sub + ")"
}

// duration prints ns with three significant digits in a unit that suits.
func duration(ns float64) string {
	sign := ""
	if ns < 0 {
		sign, ns = "−", -ns
	}
	switch {
	case ns >= 1e9:
		return sign + strconv.FormatFloat(ns/1e9, 'f', 2, 64) + " s"
	case ns >= 1e6:
		return sign + strconv.FormatFloat(ns/1e6, 'g', 3, 64) + " ms"
	case ns >= 1e3:
		return sign + strconv.FormatFloat(ns/1e3, 'g', 3, 64) + " µs"
	}
	return sign + strconv.FormatFloat(ns, 'g', 3, 64) + " ns"
}
