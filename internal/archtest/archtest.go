// Package archtest checks the dependency direction the project keeps (RATIONALE.md) from tests:
// cmd → {builtin, hostfuncs, store} → runtime, and runtime never imports the
// packages that depend on it.
package archtest

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// CLIFlags are the flags of warden's command line that the core must not
// name: its errors carry data (the missing grants, the approval needed)
// and each front end words the hint for its reader.
var CLIFlags = []string{"--grant", "--approve", "--args"}

// NoWordsOutside is NoWords over everything under root but the listed
// directories (relative to root).
func NoWordsOutside(t testing.TB, words []string, root string, except ...string) {
	t.Helper()
	ScanWords(t, words, root, false, except...)
}

// NoWords fails the test for every line, in a non-test source file
// (.go, and the .yaml, .yml and .json files a package may embed) under
// one of dirs (testdata excepted), that contains one of words: string
// literals and comments alike.
func NoWords(t testing.TB, words []string, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		ScanWords(t, words, dir, false)
	}
}

// ScanWords fails the test for every line that contains one of words, in
// the source files under root — .go files (tests too when tests is set)
// and the .yaml, .yml and .json files a package may embed — skipping
// testdata, hidden directories and the except directories (relative to
// root).
func ScanWords(t testing.TB, words []string, root string, tests bool, except ...string) {
	t.Helper()
	scanned := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			if p != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || slices.Contains(except, filepath.ToSlash(rel))) {
				return filepath.SkipDir
			}
			return nil
		}
		switch ext := filepath.Ext(p); {
		case ext == ".go" && (tests || !strings.HasSuffix(p, "_test.go")), ext == ".yaml", ext == ".yml", ext == ".json":
		default:
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		scanned++
		for i, line := range strings.Split(string(data), "\n") {
			for _, w := range words {
				if strings.Contains(line, w) {
					t.Errorf("%s:%d names %s: %s", p, i+1, w, strings.TrimSpace(line))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned == 0 {
		t.Fatalf("no source file under %s", root)
	}
}

// Imports returns the packages pkg imports directly (its test files
// aside) for the GOOS and GOARCH the test runs on, excluding the standard
// library.
func Imports(t testing.TB, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, pkg).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list %s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Fatalf("go list %s: %v", pkg, err)
	}
	var imps []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// A standard-library path has no dot in its first element.
		if first, _, _ := strings.Cut(l, "/"); strings.Contains(first, ".") {
			imps = append(imps, l)
		}
	}
	return imps
}
