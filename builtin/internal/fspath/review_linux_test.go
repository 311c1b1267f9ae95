package fspath

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/wardenrt/warden/runtime/capability"
)

// TestReviewQuickBindMount: through a bind mount, ".." is the mount
// point's parent for the kernel (openat2) as for the lexical walk, so
// the quick answer is the walk's; paths with empty elements, trailing
// slashes and ".." at the root agree too. Skipped where mounting is not
// allowed.
func TestReviewQuickBindMount(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"ws/m", "other/deep/inner"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "other/secret"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "ws/file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := filepath.Join(root, "ws/m")
	if err := syscall.Mount(filepath.Join(root, "other/deep"), m, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(m, syscall.MNT_DETACH) })
	ws := filepath.Join(root, "ws")
	for _, p := range []string{"m", "m/inner", "m/..", "m/../file", "m/inner/../..", "m/inner/../../file", "m/../../other/secret",
		"m/inner/../../../other/secret", "m//inner//", "m/inner/", "m/./inner/.", "file/", "file//", "/../../" + root + "/ws/m/.."} {
		want, werr := capability.ResolvePath(ws, p)
		got, gerr := ResolvePath(ws, p)
		if got != want || (werr == nil) != (gerr == nil) {
			t.Errorf("%q: got %q, %v; the walk says %q, %v", p, got, gerr, want, werr)
		}
	}
	// The shortcut itself answered through the mount (not the walk).
	for _, p := range []string{"m/..", "m/../file", "m/inner/../../file"} {
		if r, ok := resolveQuick(ws + "/" + p); !ok && !noOpenat2.Load() {
			t.Errorf("%q: not resolved in one call", p)
		} else if want, _ := capability.ResolvePath(ws, p); ok && r != want {
			t.Errorf("%q: quick %q, walk %q", p, r, want)
		}
	}
}
