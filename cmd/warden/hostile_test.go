//go:build unix

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wardenrt/warden/internal/hostile"
)

// maxHostileRSS is the peak resident memory warden may reach while it
// refuses a hostile file: what it needs to start, and no expansion.
const maxHostileRSS = 50 << 20

// wardenRun is one run of this test binary as warden (TestMain), in a
// process of its own so that its peak memory can be read.
type wardenRun struct {
	code           int
	stdout, stderr string
	rss            int64 // peak resident set, bytes (getrusage)
	took           time.Duration
}

func runWarden(t *testing.T, home, ws string, env []string, args ...string) wardenRun {
	t.Helper()
	bin, err := exec.LookPath("peakrss") // this test binary as peakrss (TestMain)
	if err != nil {
		t.Fatal(err)
	}
	rssFile := filepath.Join(t.TempDir(), "rss")
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, append([]string{"warden", "--home", home, "--workspace", ws}, args...)...)
	cmd.Env = append(append(os.Environ(), "WARDEN_POLICY=", "WARDEN_APPROVE=", "WARDEN_LOG_LEVEL=warn", envPeakRSSFile+"="+rssFile), env...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err = cmd.Run()
	r := wardenRun{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	r.code = cmd.ProcessState.ExitCode()
	b, err := os.ReadFile(rssFile)
	if err != nil {
		t.Fatalf("peakrss wrote nothing: %v\nstderr: %s", err, r.stderr)
	}
	r.rss, _ = strconv.ParseInt(string(b), 10, 64)
	return r
}

// envPeakRSSFile is where peakrss writes the peak it measured.
const envPeakRSSFile = "WARDEN_TEST_PEAK_RSS_FILE"

// peakRSSMain is `peakrss COMMAND ARGS…` (this test binary, TestMain): it
// runs the command as its child, with the same standard streams and exit
// status, and writes the child's peak resident set in bytes (getrusage,
// from wait4) to $WARDEN_TEST_PEAK_RSS_FILE. The child must be started by
// a small process: Linux counts the memory of the process a child was
// started from (its address space until the exec) in the child's peak,
// so a child of the test process itself reports the test process's size.
func peakRSSMain() {
	path, err := exec.LookPath(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "peakrss:", err)
		os.Exit(127)
	}
	cmd := exec.Command(path, os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = os.Environ()
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			fmt.Fprintln(os.Stderr, "peakrss:", err)
			os.Exit(127)
		}
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if ru != nil {
		_ = os.WriteFile(os.Getenv(envPeakRSSFile), []byte(strconv.FormatInt(int64(ru.Maxrss)<<10, 10)), 0o600) // KiB on Linux
	}
	os.Exit(cmd.ProcessState.ExitCode())
}

// TestHostileCorpus: every loader of a file warden did not write — the
// workspace and home policy, a module's sidecar, a workflow — refuses each
// hostile file with a clear code and the position of the problem, before
// anything is expanded: warden's peak memory (from getrusage of its
// process) stays under 50 MB. Alias bombs expand to 10^6, 10^7 and 10^8
// values; the 200 MB files are sparse; nesting is 10,000 deep.
func TestHostileCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts warden some forty times")
	}
	const wasmHeader = "\x00asm\x01\x00\x00\x00"
	type hostileCase struct {
		name  string
		setup func(t *testing.T, home, ws string) []string // the command
		code  string                                       // on stderr
		at    string                                       // a regexp: the file and position
	}
	call := []string{"call", "system", "--args", `{"operation":"get_info"}`}
	wsPolicy := func(content string) func(*testing.T, string, string) []string {
		return func(t *testing.T, home, ws string) []string {
			writeFile(t, filepath.Join(ws, ".warden", "policy.yaml"), content)
			return call
		}
	}
	homePolicy := func(content string) func(*testing.T, string, string) []string {
		return func(t *testing.T, home, ws string) []string {
			writeFile(t, filepath.Join(home, "policy.yaml"), content)
			return call
		}
	}
	sidecar := func(content string) func(*testing.T, string, string) []string {
		return func(t *testing.T, home, ws string) []string {
			writeFile(t, filepath.Join(ws, "m.wasm"), wasmHeader)
			writeFile(t, filepath.Join(ws, "m.tool.yaml"), content)
			return []string{"tool", "install", filepath.Join(ws, "m.wasm")}
		}
	}
	flow := func(content string) func(*testing.T, string, string) []string {
		return func(t *testing.T, home, ws string) []string {
			writeFile(t, filepath.Join(ws, "w.yaml"), content)
			return []string{"workflow", "validate", filepath.Join(ws, "w.yaml")}
		}
	}
	// Files each within every budget, included 200 times under other
	// names: bytes alone (4 MiB in all) let this parse for 27 s in 1.5 GB.
	includes := func(n int) func(*testing.T, string, string) []string {
		return func(t *testing.T, home, ws string) []string {
			writeFile(t, filepath.Join(ws, "big.yaml"), "version: 1\nname: n\nparams:\n  p: {type: array, default: ["+
				strings.Repeat("1,", 9500)+"1]}\nsteps:\n  - {id: a, tool: system, args: {operation: get_info}}\n")
			var top strings.Builder
			top.WriteString("version: 1\nname: top\nsteps:\n")
			for i := 0; i < n; i++ {
				if err := os.Symlink("big.yaml", filepath.Join(ws, fmt.Sprintf("n%d.yaml", i))); err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&top, "  - {id: s%d, workflow: n%d.yaml}\n", i, i)
			}
			writeFile(t, filepath.Join(ws, "w.yaml"), top.String())
			return []string{"workflow", "validate", filepath.Join(ws, "w.yaml")}
		}
	}
	var cases []hostileCase
	for _, levels := range []int{6, 7, 8} {
		bomb := hostile.AliasBomb(levels)
		n := "10^" + string(rune('0'+levels))
		cases = append(cases,
			hostileCase{"alias bomb " + n + " in a workspace policy", wsPolicy("version: 1\ngrants: " + bomb + "\n"), "INVALID_INPUT", `\.warden/policy\.yaml:2:10: YAML anchors`},
			hostileCase{"alias bomb " + n + " in a home policy", homePolicy("version: 1\ngrants: " + bomb + "\n"), "INVALID_INPUT", `/policy\.yaml:2:10: YAML anchors`},
			hostileCase{"alias bomb " + n + " at a sidecar's top level", sidecar("name: m\ncapabilities: " + bomb + "\n"), "INVALID_INPUT", `m\.tool\.yaml:2:16: YAML anchors`},
			hostileCase{"alias bomb " + n + " in a sidecar's input_schema", sidecar("name: m\ninput_schema:\n  type: object\n  properties:\n    x: {enum: " + bomb + "}\n"), "INVALID_INPUT", `m\.tool\.yaml:5:16: YAML anchors`},
			hostileCase{"alias bomb " + n + " in a workflow", flow("version: 1\nname: w\nsteps:\n  - {id: a, tool: system, args: {operation: " + bomb + "}}\n"), "INVALID_INPUT", `w\.yaml:4:46: YAML anchors`},
		)
	}
	big := func(file string) func(*testing.T, string, string) []string {
		return func(t *testing.T, home, ws string) []string {
			if err := os.MkdirAll(filepath.Join(ws, ".warden"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := hostile.Sparse(filepath.Join(ws, file), "# comments\n", 200<<20); err != nil {
				t.Fatal(err)
			}
			if file == "m.tool.yaml" {
				writeFile(t, filepath.Join(ws, "m.wasm"), wasmHeader)
				return []string{"tool", "install", filepath.Join(ws, "m.wasm")}
			}
			return call
		}
	}
	cases = append(cases,
		hostileCase{"200 MB workspace policy", big(".warden/policy.yaml"), "TOO_LARGE", `\.warden/policy\.yaml: the file is 209715200 bytes, over the limit of 1 MiB`},
		hostileCase{"200 MB sidecar", big("m.tool.yaml"), "TOO_LARGE", `m\.tool\.yaml: the file is 209715200 bytes, over the limit of 1 MiB`},
		hostileCase{"block nesting 10,000 deep in a policy", wsPolicy("version: 1\ngrants:\n" + hostile.DeepBlock(10000) + "\n"), "INVALID_INPUT", `policy\.yaml:3:127: nested deeper than 64 levels`},
		hostileCase{"flow nesting 10,000 deep in a policy", wsPolicy("version: 1\ngrants: " + hostile.DeepFlow(10000) + "\n"), "INVALID_INPUT", `policy\.yaml:2:72: nested deeper than 64 levels`},
		hostileCase{"JSON nesting 10,000 deep as a policy", wsPolicy(`{"version": 1, "rules": ` + hostile.DeepJSON(10000) + "}\n"), "INVALID_INPUT", `policy\.yaml:1:(\d+): nested deeper than 64 levels`},
		hostileCase{"JSON nesting 10,000 deep in a sidecar", sidecar(`{"name": "m", "input_schema": ` + hostile.DeepJSON(10000) + "}\n"), "INVALID_INPUT", `m\.tool\.yaml:1:(\d+): nested deeper than 64 levels`},
		hostileCase{"block nesting 10,000 deep in a workflow", flow("version: 1\nname: w\nsteps:\n" + hostile.DeepBlock(10000) + "\n"), "INVALID_INPUT", `w\.yaml:4:127: nested deeper than 64 levels`},
		hostileCase{"duplicate keys in a policy", wsPolicy("version: 1\ngrants: [system.info]\nrules:\n  - {tool: system, action: allow, action: deny}\n"), "INVALID_INPUT", `policy\.yaml:4:35: mapping key "action" already defined at \[4:20\]`},
		hostileCase{"duplicate keys in a sidecar", sidecar("name: m\ninput_schema:\n  type: object\n  type: string\n"), "INVALID_INPUT", `m\.tool\.yaml:4:3: mapping key "type" already defined`},
		hostileCase{"200 includes of a dense 19 KB workflow", includes(200), "INVALID_INPUT", `n1\.yaml:4:(\d+): more YAML tokens than are left of the budget`},
		hostileCase{"duplicate keys in a workflow", flow("version: 1\nname: w\nname: v\nsteps: []\n"), "INVALID_INPUT", `w\.yaml:3:1: mapping key "name" already defined`},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			home, ws := t.TempDir(), t.TempDir()
			args := tc.setup(t, home, ws)
			r := runWarden(t, home, ws, nil, args...)
			t.Logf("exit %d in %v, peak RSS %.1f MB", r.code, r.took.Round(time.Millisecond), float64(r.rss)/(1<<20))
			if r.code == 0 {
				t.Fatalf("accepted\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
			}
			if !regexp.MustCompile(`^warden: ` + tc.code + `: `).MatchString(r.stderr) {
				t.Errorf("stderr does not start with %s: %s", tc.code, r.stderr)
			}
			if !regexp.MustCompile(tc.at).MatchString(r.stdout + r.stderr) {
				t.Errorf("no %q\nstdout: %.2000s\nstderr: %.2000s", tc.at, r.stdout, r.stderr)
			}
			limit := int64(maxHostileRSS)
			if strings.HasPrefix(tc.name, "200 includes") {
				// The two files the shared budget holds are parsed, as
				// valid files are (one of 19,600 tokens peaks near 52 MB,
				// below); before the budget, 1.5 GB.
				limit = 80 << 20
			}
			if r.rss == 0 || r.rss > limit {
				t.Errorf("peak RSS %d bytes (limit %d)", r.rss, limit)
			}
		})
	}
	// For comparison: a plain call with a valid workspace policy.
	home, ws := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(ws, ".warden", "policy.yaml"), "version: 1\ngrants: [system.info]\n")
	r := runWarden(t, home, ws, nil, call...)
	if r.code != 0 {
		t.Fatalf("a valid policy: %s", r.stderr)
	}
	t.Logf("reference: a valid call in %v, peak RSS %.1f MB", r.took.Round(time.Millisecond), float64(r.rss)/(1<<20))
	// The meter sees what warden allocates: a valid policy near the token
	// budget (19,600 tokens) costs the YAML library some 15 MB more.
	writeFile(t, filepath.Join(ws, ".warden", "policy.yaml"), "version: 1\ngrants: ["+strings.Repeat("system.info, ", 9_800)+"system.info]\n")
	heavy := runWarden(t, home, ws, nil, call...)
	if heavy.code != 0 {
		t.Fatalf("a policy within the budget: %s", heavy.stderr)
	}
	t.Logf("a valid policy of 19,600 tokens: %v, peak RSS %.1f MB", heavy.took.Round(time.Millisecond), float64(heavy.rss)/(1<<20))
	if heavy.rss < r.rss+5<<20 {
		t.Errorf("the meter does not see the YAML library's memory: %d bytes, against %d for a small policy", heavy.rss, r.rss)
	}
}
