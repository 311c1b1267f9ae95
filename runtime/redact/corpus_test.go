package redact

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"testing"
)

// The precision corpus: source code is not a secret. This repository's own
// non-test Go files and a fixed sample of Go's standard library, read from
// $(go env GOROOT)/src when the test runs (no copy is committed), must come
// through redaction unchanged. A match that is a real secret would be
// listed in corpusSecrets with the reason; there is none.
var corpusSecrets = map[string]string{}

// goFiles returns the non-test Go files under root (testdata directories
// left out), sorted.
func goFiles(t *testing.T, root string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == ".git") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	return paths
}

func goroot(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err == nil && strings.TrimSpace(string(out)) != "" {
		return strings.TrimSpace(string(out))
	}
	if r := goruntime.GOROOT(); r != "" { //nolint:staticcheck // the fallback when go is not on PATH
		return r
	}
	t.Skip("GOROOT not found")
	return ""
}

// checkCorpus redacts every file and reports each mask it would make.
func checkCorpus(t *testing.T, base string, files []string) {
	t.Helper()
	var bytes, masked int
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		bytes += len(data)
		rel, _ := filepath.Rel(base, p)
		_, secrets := plain.Replace(string(data), func(kind, original string, at int) string { return FormatMask(kind, "0000") })
		for _, s := range secrets {
			line := strings.Split(string(data), "\n")[s.Line-1]
			if why, ok := corpusSecrets[rel+": "+s.Original]; ok {
				t.Logf("%s:%d: %s masked: a real secret: %s", rel, s.Line, s.Kind, why)
				continue
			}
			masked++
			t.Errorf("%s:%d: %s masked in %q", rel, s.Line, s.Kind, strings.TrimSpace(line))
		}
	}
	t.Logf("%d files, %d bytes, %d masks", len(files), bytes, masked)
}

func TestPrecisionCorpusRepository(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files := goFiles(t, root)
	if len(files) < 100 {
		t.Fatalf("found %d Go files under %s; is this the repository?", len(files), root)
	}
	checkCorpus(t, root, files)
}

func TestPrecisionCorpusStandardLibrary(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the standard library")
	}
	src := filepath.Join(goroot(t), "src")
	all := goFiles(t, src)
	if len(all) < 1000 {
		t.Skipf("%s holds %d Go files: not a Go installation's sources", src, len(all))
	}
	// Every tenth file, and all of crypto/tls (secrets by name everywhere).
	var files []string
	for i, p := range all {
		if i%10 == 0 || strings.HasPrefix(p, filepath.Join(src, "crypto", "tls")+"/") {
			files = append(files, p)
		}
	}
	checkCorpus(t, src, files)
}
