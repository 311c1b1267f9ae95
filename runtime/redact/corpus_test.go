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
// non-test Go files, a fixed sample of Go's standard library, read from
// $(go env GOROOT)/src when the test runs, and Python's standard library
// when python3 is installed (no copy is committed), must come through
// redaction unchanged. A match that is a real secret — a literal written
// where a secret is, which redaction must mask wherever it stands — is
// listed in corpusSecrets, by "file: original" or "file: kind", with the
// reason. Go's have none.
var corpusSecrets = map[string]string{
	// This repository's benchmark texts: configuration written to hold
	// secrets, so that the benchmarks measure redaction finding them.
	"runtime/redact/redacttest/redacttest.go: password":       "the env benchmark text's DB_PASSWORD line, a secret on purpose",
	"runtime/redact/redacttest/redacttest.go: aws-access-key": "the env benchmark text's AWS key (AWS's documented example key), a secret on purpose",
	"runtime/redact/redacttest/redacttest.go: github-token":   "the env benchmark text's GITHUB_TOKEN line, a secret on purpose",
	// Python 3.11's standard library.
	"distutils/command/register.py: sekrit": "a .pypirc shown in a docstring: `password: sekrit` " +
		"is configuration holding a literal password",
	"urllib/request.py: geheim$parole": "a literal password passed as passwd='geheim$parole' in the module's example",
	"http/cookies.py: cookie": "the module's doctests print Cookie: and Set-Cookie: headers holding name=value; " +
		"a header with a value is masked wherever it is written",
}

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
	var bytes, masked, explained int
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
			why, ok := corpusSecrets[filepath.ToSlash(rel)+": "+s.Original]
			if !ok {
				why, ok = corpusSecrets[filepath.ToSlash(rel)+": "+s.Kind]
			}
			if ok {
				explained++
				t.Logf("%s:%d: %s masked: a real secret: %s", rel, s.Line, s.Kind, why)
				continue
			}
			masked++
			t.Errorf("%s:%d: %s masked in %q", rel, s.Line, s.Kind, strings.TrimSpace(line))
		}
	}
	t.Logf("%d files, %d bytes, %d masks not explained, %d real secrets", len(files), bytes, masked, explained)
	held := "yes"
	if masked > 0 {
		held = "NO"
	}
	t.Logf("security-report: false positives, %s | %d files, %d bytes: %d masks not explained | %s", t.Name(), len(files), bytes, masked, held)
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

// TestPrecisionCorpusPython reads the non-test modules of the installed
// Python's standard library (site-packages, test and tests directories
// left out): code in another language, written by others, full of
// passwords, tokens and keys by name. It skips where python3 is absent.
func TestPrecisionCorpusPython(t *testing.T) {
	if testing.Short() {
		t.Skip("reads Python's standard library")
	}
	out, err := exec.Command("python3", "-c", `import sys, sysconfig; print(sysconfig.get_paths()["stdlib"]); print(sys.version.split()[0])`).Output()
	if err != nil {
		t.Skipf("python3 not available: %v", err)
	}
	fields := strings.Fields(string(out))
	if len(fields) != 2 {
		t.Skipf("python3 said %q", out)
	}
	stdlib := fields[0]
	var files []string
	err = filepath.WalkDir(stdlib, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".py") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Skipf("%s: %v", stdlib, err)
	}
	if len(files) < 300 {
		t.Skipf("%s holds %d Python modules: not a standard library", stdlib, len(files))
	}
	sort.Strings(files)
	t.Logf("Python %s, %s", fields[1], stdlib)
	checkCorpus(t, stdlib, files)
}
