//go:build unix

package gitcfg

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestGitlinksWithGit reads indexes git wrote — each version, a split
// index, SHA-256 object names, extended flags (intent to add), many paths
// sharing prefixes (version 4 compresses them) — and finds exactly the
// gitlinks git itself lists.
func TestGitlinksWithGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	for _, tc := range []struct {
		name   string
		init   []string
		hash   int
		config [][2]string
	}{
		{name: "version 2", config: [][2]string{{"index.version", "2"}}},
		{name: "version 3", config: [][2]string{{"index.version", "3"}}},
		{name: "version 4", config: [][2]string{{"index.version", "4"}}},
		{name: "split index", config: [][2]string{{"core.splitIndex", "true"}, {"splitIndex.maxPercentChange", "100"}}},
		{name: "sha256", init: []string{"--object-format=sha256"}, hash: 32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			run := func(dir string, args ...string) string {
				t.Helper()
				cmd := exec.Command(git, args...)
				cmd.Dir = dir
				cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
					"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com"}
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
				return string(out)
			}
			run(ws, append([]string{"init", "-q"}, tc.init...)...)
			for _, kv := range tc.config {
				run(ws, "config", kv[0], kv[1])
			}
			for _, p := range []string{"a.txt", "dir/b.txt", "dir/bb.txt", "dir/sub/c.txt", "z.txt"} {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(ws, p)), 0o755); err != nil {
					t.Fatal(err)
				}
				write(t, filepath.Join(ws, p), p+"\n")
			}
			for _, l := range []string{"dir/lib", "libs/one"} {
				d := filepath.Join(ws, l)
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
				run(ws, append([]string{"init", "-q"}, append(tc.init, d)...)...)
				write(t, filepath.Join(d, "x"), "x\n")
				run(d, "add", "x")
				run(d, "commit", "-q", "-m", "x")
			}
			run(ws, "add", "a.txt", "dir", "libs", "z.txt")
			run(ws, "commit", "-q", "-m", "one")
			write(t, filepath.Join(ws, "new.txt"), "new\n")
			run(ws, "add", "-N", "new.txt")
			hash := tc.hash
			if hash == 0 {
				hash = 20
			}
			got, err := Gitlinks(filepath.Join(ws, ".git"), hash)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, line := range strings.Split(run(ws, "ls-files", "-s"), "\n") {
				if p, ok := strings.CutPrefix(line, "160000 "); ok {
					want = append(want, p[strings.IndexByte(p, '\t')+1:])
				}
			}
			slices.Sort(got)
			if len(want) != 2 || !slices.Equal(got, want) {
				t.Fatalf("gitlinks %q, git lists %q", got, want)
			}
			if tc.name == "split index" {
				if m, _ := filepath.Glob(filepath.Join(ws, ".git", "sharedindex.*")); len(m) == 0 {
					t.Fatal("git wrote no shared index")
				}
			}
		})
	}
}

// TestGitlinksHostile: a damaged index is an error, never a silent "no
// gitlinks"; no index is none.
func TestGitlinksHostile(t *testing.T) {
	dir := t.TempDir()
	if l, err := Gitlinks(dir, 20); err != nil || l != nil {
		t.Fatalf("no index: %q %v", l, err)
	}
	for name, b := range map[string]string{
		"empty":          "",
		"wrong magic":    "DIRX\x00\x00\x00\x02\x00\x00\x00\x01" + strings.Repeat("\x00", 20),
		"version 5":      "DIRC\x00\x00\x00\x05\x00\x00\x00\x00" + strings.Repeat("\x00", 20),
		"entries beyond": "DIRC\x00\x00\x00\x02\x00\x00\x00\x09" + strings.Repeat("\x00", 80),
		"unterminated":   "DIRC\x00\x00\x00\x02\x00\x00\x00\x01" + strings.Repeat("\x00", 40) + strings.Repeat("\x01", 22) + "name" + strings.Repeat("\x00", 20),
	} {
		if err := os.WriteFile(filepath.Join(dir, "index"), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Gitlinks(dir, 20); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// FuzzParseIndex: any bytes give an error or paths, never a panic.
func FuzzParseIndex(f *testing.F) {
	f.Add([]byte("DIRC\x00\x00\x00\x04\x00\x00\x00\x01"+strings.Repeat("\x00", 24)+"\x00\x00\xe0\x00"+strings.Repeat("\x00", 32)+"\x00\x03\x00abc\x00"+strings.Repeat("\x00", 20)), 20)
	f.Fuzz(func(t *testing.T, b []byte, hashLen int) {
		if hashLen != 20 && hashLen != 32 {
			hashLen = 20
		}
		parseIndex(b, hashLen)
	})
}
