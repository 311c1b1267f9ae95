package builtin

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wardenrt/warden/internal/archtest"
)

const mod = "github.com/wardenrt/warden/"

// schemaPkg is the JSON Schema package of the typed tool contract.
const schemaPkg = "github.com/google/jsonschema-go/jsonschema"

// families are the tool families, a package each; Core assembles them.
var families = []string{"automation", "fs", "git", "interact", "memory", "ops", "shell", "system", "text", "web"}

// shared are the packages the families share: builtin/internal/* and the
// egress proxy.
var shared = []string{"egress", "internal/argguard", "internal/fspath", "internal/getopt", "internal/gitcfg", "internal/netguard", "internal/proc", "internal/textutil", "internal/tooltest"}

// libraries are the packages outside the runtime and builtin/ that each
// package under builtin/ may import (all of them for the catalogue, which
// imports the families).
var libraries = map[string][]string{
	"fs":                {"github.com/bmatcuk/doublestar/v4", mod + "internal/unidiff"},
	"interact":          {"golang.org/x/sys/unix", "golang.org/x/term"},
	"memory":            {"github.com/bmatcuk/doublestar/v4"},
	"shell":             {"mvdan.cc/sh/v3"},
	"system":            {"golang.org/x/sys/unix"},
	"text":              {"github.com/sashabaranov/go-openai"},
	"internal/proc":     {"github.com/bmatcuk/doublestar/v4", "golang.org/x/sys/unix"},
	"internal/fspath":   {"golang.org/x/sys/unix"},
	"internal/netguard": nil,
}

// TestDependencyDirection: the catalogue and everything under builtin/ stay
// below cmd, hostfuncs and the store.
func TestDependencyDirection(t *testing.T) {
	for _, p := range append([]string{""}, append(slices.Clone(families), shared...)...) {
		archtest.Forbid(t, pkgPath(p),
			mod+"store", mod+"cmd", mod+"hostfuncs", "go.etcd.io/bbolt", "github.com/urfave/cli")
	}
}

// TestFamiliesApart: a family imports the runtime, what builtin/internal
// (and egress) offer and the libraries it uses, and nothing else — no
// other family, not the catalogue, directly or through a shared package:
// what two families need lives in builtin/internal. The shared packages
// import no family.
func TestFamiliesApart(t *testing.T) {
	for _, f := range families {
		pkg := pkgPath(f)
		for _, imp := range archtest.Imports(t, pkg) {
			if !allowed(f, imp) {
				t.Errorf("%s imports %s: a family imports the runtime, builtin/internal and its libraries (%v) only", pkg, imp, libraries[f])
			}
		}
		others := []string{pkgPath("")}
		for _, o := range families {
			if o != f {
				others = append(others, pkgPath(o))
			}
		}
		for _, d := range archtest.Deps(t, pkg) {
			if slices.Contains(others, d) {
				t.Errorf("%s depends on %s: families share code through builtin/internal only", pkg, d)
			}
		}
	}
	for _, s := range shared {
		pkg := pkgPath(s)
		for _, imp := range archtest.Imports(t, pkg) {
			if !allowed(s, imp) {
				t.Errorf("%s imports %s", pkg, imp)
			}
		}
		for _, d := range archtest.Deps(t, pkg) {
			if d == pkgPath("") || slices.ContainsFunc(families, func(f string) bool { return d == pkgPath(f) }) {
				t.Errorf("%s depends on the family or catalogue %s", pkg, d)
			}
		}
	}
}

// TestPackagesListed: every package under builtin/ is in families or
// shared, so the tests above see it.
func TestPackagesListed(t *testing.T) {
	known := append(slices.Clone(families), shared...)
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == "." {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		gos, _ := filepath.Glob(filepath.Join(p, "*.go"))
		if len(gos) > 0 && !slices.Contains(known, filepath.ToSlash(p)) {
			t.Errorf("builtin/%s is neither a family nor shared: add it to deps_test.go", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func pkgPath(p string) string {
	if p == "" {
		return mod + "builtin"
	}
	return mod + "builtin/" + p
}

// allowed reports whether package p (a family or a shared package) may
// import imp.
func allowed(p, imp string) bool {
	under := func(prefix string) bool { return imp == prefix || strings.HasPrefix(imp, prefix+"/") }
	if under(mod+"runtime") || under(mod+"builtin/internal") {
		return true
	}
	// Patterns compiled on first use (internal/lazyre) are the project's
	// own, with no dependency.
	if imp == mod+"internal/lazyre" {
		return true
	}
	if p == "internal/proc" && imp == mod+"builtin/egress" {
		return true
	}
	// The typed tool contract names its schema type (tool.SchemaRefiner's
	// RefineSchema takes a *jsonschema.Schema): a family that refines the
	// schema derived from its arguments imports it.
	if imp == schemaPkg && slices.Contains(families, p) {
		return true
	}
	for _, l := range libraries[p] {
		if under(l) {
			return true
		}
	}
	return false
}
