// Package wasmfixture builds warden's example and hostile wasm guests (in
// wasm-tools/) from source for the root module's tests, so no built binary
// is ever committed. Builds are cached across test binaries and runs in a
// directory keyed by a hash of the guest's sources, so the many packages
// that run guests build each one once.
package wasmfixture

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Root returns the wasm-tools directory of this checkout.
func Root(t testing.TB) string {
	t.Helper()
	_, file, _, ok := goruntime.Caller(0)
	if !ok {
		t.Fatal("wasmfixture: cannot locate the sources")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "wasm-tools")
}

var (
	mu   sync.Mutex
	errs = map[string]error{}
)

// Path builds the guest whose main package is wasm-tools/dir (e.g.
// "examples/textstats") and returns the path of the .wasm file: an Extism
// plugin or servlet (-buildmode=c-shared), or a WASI command when command
// is true. The test is skipped with -short. The file is shared: copy it
// before changing it.
func Path(t testing.TB, dir string, command bool) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds wasm guests; skipped with -short")
	}
	return BuildDir(t, filepath.Join(Root(t), filepath.FromSlash(dir)), command)
}

// Stage copies the guest Path builds, with the sidecar beside its sources
// (if any), into a new temp dir as name.wasm and name.tool.yaml, ready to
// install; name "" is the directory's base name. It returns the .wasm path.
func Stage(t testing.TB, dir, name string, command bool) string {
	t.Helper()
	b, err := os.ReadFile(Path(t, dir, command))
	if err != nil {
		t.Fatal(err)
	}
	if name == "" {
		name = filepath.Base(dir)
	}
	out := t.TempDir()
	dst := filepath.Join(out, name+".wasm")
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	scs, _ := filepath.Glob(filepath.Join(Root(t), filepath.FromSlash(dir), "*.tool.yaml"))
	for _, sc := range scs {
		b, err := os.ReadFile(sc)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, name+".tool.yaml"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// Bytes is Path's file, read.
func Bytes(t testing.TB, dir string, command bool) []byte {
	t.Helper()
	b, err := os.ReadFile(Path(t, dir, command))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BuildDir builds the Go main package in srcDir (any module: its go.mod
// decides the dependencies) for wasip1 and returns the cached .wasm path.
func BuildDir(t testing.TB, srcDir string, command bool) string {
	t.Helper()
	key, err := sourceKey(srcDir, command)
	if err != nil {
		t.Fatal(err)
	}
	cacheDir, err := cacheRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(cacheDir, filepath.Base(srcDir)+"-"+key+".wasm")
	mu.Lock()
	defer mu.Unlock()
	if err := errs[out]; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(out); err == nil {
		return out
	}
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	args := []string{"build", "-trimpath"}
	if !command {
		args = append(args, "-buildmode=c-shared")
	}
	args = append(args, "-o", tmp, ".")
	cmd := exec.Command("go", args...)
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		errs[out] = fmt.Errorf("go %s in %s: %v\n%s", strings.Join(args, " "), srcDir, err, b)
		t.Fatal(errs[out])
	}
	if err := os.Rename(tmp, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// cacheRoot is <user cache>/warden-test-wasm (or a temp dir).
func cacheRoot() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "warden-test-wasm")
	return dir, os.MkdirAll(dir, 0o700)
}

// sourceKey hashes every file of srcDir's module that could change the
// build (Go sources, go.mod, go.sum), the ABI and the Go version.
func sourceKey(srcDir string, command bool) (string, error) {
	modRoot := srcDir
	for {
		if _, err := os.Stat(filepath.Join(modRoot, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(modRoot)
		if parent == modRoot {
			return "", fmt.Errorf("wasmfixture: no go.mod above %s", srcDir)
		}
		modRoot = parent
	}
	var files []string
	err := filepath.WalkDir(modRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != modRoot {
			return filepath.SkipDir
		}
		n := d.Name()
		if !d.IsDir() && (strings.HasSuffix(n, ".go") || n == "go.mod" || n == "go.sum") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	h := sha256.New()
	// Builds use -trimpath, so where the checkout is does not matter: only
	// paths relative to the module root enter the key.
	rel, err := filepath.Rel(modRoot, srcDir)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "%s\x00%v\x00%s\x00", goruntime.Version(), command, filepath.ToSlash(rel))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		r, _ := filepath.Rel(modRoot, f)
		fmt.Fprintf(h, "%s\x00%d\x00", filepath.ToSlash(r), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Edited builds the guest in wasm-tools/dir as [Path] does, from a copy of
// the wasm-tools module in which old is replaced by new in dir's main.go: a
// new version of the module (what `warden tool approve` shows), built from
// source like every fixture. The test fails when main.go does not contain
// old. The file is shared: copy it before changing it.
func Edited(t testing.TB, dir string, command bool, old, new string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds wasm guests; skipped with -short")
	}
	root := Root(t)
	tmp := t.TempDir()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		n := d.Name()
		if d.IsDir() {
			if p != root && (n == "testdata" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(tmp, rel), 0o755)
		}
		if !strings.HasSuffix(n, ".go") && n != "go.mod" && n != "go.sum" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(tmp, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(tmp, filepath.FromSlash(dir))
	main := filepath.Join(src, "main.go")
	b, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("wasmfixture: %s/main.go does not contain %q", dir, old)
	}
	if err := os.WriteFile(main, []byte(strings.ReplaceAll(string(b), old, new)), 0o644); err != nil {
		t.Fatal(err)
	}
	return BuildDir(t, src, command)
}
