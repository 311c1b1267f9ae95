// Command securityreport runs warden's security suites — the hostile
// suites, the injection scenarios, secrets at scale, the redaction
// precision corpus, every fuzz target and the crash soak — and prints one
// table of what ran and what held, for the README's security section:
//
//	go run ./internal/securityreport [-fuzztime 10s] [-soak 200]
//
// (`task security-report`). A suite reports a row by logging a line
// "security-report: WHAT | FIGURE | HELD"; the fuzz script prints the same
// line per target. The command exits 1 if any suite failed.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

const marker = "security-report:"

// row is one line of the table.
type row struct{ what, figure, held string }

// suite is one command whose output carries report lines; tests run with
// -json so that failures are counted as well.
type suite struct {
	name string
	args []string
	env  []string
	json bool
}

func main() {
	fuzztime := flag.String("fuzztime", "10s", "time each fuzz target runs")
	soak := flag.Int("soak", 200, "crash-soak iterations")
	flag.Parse()
	suites := []suite{
		{name: "hostile suites", json: true, args: []string{"go", "test", "-count=1", "-json", "-run", "Hostile", "./..."}},
		{name: "injection scenarios", json: true, args: []string{"go", "test", "-count=1", "-json", "-v", "-run", "^TestInjection$", "./cmd/warden/"}},
		{name: "secrets at scale", json: true, args: []string{"go", "test", "-count=1", "-json", "-v", "-run", "^TestSecretsAtScale$", "./cmd/warden/"}},
		{name: "redaction precision", json: true, args: []string{"go", "test", "-count=1", "-json", "-v", "-run", "^TestPrecisionCorpus", "./runtime/redact/"}},
		{name: "crash soak", json: true, env: []string{fmt.Sprintf("WARDEN_SOAK=%d", *soak)},
			args: []string{"go", "test", "-count=1", "-json", "-v", "-timeout", "60m", "-run", "^TestCrashSoak$", "./cmd/warden/"}},
		{name: "fuzzing", env: []string{"FUZZTIME=" + *fuzztime, "FUZZ_FRESH=1"}, args: []string{"bash", ".ci/fuzz"}},
	}
	var rows []row
	failed := false
	for _, s := range suites {
		start := time.Now()
		fmt.Fprintf(os.Stderr, "== %s: %s\n", s.name, strings.Join(s.args, " "))
		got, pass, fail, err := runSuite(s)
		took := time.Since(start).Round(time.Second)
		held := "yes"
		if err != nil || fail > 0 {
			held, failed = "NO", true
		}
		figure := fmt.Sprintf("%d passed, %d failed, %v", pass, fail, took)
		if !s.json {
			figure = took.String()
			if err != nil {
				figure += " (" + err.Error() + ")"
			}
		}
		rows = append(rows, row{s.name, figure, held})
		rows = append(rows, got...)
	}
	fmt.Println("| what | figure | held |")
	fmt.Println("|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s |\n", r.what, r.figure, r.held)
	}
	if failed {
		os.Exit(1)
	}
}

// runSuite runs s and returns its report rows and, for tests, the number
// of tests and subtests that passed and failed.
func runSuite(s suite) (rows []row, pass, fail int, err error) {
	cmd := exec.Command(s.args[0], s.args[1:]...)
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, 0, err
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if s.json {
			var ev struct{ Action, Test, Output string }
			if json.Unmarshal([]byte(line), &ev) != nil {
				continue
			}
			switch {
			case ev.Action == "pass" && ev.Test != "":
				pass++
			case ev.Action == "fail" && ev.Test != "":
				fail++
				fmt.Fprintf(os.Stderr, "FAIL %s\n", ev.Test)
			}
			line = ev.Output
		} else {
			fmt.Fprintln(os.Stderr, line)
		}
		if r, ok := parse(line); ok {
			rows = append(rows, r)
		}
	}
	_, _ = io.Copy(io.Discard, out)
	return rows, pass, fail, cmd.Wait()
}

// parse reads a report line: "security-report: WHAT | FIGURE | HELD".
func parse(line string) (row, bool) {
	i := strings.Index(line, marker)
	if i < 0 {
		return row{}, false
	}
	parts := strings.Split(strings.TrimSpace(line[i+len(marker):]), "|")
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	trim := func(s string) string { return string(bytes.TrimSpace([]byte(s))) }
	return row{"  " + trim(parts[0]), trim(parts[1]), trim(parts[2])}, true
}
