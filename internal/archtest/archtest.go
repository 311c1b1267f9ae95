// Package archtest checks the dependency direction the project keeps (RATIONALE.md) from tests:
// cmd → {builtin, hostfuncs, store} → runtime, and runtime never imports the
// packages that depend on it.
package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

// Deps returns every package pkg depends on, directly or not (go list -deps),
// excluding the standard library.
func Deps(t testing.TB, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", pkg).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var deps []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && l != pkg {
			deps = append(deps, l)
		}
	}
	return deps
}

// Forbid fails the test if pkg depends on any package whose import path
// starts with one of the forbidden prefixes.
func Forbid(t testing.TB, pkg string, forbidden ...string) {
	t.Helper()
	for _, d := range Deps(t, pkg) {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("%s must not depend on %s (via %s): see RATIONALE.md, dependency direction", pkg, f, d)
			}
		}
	}
}

// Only fails the test if pkg depends on a non-standard package outside the
// allowed prefixes.
func Only(t testing.TB, pkg string, allowed ...string) {
	t.Helper()
next:
	for _, d := range Deps(t, pkg) {
		for _, a := range allowed {
			if d == a || strings.HasPrefix(d, a+"/") {
				continue next
			}
		}
		t.Errorf("%s may import only the standard library and %v, but depends on %s", pkg, allowed, d)
	}
}
