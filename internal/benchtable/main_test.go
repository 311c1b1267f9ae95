package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestParseLine: a result line of go test -bench, its -GOMAXPROCS suffix
// dropped, every metric kept.
func TestParseLine(t *testing.T) {
	name, r, ok := parseLine("BenchmarkFSRead/code-4KiB/fs_read-2   \t   12345\t     93012 ns/op\t  44.04 MB/s\t   81234 cpu-ns/op\t   20480 B/op\t     112 allocs/op")
	if !ok || name != "BenchmarkFSRead/code-4KiB/fs_read" || r.nsPerOp != 93012 || r.metrics["allocs/op"] != 112 || r.metrics["cpu-ns/op"] != 81234 {
		t.Fatalf("%q %+v %v", name, r, ok)
	}
	for _, l := range []string{"PASS", "ok  \tgithub.com/x\t1.2s", "BenchmarkX-2 \t 10", "--- BENCH: BenchmarkX", "goos: linux"} {
		if _, _, ok := parseLine(l); ok {
			t.Errorf("parsed %q", l)
		}
	}
}

// TestBenchPattern: the pattern of a package runs exactly its rows' sides
// (go test matches each level of a name against its own part).
func TestBenchPattern(t *testing.T) {
	rs := []row{
		{pkg: "./a", warden: "BenchmarkShellTrue/runProc-sandboxed", baseline: "BenchmarkShellTrue/exec.Command"},
		{pkg: "./a", warden: "BenchmarkFSRead/code-4KiB/fs_read", baseline: "BenchmarkFSRead/code-4KiB/os.ReadFile"},
		{pkg: "./b", warden: "BenchmarkOther/x", baseline: "BenchmarkOther/y"},
	}
	levels := strings.Split(benchPattern(rs, "./a"), "/")
	match := func(name string) bool {
		parts := strings.Split(name, "/")
		for i, p := range parts {
			if i < len(levels) && !regexp.MustCompile(levels[i]).MatchString(p) {
				return false
			}
		}
		return true
	}
	for _, name := range []string{"BenchmarkShellTrue/runProc-sandboxed", "BenchmarkShellTrue/exec.Command", "BenchmarkFSRead/code-4KiB/fs_read", "BenchmarkFSRead/code-4KiB/os.ReadFile"} {
		if !match(name) {
			t.Errorf("%s is not run", name)
		}
	}
	for _, name := range []string{"BenchmarkShellTrue/interp", "BenchmarkShellTrueX/exec.Command", "BenchmarkOther/x", "BenchmarkFSRead/env-4KiB/fs_read", "BenchmarkShellTrue/execXCommand"} {
		if match(name) {
			t.Errorf("%s is run", name)
		}
	}
}

// TestRowsPairSiblings: every row of the table pairs two sub-benchmarks
// of one Benchmark function; a row that does not is refused.
func TestRowsPairSiblings(t *testing.T) {
	if _, err := selectRows(rows, ""); err != nil {
		t.Fatal(err)
	}
	bad := []row{{what: "x", warden: "BenchmarkA/x", baseline: "BenchmarkB/y"}}
	if _, err := selectRows(bad, ""); err == nil {
		t.Fatal("a baseline from another benchmark was accepted")
	}
	if got, err := selectRows(rows, "FSRead"); err != nil || len(got) != 3 {
		t.Fatalf("-only FSRead: %d rows, %v", len(got), err)
	}
}

// TestTable: medians, the ratio and the difference, and a side without a
// result said so.
func TestTable(t *testing.T) {
	rs := []row{
		{what: "w", pkg: "./p", warden: "BenchmarkX/w", baseline: "BenchmarkX/b", aim: "≤ 2×"},
		{what: "missing", pkg: "./p", warden: "BenchmarkX/m", baseline: "BenchmarkX/b", aim: "-"},
	}
	res := map[string][]result{
		"./p BenchmarkX/w": {{nsPerOp: 3e6}, {nsPerOp: 9e6}, {nsPerOp: 4e6}},
		"./p BenchmarkX/b": {{nsPerOp: 2e6}},
	}
	var out bytes.Buffer
	printTable(&out, rs, res, 3)
	for _, want := range []string{"| w | 4 ms (w) | 2 ms (b) | 2.00× | 2 ms | ≤ 2× |", "| missing | no result (m) | 2 ms (b) | — | — | - |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	for ns, want := range map[float64]string{950: "950 ns", 93012: "93 µs", 1.234e6: "1.23 ms", 2.5e9: "2.50 s", -1500: "−1.5 µs"} {
		if got := duration(ns); got != want {
			t.Errorf("duration(%v) = %q, want %q", ns, got, want)
		}
	}
}
