package wasmtools_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	wasmtools "github.com/wardenrt/warden/wasm-tools"
)

// TestBuildEveryFixture builds every example and hostile module for wasip1
// and checks its exports, imports and sidecar.
func TestBuildEveryFixture(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every guest module (seconds each); skipped with -short")
	}
	root, err := wasmtools.Root()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range wasmtools.Fixtures {
		t.Run(f.Name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), f.Name+".wasm")
			if err := wasmtools.Build(f.Path(root), out, f.Command()); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) == 0 {
				t.Fatal("empty module")
			}
			m, err := wasmtools.Inspect(b)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d bytes (%.2f MiB), memory min %d pages, exports %v, imports from warden %v",
				f.Name, len(b), float64(len(b))/(1<<20), m.MemoryMinPages, keys(m.Exports, ""), keys(m.Imports, "warden."))

			entry := "_initialize"
			if f.Command() {
				entry = "_start"
			}
			want := append([]string{entry}, f.Exports...)
			for _, name := range want {
				if m.Exports[name] != "func" {
					t.Errorf("export %q missing (exports: %v)", name, keys(m.Exports, ""))
				}
			}
			if m.Exports["memory"] != "memory" {
				t.Errorf("memory not exported")
			}
			for _, name := range f.Imports {
				if m.Imports[name] != "func" {
					t.Errorf("import %q missing (imports: %v)", name, keys(m.Imports, ""))
				}
			}
			// Only the fixtures that say so reach warden's host module.
			for imp := range m.Imports {
				if strings.HasPrefix(imp, "warden.") && !contains(f.Imports, imp) {
					t.Errorf("unexpected import %q", imp)
				}
			}
			if m.MemoryMinPages < 0 {
				t.Errorf("no memory")
			}
			// A WASI command gets WASI and nothing else: no Extism kernel,
			// no warden host module.
			if f.Command() {
				for imp := range m.Imports {
					if !strings.HasPrefix(imp, "wasi_snapshot_preview1.") {
						t.Errorf("WASI command imports %q", imp)
					}
				}
			}
			if f.Sidecar == "" {
				if f.ABI != wasmtools.Servlet && !f.Published {
					t.Errorf("%s ABI needs a sidecar", f.ABI)
				}
				return
			}
			if f.Sidecar != f.Name+".tool.yaml" {
				t.Errorf("sidecar %q, want %s.tool.yaml", f.Sidecar, f.Name)
			}
			sc, err := os.ReadFile(filepath.Join(f.Path(root), f.Sidecar))
			if err != nil {
				t.Fatal(err)
			}
			checkSidecar(t, sc, f.Name, f.ABI, m)
		})
	}
}

// TestEveryMainPackageIsListed keeps Fixtures complete: every main package
// under examples/, hostile/ and compat/ must be in it (and vice versa).
func TestEveryMainPackageIsListed(t *testing.T) {
	root, err := wasmtools.Root()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, top := range []string{"examples", "hostile", "compat"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if bytes.Contains(b, []byte("\npackage main\n")) || bytes.HasPrefix(b, []byte("package main\n")) {
				rel, _ := filepath.Rel(root, filepath.Dir(p))
				found[filepath.ToSlash(rel)] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	names := map[string]bool{}
	for _, f := range wasmtools.Fixtures {
		if !found[f.Dir] {
			t.Errorf("fixture %s: no main package in %s", f.Name, f.Dir)
		}
		if names[f.Name] {
			t.Errorf("fixture name %s twice", f.Name)
		}
		names[f.Name] = true
		delete(found, f.Dir)
		if g, ok := wasmtools.Lookup(f.Name); !ok || g.Dir != f.Dir {
			t.Errorf("Lookup(%s) = %+v, %v", f.Name, g, ok)
		}
	}
	for dir := range found {
		t.Errorf("main package %s is not in wasmtools.Fixtures", dir)
	}
}

func TestInspectRefusesGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("garbage!"), []byte("\x00asm\x02\x00\x00\x00"), []byte("\x00asm\x01\x00\x00\x00\x07\x05\x01")} {
		if _, err := wasmtools.Inspect(b); err == nil {
			t.Errorf("Inspect(%q) accepted it", b)
		}
	}
	// A minimal module: one memory, exported.
	m, err := wasmtools.Inspect([]byte("\x00asm\x01\x00\x00\x00" +
		"\x05\x03\x01\x00\x02" + // memory section: 1 memory, min 2
		"\x07\x0a\x01\x06memory\x02\x00")) // export "memory" memory 0
	if err != nil || m.Exports["memory"] != "memory" || m.MemoryMinPages != 2 {
		t.Fatalf("got %+v, %v", m, err)
	}
}

// TestBuildReportsErrors checks Build's failure path (no network needed).
func TestBuildReportsErrors(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module broken\n\ngo 1.25\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() { undefined() }\n"), 0o644)
	err := wasmtools.Build(dir, filepath.Join(dir, "x.wasm"), true)
	if err == nil || !strings.Contains(err.Error(), "undefined") {
		t.Fatalf("Build of a broken package: %v", err)
	}
}

func keys(m map[string]string, prefix string) []string {
	var out []string
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
