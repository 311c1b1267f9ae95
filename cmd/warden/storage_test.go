//go:build linux

package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// mountTmpfs mounts a tmpfs of the given size (e.g. "4m") on a new
// directory, unmounted when the test ends. It skips the test where it may
// not mount one (not root, or no mount(2) in this container).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to mount a size-limited tmpfs (the store package injects ENOSPC instead: TestAnchorWriteFull)")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v); the store package injects ENOSPC instead: TestAnchorWriteFull", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file in dir until the file system is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	name := filepath.Join(dir, "filler")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			// The last pages too, a byte at a time.
			for {
				if _, err := f.Write(chunk[:1]); err != nil {
					return name
				}
			}
		}
	}
}

// TestStoreFull: with the store's file system full, every call is refused
// with STORE_FULL, a hint naming the path and what to free, and nothing
// written; once space is freed, calls work and the log verifies.
func TestStoreFull(t *testing.T) {
	home := mountTmpfs(t, "4m")
	ws := t.TempDir()
	call := []string{"call", "system", "--args", `{"operation":"get_info"}`}
	if r := runWarden(t, home, ws, nil, call...); r.code != 0 {
		t.Fatalf("before: %s", r.stderr)
	}
	filler := fill(t, home)
	want := regexp.MustCompile(`^warden: STORE_FULL: (audit log write failed: )?store: cannot write ` + regexp.QuoteMeta(home) + `(/warden\.db|/audit\.head)?: no space left on device — free space on the file system holding ` + regexp.QuoteMeta(home))
	for i := 0; i < 20; i++ {
		r := runWarden(t, home, ws, nil, call...)
		if r.code == 0 || !want.MatchString(r.stderr) {
			t.Fatalf("call %d on a full disk: exit %d\nstdout: %s\nstderr: %s", i, r.code, r.stdout, r.stderr)
		}
		if i == 0 {
			t.Logf("%s", strings.TrimSpace(r.stderr))
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if r := runWarden(t, home, ws, nil, call...); r.code != 0 {
		t.Fatalf("after freeing space: %s", r.stderr)
	}
	// Two calls of two records each: the twenty refused ones wrote none.
	r := runWarden(t, home, ws, nil, "audit", "verify")
	if r.code != 0 || !strings.Contains(r.stdout, "audit log OK: 4 records") {
		t.Fatalf("audit verify: %s%s", r.stdout, r.stderr)
	}
}

// TestStoreReadOnly: a home on a read-only file system gives
// STORE_READONLY and a hint naming it; remounted read-write, calls work.
func TestStoreReadOnly(t *testing.T) {
	home := mountTmpfs(t, "4m")
	ws := t.TempDir()
	call := []string{"call", "system", "--args", `{"operation":"get_info"}`}
	if r := runWarden(t, home, ws, nil, call...); r.code != 0 {
		t.Fatalf("before: %s", r.stderr)
	}
	remount := func(flags uintptr) {
		t.Helper()
		if err := syscall.Mount("tmpfs", home, "tmpfs", syscall.MS_REMOUNT|flags, "size=4m"); err != nil {
			t.Fatalf("remount: %v", err)
		}
	}
	remount(syscall.MS_RDONLY)
	r := runWarden(t, home, ws, nil, call...)
	want := regexp.MustCompile(`^warden: STORE_READONLY: store: cannot write ` + regexp.QuoteMeta(home) + `/warden\.db: read-only file system — make ` + regexp.QuoteMeta(home) + ` writable`)
	if r.code == 0 || !want.MatchString(r.stderr) {
		t.Fatalf("read-only home: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	t.Logf("%s", strings.TrimSpace(r.stderr))
	// A home to be made on it.
	sub := filepath.Join(home, "sub")
	r = runWarden(t, sub, ws, nil, call...)
	if r.code == 0 || !strings.HasPrefix(r.stderr, "warden: STORE_READONLY: store: cannot write "+sub+": read-only file system — make "+home+" writable") {
		t.Fatalf("a home on a read-only file system: exit %d\nstderr: %s", r.code, r.stderr)
	}
	remount(0)
	if r := runWarden(t, home, ws, nil, call...); r.code != 0 {
		t.Fatalf("read-write again: %s", r.stderr)
	}
	if r := runWarden(t, home, ws, nil, "audit", "verify"); r.code != 0 || !strings.Contains(r.stdout, "audit log OK: 4 records") {
		t.Fatalf("audit verify: %s%s", r.stdout, r.stderr)
	}
}
