package capability

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// tree builds a workspace and an outside directory:
//
//	<root>/ws/notes/a.txt
//	<root>/ws/out       -> <root>/outside        (absolute, leaves the workspace)
//	<root>/ws/rel       -> notes                 (relative)
//	<root>/ws/chain     -> rel                   (a link to a link)
//	<root>/ws/up        -> ../outside            (relative, leaves the workspace)
//	<root>/ws/dangling  -> missing/deeper        (target does not exist)
//	<root>/ws/loop1     -> loop2, loop2 -> loop1 (a loop)
//	<root>/ws/self      -> self
//	<root>/ws/notes/file.txt                     (a regular file)
//	<root>/outside/secret
func tree(t *testing.T) (root, ws string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws = filepath.Join(root, "ws")
	for _, d := range []string{filepath.Join(ws, "notes"), filepath.Join(root, "outside")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{filepath.Join(ws, "notes", "a.txt"), filepath.Join(ws, "notes", "file.txt"), filepath.Join(root, "outside", "secret")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"out":      filepath.Join(root, "outside"),
		"rel":      "notes",
		"chain":    "rel",
		"up":       "../outside",
		"dangling": "missing/deeper",
		"loop1":    "loop2",
		"loop2":    "loop1",
		"self":     "self",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Skipf("symlinks not available: %v", err)
		}
	}
	return root, ws
}

func TestResolvePath(t *testing.T) {
	root, ws := tree(t)
	tests := []struct {
		p    string
		want string // relative to root
	}{
		{"notes/a.txt", "ws/notes/a.txt"},
		{".", "ws"},
		{"./notes//a.txt", "ws/notes/a.txt"},
		{"notes/new/file.txt", "ws/notes/new/file.txt"},
		{"rel/a.txt", "ws/notes/a.txt"},
		{"chain/a.txt", "ws/notes/a.txt"},
		{"out/secret", "outside/secret"},
		{"out", "outside"},
		{"up/secret", "outside/secret"},
		{"out/../ws/notes", "ws/notes"},          // .. after a link is the parent of its target
		{"rel/../notes/a.txt", "ws/notes/a.txt"}, // rel -> notes, .. -> ws
		{"notes/../out/secret", "outside/secret"},
		{"missing/../out/secret", "outside/secret"}, // .. back out of a missing part, into a link
		{"dangling", "ws/missing/deeper"},
		{"dangling/x", "ws/missing/deeper/x"},
		{"notes/file.txt/x", "ws/notes/file.txt/x"},
		{"../outside/secret", "outside/secret"},
		{filepath.Join(ws, "out", "secret"), "outside/secret"},
		{filepath.Join(root, "ws", "rel"), "ws/notes"},
	}
	for _, tt := range tests {
		t.Run(tt.p, func(t *testing.T) {
			got, err := ResolvePath(ws, tt.p)
			if err != nil {
				t.Fatalf("ResolvePath(%q): %v", tt.p, err)
			}
			if want := filepath.Join(root, tt.want); got != want {
				t.Errorf("ResolvePath(%q) = %q, want %q", tt.p, got, want)
			}
		})
	}
}

func TestResolvePathErrors(t *testing.T) {
	_, ws := tree(t)
	tests := []struct {
		ws, p string
		loop  bool
	}{
		{ws, "loop1", true},
		{ws, "loop1/x", true},
		{ws, "self", true},
		{ws, "notes/../self/a", true},
		{ws, "", false},
		{ws, "a\x00b", false},
		{"relative/ws", "notes", false},
		{"", "notes", false},
	}
	for _, tt := range tests {
		t.Run(tt.p, func(t *testing.T) {
			got, err := ResolvePath(tt.ws, tt.p)
			if err == nil {
				t.Fatalf("ResolvePath(%q, %q) = %q, want an error", tt.ws, tt.p, got)
			}
			if errors.Is(err, ErrSymlinkLoop) != tt.loop {
				t.Errorf("error %v: errors.Is(ErrSymlinkLoop) = %v, want %v", err, !tt.loop, tt.loop)
			}
		})
	}
}

// TestResolvedPathsAgainstGrants is the point of ResolvePath: a symlink
// inside a granted tree does not carry access outside it.
func TestResolvedPathsAgainstGrants(t *testing.T) {
	root, ws := tree(t)
	s := NewSet(ws, MustParse("fs.read:**"))
	tests := []struct {
		p    string
		want bool
	}{
		{"notes/a.txt", true},
		{"rel/a.txt", true},
		{"out/secret", false},
		{"up/secret", false},
		{"../outside/secret", false},
	}
	for _, tt := range tests {
		p, err := ResolvePath(ws, tt.p)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Allows(Need{FSRead, p}); got != tt.want {
			t.Errorf("fs.read:** allows %s (%s) = %v, want %v", tt.p, p, got, tt.want)
		}
	}
	abs := NewSet(ws, MustParse("fs.read:"+filepath.ToSlash(filepath.Join(root, "outside"))+"/**"))
	p, err := ResolvePath(ws, "out/secret")
	if err != nil {
		t.Fatal(err)
	}
	if !abs.Allows(Need{FSRead, p}) {
		t.Errorf("an absolute grant for the link's target does not allow %s", p)
	}
}
