package pathrule

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, e := range []string{".env", "*.pem", "secrets/", "config/*.key", "/etc/app/token", "**/id_rsa", "a/b"} {
		if err := Check(e); err != nil {
			t.Errorf("%q: %v", e, err)
		}
	}
	for _, e := range []string{"", " ", "/", "**", "*", "../x", "a/../b", "./a", "~/x", `a\b`, "a\x00b", "[x"} {
		if err := Check(e); err == nil {
			t.Errorf("%q accepted", e)
		}
	}
}

func TestMatch(t *testing.T) {
	ws := "/ws"
	l := New([]string{".env", "*.pem", "secrets/", "config/*.key", "/etc/app/token"})
	for _, tc := range []struct {
		path, entry string
	}{
		{"/ws/.env", ".env"},
		{"/ws/sub/dir/.env", ".env"},
		{"/ws/a.pem", "*.pem"},
		{"/ws/x/b.pem", "*.pem"},
		{"/ws/secrets", "secrets/"},
		{"/ws/secrets/deep/file", "secrets/"},
		{"/ws/config/db.key", "config/*.key"},
		{"/etc/app/token", "/etc/app/token"},
		{"/ws/.env/inner", ".env"}, // a directory named .env hides what it holds
		{"/ws/README.md", ""},
		{"/ws/sub/secrets/x", "secrets/"}, // a name: at any depth
		{"/ws/sub/config/db.key", ""},     // anchored: only the workspace's config/
		{"/ws/.git/x.pem", ""},            // name entries never look inside .git
		{"/ws/.envrc", ""},
		{"/elsewhere/.env", ""}, // name entries are the workspace's
		{"/ws", ""},
	} {
		entry, ok := l.Match(ws, tc.path)
		if entry != tc.entry || ok != (tc.entry != "") {
			t.Errorf("%s: %q %v, want %q", tc.path, entry, ok, tc.entry)
		}
	}
	if _, ok := (List{}).Match(ws, "/ws/.env"); ok {
		t.Error("the empty list matched")
	}
}

func TestResolve(t *testing.T) {
	ws := t.TempDir()
	write := func(rel string) {
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{".env", "sub/.env", "secrets/a", "secrets/b/.env", "k.pem", ".git/x.pem", "config/db.key", "ok.txt"} {
		write(f)
	}
	if err := os.Symlink(filepath.Join(ws, "ok.txt"), filepath.Join(ws, "link.pem")); err != nil {
		t.Fatal(err)
	}
	l := New([]string{".env", "*.pem", "secrets/", "config/*.key", "missing/"})
	got, err := l.Resolve(ws, 1000, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".env", "config/db.key", "k.pem", "ok.txt", "secrets", "sub/.env"} // link.pem: its target
	for i := range want {
		want[i] = filepath.Join(ws, want[i])
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if _, err := l.Resolve(ws, 3, 100); !errors.Is(err, ErrTooMany) {
		t.Fatalf("visit limit: %v", err)
	}
	if _, err := l.Resolve(ws, 1000, 2); !errors.Is(err, ErrTooMany) {
		t.Fatalf("match limit: %v", err)
	}
}

func FuzzMatch(f *testing.F) {
	f.Add(".env", "/ws/a/.env")
	f.Add("secrets/", "/ws/secrets/x")
	f.Fuzz(func(t *testing.T, entry, p string) {
		l := New([]string{entry})
		if Check(entry) != nil && !l.Empty() {
			t.Fatalf("%q compiled though Check refuses it", entry)
		}
		if e, ok := l.Match("/ws", p); ok && e != entry {
			t.Fatalf("matched %q for %q", e, entry)
		}
	})
}
