package fspath

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/wardenrt/warden/runtime/capability"
)

// TestResolveQuickSameAsWalk: the one-call resolution answers exactly as
// the element-by-element walk, for paths through symlinks (relative,
// absolute, dangling, looping, into /proc), "..", ".", missing elements,
// a file used as a directory, a FIFO and a directory nobody may search;
// and it answers only where no symlink is on the path.
func TestResolveQuickSameAsWalk(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(root, "ws")
	for _, d := range []string{"ws/dir/sub", "outside", "locked/in"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"ws/file.txt", "ws/dir/sub/x.go", "outside/secret"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"ws/up": "..", "ws/abs": filepath.Join(root, "outside"), "ws/rel": "dir/sub", "ws/dangling": "nowhere/x",
		"ws/loop1": "loop2", "ws/loop2": "loop1", "ws/proc": "/proc/self/root", "ws/dir/back": "../file.txt",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "locked"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(root, "locked"), 0o755) })
	paths := []string{
		"file.txt", "./file.txt", "dir/sub/x.go", "dir/../file.txt", "dir/sub/../../file.txt", "../ws/file.txt",
		"../../../../../../..", ".", "..", "dir/", "dir/.", "dir//sub///x.go", "fifo", "fifo/x", "file.txt/x",
		"file.txt/..", "file.txt/.", "missing", "missing/../file.txt", "dir/missing/../sub", "up/outside/secret",
		"abs/secret", "rel/x.go", "rel/../file.txt", "dangling", "loop1", "loop1/x", "proc/etc/hostname",
		"dir/back", "dir/back/..", "../locked/in", "../locked/in/x", "/proc/self/root/etc", "/proc/self/fd/0",
		"/", "/etc", "/etc/../tmp", filepath.Join(root, "outside/secret"), filepath.Join(root, "ws/up/ws/file.txt"),
	}
	quick := 0
	for _, p := range paths {
		want, werr := capability.ResolvePath(ws, p)
		got, gerr := ResolvePath(ws, p)
		if got != want || (werr == nil) != (gerr == nil) {
			t.Errorf("%q: got %q, %v; the walk says %q, %v", p, got, gerr, want, werr)
		}
		abs := p
		if !filepath.IsAbs(p) {
			abs = ws + "/" + p
		}
		if r, ok := resolveQuick(abs); ok {
			quick++
			if r != want {
				t.Errorf("%q: the quick answer is %q, the walk's %q", p, r, want)
			}
		}
	}
	if quick == 0 && !noOpenat2.Load() {
		t.Errorf("no path was resolved in one call")
	}
	// Through a symlink, never quick.
	for _, p := range []string{"up", "abs/secret", "rel/x.go", "proc/etc", "dir/back", "/proc/self/root"} {
		abs := p
		if !filepath.IsAbs(p) {
			abs = ws + "/" + p
		}
		if r, ok := resolveQuick(abs); ok {
			t.Errorf("%q: resolved quickly to %q through a symlink", p, r)
		}
	}
}
