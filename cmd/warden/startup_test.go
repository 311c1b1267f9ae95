package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// What the package inits of warden may allocate before main runs: every
// process pays it — `warden version`, each `warden call`, and each
// program a tool starts (the sandbox launcher is warden re-executed). A
// package init that compiles, parses or builds a table there should do it
// on first use instead (sync.OnceValue, internal/lazyre).
const (
	maxInitBytes    = 1 << 20  // all packages together
	maxOwnInitBytes = 32 << 10 // one of warden's own packages
)

// maxOwnInitBytesEach is what the init of one of warden's own packages may
// allocate at most: a few small lookup tables (a map literal of a few dozen
// keys, the descriptors of patterns compiled on first use). A word list, a
// keyword table built by splitting a string, a compiled pattern or schema
// is built on first use instead: the tool that needs it pays for it, not
// `warden version`.
const maxOwnInitBytesEach = 8 << 10

// TestStartUpInitCost runs `warden version` with GODEBUG=inittrace=1 and
// holds the package inits of warden's dependency graph to their budget, in
// bytes allocated (what the runtime reports, the same on every run of one
// binary — no clock involved).
func TestStartUpInitCost(t *testing.T) {
	inits := initTrace(t)
	total := 0
	for _, in := range inits {
		n := in.bytes
		total += n
		if strings.HasPrefix(in.pkg, "github.com/wardenrt/warden/") && n > maxOwnInitBytes {
			t.Errorf("the init of %s allocates %d bytes (budget %d): build what it builds on first use", in.pkg, n, maxOwnInitBytes)
		}
		if n > maxInitBytes/4 {
			t.Logf("the init of %s allocates %d bytes", in.pkg, n)
		}
	}
	if total > maxInitBytes {
		t.Errorf("the package inits of warden allocate %d bytes before main (budget %d): run with GODEBUG=inittrace=1 to see which", total, maxInitBytes)
	}
	t.Logf("%d package inits, %d bytes", len(inits), total)
}

// TestStartUpOwnInitsSmall (issue 18): none of warden's own package inits
// builds a table, word list or pattern that only some tool uses — each
// stays within maxOwnInitBytesEach, so that what `warden version` pays
// before main is the Go runtime's and its dependencies' alone.
func TestStartUpOwnInitsSmall(t *testing.T) {
	for _, in := range initTrace(t) {
		if strings.HasPrefix(in.pkg, "github.com/wardenrt/warden/") && in.bytes > maxOwnInitBytesEach {
			t.Errorf("the init of %s allocates %d bytes in %d allocations (budget %d): build its tables on first use (sync.OnceValue, internal/lazyre)",
				in.pkg, in.bytes, in.allocs, maxOwnInitBytesEach)
		}
	}
}

// pkgInit is one line of GODEBUG=inittrace=1.
type pkgInit struct {
	pkg           string
	bytes, allocs int
}

// initTrace runs `warden version` with GODEBUG=inittrace=1 and returns the
// package inits of warden's dependency graph, in the order they ran.
func initTrace(t *testing.T) []pkgInit {
	t.Helper()
	deps := map[string]bool{}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		deps[p] = true
	}
	// This package's init is the test's too (its _test.go files).
	delete(deps, "github.com/wardenrt/warden/cmd/warden")
	// This test binary, run as `warden` (TestMain), is warden's start-up
	// plus the test's own packages, which are left out below.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "warden")
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("warden version: %v\n%s", err, stderr.Bytes())
	}
	var inits []pkgInit
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		// init PKG @T ms, C ms clock, B bytes, N allocs
		f := strings.Fields(sc.Text())
		if len(f) < 11 || f[0] != "init" || f[8] != "bytes," || !deps[f[1]] {
			continue
		}
		n, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", sc.Text(), err)
		}
		a, err := strconv.Atoi(f[9])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", sc.Text(), err)
		}
		inits = append(inits, pkgInit{pkg: f[1], bytes: n, allocs: a})
	}
	if len(inits) == 0 {
		t.Fatalf("no init of warden's packages in the trace:\n%s", stderr.Bytes())
	}
	return inits
}
